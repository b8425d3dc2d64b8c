#!/usr/bin/env bash
# `npm run dev`: install what is missing, build, migrate and seed the local D1, then run
# `wrangler dev` on http://127.0.0.1:8787 (PORT overrides the port). Runs the example app at
# the repository root, or the app in $EDGENT_APP_DIR (examples/hello). EDGENT_WRANGLER_CONFIG
# names another wrangler config to run the built Worker with (one without [build]; e.g.
# examples/chat-web/wrangler.toml: the Worker with a web page as static assets), with this
# app's .dev.vars; EDGENT_DEV_NOTE is one more line for the banner.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WRANGLER="$ROOT/node_modules/.bin/wrangler"
PORT="${PORT:-8787}"
STATE=".wrangler/state"

bash "$ROOT/scripts/setup.sh"
cd "${EDGENT_APP_DIR:-$ROOT}"

# Secrets: readable by this user only, from the first byte written.
[[ -f .dev.vars ]] || (umask 077 && : > .dev.vars)
if ! grep -q '^EDGENT_API_KEY=' .dev.vars; then
  key="$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))')"
  {
    echo "# Local secrets for wrangler dev (git-ignored). Production: wrangler secret put NAME"
    echo "EDGENT_API_KEY=$key"
    echo "# The key for the default model (agents/models/default.toml names this secret)."
    echo "OPENAI_API_KEY="
  } >> .dev.vars
  echo "[dev] generated a local API key in .dev.vars"
fi
if ! grep -q '^EDGENT_TOKEN_SECRET=' .dev.vars; then
  secret="$(node -e 'console.log(require("crypto").randomBytes(32).toString("base64url"))')"
  {
    echo "# Signs the client tokens browsers use (POST /api/threads/:id/tokens); never the API key."
    echo "EDGENT_TOKEN_SECRET=$secret"
  } >> .dev.vars
fi
if ! grep -q '^EDGENT_ALLOW_HTTP_MODELS=' .dev.vars; then
  {
    echo "# Lets a model's base_url be plain http to this machine (a local model server);"
    echo "# only here: production models must use https (docs/security.md)."
    echo "EDGENT_ALLOW_HTTP_MODELS=1"
  } >> .dev.vars
fi
chmod 600 .dev.vars
API_KEY="$(grep '^EDGENT_API_KEY=' .dev.vars | head -n1 | cut -d= -f2-)"

echo "[dev] building the Worker"
EDGENT_APP_DIR="$PWD" bash "$ROOT/scripts/build.sh"
# The playground and inspector, for an app whose wrangler.toml serves them (the root's does).
if grep -q '^directory = "ui/dist"' wrangler.toml 2>/dev/null; then
  bash "$ROOT/scripts/ui.sh"
  UI_NOTE="UI:       http://127.0.0.1:$PORT/  (playground, inspector, configuration; sign in with the API key)"
fi

echo "[dev] applying D1 migrations and seeding agents/ into the local D1"
"$WRANGLER" d1 migrations apply DB --local --persist-to "$STATE" >/dev/null
node "$ROOT/scripts/seed.mjs" --persist-to "$STATE"
if [[ -n "${EDGENT_WRANGLER_CONFIG:-}" ]]; then
  # wrangler reads .dev.vars beside its config: name this app's explicitly.
  CONFIG=("$EDGENT_WRANGLER_CONFIG" --env-file "$PWD/.dev.vars")
else
  node "$ROOT/scripts/dev-config.mjs"
  CONFIG=(.wrangler.dev.toml)
fi

cat <<MSG

  edgent is starting on http://127.0.0.1:$PORT
  API key:  $API_KEY
  Try:      curl -s -H "Authorization: Bearer $API_KEY" http://127.0.0.1:$PORT/api/tools
  Browser:  mint a client token for a thread (POST /api/threads with "token", README);
            the server key stays on servers
${UI_NOTE:+  $UI_NOTE
}${EDGENT_DEV_NOTE:+  $EDGENT_DEV_NOTE
}
MSG
exec "$WRANGLER" dev --config "${CONFIG[@]}" --ip 127.0.0.1 --port "$PORT" --persist-to "$STATE" --show-interactive-dev-session=false
