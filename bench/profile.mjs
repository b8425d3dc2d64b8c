#!/usr/bin/env node
// Where a turn's CPU goes: runs TURNS text turns (or tool turns with `tool`) on one thread in
// Miniflare with the V8 inspector on, records a CPU profile of the Worker's isolate over them
// and prints the functions with the most self time (wasm functions by name when the build kept
// them: `EDGENT_KEEP_NAMES=1 npm run build`). The profile is written to bench/last.cpuprofile
// (open it in Chrome DevTools).
// With `create`, each of the TURNS is a new thread instead (`POST /api/threads`, nothing else).
// With `cold`, the profile covers a new isolate's first thread instead: `POST /api/threads`, its
// socket and one text turn, the first requests the Worker serves (TURNS is ignored). Most of that
// time is V8 compiling each wasm function on its first call, which the profile charges to the
// caller, so `cold` also prints the time spent inside each function and what it called.
// Usage: EDGENT_KEEP_NAMES=1 npm run build && node bench/profile.mjs [turns] [text|tool|create|cold]
import { writeFileSync } from 'node:fs';
import WebSocket from 'ws';
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { seedBench } from './lib.mjs';

const KIND = process.argv[3] ?? 'text';
const COLD = KIND === 'cold';
const TURNS = COLD ? 1 : Number(process.argv[2] ?? 200);
const PORT = 9300 + Math.floor(Math.random() * 500);

const script = (req) => {
  const msgs = req.body.messages ?? [];
  const last = msgs.at(-1);
  if (KIND === 'tool' && last?.role === 'user') {
    return { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  }
  return { text: 'ok, noted.' };
};
const model = await startModelServer({ fallback: script });
const worker = await startWorker({ modelUrl: `${model.url}/v1`, inspectorPort: PORT });

/** A Chrome DevTools Protocol session with the Worker's isolate. */
async function inspect() {
  const targets = await (await fetch(`http://127.0.0.1:${PORT}/json`)).json();
  const target = targets.find((t) => t.webSocketDebuggerUrl) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((ok, err) => { ws.once('open', ok); ws.once('error', err); });
  let next = 1;
  const waiting = new Map();
  ws.on('message', (data) => {
    const msg = JSON.parse(data);
    if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
  });
  return {
    send: (method, params = {}) => new Promise((ok) => {
      const id = next++;
      waiting.set(id, ok);
      ws.send(JSON.stringify({ id, method, params }));
    }),
    close: () => ws.close(),
  };
}

try {
  await seedBench(worker.db);
  let sock = null;
  const send = async (i) => {
    const from = sock.frames.length;
    sock.send({ type: 'rpc', id: `p${i}`, method: 'send_message', params: { content: `message ${i}` } });
    await sock.finalAssistant(from, 15_000);
  };
  const turn = async (i) => {
    if (KIND === 'create') return void (await worker.client.createThread('bench_support'));
    if (!sock) sock = await worker.client.connect(await worker.client.createThread('bench_support'));
    await send(i);
  };
  if (!COLD) {
    sock = await worker.client.connect(await worker.client.createThread('bench_support'));
    for (let i = 0; i < 10; i++) await turn(i); // warm-up
  }
  const cdp = await inspect();
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
  await cdp.send('Profiler.start');
  const t0 = performance.now();
  for (let i = 0; i < TURNS; i++) await turn(100 + i);
  const elapsed = performance.now() - t0;
  const { result } = await cdp.send('Profiler.stop');
  cdp.close();
  sock?.close();
  writeFileSync(new URL('./last.cpuprofile', import.meta.url), JSON.stringify(result.profile));
  const { nodes, samples, timeDeltas } = result.profile;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const parentOf = new Map();
  for (const n of nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);
  const nameOf = (n) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url ? n.callFrame.url.split('/').at(-1) : ''}`.trim();
  const self = new Map();
  const inside = new Map(); // time with the function anywhere on the stack, counted once per sample
  let total = 0;
  samples.forEach((s, i) => {
    const name = nameOf(byId.get(s));
    const dt = timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
    if (!COLD) return;
    const onStack = new Set();
    for (let id = s; id !== undefined; id = parentOf.get(id)) onStack.add(nameOf(byId.get(id)));
    for (const k of onStack) inside.set(k, (inside.get(k) ?? 0) + dt);
  });
  const idle = (self.get('(idle)') ?? 0) + (self.get('(program)') ?? 0);
  console.log(`${TURNS} ${KIND} turns in ${elapsed.toFixed(0)} ms (${(elapsed / TURNS).toFixed(2)} ms each); ` +
    `profiled ${(total / 1000).toFixed(0)} ms, busy ${((total - idle) / 1000 / TURNS).toFixed(2)} ms per turn`);
  const top = [...self.entries()].filter(([k]) => k !== '(idle)').sort((a, b) => b[1] - a[1]).slice(0, 40);
  for (const [name, us] of top) {
    console.log(`${(us / 1000 / TURNS).toFixed(3).padStart(8)} ms/turn  ${(100 * us / (total - (self.get('(idle)') ?? 0))).toFixed(1).padStart(5)}%  ${name.slice(0, 140)}`);
  }
  if (COLD) {
    // The entry points and the runtime's own frames are on every stack: list edgent's and the
    // app's functions, the ones a change can move.
    console.log('\ninside each function, with what it called (edgent and the app):');
    const ours = [...inside.entries()].filter(([k]) => /edgent/.test(k)).sort((a, b) => b[1] - a[1]).slice(0, 25);
    for (const [name, us] of ours) console.log(`${(us / 1000).toFixed(2).padStart(8)} ms  ${name.slice(0, 140)}`);
  }
} finally {
  await worker.dispose();
  await model.close?.();
}
