#!/usr/bin/env bash
# Installs what building and testing edgent needs, skipping whatever is already there:
# the wasm32 target, worker-build, the wasm-bindgen CLI matching Cargo.lock, and the pinned
# npm packages (wrangler, miniflare, binaryen's wasm-opt, ws, smol-toml, and the AI SDK (ai, @ai-sdk/react, react) the chat transport's tests talk through).
# A fresh machine pays a few minutes once (two cargo installs); later runs take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"

# scripts/test.sh (prebuild_wasm) runs this version's `cargo build` ahead of it, with the same
# arguments and environment: check that copy when the version changes.
WORKER_BUILD_VERSION="0.8.7"
step() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# shellcheck source=lib/tool-install.sh
source scripts/lib/tool-install.sh

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# One install after the other, into one target dir. Side by side (a target dir each, since cargo
# locks a dir for one build at a time) they compiled the crates they share twice and slowed the
# `cargo test` beside them, for no shorter setup
# (docs/decisions/2026-12-03-tools-compiled-unoptimised.md).
if ! "$CARGO_BIN/worker-build" --version 2>/dev/null | grep -qF "$WORKER_BUILD_VERSION"; then
  step "installing worker-build $WORKER_BUILD_VERSION (once, a few minutes)"
  tool_install worker-build --version "$WORKER_BUILD_VERSION" --locked
fi

# wasm-bindgen's CLI must match the library version exactly; worker-build would download it
# from a host that is not always reachable, so install it from crates.io instead.
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)"
if [[ -z "$WASM_BINDGEN_VERSION" ]]; then
  echo "setup: cannot find wasm-bindgen in Cargo.lock" >&2
  exit 1
fi
if ! "$CARGO_BIN/wasm-bindgen" --version 2>/dev/null | grep -qF "$WASM_BINDGEN_VERSION"; then
  step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (once, a few minutes)"
  # Without --locked: the CLI's own lockfile pins a yanked crate. Without default features:
  # they are the test runner's TLS for downloading browser drivers, which edgent never runs;
  # the CLI writes the same glue and wasm byte for byte and compiles with about 12% less CPU.
  # Its run is parsing and rewriting the Worker's wasm: those three crates stay optimised (0.5 s
  # per build, against 1.5 s with none and 0.46 s with all).
  tool_install --hot walrus --hot wasmparser --hot wasm-bindgen-cli-support \
    wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION" --no-default-features
fi

# The root package set, unless the caller installs it (scripts/test.sh starts setup first and
# runs `npm ci` itself meanwhile; two installs in one directory would collide).
[[ "${EDGENT_SETUP_SKIP_NPM:-}" == "1" ]] && exit 0
# shellcheck source=lib/npm-once.sh
source scripts/lib/npm-once.sh
npm_once . node_modules/.bin/wrangler
