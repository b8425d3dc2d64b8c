#!/usr/bin/env bash
# `npm test`: install what is missing, then host tests (cargo test), the TypeScript clients' unit
# tests, the example page's build, a short fuzzing run, build the Worker, then the end-to-end
# tests (node --test) against the real built Worker in Miniflare and wrangler dev, with the UI's
# tests in headless Chromium in the same pool. Ends with how long each step took.
#
# Steps that wait on the network or on one core run beside the ones that keep both cores busy:
# setup and the JavaScript package sets install while cargo test compiles, and the fuzzing step
# (its own nightly build, then the targets) runs beside the Workers' release builds, whose last
# link is one long single-threaded LTO. Each background step's output is printed when it is
# awaited.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
# shellcheck source=lib/npm-once.sh
source scripts/lib/npm-once.sh
# shellcheck source=lib/schemas.sh
source scripts/lib/schemas.sh
# shellcheck source=lib/profile.sh
source scripts/lib/profile.sh

LOGS="$(mktemp -d "${TMPDIR:-/tmp}/edgent-test.XXXXXX")"
# A step that fails ends the run: the background steps still running (a cargo install, a fuzz
# run) end with it instead of running on unseen. Each process is stopped before its children
# are listed, so none can start another meanwhile; then all are ended.
kill_tree() {
  local child
  kill -STOP "$1" 2>/dev/null || return 0
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null || true
  kill -CONT "$1" 2>/dev/null || true
}
cleanup() {
  local pid
  for pid in $(jobs -pr); do kill_tree "$pid"; done
  rm -rf "$LOGS"
}
trap cleanup EXIT
# The browser tests, in the last step, need a Chromium: said now rather than after the builds.
# shellcheck source=lib/chromium.sh
source scripts/lib/chromium.sh
need_chromium "[test]" || exit 1
STARTED=$SECONDS
TIMES=()
# step NAME COMMAND...: runs it in the foreground and keeps its time for the summary.
step() {
  local name="$1" t0=$SECONDS
  shift
  echo "[test] $name"
  "$@"
  TIMES+=("$(printf '%5d s  %s' $((SECONDS - t0)) "$name")")
}
# started NAME COMMAND...: runs it in the background, its output kept in a log.
declare -A PIDS BEGAN
log_of() { echo "$LOGS/${1//[^A-Za-z0-9]/_}.log"; }
started() {
  local name="$1"
  shift
  BEGAN[$name]=$SECONDS
  echo "[test] $name: started in the background"
  # The step's own end, for the summary (it may end long before it is awaited), written on its
  # way out so that the step runs with `set -e` in force.
  (
    trap 'echo "$SECONDS" >"$(log_of "$name").end"' EXIT
    "$@"
  ) >"$(log_of "$name")" 2>&1 &
  PIDS[$name]=$!
}
# awaited NAME: waits for a background step, prints its output, and stops on its failure.
awaited() {
  local name="$1" status=0
  wait "${PIDS[$name]}" || status=$?
  echo "[test] $name (ran in the background):"
  cat "$(log_of "$name")"
  local ended
  ended="$(cat "$(log_of "$name").end" 2>/dev/null || echo "$SECONDS")"
  TIMES+=("$(printf '%5d s  %s (in the background)' $((ended - ${BEGAN[$name]})) "$name")")
  if [[ "$status" -ne 0 ]]; then
    echo "[test] $name FAILED (exit $status)" >&2
    exit "$status"
  fi
}

# Setup (the wasm32 target, worker-build and the wasm-bindgen CLI: a few minutes of compiling on
# a fresh machine) is needed by neither the npm packages nor cargo test: it starts first, and
# leaves the project's own packages to the step below (EDGENT_SETUP_SKIP_NPM).
started "setup (the toolchain's parts)" env EDGENT_SETUP_SKIP_NPM=1 bash scripts/setup.sh

# The project's own packages (seconds): npm reads them while installing the package sets below
# (it looks up from the clients the UI and the example page link), so they do not change under
# it.
step "the project's npm packages" npm_once . node_modules/.bin/wrangler

# The package sets of the clients, the example page, the UI and the browser tests, each from its
# own lockfile (scripts/lib/npm-once.sh), meanwhile cargo compiles. The UI and the example page
# link the clients' packages, so they install once the clients' are in place.
link_users() {
  npm_once clients/js node_modules/.bin/tsc
  npm_once examples/chat-web node_modules/.bin/vite &
  npm_once ui node_modules/.bin/vite
  wait $!
}
started "npm packages: clients/js, then examples/chat-web and ui" link_users
started "npm packages: tests/browser" npm_once tests/browser node_modules/playwright-core

# The apps' `edgent_export_schemas` tests write the JSON Schemas their Workers carry into
# EDGENT_SCHEMAS_DIR as part of this run, so the wasm builds below need no host build of their
# own (scripts/lib/schemas.sh takes the files from there).
EDGENT_SCHEMAS_DIR="$PWD/target/edgent/from-tests"
rm -rf "$EDGENT_SCHEMAS_DIR" && mkdir -p "$EDGENT_SCHEMAS_DIR"
export EDGENT_SCHEMAS_DIR
step "host tests (cargo test)" cargo test --workspace --quiet

# The Workers' wasm, compiled as soon as cargo test leaves the target dir, while setup may still
# be compiling worker-build and the wasm-bindgen CLI (on a bare machine the run waited for
# setup about 50 s here, with a core idle for much of it). This is the cargo half of
# `worker-build --release`, with the same command and environment (0.8.7 runs it with
# WASM_BINDGEN_USE_JS_SYS=1, which wasm-bindgen's macro reads and cargo does not track), so
# the builds below find the wasm fresh and go on to wasm-bindgen, the shim and wasm-opt. One
# cargo invocation per app: in one, cargo would unify the apps' features, and build edgent in a
# way none of worker-build's own invocations asks for. Without the wasm32 target (setup adds it
# first), worker-build compiles them itself.
prebuild_wasm() {
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "[test] no wasm32 target yet: the builds below compile the wasm themselves"
    return 0
  fi
  local app
  for app in . examples/hello tests/apps/upgraded; do
    # The same profile and EDGENT_SCHEMAS as scripts/build.sh will give it (the build script
    # reruns when EDGENT_SCHEMAS differs).
    (cd "$app" && release_profile && EDGENT_SCHEMAS="$(write_schemas)" && export EDGENT_SCHEMAS \
      && WASM_BINDGEN_USE_JS_SYS=1 cargo build --lib --release --target wasm32-unknown-unknown --quiet)
  done
}
PREBUILD_STEP="the Workers' wasm (cargo build, the first half of worker-build)"
started "$PREBUILD_STEP" prebuild_wasm

awaited "npm packages: clients/js, then examples/chat-web and ui"
awaited "npm packages: tests/browser"

# The TypeScript clients: @edgent/client and @edgent/react have their own packages (not the
# root's). Their tests build them, check the generated types against the schema the host tests
# keep current, and run against fake servers. tests/e2e/js_client.test.mjs then uses the built
# client against the real Worker.
step "TypeScript clients (clients/js: build, generated types, unit tests)" npm test --prefix clients/js

# The example page (examples/chat-web): type-checked and built with Vite (about 10 s) so that
# tests/e2e/chat_web.test.mjs serves it as assets beside the Worker under wrangler dev.
step "the example page (examples/chat-web: type check, vite build)" npm run build --prefix examples/chat-web

# The playground and inspector (ui/): type-checked and built with Vite into ui/dist, which the
# Worker serves at / and tests/browser drives in Chromium.
step "the UI (ui/: type check, vite build)" env EDGENT_UI_FORCE=1 bash scripts/ui.sh

# The three steps above need none of setup's tools: on a fresh machine they run while the
# tools still compile (there, setup outlasts cargo test by minutes).
awaited "setup (the toolchain's parts)"

# The adversarial layer's cargo-fuzz targets, briefly (the same properties ran above as proptest
# cases): 3 s each, as many at once as there are cores, from an unoptimised build (half the
# build time); `npm run fuzz [seconds]` fuzzes for longer, optimised. Beside the end of the
# Workers' wasm and their builds below (separate target dirs), whose LTO links and wasm-opt
# pass each run on one core.
FUZZ_SECONDS=3
FUZZ_STEP="fuzzing (cargo-fuzz, $FUZZ_SECONDS s per target)"
started "$FUZZ_STEP" env FUZZ_QUICK_BUILD=1 bash scripts/fuzz.sh "$FUZZ_SECONDS"

# The wasm is compiled by now (above), so what is left of each build is wasm-bindgen, the shim
# (bundled by esbuild) and, for the example app, its wasm-opt pass (about 40 s, on one core).
# examples/hello goes first, alone, in seconds: on a machine that has never built a Worker,
# worker-build downloads esbuild into its cache on first use, and two builds doing that at
# once collide (one runs the binary while another rewrites it: "Text file busy"). Then the
# example app and the upgrade test's second Worker build side by side. Only the example app is
# built exactly as users build theirs: examples/hello (an app depending on the crates) and
# tests/apps/upgraded skip the wasm-opt pass (`EDGENT_FAST_BUILD=1`), whose output the
# example's tests already run, and whose 40 s of CPU each counts on a machine compiling
# everything for the first time.
# report_build NAME STATUS: a build's log under its outcome; returns STATUS.
report_build() {
  if [[ "$2" -eq 0 ]]; then
    echo "[test] built $1:"
  else
    echo "[test] building $1 FAILED (exit $2):"
  fi
  cat "$LOGS/build-$1.log"
  return "$2"
}
build_workers() {
  local -a names=(example upgraded) pids=()
  local i built status=0
  built=0
  EDGENT_APP_DIR=examples/hello EDGENT_FAST_BUILD=1 bash scripts/build.sh \
    >"$LOGS/build-hello.log" 2>&1 || built=$?
  report_build hello "$built" || return
  bash scripts/build.sh >"$LOGS/build-example.log" 2>&1 &
  pids+=($!)
  EDGENT_APP_DIR=tests/apps/upgraded EDGENT_FAST_BUILD=1 bash scripts/build.sh \
    >"$LOGS/build-upgraded.log" 2>&1 &
  pids+=($!)
  for i in 0 1; do
    built=0
    wait "${pids[$i]}" || built=$?
    report_build "${names[$i]}" "$built" || status=$built
  done
  return "$status"
}
awaited "$PREBUILD_STEP"
step "building the Workers (the example app, examples/hello, and tests/apps/upgraded: the example's workflows after a deploy)" build_workers

awaited "$FUZZ_STEP"

# Test files are independent (each starts its own Worker, model server, browser and state on
# free ports), so the end-to-end and browser files run in one pool, four at a time: most of
# their time is waiting on real timers, sockets and pages (at three, the pool kept about 1.1
# of the 2 cores busy), and one pool leaves no tail where a last file runs alone. The longest,
# reliability.test.mjs (its SIGKILL loop alone runs about two minutes), starts first in a run
# of its own beside the pool: node --test starts files in the order given, and it used to begin
# near the end. Separately (the end-to-end files three at a time, then the browser files two
# at a time) the two steps took 226 s; as one pool, 161-194 s (2026-12-03, seven runs).
E2E_LONGEST=tests/e2e/reliability.test.mjs
POOL=()
for file in tests/e2e/*.test.mjs; do
  [[ "$file" == "$E2E_LONGEST" ]] || POOL+=("$file")
done
POOL+=(tests/browser/*.test.mjs)
started "end-to-end tests: $E2E_LONGEST" node --test "$E2E_LONGEST"
step "end-to-end and browser tests (node --test, the other files four at a time; Chromium + playwright-core)" \
  node --test --test-concurrency=4 "${POOL[@]}"
awaited "end-to-end tests: $E2E_LONGEST"

echo
echo "[test] passed in $((SECONDS - STARTED)) s:"
printf '%s\n' "${TIMES[@]}"
