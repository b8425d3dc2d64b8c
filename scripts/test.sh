#!/usr/bin/env bash
# `npm test`: install what is missing, then host tests (cargo test), build the Worker, then the
# end-to-end tests (node --test) against the real built Worker in Miniflare and wrangler dev.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

bash scripts/setup.sh

echo "[test] host tests (cargo test)"
cargo test --workspace --quiet

echo "[test] building the Workers (the example app, then examples/hello)"
bash scripts/build.sh
EDGENT_APP_DIR=examples/hello bash scripts/build.sh

echo "[test] end-to-end tests (node --test)"
node --test --test-concurrency=1 tests/e2e/
