#!/usr/bin/env bash
# Builds the Worker (build/index.js + build/index_bg.wasm) with the pinned toolchain.
# Uses the wasm-bindgen and wasm-opt installed by scripts/setup.sh instead of downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$CARGO_BIN/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
if [[ "${EDGENT_FAST_BUILD:-}" == "1" ]]; then
  exec worker-build --release --no-opt
fi
worker-build --release
# Drop the names and producers sections wasm-bindgen leaves behind (~20% of the file); the
# code is untouched. (Cargo's `strip = true` would do it too, but hides the target_features
# section wasm-bindgen reads.) The features listed are those rustc 1.95 enables for wasm32.
"$WASM_OPT_BIN" build/index_bg.wasm --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue --strip-debug --strip-producers -o build/index_bg.wasm \
  || echo "[build] warning: could not strip wasm names; the Worker still works, just larger" >&2
