#!/usr/bin/env bash
# Builds the playground and inspector (ui/) into ui/dist, which the Worker serves at /
# (wrangler.toml's [assets]): installs ui/'s packages once per lockfile, builds the local
# @edgent/client and @edgent/react it links, type-checks and bundles with Vite (a few seconds).
# Skips the build when ui/dist is newer than every source. `npm run dev` and `npm run deploy`
# run it; EDGENT_UI_FORCE=1 rebuilds anyway.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
UI="$ROOT/ui"

LOCK_HASH="$(sha256sum "$UI/package-lock.json" | cut -d' ' -f1)"
if [[ ! -x "$UI/node_modules/.bin/vite" || "$(cat "$UI/node_modules/.edgent-lock" 2>/dev/null)" != "$LOCK_HASH" ]]; then
  echo "[ui] installing ui/'s packages (npm ci, once per lockfile)"
  npm ci --prefix "$UI" --no-audit --no-fund
  echo "$LOCK_HASH" > "$UI/node_modules/.edgent-lock"
fi

# The newest source: the app's own files and the client packages it bundles.
newest_source="$(find "$UI/src" "$UI/index.html" "$UI/vite.config.ts" "$UI/package-lock.json" \
  "$ROOT/clients/js/client/src" "$ROOT/clients/js/react/src" -type f -printf '%T@\n' | sort -n | tail -1)"
built="$(stat -c '%Y' "$UI/dist/index.html" 2>/dev/null || echo 0)"
if [[ "${EDGENT_UI_FORCE:-0}" != 1 && "${built%.*}" -gt "${newest_source%.*}" ]]; then
  exit 0
fi
echo "[ui] building the playground and inspector (ui/dist)"
npm run build --prefix "$UI" --silent
