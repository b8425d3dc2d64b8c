#!/usr/bin/env node
// Turns at once, beside the floor (bench/floor-worker.mjs): THREADS threads, each with its own
// socket, run TURNS text turns back to back, all threads at the same time, in three timed
// rounds after a warm-up round. For each round it prints the turns per second and the workerd
// process's CPU per turn (/proc, user + system) of edgent and of the floor, each in a Miniflare
// of its own against one scripted model server.
//
// Why beside bench/cpu.mjs (one thread, turn after turn): a workerd that serves many turns at
// once pays less per turn for waking up, and the floor gains more from that than edgent does
// (the numbers in docs/testing.md), so the harness's "20 x 20 at once" row depends on this
// figure, not on cpu.mjs's. `1 100` gives the one-thread figure the same way.
//
// Usage: npm run build && node bench/at-once.mjs [threads] [turns]   (20 x 20 by default)
import { Miniflare } from 'miniflare';
import { startModelServer } from '../tests/support/model-server.mjs';
import { startWorker } from '../tests/support/worker.mjs';
import { cpuMs, seedBench, workerdPid } from './lib.mjs';
import { floorSocket } from './sides.mjs';

const [THREADS, TURNS] = [Number(process.argv[2] ?? 20), Number(process.argv[3] ?? 20)];
const ROUNDS = 3;

/** Edgent's built Worker with THREADS threads of `bench_support`, each with its socket. */
async function edgent(modelUrl) {
  const worker = await startWorker({ modelUrl });
  await seedBench(worker.db);
  const sockets = [];
  for (let i = 0; i < THREADS; i++) {
    sockets.push(await worker.client.connect(await worker.client.createThread('bench_support')));
  }
  let turn = 0;
  const one = async (sock, n, content) => {
    const from = sock.frames.length;
    sock.send({ type: 'rpc', id: `t${n}`, method: 'send_message', params: { content } });
    await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === n, { from, timeout: 60_000 });
  };
  return {
    pid: workerdPid(worker.url),
    async round(label) {
      const first = turn + 1;
      turn += TURNS;
      await Promise.all(sockets.map(async (sock) => {
        for (let i = 0; i < TURNS; i++) await one(sock, first + i, `${label} ${i}`);
      }));
    },
    async dispose() {
      for (const sock of sockets) sock.close();
      await worker.dispose();
    },
  };
}

/** The floor in a Miniflare of its own, with THREADS objects and a socket to each. */
async function floor(modelUrl) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: new URL('./floor-worker.mjs', import.meta.url).pathname,
    compatibilityDate: '2026-04-20',
    durableObjects: { FLOOR: { className: 'Floor', useSQLite: true } },
    bindings: { MODEL_URL: modelUrl },
    port: 0,
    host: '127.0.0.1',
  });
  const url = (await mf.ready).toString().replace(/^http/, 'ws');
  const sockets = [];
  for (let i = 0; i < THREADS; i++) sockets.push(await floorSocket(`${url}floor-${i}-${Date.now()}`));
  return {
    pid: workerdPid(url.replace(/^ws/, 'http')),
    async round(label) {
      await Promise.all(sockets.map(async (sock) => {
        for (let i = 0; i < TURNS; i++) await sock.turn(`${label} ${i}`);
      }));
    },
    async dispose() {
      for (const sock of sockets) sock.close();
      await mf.dispose();
    },
  };
}

const model = await startModelServer({ fallback: { text: 'ok, noted.' } });
try {
  console.log(`${THREADS} threads x ${TURNS} text turns at once, ${ROUNDS} rounds after a warm-up`);
  const cpu = {};
  for (const [name, start] of [['floor', floor], ['edgent', edgent]]) {
    const side = await start(`${model.url}/v1`);
    try {
      await side.round('warm-up');
      const rounds = [];
      for (let r = 1; r <= ROUNDS; r++) {
        const [c0, t0] = [cpuMs(side.pid), performance.now()];
        await side.round(`round ${r}`);
        const [wall, used] = [performance.now() - t0, cpuMs(side.pid) - c0];
        rounds.push({ perSecond: (THREADS * TURNS * 1000) / wall, cpu: used / (THREADS * TURNS) });
      }
      cpu[name] = rounds.map((r) => r.cpu).sort((a, b) => a - b)[1];
      const shown = rounds.map((r) => `${r.perSecond.toFixed(0)} turns/s, ${r.cpu.toFixed(2)} ms CPU`).join(' | ');
      console.log(`${name.padEnd(7)}: ${shown}`);
    } finally {
      await side.dispose();
    }
  }
  console.log(`edgent's workerd CPU per turn at once: x${(cpu.edgent / cpu.floor).toFixed(2)} the floor's (middle rounds)`);
} finally {
  await model.close();
}
