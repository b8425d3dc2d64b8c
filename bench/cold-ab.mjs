#!/usr/bin/env node
// A/B benchmark of a new isolate's first thread, two builds side by side: this checkout's Worker
// and another checkout's (a `git worktree` of an older commit, built with its own
// scripts/build.sh). Per repetition, for each build in alternating order: a fresh Miniflare
// (its own workerd, nothing compiled yet), then `POST /api/threads`, the thread's socket and
// one text turn. Prints, per build, the medians of the first create, of create + socket + first
// reply, and of the workerd's CPU over the whole. What it measures is mostly V8 compiling the
// wasm functions these requests run for the first time
// (docs/decisions/2026-12-02-a-cold-isolate-compiles-what-it-runs.md).
// Both builds are started with this checkout's test support (D1 migrations, agents' seed, the
// scripted model server): compare with a checkout whose migrations and agents match this one's.
// Usage: node bench/cold-ab.mjs <other checkout> [repetitions]
import { resolve } from 'node:path';
import { ROOT, startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { cpuMs, median, seedBench, workerdPid } from './lib.mjs';

const other = process.argv[2];
if (!other) {
  console.error('usage: node bench/cold-ab.mjs <other checkout> [repetitions]');
  process.exit(2);
}
const REPS = Number(process.argv[3] ?? 10);
const builds = [['this', ROOT], ['other', resolve(other)]];
const model = await startModelServer({ fallback: () => ({ text: 'ok, noted.' }) });
const rows = { this: [], other: [] };
try {
  for (let rep = 0; rep < REPS; rep++) {
    for (const [label, appDir] of rep % 2 ? builds : [...builds].reverse()) {
      const worker = await startWorker({ modelUrl: `${model.url}/v1`, appDir });
      try {
        await seedBench(worker.db);
        const pid = workerdPid(worker.url);
        const cpu0 = cpuMs(pid);
        const t0 = performance.now();
        const id = await worker.client.createThread('bench_support');
        const created = performance.now();
        const sock = await worker.client.connect(id);
        const from = sock.frames.length;
        sock.send({ type: 'rpc', id: 'cold', method: 'send_message', params: { content: 'hello' } });
        await sock.finalAssistant(from, 15_000);
        rows[label].push({ create: created - t0, total: performance.now() - t0, cpu: cpuMs(pid) - cpu0 });
        sock.close();
      } finally {
        await worker.dispose();
      }
    }
  }
} finally {
  await model.close?.();
}
for (const [label, dir] of builds) {
  const r = rows[label];
  console.log(
    `${label} (${dir}): first POST /api/threads ${median(r.map((x) => x.create)).toFixed(1)} ms; ` +
      `create + socket + first reply ${median(r.map((x) => x.total)).toFixed(1)} ms; ` +
      `workerd CPU ${median(r.map((x) => x.cpu))} ms (medians of ${r.length})`,
  );
}
