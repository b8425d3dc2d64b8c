#!/usr/bin/env bash
# Builds the playground and inspector (ui/) into ui/dist, which the Worker serves at /
# (wrangler.toml's [assets]): installs ui/'s packages once per lockfile, builds the local
# @edgent/client and @edgent/react it links, type-checks and bundles with Vite (a few seconds).
# Skips the build when nothing it reads changed. `npm run dev` and `npm run deploy` run it;
# EDGENT_UI_FORCE=1 rebuilds anyway.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
UI="$ROOT/ui"

# shellcheck source=lib/npm-once.sh
source "$ROOT/scripts/lib/npm-once.sh"
npm_once "$UI" node_modules/.bin/vite

# What the build reads: the app's files (sources, public/ with the security headers, configs),
# the client packages it bundles and the script that builds them, and VITE_EDGENT_URL. Their
# names, times and sizes (and that variable) are hashed: a changed, added or deleted file, or
# another origin, rebuilds. The stamp lives beside the packages, not in dist/ (served).
STAMP="$UI/node_modules/.edgent-ui-stamp"
inputs="$( { find "$UI/src" "$UI/public" "$UI/index.html" "$UI/vite.config.ts" "$UI/package.json" \
    "$UI/package-lock.json" "$UI"/tsconfig*.json "$ROOT/scripts/clients.mjs" \
    "$ROOT/clients/js/client/src" "$ROOT/clients/js/react/src" "$ROOT/clients/js/client/package.json" \
    "$ROOT/clients/js/react/package.json" -type f -printf '%p %T@ %s\n' 2>/dev/null | sort
  echo "VITE_EDGENT_URL=${VITE_EDGENT_URL:-}"; } | sha256sum | cut -d' ' -f1)"
if [[ "${EDGENT_UI_FORCE:-0}" != 1 && -f "$UI/dist/index.html" && "$(cat "$STAMP" 2>/dev/null)" == "$inputs" ]]; then
  exit 0
fi
echo "[ui] building the playground and inspector (ui/dist)"
npm run build --prefix "$UI" --silent
echo "$inputs" > "$STAMP"
