import { startModelServer } from '../tests/support/model-server.mjs';
import { cpuMs } from './lib.mjs';
import { startWorker } from '../tests/support/worker.mjs';
import { seedBench, workerdPid } from './lib.mjs';
import { Miniflare } from 'miniflare';
import { floorSocket } from './sides.mjs';
import { spawn } from 'node:child_process';

const THREADS = Number(process.argv[2] ?? 20), TURNS = Number(process.argv[3] ?? 20);
const model = await startModelServer({ fallback: { text: 'ok, noted.' } });
async function edgent() {
  const worker = await startWorker({ modelUrl: `${model.url}/v1` });
  await seedBench(worker.db);
  const socks = [];
  for (let i = 0; i < THREADS; i++) socks.push(await worker.client.connect(await worker.client.createThread('bench_support')));
  const turn = async (sock, n, content) => {
    const from = sock.frames.length;
    sock.send({ type: 'rpc', id: `f${n}`, method: 'send_message', params: { content } });
    await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === n, { from, timeout: 60_000 });
  };
  return { pid: workerdPid(worker.url), run: (k, label) => Promise.all(socks.map(async (s) => { for (let i = 0; i < TURNS; i++) await turn(s, k * TURNS + i + 1, `${label} ${i}`); })), dispose: () => worker.dispose() };
}
async function floor() {
  const mf = new Miniflare({ modules: true, scriptPath: new URL('./floor-worker.mjs', import.meta.url).pathname, compatibilityDate: '2026-04-20',
    durableObjects: { FLOOR: { className: 'Floor', useSQLite: true } }, bindings: { MODEL_URL: `${model.url}/v1` }, port: 0, host: '127.0.0.1' });
  const url = (await mf.ready).toString();
  const socks = [];
  for (let i = 0; i < THREADS; i++) socks.push(await floorSocket(`${url.replace(/^http/, 'ws')}floor-${i}-${Date.now()}`));
  return { pid: workerdPid(url), run: (_k, label) => Promise.all(socks.map(async (s) => { for (let i = 0; i < TURNS; i++) await s.turn(`${label} ${i}`); })), dispose: () => mf.dispose() };
}
for (const [name, start] of [['floor', floor], ['edgent', edgent]]) {
  const side = await start();
  await side.run(0, 'warm');
  const res = [];
  for (let k = 1; k <= 3; k++) {
    let perf;
    if (k === 2 && process.env.PERF) { perf = spawn('perf', ['record', '-F', '1000', '-g', '-p', String(side.pid), '-o', `/tmp/conc-${name}.perf`], { stdio: 'ignore' }); await new Promise((r) => setTimeout(r, 500)); }
    const c0 = cpuMs(side.pid), t0 = performance.now();
    await side.run(k, 'timed');
    if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.on('exit', r)); }
    const wall = performance.now() - t0, cpu = cpuMs(side.pid) - c0;
    res.push(`${(THREADS * TURNS / wall * 1000).toFixed(0)} turns/s, ${(cpu / (THREADS * TURNS)).toFixed(2)} ms CPU/turn`);
  }
  console.log(name, res.join(' | '));
  await side.dispose();
}
await model.close();
