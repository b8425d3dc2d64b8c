#!/usr/bin/env node
// Whether a turn's cost stays flat as the thread grows: TURNS tool turns (4 messages each, 250
// by default: a 1,000-message thread) on one thread in Miniflare, printing the workerd process's
// CPU per turn over the first and the last 50 turns, their latency, and the size of the model
// request at each end. The request grows with the history (the whole history within the
// prompt's budget is sent, as every provider expects); what edgent itself does per turn should
// not. CPU is read from /proc at the kernel's 10 ms resolution, so only means over many turns
// mean anything.
// Usage: npm run build && node bench/flat.mjs [turns]
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { seedBench, workerdPid, cpuMs } from './lib.mjs';

const TURNS = Number(process.argv[2] ?? 250);
const WINDOW = 50;

const answer = (req) => {
  const last = (req.body.messages ?? []).at(-1);
  if (last?.role === 'user') return { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  return { text: 'The current time is in the tool result above, so that is the answer.' };
};
const model = await startModelServer({ fallback: answer });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
try {
  await seedBench(worker.db);
  const pid = workerdPid(worker.url);
  const sock = await worker.client.connect(await worker.client.createThread('bench_support'));
  const cpu = [];
  const ms = [];
  for (let i = 0; i < TURNS; i++) {
    const from = sock.frames.length;
    const c0 = cpuMs(pid);
    const t0 = performance.now();
    sock.send({ type: 'rpc', id: `t${i}`, method: 'send_message', params: { content: `Turn ${i}: what time is it?` } });
    await sock.finalAssistant(from, 30_000);
    ms.push(performance.now() - t0);
    cpu.push(cpuMs(pid) - c0);
  }
  sock.close();
  const mean = (xs) => (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(2);
  const size = (r) => JSON.stringify(r.body).length;
  const ends = (xs) => `first ${WINDOW} ${mean(xs.slice(0, WINDOW))} ms, last ${WINDOW} ${mean(xs.slice(-WINDOW))} ms`;
  console.log(`${TURNS} tool turns on one thread (${4 * TURNS} messages)`);
  console.log(`  workerd CPU per turn: ${ends(cpu)}`);
  console.log(`  turn latency (mean): ${ends(ms)}`);
  console.log(`  model request body: first ${size(model.requests[0])} B, last ${size(model.requests.at(-1))} B`);
} finally {
  await worker.dispose();
  await model.close();
}
