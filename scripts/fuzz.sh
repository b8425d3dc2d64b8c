#!/usr/bin/env bash
# `npm run fuzz [seconds-per-target]` (default 10): runs every cargo-fuzz target of the
# adversarial layer (fuzz/fuzz_targets/, one per property body of edgent::testing::adversarial)
# for that long, then prints a table: target, inputs run, crashes. Exits non-zero if any target
# crashed (a panic, a timeout or running out of memory); its input is in fuzz/artifacts/<target>/.
#
# Needs the nightly toolchain (libFuzzer's instrumentation) and cargo-fuzz, installed when
# missing. Options by environment: FUZZ_TARGETS="a b" runs only those; FUZZ_JOBS=n runs n at
# once (default: one per core); FUZZ_QUICK_BUILD=1 builds unoptimised (see below);
# FUZZ_SANITIZER=address builds with AddressSanitizer (default none: the code under test
# forbids `unsafe`, and the panics the properties raise need no sanitizer; a build with it is
# about twice as slow).
# The corpus each target grows is kept in fuzz/corpus/ (ignored by git), so later runs start
# from what earlier ones found.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

SECONDS_PER_TARGET="${1:-10}"
SANITIZER="${FUZZ_SANITIZER:-none}"
MAX_LEN=8192

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "[fuzz] installing the nightly toolchain (libFuzzer needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "[fuzz] installing cargo-fuzz"
  # shellcheck source=lib/tool-install.sh
  source scripts/lib/tool-install.sh
  tool_install cargo-fuzz --locked
fi

cd fuzz
started=$(date +%s)
# fuzz/target whatever CARGO_TARGET_DIR says: the binaries are run from there below.
# FUZZ_QUICK_BUILD=1 (npm test's few seconds per target) builds without optimisation, in a
# target dir of its own: half the build time, for a few times fewer inputs per second, which a
# short run that only shows every target builds and runs can spare. It also lifts cargo-fuzz's
# one codegen unit per crate (kept for optimised builds, whose runs it speeds up): 16 let the
# last, largest crates compile on every core.
target_dir=target
build_kind="optimised"
build_flags=()
if [ "${FUZZ_QUICK_BUILD:-0}" = 1 ]; then
  target_dir=target/quick
  build_kind="quick, unoptimised"
  build_flags=(--codegen-units 16)
  export CARGO_PROFILE_RELEASE_OPT_LEVEL=0
fi
echo "[fuzz] building the targets (sanitizer: $SANITIZER; $build_kind)"
cargo +nightly fuzz build -s "$SANITIZER" --target-dir "$target_dir" ${build_flags[@]+"${build_flags[@]}"}
built=$(date +%s)
# The targets run from the binaries just built (`cargo fuzz run` would check the build again
# before each one, and rebuild from sources edited meanwhile).
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin="$target_dir/$triple/release"

if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  targets=()
  for f in fuzz_targets/*.rs; do
    targets+=("$(basename "$f" .rs)")
  done
fi

mkdir -p target/fuzz-logs target/fuzz-rows
rm -f target/fuzz-rows/*
# One target's run; its table row goes to target/fuzz-rows/<target> ("<row>\t<failed 0|1>"),
# and anything to say about a crash to its log's summary (printed in order below).
run_target() {
  local t="$1"
  mkdir -p "artifacts/$t" "corpus/$t"
  local before log status runs crashes newest
  before=$(find "artifacts/$t" -type f | wc -l)
  log="target/fuzz-logs/$t.log"
  status=0
  "$bin/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$SECONDS_PER_TARGET" \
    -max_len="$MAX_LEN" -timeout=30 -rss_limit_mb=2048 "corpus/$t" >"$log" 2>&1 || status=$?
  runs=$(grep -oE '^Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  if [ -z "$runs" ]; then
    # Stopped by a crash: the last status line counts the inputs run before it.
    runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  fi
  crashes=$(($(find "artifacts/$t" -type f | wc -l) - before))
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then
    crashes=1 # failed without leaving an input (a build or libFuzzer error): see the log
  fi
  {
    if [ "$crashes" -gt 0 ]; then
      echo "[fuzz] $t FAILED (exit $status; log: fuzz/$log)"
      grep -E "panicked at|^(thread|Error|==[0-9]+==ERROR)" "$log" | head -5 || true
      newest=$(find "artifacts/$t" -type f -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2- || true)
      if [ -n "$newest" ]; then
        echo "[fuzz] reproduce: (cd fuzz && cargo +nightly fuzz run -s $SANITIZER $t $newest)"
        echo "[fuzz] minimise:  (cd fuzz && cargo +nightly fuzz tmin -s $SANITIZER $t $newest)"
      fi
    fi
  } >"target/fuzz-rows/$t.said"
  printf '%-24s %14s %8s\t%d\n' "$t" "${runs:-?}" "$crashes" "$((crashes > 0))" >"target/fuzz-rows/$t"
}

# Each target is one libFuzzer process on one core: as many run at once as there are cores
# (FUZZ_JOBS to choose), so a short run of every target takes a fraction of the time.
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
echo "[fuzz] ${#targets[@]} targets, ${SECONDS_PER_TARGET}s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

rows=()
failed=0
for t in "${targets[@]}"; do
  if [ ! -f "target/fuzz-rows/$t" ]; then
    rows+=("$(printf '%-24s %14s %8s' "$t" "?" "1")")
    failed=1
    continue
  fi
  cat "target/fuzz-rows/$t.said"
  IFS=$'\t' read -r row bad <"target/fuzz-rows/$t"
  rows+=("$row")
  [ "$bad" -eq 0 ] || failed=1
done

echo
printf '%-24s %14s %8s\n' "target" "inputs run" "crashes"
printf '%s\n' "${rows[@]}"
finished=$(date +%s)
echo "[fuzz] build $((built - started)) s, runs $((finished - built)) s (${SECONDS_PER_TARGET} s per target, $jobs at a time)"
if [ "$failed" -ne 0 ]; then
  echo "[fuzz] a target crashed: see docs/testing.md (Fuzzing and property tests) to reproduce and keep the case"
  exit 1
fi
