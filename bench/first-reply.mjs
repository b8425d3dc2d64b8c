#!/usr/bin/env node
// A new conversation's first reply: from nothing to the final assistant frame of the first
// message, on a brand-new thread each time, two ways, interleaved so drift hits both alike:
//   two requests: POST /api/threads (201), then the WebSocket (hello + status), then send;
//   one request:  GET /api/threads/new/stream?agent_id=… (hello names the thread), then send.
// The scripted model answers at once, so the numbers are the framework's (Miniflare, direct).
// The peer's figure for the same path comes from `npm run bench:compare` (its cold probe).
// Usage: npm run build && node bench/first-reply.mjs [threads]
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { summary, seedBench } from './lib.mjs';

const THREADS = Number(process.argv[2] ?? process.env.THREADS ?? 60);
const WARMUP = 5;

const model = await startModelServer({ fallback: { text: 'ok, noted.' } });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
const client = worker.client;

/** Sends the first message and resolves when the final assistant frame arrived. */
async function firstReply(sock) {
  await sock.waitFor((f) => f.type === 'status');
  const from = sock.frames.length;
  sock.send({ type: 'rpc', id: 'first', method: 'send_message', params: { content: 'Hello!' } });
  await sock.finalAssistant(from, 15_000);
}

const twoRequests = async () => {
  const t0 = performance.now();
  const id = await client.createThread('bench_support');
  const sock = await client.connect(id);
  await firstReply(sock);
  const dt = performance.now() - t0;
  sock.close();
  return dt;
};

const oneRequest = async () => {
  const t0 = performance.now();
  const sock = await client.openNew('bench_support');
  await firstReply(sock);
  const dt = performance.now() - t0;
  sock.close();
  return dt;
};

try {
  await seedBench(worker.db);
  const two = [];
  const one = [];
  for (let i = 0; i < THREADS + WARMUP; i++) {
    // Alternate which goes first, so neither always meets a warmer isolate.
    const [a, b] = i % 2 ? [twoRequests, oneRequest] : [oneRequest, twoRequests];
    const ra = await a();
    const rb = await b();
    if (i < WARMUP) continue;
    (a === twoRequests ? two : one).push(ra);
    (b === twoRequests ? two : one).push(rb);
  }
  summary(`new thread to first reply, two requests (POST + socket), ${THREADS} threads`, two);
  summary(`new thread to first reply, one request (/api/threads/new/stream), ${THREADS} threads`, one);
} finally {
  await worker.dispose();
  await model.close();
}
