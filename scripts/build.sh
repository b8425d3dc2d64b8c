#!/usr/bin/env bash
# Builds an app's Worker (build/index.js + build/index_bg.wasm) with the pinned toolchain:
# the example app at the repository root, or the app in $EDGENT_APP_DIR (examples/hello).
# Uses the wasm-bindgen and wasm-opt installed by scripts/setup.sh instead of downloads.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "${EDGENT_APP_DIR:-$ROOT}"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$CARGO_BIN/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$ROOT/node_modules/.bin/wasm-opt}"
if [[ "${EDGENT_FAST_BUILD:-}" == "1" ]]; then
  exec worker-build --release --no-opt
fi
worker-build --release
# EDGENT_KEEP_NAMES=1 keeps the function names, for CPU profiles (bench/profile.mjs).
if [[ "${EDGENT_KEEP_NAMES:-}" == "1" ]]; then
  exit 0
fi
# Drop the names and producers sections wasm-bindgen leaves behind (~20% of the file); the
# code is untouched. (Cargo's `strip = true` would do it too, but hides the target_features
# section wasm-bindgen reads.) The features listed are those rustc 1.95 enables for wasm32.
"$WASM_OPT_BIN" build/index_bg.wasm --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue --strip-debug --strip-producers -o build/index_bg.wasm \
  || echo "[build] warning: could not strip wasm names; the Worker still works, just larger" >&2
