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
# worker-build writes into build.next/, and the finished Worker replaces build/'s files only at
# the end, each by a rename, the wasm before the glue that loads it: `wrangler dev` reloads when
# they change, and one that read a wasm being written (or a glue without its wasm) stops.
NEXT=build.next
# The glue's one change (scripts/lib/glue.mjs says why): futures queued with `then`.
patch_glue() { node "$ROOT/scripts/lib/glue.mjs" "$NEXT/index.js"; }
publish() {
  mkdir -p build/worker
  mv -f "$NEXT/index_bg.wasm" build/index_bg.wasm
  mv -f "$NEXT/worker/shim.mjs" build/worker/shim.mjs
  mv -f "$NEXT/package.json" build/package.json
  if [[ -f "$NEXT/.gitignore" ]]; then mv -f "$NEXT/.gitignore" build/.gitignore; fi
  mv -f "$NEXT/index.js" build/index.js
  rm -rf "$NEXT"
}
# The release profile edgent's Workers are measured with, for an app whose root sets none.
# shellcheck source=lib/profile.sh
source "$ROOT/scripts/lib/profile.sh"
release_profile
# The tools' JSON Schemas, written on the host for an app whose Worker carries them instead of
# schemars' generator (empty otherwise); its wasm build reads the file named here.
# shellcheck source=lib/schemas.sh
source "$ROOT/scripts/lib/schemas.sh"
EDGENT_SCHEMAS="$(write_schemas)"
export EDGENT_SCHEMAS
rm -rf "$NEXT"
if [[ "${EDGENT_FAST_BUILD:-}" == "1" ]]; then
  worker-build --release --no-opt --out-dir "$NEXT"
  patch_glue
  publish
  exit
fi
# worker-build's own wasm-opt pass is -O (for speed); one pass of ours instead, for size: -Os
# makes the wasm ~14% smaller gzipped than -O (bench/wasm-size.mjs, docs/decisions), and the
# turn benchmarks (bench/ab.mjs) showed no slower turns. The features are worker-build's own
# list: rustc 1.95's wasm32 defaults and the exception handling of wasm-bindgen's catch
# wrappers (named, not --all-features, so no encoding workerd cannot load is emitted).
worker-build --release --no-opt --out-dir "$NEXT"
patch_glue
OPT=(-Os --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext
  --enable-mutable-globals --enable-reference-types --enable-multivalue
  --enable-exception-handling)
# Drop the names and producers sections wasm-bindgen leaves behind (~20% of the file), unless
# EDGENT_KEEP_NAMES=1 keeps the function names, for CPU profiles (bench/profile.mjs) and
# bench/wasm-size.mjs. (Cargo's `strip = true` would hide the target_features section
# wasm-bindgen reads.)
if [[ "${EDGENT_KEEP_NAMES:-}" == "1" ]]; then
  OPT+=(--debuginfo)
else
  OPT+=(--strip-debug --strip-producers)
fi
"$WASM_OPT_BIN" "$NEXT/index_bg.wasm" "${OPT[@]}" -o "$NEXT/index_bg.wasm" \
  || echo "[build] warning: wasm-opt failed; the Worker still works, just larger and slower" >&2
publish
