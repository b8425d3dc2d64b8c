#!/usr/bin/env node
// Agent-engine overhead, with the scripted model answering immediately, in Miniflare:
//  1. a 3-step tool-using turn (model → get_current_time → model → get_current_time → model),
//     timed from the user message to the turn's idle `status` frame, TURNS times (default 100);
//  2. a dual_ai conversation of 25 turns (sides alternate until max_turns), timed from the
//     opening message to the `stopped` status, RUNS times (default 5).
// Usage: npm run build && node bench/engine.mjs [turns] [runs]
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { summary, seedBench } from './lib.mjs';

const TURNS = Number(process.argv[2] ?? 100);
const RUNS = Number(process.argv[3] ?? 5);
const WARMUP = 5;

// A 3-step turn: two tool calls, then the answer. The model server answers by looking at the
// last message of the request, so the script never runs out.
const threeStep = (req) => {
  const msgs = req.body.messages ?? [];
  const tools = msgs.filter((m) => m.role === 'tool').length;
  const sinceUser = msgs.length - 1 - msgs.map((m) => m.role).lastIndexOf('user');
  const stepInTurn = Math.floor(sinceUser / 2);
  if (req.body.messages?.[0]?.content?.startsWith('DUAL')) return { text: `turn ${tools}` };
  return stepInTurn < 2 ? { toolCalls: [{ name: 'get_current_time', arguments: {} }] } : { text: 'It is now.' };
};

const model = await startModelServer({ fallback: threeStep });
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
try {
  await seedBench(worker.db, {
    prompts: ['bench_a', 'bench_b'].map((name) => ({
      name, system: `DUAL ${name}`, model: 'default', tools: '[]', tool_choice: 'auto',
      parallel_tool_calls: 1, include_chat: 1, description: '', hooks: '[]',
    })),
    agents: [{
      id: 'bench_dual', kind: 'dual_ai', description: '', max_turns: 25, expose_as_tool: 0, tool_description: '', hooks: '[]',
      side_a: JSON.stringify({ prompt: 'bench_a', label: 'A' }), side_b: JSON.stringify({ prompt: 'bench_b', label: 'B' }),
    }],
  });

  // 1. Three-step tool-using turns on one thread.
  const id = await worker.client.createThread('bench_support');
  const sock = await worker.client.connect(id);
  const times = [];
  for (let i = 0; i < TURNS + WARMUP; i++) {
    const from = sock.frames.length;
    const before = model.requests.length;
    const t0 = performance.now();
    sock.send({ type: 'rpc', id: `b${i}`, method: 'send_message', params: { content: `what time is it? ${i}` } });
    await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === i + 1, { from, timeout: 15_000 });
    const dt = performance.now() - t0;
    const calls = model.requests.length - before;
    if (calls !== 3) throw new Error(`expected 3 model calls in turn ${i}, got ${calls}`);
    if (i >= WARMUP) times.push(dt);
  }
  sock.close();
  summary(`3-step tool turn (user message -> idle, 3 model calls + 2 tools, ${TURNS} turns)`, times);
  summary('  per model call + tool step (turn / 3)', times.map((t) => t / 3));
  summary('  first 25 turns', times.slice(0, 25));
  summary('  last 25 turns', times.slice(-25));

  // 2. dual_ai conversations of 25 turns.
  const runs = [];
  for (let r = 0; r < RUNS; r++) {
    const tid = await worker.client.createThread('bench_dual');
    const s = await worker.client.connect(tid);
    const before = model.requests.length;
    const t0 = performance.now();
    s.send({ type: 'rpc', id: 'go', method: 'send_message', params: { content: 'Negotiate.' } });
    await s.waitFor((f) => f.type === 'status' && f.state === 'stopped', { timeout: 60_000 });
    runs.push(performance.now() - t0);
    const calls = model.requests.length - before;
    if (calls !== 25) throw new Error(`expected 25 model calls, got ${calls}`);
    s.close();
  }
  summary('dual_ai conversation (25 turns, opening message -> stopped)', runs);
  summary('  per turn', runs.map((t) => t / 25));
} finally {
  await worker.dispose();
  await model.close();
}
