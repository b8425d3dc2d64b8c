#!/usr/bin/env node
// A/B of two builds' CPU per turn with many threads at once: this checkout's Worker and another
// checkout's (a `git worktree` of another commit, built with its own scripts/build.sh), each in
// a Miniflare of its own against one scripted model server. Each side gets THREADS threads; a
// round runs TURNS text turns on every thread, the threads at once; the sides take rounds in
// turn (ABBA order, so drift in the machine's speed hits both alike), and each round's workerd
// CPU per turn (/proc, user + system) and turns per second are printed with their medians.
// Why beside bench/ab.mjs (one thread, turn after turn, latency and CPU): the harness's
// "20 x 20 at once" row depends on CPU per turn under concurrency, where a workerd pays less per
// turn for waking up (bench/at-once.mjs), so a change can move the two differently.
// With `--harness`, rounds are shaped as the harness's row (bench/at-once.mjs says how).
// Usage: node bench/ab-at-once.mjs <other checkout> [threads] [turns] [rounds] [--harness]   (20 20 6)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startModelServer } from '../tests/support/model-server.mjs';
import { ROOT } from '../tests/support/worker.mjs';
import { freshRound, harnessModel, timedRound } from './lib.mjs';
import { startEdgent } from './sides.mjs';

const HARNESS = process.argv.includes('--harness');
const argv = process.argv.filter((a) => !a.startsWith('--'));
const other = argv[2];
if (!other) {
  console.error('usage: node bench/ab-at-once.mjs <other checkout> [threads] [turns] [rounds]');
  process.exit(2);
}
const [THREADS, TURNS, ROUNDS] = [3, 4, 5].map((i, k) => Number(argv[i] ?? [20, 20, 6][k]));
const dir = mkdtempSync(join(tmpdir(), 'edgent-ab-at-once-'));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const model = HARNESS ? await harnessModel(dir) : await startModelServer({ fallback: { text: 'ok, noted.' } });
const modelUrl = HARNESS ? model.url : `${model.url}/v1`;
const sides = {};
try {
  sides.this = await startEdgent(modelUrl, HARNESS ? 1 : THREADS, ROOT);
  sides.other = await startEdgent(modelUrl, HARNESS ? 1 : THREADS, resolve(other));
  for (const side of Object.values(sides)) {
    if (HARNESS) for (let i = 0; i < 300; i++) await side.turn(`warm-up ${i}`);
    else await timedRound(side.pid, side.turns, TURNS, 'warm-up');
  }
  const rounds = { this: [], other: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of r % 2 ? ['other', 'this'] : ['this', 'other']) {
      const side = sides[name];
      rounds[name].push(HARNESS
        ? await freshRound(side, THREADS, TURNS, `round ${r}`)
        : await timedRound(side.pid, side.turns, TURNS, `round ${r}`));
    }
  }
  console.log(`${THREADS} threads x ${TURNS} text turns at once, ${ROUNDS} rounds per build after a warm-up`);
  for (const [name, rs] of Object.entries(rounds)) {
    const cpu = rs.map((x) => x.cpu);
    console.log(`${name.padEnd(5)}: ms CPU per turn ${cpu.map((c) => c.toFixed(2)).join(' ')} | median ${median(cpu).toFixed(2)}, ${median(rs.map((x) => x.perSecond)).toFixed(0)} turns/s`);
  }
  const ratio = median(rounds.this.map((x) => x.cpu)) / median(rounds.other.map((x) => x.cpu));
  // Each round's pair ran back to back, so their ratio is the least disturbed by drift.
  const paired = median(rounds.this.map((x, r) => x.cpu / rounds.other[r].cpu));
  console.log(`this / other, CPU per turn: ${ratio.toFixed(3)} (medians), ${paired.toFixed(3)} (median of each round's pair)`);
} finally {
  for (const side of Object.values(sides)) await side.dispose();
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
