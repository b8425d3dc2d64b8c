#!/usr/bin/env node
// Turns at once, beside the floor (bench/floor-worker.mjs): THREADS threads, each with its own
// socket, run TURNS text turns back to back, all threads at the same time, in three timed
// rounds after a warm-up round. For each round it prints the turns per second and the workerd
// process's CPU per turn (/proc, user + system) of edgent and of the floor, each in a Miniflare
// of its own against one scripted model server.
//
// Why beside bench/cpu.mjs (one thread, turn after turn): a workerd that serves many turns at
// once pays less per turn for waking up, and the floor gains more from that than edgent does
// (the numbers in docs/testing.md), so the harness's "20 x 20 at once" row depends on this
// figure, not on cpu.mjs's. `1 100` gives the one-thread figure the same way.
//
// With `--harness`, each round is shaped as the harness's row: fresh threads with two untimed
// warm-up turns each, and the harness's model server and reply (16 streamed pieces) when the
// harness is on the machine; the sides first run 300 turns on one thread, as the harness's
// earlier phases warm its Worker up.
//
// Usage: npm run build && node bench/at-once.mjs [threads] [turns] [--harness]   (20 x 20 by default)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startModelServer } from '../tests/support/model-server.mjs';
import { freshRound, harnessModel, timedRound } from './lib.mjs';
import { startEdgent, startFloor } from './sides.mjs';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const HARNESS = process.argv.includes('--harness');
const [THREADS, TURNS] = [Number(args[0] ?? 20), Number(args[1] ?? 20)];
const ROUNDS = 3;
const dir = mkdtempSync(join(tmpdir(), 'edgent-at-once-'));

const model = HARNESS ? await harnessModel(dir) : await startModelServer({ fallback: { text: 'ok, noted.' } });
const modelUrl = HARNESS ? model.url : `${model.url}/v1`;
try {
  console.log(`${THREADS} threads x ${TURNS} text turns at once, ${ROUNDS} rounds after a warm-up${HARNESS ? `, shaped as the harness's row (fresh threads, ${model.name})` : ''}`);
  const cpu = {};
  for (const [name, start] of [['floor', startFloor], ['edgent', startEdgent]]) {
    const side = await start(modelUrl, HARNESS ? 1 : THREADS);
    try {
      if (HARNESS) for (let i = 0; i < 300; i++) await side.turn(`warm-up ${i}`);
      else await timedRound(side.pid, side.turns, TURNS, 'warm-up');
      const rounds = [];
      for (let r = 1; r <= ROUNDS; r++) {
        rounds.push(HARNESS
          ? await freshRound(side, THREADS, TURNS, `round ${r}`)
          : await timedRound(side.pid, side.turns, TURNS, `round ${r}`));
      }
      cpu[name] = rounds.map((r) => r.cpu).sort((a, b) => a - b)[1];
      const shown = rounds.map((r) => `${r.perSecond.toFixed(0)} turns/s, ${r.cpu.toFixed(2)} ms CPU`).join(' | ');
      console.log(`${name.padEnd(7)}: ${shown}`);
    } finally {
      await side.dispose();
    }
  }
  console.log(`edgent's workerd CPU per turn at once: x${(cpu.edgent / cpu.floor).toFixed(2)} the floor's (middle rounds)`);
} finally {
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
