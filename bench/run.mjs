#!/usr/bin/env node
// Framework overhead benchmark. Prints the wasm size (raw and gzip -9) and the time from a
// user message (rpc send_message) to the final assistant `message` frame, with the scripted
// model answering immediately, over TURNS turns (default 200) on one thread in Miniflare.
// Usage: npm run build && node bench/run.mjs [turns]
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { startWorker, ROOT } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { summary, seedBench } from './lib.mjs';

const TURNS = Number(process.argv[2] ?? process.env.TURNS ?? 200);
const WARMUP = 10;

const wasm = readFileSync(join(ROOT, 'build', 'index_bg.wasm'));
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`wasm size: ${kb(wasm.length)} raw, ${kb(gzipSync(wasm, { level: 9 }).length)} gzip -9`);

const model = await startModelServer({ fallback: { text: 'ok, noted.' } });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
try {
  await seedBench(worker.db);
  const id = await worker.client.createThread('bench_support');
  const sock = await worker.client.connect(id);
  const times = [];
  for (let i = 0; i < TURNS + WARMUP; i++) {
    const from = sock.frames.length;
    const t0 = performance.now();
    sock.send({ type: 'rpc', id: `b${i}`, method: 'send_message', params: { content: `message ${i}` } });
    await sock.finalAssistant(from, 15_000);
    const dt = performance.now() - t0;
    if (i >= WARMUP) times.push(dt);
  }
  sock.close();
  summary(`turn latency (user message -> final assistant frame, ${TURNS} turns)`, times);
  summary('  first 50 turns', times.slice(0, 50));
  summary('  last 50 turns', times.slice(-50));
} finally {
  await worker.dispose();
  await model.close();
}
