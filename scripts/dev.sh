#!/usr/bin/env bash
# `npm run dev`: install what is missing, build, migrate and seed the local D1, then run
# `wrangler dev` on http://127.0.0.1:8787 (PORT overrides the port). Runs the example app at
# the repository root, or the app in $EDGENT_APP_DIR (examples/hello). EDGENT_WRANGLER_CONFIG
# names another wrangler config to run the built Worker with (one without [build]; e.g.
# examples/chat-web/wrangler.toml: the Worker with a web page as static assets), with this
# app's .dev.vars; EDGENT_DEV_NOTE is one more line for the banner.
#
# With no key for the default model (its api_key_secret empty in .dev.vars), it also runs
# edgent's demo model (scripts/demo-model.mjs, on EDGENT_DEMO_PORT, default PORT+10) and seeds
# the keyless models as that demo; EDGENT_DEMO=0 turns this off. Setting the key and
# restarting seeds the real model again. The demo server stops when this script does.
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
  UI_NOTE="UI:       http://127.0.0.1:$PORT/  (playground, inspector, configuration: sign in with the API key)"
fi

# Children (the demo model, wrangler) stop with this script, however it ends; its exit code
# is wrangler's.
CHILDREN=()
stop_children() {
  local pid
  for pid in ${CHILDREN[@]+"${CHILDREN[@]}"}; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in ${CHILDREN[@]+"${CHILDREN[@]}"}; do wait "$pid" 2>/dev/null || true; done
  CHILDREN=()
}
trap stop_children EXIT
trap 'stop_children; exit 130' INT
trap 'stop_children; exit 143' TERM

# The model: the default model with its key, or the demo model when the key is not set.
demo_failed() {
  echo "[dev] the demo model did not start on port $DEMO_PORT: $1 (EDGENT_DEMO_PORT picks another; EDGENT_DEMO=0 runs without it)" >&2
  exit 1
}
MODEL_LINE=""
SEED_ARGS=()
DEV_VARS=()
if status="$(node "$ROOT/scripts/seed.mjs" --key-status default)"; then
  IFS=$'\t' read -r SECRET KEY_STATE MODEL_ID MODEL_URL <<<"$status"
  if [[ "$KEY_STATE" == "empty" && "${EDGENT_DEMO:-}" != "0" ]]; then
    DEMO_PORT="${EDGENT_DEMO_PORT:-$((PORT + 10))}"
    DEMO_URL="http://127.0.0.1:$DEMO_PORT"
    # Whatever already listens there (another dev server's demo) would answer for ours.
    if node -e 'require("net").connect(Number(process.argv[1]), "127.0.0.1")
        .on("connect", () => process.exit(0)).on("error", () => process.exit(1))' "$DEMO_PORT"; then
      demo_failed "the port is in use"
    fi
    echo "[dev] no $SECRET in .dev.vars: starting the demo model on $DEMO_URL"
    # The weather tool's service too, when it has no key: the demo should show a tool working.
    DEMO_ARGS=(--port "$DEMO_PORT" --secret "$SECRET")
    if [[ -f agents/tools/get_weather.rs ]] && ! grep -Eq '^WEATHER_API_KEY=.+' .dev.vars; then
      DEMO_ARGS+=(--weather-port "$((DEMO_PORT + 1))")
      DEV_VARS+=(--var "WEATHER_API_KEY:demo" --var "WEATHER_API_URL:http://127.0.0.1:$((DEMO_PORT + 1))")
    fi
    node "$ROOT/scripts/demo-model.mjs" "${DEMO_ARGS[@]}" &
    CHILDREN+=($!)
    DEMO_PID=$!
    ready=""
    for _ in $(seq 1 100); do
      kill -0 "$DEMO_PID" 2>/dev/null || demo_failed "it exited"
      if node -e 'fetch(process.argv[1], { signal: AbortSignal.timeout(1000) })
          .then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$DEMO_URL/v1/models"; then
        ready=1
        break
      fi
      sleep 0.1
    done
    [[ -n "$ready" ]] || demo_failed "it did not answer GET /v1/models"
    SEED_ARGS=(--demo-model "$DEMO_URL")
    MODEL_LINE="demo (no API key set: put $SECRET in .dev.vars and restart for $MODEL_ID)"
  elif [[ "$KEY_STATE" == "empty" ]]; then
    MODEL_LINE="default ($MODEL_ID via $MODEL_URL): $SECRET is empty in .dev.vars, so turns fail until it is set"
  else
    MODEL_LINE="default ($MODEL_ID via $MODEL_URL)"
  fi
fi

echo "[dev] applying D1 migrations and seeding agents/ into the local D1"
"$WRANGLER" d1 migrations apply DB --local --persist-to "$STATE" >/dev/null
node "$ROOT/scripts/seed.mjs" --persist-to "$STATE" ${SEED_ARGS[@]+"${SEED_ARGS[@]}"}
if [[ -n "${EDGENT_WRANGLER_CONFIG:-}" ]]; then
  # wrangler reads .dev.vars beside its config: name this app's explicitly.
  CONFIG=("$EDGENT_WRANGLER_CONFIG" --env-file "$PWD/.dev.vars")
else
  node "$ROOT/scripts/dev-config.mjs"
  CONFIG=(.wrangler.dev.toml)
fi

cat <<MSG

  edgent is starting on http://127.0.0.1:$PORT
${UI_NOTE:+  $UI_NOTE
}  API key:  $API_KEY
${MODEL_LINE:+  Model:    $MODEL_LINE
}  Try:      curl -s -H "Authorization: Bearer $API_KEY" http://127.0.0.1:$PORT/api/tools
  Clients:  a browser app gets a client token per thread (POST /api/threads with "token",
            README); the server key stays on servers
${EDGENT_DEV_NOTE:+  $EDGENT_DEV_NOTE
}
MSG
# In the background (stdin kept: a background job would get /dev/null), so the traps above run
# as soon as a signal arrives rather than after wrangler exits.
"$WRANGLER" dev --config "${CONFIG[@]}" --ip 127.0.0.1 --port "$PORT" --persist-to "$STATE" \
  ${DEV_VARS[@]+"${DEV_VARS[@]}"} --show-interactive-dev-session=false <&0 &
WRANGLER_PID=$!
CHILDREN+=("$WRANGLER_PID")
# A change to the app's Rust sources rebuilds the Worker, and wrangler reloads it.
if [[ "${EDGENT_DEV_WATCH:-1}" != "0" ]]; then
  node "$ROOT/scripts/lib/dev-watch.mjs" "$ROOT" </dev/null &
  CHILDREN+=($!)
fi
set +e
wait "$WRANGLER_PID"
code=$?
set -e
exit "$code"
