#!/usr/bin/env bash
# `npm test`: install what is missing, then host tests (cargo test), the TypeScript clients' unit
# tests, the example page's build, a short fuzzing run, build the Worker, then the end-to-end
# tests (node --test) against the real built Worker in Miniflare and wrangler dev, and the UI's
# tests in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

bash scripts/setup.sh

echo "[test] host tests (cargo test)"
cargo test --workspace --quiet

# The TypeScript clients: @edgent/client and @edgent/react have their own packages (not the
# root's), installed once per lockfile; their tests build them, check the generated types
# against the schema the host tests keep current, and run against fake servers.
# tests/e2e/js_client.test.mjs then uses the built client against the real Worker.
echo "[test] TypeScript clients (clients/js: build, generated types, unit tests)"
JS_LOCK_HASH="$(sha256sum clients/js/package-lock.json | cut -d' ' -f1)"
if [[ ! -x clients/js/node_modules/.bin/tsc || "$(cat clients/js/node_modules/.edgent-lock 2>/dev/null)" != "$JS_LOCK_HASH" ]]; then
  npm ci --prefix clients/js --no-audit --no-fund
  echo "$JS_LOCK_HASH" > clients/js/node_modules/.edgent-lock
fi
npm test --prefix clients/js

# The example page (examples/chat-web): its own packages, installed once per lockfile like the
# clients' above; type-checked and built with Vite (about 10 s) so that
# tests/e2e/chat_web.test.mjs serves it as assets beside the Worker under wrangler dev.
echo "[test] the example page (examples/chat-web: type check, vite build)"
WEB_LOCK_HASH="$(sha256sum examples/chat-web/package-lock.json | cut -d' ' -f1)"
if [[ ! -x examples/chat-web/node_modules/.bin/vite || "$(cat examples/chat-web/node_modules/.edgent-lock 2>/dev/null)" != "$WEB_LOCK_HASH" ]]; then
  npm ci --prefix examples/chat-web --no-audit --no-fund
  echo "$WEB_LOCK_HASH" > examples/chat-web/node_modules/.edgent-lock
fi
npm run build --prefix examples/chat-web

# The playground and inspector (ui/): its own packages, type-checked and built with Vite into
# ui/dist, which the Worker serves at / and tests/browser drives in Chromium.
echo "[test] the UI (ui/: type check, vite build)"
EDGENT_UI_FORCE=1 bash scripts/ui.sh

# The adversarial layer's cargo-fuzz targets, briefly (the same properties ran above as
# proptest cases): 5 s each; `npm run fuzz [seconds]` fuzzes for longer.
echo "[test] fuzzing (cargo-fuzz, 5 s per target)"
bash scripts/fuzz.sh 5

echo "[test] building the Workers (the example app, examples/hello, and tests/apps/upgraded: the example's workflows after a deploy)"
bash scripts/build.sh
EDGENT_APP_DIR=examples/hello bash scripts/build.sh
EDGENT_APP_DIR=tests/apps/upgraded bash scripts/build.sh

echo "[test] end-to-end tests (node --test)"
# Test files are independent (each starts its own Worker, model server and state on free
# ports), so they run side by side; the longest, reliability.test.mjs, sets the wall time.
node --test --test-concurrency=4 tests/e2e/

echo "[test] browser tests (Chromium + playwright-core, tests/browser)"
bash scripts/test-browser.sh
