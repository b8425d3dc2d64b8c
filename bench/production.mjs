#!/usr/bin/env node
// A production-like turn: D1 a network hop away (every D1 round trip delayed by D1_MS, default
// 20), a model that streams with realistic pacing (CHUNKS chunks, CHUNK_MS apart, default
// 10 x 20 ms), and the router and the thread objects in separate isolates (each with its own
// configuration cache, as in production). Prints the turn latency, the model's own time for the
// same reply (measured against the scripted server directly) and the difference: what edgent
// adds per turn. The first turn of a thread is shown apart (it resolves the agent's
// configuration from D1; later turns use the isolate's cache), and so is creating a thread:
// with nothing cached, with the configuration fresh in the objects' isolate, and once every
// cached copy is older than the cache's 5 s (only its version is read again). Then PACED turns
// (default 5) at human pace, 5.5 s apart: each finds its configuration copy past the 5 s. Then
// RESTARTS (default 5) first turns after the Worker started again over the same storage.
// Usage: npm run build && node bench/production.mjs [turns]
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startWorker, ROOT } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { summary, seedBench } from './lib.mjs';

const TURNS = Number(process.argv[2] ?? 50);
const D1_MS = Number(process.env.D1_MS ?? 20);
const CHUNKS = Number(process.env.CHUNKS ?? 10);
const CHUNK_MS = Number(process.env.CHUNK_MS ?? 20);
const PACED = Number(process.env.PACED ?? 5);
const RESTARTS = Number(process.env.RESTARTS ?? 5);
const text = 'x'.repeat(8 * CHUNKS); // chunkSize 8 by default: CHUNKS text chunks
const step = { text, chunkDelayMs: CHUNK_MS };

copyFileSync(new URL('./d1-delay-entry.mjs', import.meta.url), join(ROOT, 'build', 'bench-d1-delay.mjs'));
const model = await startModelServer({ fallback: step });

// The model alone: the same streamed reply, read whole by a plain client.
const modelOnly = [];
for (let i = 0; i < 10; i++) {
  const t0 = performance.now();
  const r = await fetch(`${model.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm',
      stream: true,
      stream_options: { include_usage: true }, // as edgent asks: the usage frame is one more chunk
      messages: [{ role: 'user', content: 'hi' }],
    }),
  });
  await r.text();
  modelOnly.push(performance.now() - t0);
}
modelOnly.sort((a, b) => a - b);
const modelMedian = modelOnly[5];

// Persisted, so the Worker can be started again over the same storage (a new isolate: empty
// configuration caches, the thread's own storage kept).
const persistDir = mkdtempSync(join(tmpdir(), 'edgent-production-'));
const start = () =>
  startWorker({
    modelUrl: `${model.url}/v1`,
    entry: 'bench-d1-delay.mjs',
    bindings: { D1_DELAY_MS: String(D1_MS) },
    objectsApart: true,
    persistDir,
  });
let worker = await start();
/** `POST /api/threads`: the new thread's id and how long the answer took. */
async function create() {
  const t0 = performance.now();
  const id = await worker.client.createThread('bench_support');
  return [id, performance.now() - t0];
}
try {
  await seedBench(worker.db);
  const [id, createMs] = await create();
  const sock = await worker.client.connect(id);
  const times = [];
  for (let i = 0; i < TURNS + 1; i++) {
    const from = sock.frames.length;
    const start = performance.now();
    sock.send({ type: 'rpc', id: `p${i}`, method: 'send_message', params: { content: `message ${i}` } });
    await sock.finalAssistant(from, 30_000);
    times.push(performance.now() - start);
  }
  // At human pace: every message finds the objects' copy of the configuration older than the
  // cache's 5 s, so its version is checked (one D1 round trip) while the model request starts.
  const paced = [];
  for (let i = 0; i < PACED; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    const from = sock.frames.length;
    const start = performance.now();
    sock.send({ type: 'rpc', id: `h${i}`, method: 'send_message', params: { content: `paced ${i}` } });
    await sock.finalAssistant(from, 30_000);
    paced.push(performance.now() - start);
  }
  sock.close();
  // The first turn of a thread in a new isolate (after an eviction or a deploy): its object
  // plans with the configuration copy it kept while D1 confirms it.
  const restarted = [];
  for (let i = 0; i < RESTARTS; i++) {
    await worker.dispose();
    worker = await start();
    const again = await worker.client.connect(id);
    const from = again.frames.length;
    const t0 = performance.now();
    again.send({ type: 'rpc', id: `r${i}`, method: 'send_message', params: { content: `restarted ${i}` } });
    await again.finalAssistant(from, 30_000);
    restarted.push(performance.now() - t0);
    again.close();
  }
  const [, freshMs] = await create();
  await new Promise((resolve) => setTimeout(resolve, 5_500));
  const [, staleMs] = await create();
  const sorted = times.slice(1).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  console.log(`D1 round trip +${D1_MS} ms; model streams ${CHUNKS} chunks ${CHUNK_MS} ms apart`);
  console.log(`model alone (the same reply, read by a plain client): median ${modelMedian.toFixed(2)} ms`);
  console.log(`create thread (POST /api/threads): nothing cached ${createMs.toFixed(2)} ms, configuration fresh ${freshMs.toFixed(2)} ms, cache older than 5 s ${staleMs.toFixed(2)} ms`);
  console.log(`first turn: ${times[0].toFixed(2)} ms`);
  summary(`turns 2..${TURNS + 1}`, times.slice(1));
  console.log(`edgent adds per turn (median turn - model alone): ${(median - modelMedian).toFixed(2)} ms`);
  if (restarted.length > 0) {
    summary(`${RESTARTS} first turns after the Worker started again (new isolates)`, restarted);
  }
  if (paced.length > 0) {
    summary(`${PACED} turns at human pace (5.5 s apart: the configuration's version checked each time)`, paced);
    const pacedMedian = paced.slice().sort((a, b) => a - b)[Math.floor(paced.length / 2)];
    console.log(`edgent adds per turn at human pace: ${(pacedMedian - modelMedian).toFixed(2)} ms`);
  }
} finally {
  await worker.dispose();
  await model.close?.();
  rmSync(persistDir, { recursive: true, force: true });
}
