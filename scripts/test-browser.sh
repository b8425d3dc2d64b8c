#!/usr/bin/env bash
# `npm run test:browser`: the UI's end-to-end tests in headless Chromium (Debian's package,
# /usr/bin/chromium; CHROMIUM overrides the path) driven by playwright-core against the real
# Worker under wrangler dev and the scripted model server. `npm test` runs the same files in
# its last step, in one pool with the end-to-end files.
# Needs the Worker (scripts/build.sh) and the UI (scripts/ui.sh) built. A failing test saves a
# screenshot under $TMPDIR/edgent-browser-shots and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/chromium.sh
source scripts/lib/chromium.sh
need_chromium "test-browser:" || exit 1
# shellcheck source=lib/npm-once.sh
source scripts/lib/npm-once.sh
npm_once tests/browser node_modules/playwright-core
node --test --test-concurrency=2 tests/browser/
