#!/bin/bash
# `npm run bench:compare`: edgent side by side with the Cloudflare Agents SDK, using the harness
# in ../shared/bench-peer when this machine has it (it is not part of the project). Builds
# first; pass the harness's variables through (e.g. TURNS=60 ROUNDS=1 CONC_ROUNDS=1 for a quick
# look; the full run takes about 12 minutes).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER="${EDGENT_BENCH_PEER:-$ROOT/../shared/bench-peer}"
if [ ! -f "$PEER/sidebyside/run.sh" ]; then
  echo "bench:compare: no peer harness at $PEER (set EDGENT_BENCH_PEER); skipped"
  exit 0
fi
bash "$ROOT/scripts/build.sh"
cd "$ROOT"
EDGENT_DIR="$ROOT" bash "$PEER/sidebyside/run.sh"
