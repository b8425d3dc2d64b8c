#!/usr/bin/env node
// A/B benchmark of two builds in one run: this checkout's Worker and another checkout's (e.g.
// a `git worktree` of an older commit, built with its own scripts/build.sh), side by side in
// two Miniflare instances against one scripted model server, alternating turn by turn so that
// drift in the machine's speed hits both alike. Prints the medians of a text turn and of a
// 3-step tool turn (3 model calls + 2 tools), the paired difference, and each workerd's CPU
// time per pair of turns (each build runs in its own process, so its CPU is its own).
// REPLY_CHUNKS=n streams every text reply as n chunks of 8 characters (default: one short
// reply, 'ok, noted.'), the way a model streams over the network; CHUNK_DELAY_MS=m sends them m ms
// apart (default 0: back to back, so several may arrive in one read).
// Usage: node bench/ab.mjs <other checkout> [turns]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { startWorker as startThis, ROOT } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { cpuMs, seedBench, workerdPid } from './lib.mjs';

const other = process.argv[2];
if (!other) {
  console.error('usage: node bench/ab.mjs <other checkout> [turns]');
  process.exit(2);
}
const TURNS = Number(process.argv[3] ?? 150);
const CHUNKS = Number(process.env.REPLY_CHUNKS ?? 0);
const CHUNK_DELAY_MS = Number(process.env.CHUNK_DELAY_MS ?? 0);
const reply = (text) => (CHUNKS > 0 ? { text: 'abcdefg '.repeat(CHUNKS), chunkSize: 8, chunkDelayMs: CHUNK_DELAY_MS } : { text });
const WARMUP = 10;
const { startWorker: startOther } = await import(pathToFileURL(join(resolve(other), 'tests/support/worker.mjs')).href);

// Text turns answer at once; tool turns call get_current_time twice, then answer.
const script = (req) => {
  const msgs = req.body.messages ?? [];
  const lastUser = msgs.map((m) => m.role).lastIndexOf('user');
  if (String(msgs[lastUser]?.content ?? '').startsWith('TEXT')) return reply('ok, noted.');
  const sinceUser = msgs.length - 1 - lastUser;
  return Math.floor(sinceUser / 2) < 2 ? { toolCalls: [{ name: 'get_current_time', arguments: {} }] } : reply('It is now.');
};
const model = await startModelServer({ fallback: script });
const builds = { this: ROOT, other: resolve(other) };
const workers = { this: await startThis({ modelUrl: `${model.url}/v1` }), other: await startOther({ modelUrl: `${model.url}/v1` }) };
const kb = (dir) => (gzipSync(readFileSync(join(dir, 'build', 'index_bg.wasm')), { level: 9 }).length / 1024).toFixed(1);
const state = {};
for (const k of ['this', 'other']) {
  await seedBench(workers[k].db);
  const sock = await workers[k].client.connect(await workers[k].client.createThread('bench_support'));
  state[k] = { sock, turn: 0, text: [], tool: [] };
}

async function turn(k, content, done) {
  const s = state[k];
  const from = s.sock.frames.length;
  const t0 = performance.now();
  s.sock.send({ type: 'rpc', id: `ab${s.turn}`, method: 'send_message', params: { content } });
  s.turn++;
  const n = s.turn;
  await s.sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === n, { from, timeout: 15_000 });
  return performance.now() - t0 - done;
}

const pids = { this: workerdPid(workers.this.url), other: workerdPid(workers.other.url) };
const cpu = {};
try {
  for (let i = 0; i < TURNS + WARMUP; i++) {
    if (i === WARMUP) for (const k of ['this', 'other']) cpu[k] = pids[k] && cpuMs(pids[k]);
    for (const k of i % 2 ? ['this', 'other'] : ['other', 'this']) {
      const text = await turn(k, `TEXT ${i}`, 0);
      const tool = await turn(k, `what time is it? ${i}`, 0);
      if (i >= WARMUP) {
        state[k].text.push(text);
        state[k].tool.push(tool);
      }
    }
  }
  for (const k of ['this', 'other']) cpu[k] = pids[k] ? (cpuMs(pids[k]) - cpu[k]) / TURNS : NaN;
  const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  for (const k of ['this', 'other']) {
    console.log(`${k} (${builds[k]}): wasm ${kb(builds[k])} KiB gzip -9; text turn median ${med(state[k].text).toFixed(2)} ms; 3-step tool turn median ${med(state[k].tool).toFixed(2)} ms (${TURNS} each); workerd CPU ${cpu[k].toFixed(2)} ms per text + tool turn`);
  }
  for (const kind of ['text', 'tool']) {
    const diffs = state.this[kind].map((t, i) => t - state.other[kind][i]);
    console.log(`${kind}: this - other, paired median ${med(diffs).toFixed(2)} ms; this slower in ${diffs.filter((d) => d > 0).length}/${diffs.length}; ratio of medians ${(med(state.this[kind]) / med(state.other[kind])).toFixed(3)}`);
  }
} finally {
  for (const k of ['this', 'other']) {
    state[k]?.sock.close();
    await workers[k].dispose();
  }
  await model.close();
}
