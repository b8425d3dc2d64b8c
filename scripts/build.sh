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
exec worker-build --release
