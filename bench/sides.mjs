// The two sides the floor benches compare, each one thread driven over its socket in Miniflare:
// edgent (the built Worker) and the floor (bench/floor-worker.mjs). `turn(content)` resolves
// when the turn has ended; `pid` is the side's workerd process. With `threads`, each side has
// that many threads, driven one each through `turns`. The sockets do not offer
// permessage-deflate, as the side-by-side harness's client does not and production's runtime
// would not use it: in Miniflare the entry Worker compresses every frame, CPU that
// the floor, with its smaller frames, paid less of (about 6% of edgent's at once, 2026-12-02).
import { Miniflare } from 'miniflare';
import WebSocket from 'ws';
import { startWorker } from '../tests/support/worker.mjs';
import { seedBench, workerdPid } from './lib.mjs';

/** A socket to a floor instance: `turn(content)` resolves at its `idle` frame. */
export async function floorSocket(url) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return {
    turn(content) {
      return new Promise((resolve, reject) => {
        const onMessage = (data) => {
          const frame = JSON.parse(data);
          if (frame.type === 'error') reject(new Error(`floor: ${frame.message}`));
          if (frame.type !== 'idle') return;
          ws.off('message', onMessage);
          resolve();
        };
        ws.on('message', onMessage);
        ws.send(JSON.stringify({ content }), (e) => e && reject(e));
      });
    },
    close: () => ws.close(),
  };
}

/**
 * The floor in Miniflare, with `threads` objects and a socket to each: `turns[i](content)` runs
 * a turn on object i, `turn` on the first.
 */
export async function startFloor(modelUrl, threads = 1) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: new URL('./floor-worker.mjs', import.meta.url).pathname,
    compatibilityDate: '2026-04-20',
    durableObjects: { FLOOR: { className: 'Floor', useSQLite: true } },
    bindings: { MODEL_URL: modelUrl },
    port: 0,
    host: '127.0.0.1',
  });
  const url = (await mf.ready).toString();
  const sockets = [];
  for (let i = 0; i < threads; i++) {
    sockets.push(await floorSocket(`${url.replace(/^http/, 'ws')}floor-${i}-${Date.now()}`));
  }
  const turns = sockets.map((socket) => socket.turn);
  return {
    pid: workerdPid(url),
    turn: turns[0],
    turns,
    /** A new object and its socket: its `turn`. */
    async open() {
      const socket = await floorSocket(`${url.replace(/^http/, 'ws')}floor-new-${sockets.length}-${Date.now()}`);
      sockets.push(socket);
      return socket.turn;
    },
    async dispose() {
      for (const socket of sockets) socket.close();
      await mf.dispose();
    },
  };
}

/**
 * Edgent's built Worker in Miniflare, with `threads` new threads of `bench_support` and a socket
 * to each: `turns[i](content)` runs a turn on thread i, `turn` on the first. `appDir` is the
 * checkout whose `build/` and `agents/` run (this one by default; another for an A/B).
 */
export async function startEdgent(modelUrl, threads = 1, appDir = undefined) {
  const worker = await startWorker({ modelUrl, appDir });
  await seedBench(worker.db);
  const sockets = [];
  const open = async () => {
    const sock = await worker.client.connect(await worker.client.createThread('bench_support'), { compress: false });
    sockets.push(sock);
    let n = 0;
    return async (content) => {
      const from = sock.frames.length;
      sock.send({ type: 'rpc', id: `f${n}`, method: 'send_message', params: { content } });
      const turn = ++n;
      await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === turn, { from, timeout: 30_000 });
    };
  };
  const turns = [];
  for (let i = 0; i < threads; i++) turns.push(await open());
  return {
    pid: workerdPid(worker.url),
    turn: turns[0],
    turns,
    /** A new thread and its socket: its `turn`. */
    open,
    async dispose() {
      for (const sock of sockets) sock.close();
      await worker.dispose();
    },
  };
}
