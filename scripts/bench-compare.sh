#!/bin/bash
# `npm run bench:compare`: edgent side by side with the Cloudflare Agents SDK, using the harness
# in ../shared/bench-peer when this machine has it (it is not part of the project). Builds
# first; pass the harness's variables through (e.g. TURNS=60 ROUNDS=1 CONC_ROUNDS=1 for a quick
# look; the full run takes about 12 minutes), then runs the floor (bench/floor.mjs --wrangler)
# and prints its ratios to the same run's peer medians (about 4 minutes more).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER="${EDGENT_BENCH_PEER:-$ROOT/../shared/bench-peer}"
if [ ! -f "$PEER/sidebyside/run.sh" ]; then
  echo "bench:compare: no peer harness at $PEER (set EDGENT_BENCH_PEER); skipped"
  exit 0
fi
bash "$ROOT/scripts/build.sh"
cd "$ROOT"
# The harness configures its model over plain http on loopback with a secret of its own
# (BENCH_MODEL_KEY): allowed for this run only, through the generated local config it uses
# (scripts/dev-config.mjs), which is written back without them afterwards.
trap 'EDGENT_DEV_VARS= EDGENT_DEV_NO_ASSETS= node "$ROOT/scripts/dev-config.mjs"' EXIT
export EDGENT_DEV_VARS='{"MODEL_SECRETS":"OPENAI_API_KEY,ANTHROPIC_API_KEY,BENCH_MODEL_KEY","EDGENT_ALLOW_HTTP_MODELS":"1"}'
# The API alone, like the peer (which serves no UI): no assets router in front of it.
export EDGENT_DEV_NO_ASSETS=1
LOG=$(mktemp)
EDGENT_DIR="$ROOT" bash "$PEER/sidebyside/run.sh" | tee "$LOG"
# The floor (the least a Durable Object can do for the same turns) under wrangler dev, with the
# same model server, right after: its ratios to this run's peer medians are the lowest any
# framework could show in the table above.
RESULTS=$(grep -o '/[^ ]*sidebyside\.[A-Za-z0-9]*' "$LOG" | tail -1)
rm -f "$LOG"
if [ -n "$RESULTS" ] && [ -d "$RESULTS/results" ]; then
  node "$ROOT/bench/floor.mjs" "${TURNS:-200}" --wrangler --peer "$RESULTS/results"
fi
