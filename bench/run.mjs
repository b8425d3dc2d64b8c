#!/usr/bin/env node
// Framework overhead benchmark. Prints the wasm size (raw and gzip -9) and the time from a
// user message (rpc send_message) to the final assistant `message` frame, with the scripted
// model answering immediately, over TURNS turns (default 200) on one thread in Miniflare.
// `tool` turns call get_current_time and then answer (two model calls, four messages a turn):
// 250 of them grow the thread to 1,000 messages, and the first and last 20 turns side by side
// say whether a turn's cost stays flat as the history grows (issue 12: within 10%).
// Usage: npm run build && node bench/run.mjs [turns] [text|tool]
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { startWorker, ROOT } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { median, summary, seedBench } from './lib.mjs';

const TURNS = Number(process.argv[2] ?? process.env.TURNS ?? 200);
const KIND = process.argv[3] ?? 'text';
const WARMUP = 10;

const wasm = readFileSync(join(ROOT, 'build', 'index_bg.wasm'));
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`wasm size: ${kb(wasm.length)} raw, ${kb(gzipSync(wasm, { level: 9 }).length)} gzip -9`);

const answer = (req) => {
  const last = (req.body.messages ?? []).at(-1);
  if (KIND === 'tool' && last?.role === 'user') return { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  return { text: 'ok, noted.' };
};
const model = await startModelServer({ fallback: answer });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
try {
  await seedBench(worker.db);
  // HISTORY_TOKENS=n bounds the history each model call is sent (the support prompt's model's
  // max_history_tokens): what remains of the growth is the framework's, not the request's.
  if (process.env.HISTORY_TOKENS) {
    await worker.db.prepare("UPDATE models SET max_history_tokens = ? WHERE name = 'default'").bind(Number(process.env.HISTORY_TOKENS)).run();
  }
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
  summary(`${KIND} turn latency (user message -> final assistant frame, ${TURNS} turns)`, times);
  summary('  first 50 turns', times.slice(0, 50));
  summary('  last 50 turns', times.slice(-50));
  const [first, last] = [median(times.slice(0, 20)), median(times.slice(-20))];
  const messages = (await worker.client.request('GET', `/api/threads/${id}/messages?limit=1`)).body.total;
  console.log(`flat cost: first 20 turns median ${first.toFixed(2)} ms, last 20 ${last.toFixed(2)} ms ` +
    `(last / first ${(last / first).toFixed(2)}), the thread at ${messages} messages`);
} finally {
  await worker.dispose();
  await model.close();
}
