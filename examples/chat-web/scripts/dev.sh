#!/usr/bin/env bash
# `npm run dev` in examples/chat-web: installs this page's packages (once per lockfile), builds
# it into dist/ (and the local @edgent/client and @edgent/react it links), then runs the root's
# `npm run dev` (scripts/dev.sh: .dev.vars with the API key and the token secret, the Worker's
# build, local D1 migrations and seed) with this folder's wrangler.toml, which serves dist/
# beside the API on http://127.0.0.1:8787 (PORT overrides the port).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$HERE"

LOCK_HASH="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ ! -x node_modules/.bin/vite || "$(cat node_modules/.edgent-lock 2>/dev/null)" != "$LOCK_HASH" ]]; then
  echo "[chat-web] installing the page's packages (npm ci)"
  npm ci --no-audit --no-fund
  echo "$LOCK_HASH" > node_modules/.edgent-lock
fi
echo "[chat-web] building the page (dist/)"
npm run build --silent

EDGENT_WRANGLER_CONFIG="$HERE/wrangler.toml" \
EDGENT_DEV_NOTE="Page:     http://127.0.0.1:${PORT:-8787}/  (run \`npm run open\` in examples/chat-web for its address with a thread and token)" \
  exec bash "$ROOT/scripts/dev.sh"
