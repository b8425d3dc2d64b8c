#!/usr/bin/env node
// Many threads at once through one local workerd (Miniflare), text turns, scripted model:
// creates THREADS threads all at once (every POST /api/threads in flight together), opens a
// socket to each, then drives TURNS turns in every thread concurrently. Prints failed
// requests, creation time, per-turn latency and aggregate turns/s at saturation.
// Usage: npm run build && node bench/scale.mjs [threads] [turns]
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { summary, seedBench } from './lib.mjs';

const THREADS = Number(process.argv[2] ?? 300);
const TURNS = Number(process.argv[3] ?? 3);

const model = await startModelServer({ fallback: { text: 'ok, noted.' } });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
const failures = new Map();
const fail = (what) => failures.set(what, (failures.get(what) ?? 0) + 1);
try {
  await seedBench(worker.db);
  let t0 = performance.now();
  const created = await Promise.all(
    Array.from({ length: THREADS }, async () => {
      const start = performance.now();
      const r = await worker.client.request('POST', '/api/threads', { body: { agent_id: 'bench_support' } });
      if (r.status !== 201) fail(`create ${r.status}`);
      return { id: r.body?.thread_id, ms: performance.now() - start };
    }),
  );
  const createMs = performance.now() - t0;
  console.log(`created ${THREADS} threads at once in ${createMs.toFixed(0)} ms`);
  summary('  per creation', created.map((c) => c.ms));
  const ids = created.map((c) => c.id).filter(Boolean);

  t0 = performance.now();
  const socks = (
    await Promise.all(ids.map((id) => worker.client.connect(id).catch(() => fail('connect'))))
  ).filter(Boolean);
  console.log(`opened ${socks.length} sockets in ${(performance.now() - t0).toFixed(0)} ms`);

  const latencies = [];
  t0 = performance.now();
  await Promise.all(
    socks.map(async (sock, n) => {
      for (let i = 0; i < TURNS; i++) {
        const from = sock.frames.length;
        const start = performance.now();
        sock.send({ type: 'rpc', id: `s${n}-${i}`, method: 'send_message', params: { content: `message ${i}` } });
        try {
          await sock.finalAssistant(from, 120_000);
          latencies.push(performance.now() - start);
        } catch {
          fail('turn timed out');
        }
      }
    }),
  );
  const driveMs = performance.now() - t0;
  for (const s of socks) s.close();
  console.log(
    `${latencies.length} turns (${socks.length} threads x ${TURNS}) in ${driveMs.toFixed(0)} ms: ` +
      `${((latencies.length / driveMs) * 1000).toFixed(1)} turns/s aggregate`,
  );
  summary('  per turn', latencies);
  const failed = [...failures.entries()].map(([k, v]) => `${k}: ${v}`).join(', ');
  console.log(`failed requests: ${failed || 0}`);
} finally {
  await worker.dispose();
  await model.close?.();
}
