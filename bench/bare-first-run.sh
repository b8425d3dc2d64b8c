#!/usr/bin/env bash
# `bash bench/bare-first-run.sh`: how long the first `npm test` takes on a bare machine (issue
# 12's first-run row). It runs `bash .ci/run` on a fresh clone of this repository's HEAD as a
# machine would that has only rustup's toolchains, Node and git:
# - an empty CARGO_HOME holding only rustup's proxies (no installed tools, no crate downloads);
# - an empty HOME (no npm cache, no esbuild download);
# - a PATH of rustup's proxies, node, git and the system's directories (`env -i`).
# rustup's toolchains (nightly, for the fuzz step) and Chromium are used as they are. The run
# compiles everything from sources: about 12-13 minutes on 2 cores, and about 5 GB of disk in
# $TMPDIR, removed at the end (KEEP=1 keeps it). It prints `npm test`'s step times, then the
# run's wall and CPU time. Nothing else should run meanwhile: it measures the machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUSTUP_BIN="$(command -v rustup)" || {
  echo "bare-first-run: needs rustup on PATH" >&2
  exit 1
}
RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/edgent-bare.XXXXXX")"
[[ "${KEEP:-}" == "1" ]] || trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/cargo/bin" "$WORK/home"
# Every rustup proxy is rustup itself under another name.
for tool in cargo cargo-clippy cargo-fmt clippy-driver rustc rustdoc rustfmt rustup; do
  ln -s "$RUSTUP_BIN" "$WORK/cargo/bin/$tool"
done
git clone -q "$ROOT" "$WORK/clone"
path="$WORK/cargo/bin"
for tool in node git; do
  path="$path:$(dirname "$(command -v "$tool")")"
done
path="$path:/usr/local/bin:/usr/bin:/bin"

echo "[bare] bash .ci/run on a fresh clone of $(git -C "$ROOT" rev-parse --short HEAD) in $WORK"
TIMEFORMAT='[bare] wall %R s, CPU %U s user + %S s system'
status=0
time (cd "$WORK/clone" && env -i HOME="$WORK/home" CARGO_HOME="$WORK/cargo" \
  RUSTUP_HOME="$RUSTUP_HOME" TERM=dumb PATH="$path" bash .ci/run >"$WORK/run.log" 2>&1) ||
  status=$?
# The summary npm test ends with, or the end of the log when it failed.
if [[ "$status" -eq 0 ]]; then
  sed -n '/^\[test\] passed in/,/^[^ ]/p' "$WORK/run.log" | grep -v '^npm notice'
else
  tail -40 "$WORK/run.log"
  echo "[bare] the run failed (exit $status); its log: $WORK/run.log (kept)" >&2
  trap - EXIT
fi
exit "$status"
