#!/usr/bin/env node
// Tool and history benchmarks, on one thread in Miniflare (real workerd + Durable Object SQLite):
//   1. queued-tool throughput: N `queue_tool get_current_time` rpcs sent at once; time until the
//      N-th tool reports success (tools per second, end to end through the turn loop);
//   2. `get_messages(limit 50)` latency (newest page and oldest page) with 1k and then 100k
//      stored messages: it should stay flat, because pages come from an index and totals
//      from counters.
// Usage: npm run build && node bench/tools.mjs [tools=500] [big=100000]
import { summary } from './lib.mjs';
import WebSocket from 'ws';
import { startWorker, API_KEY } from '../tests/support/worker.mjs';

const TOOLS = Number(process.argv[2] ?? 500);
const BIG = Number(process.argv[3] ?? 100_000);
const SAMPLES = 200;

/** A bare socket: counts frames by predicate without keeping them (100k frames must not pile up). */
async function open(url, threadId) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}api/threads/${threadId}/stream?token=${API_KEY}`);
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const pending = new Map();
  let watcher = null;
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString());
    if (f.type === 'result' && pending.has(f.id)) {
      pending.get(f.id)(f);
      pending.delete(f.id);
    }
    watcher?.(f);
  });
  let n = 0;
  return {
    ws,
    /** Sends an rpc; resolves with its result frame. */
    rpc(method, params) {
      const id = `b${n++}`;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        ws.send(JSON.stringify({ type: 'rpc', id, method, params }));
      });
    },
    watch(fn) { watcher = fn; },
  };
}

async function fill(sock, from, to) {
  const WINDOW = 500; // rpcs in flight
  const inflight = new Set();
  for (let i = from; i < to; i++) {
    const p = sock.rpc('inject_message', { content: `history message ${i} `.padEnd(120, '.'), role: i % 2 ? 'assistant' : 'user' })
      .then((r) => { if (!r.ok) throw new Error(JSON.stringify(r.error)); inflight.delete(p); });
    inflight.add(p);
    if (inflight.size >= WINDOW) await Promise.race(inflight);
  }
  await Promise.all(inflight);
}

async function pageLatency(sock, label) {
  for (const order of ['desc', 'asc']) {
    const times = [];
    for (let i = 0; i < SAMPLES + 20; i++) {
      const t0 = performance.now();
      const r = await sock.rpc('get_messages', { limit: 50, order });
      const dt = performance.now() - t0;
      if (!r.ok || r.result.messages.length !== 50) throw new Error(`bad page: ${JSON.stringify(r).slice(0, 300)}`);
      if (i >= 20) times.push(dt);
    }
    summary(`get_messages(50, ${order}) at ${label}`, times);
  }
}

const worker = await startWorker({});
try {
  // 1. Queued-tool throughput.
  {
    const id = await worker.client.createThread('support');
    const sock = await open(worker.url, id);
    let done = 0;
    let finished;
    const all = new Promise((resolve) => { finished = resolve; });
    sock.watch((f) => {
      if (f.type === 'tool' && f.status === 'success' && ++done === TOOLS) finished();
    });
    const t0 = performance.now();
    const queued = await Promise.all(
      Array.from({ length: TOOLS }, () => sock.rpc('queue_tool', { name: 'get_current_time', args: {} })),
    );
    if (queued.some((r) => !r.ok)) throw new Error('a queue_tool rpc failed');
    const tQueued = performance.now() - t0;
    await all;
    const dt = performance.now() - t0;
    console.log(`queued-tool throughput: ${TOOLS} tools in ${dt.toFixed(0)} ms = ${(TOOLS / (dt / 1000)).toFixed(0)} tools/s (all ${TOOLS} queued after ${tQueued.toFixed(0)} ms)`);
    sock.ws.close();
  }

  // 2. get_messages(50) at 1k and at BIG stored messages, same thread.
  {
    const id = await worker.client.createThread('support');
    const sock = await open(worker.url, id);
    let t0 = performance.now();
    await fill(sock, 0, 1000);
    console.log(`stored 1000 messages in ${(performance.now() - t0).toFixed(0)} ms (inject_message, 500 in flight)`);
    await pageLatency(sock, '1k messages');
    t0 = performance.now();
    await fill(sock, 1000, BIG);
    const secs = (performance.now() - t0) / 1000;
    console.log(`stored ${BIG - 1000} more messages in ${secs.toFixed(1)} s (${((BIG - 1000) / secs).toFixed(0)} inserts/s)`);
    await pageLatency(sock, `${BIG / 1000}k messages`);
    const total = await sock.rpc('get_messages', { limit: 1 });
    console.log(`thread total: ${total.result.total} messages`);
    sock.ws.close();
  }
} finally {
  await worker.dispose();
}
