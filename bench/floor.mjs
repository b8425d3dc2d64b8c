#!/usr/bin/env node
// How far edgent's turn is from the floor: the least a Durable Object can do for the same turn
// (bench/floor-worker.mjs: store the message, stream one chat completion, send the pieces,
// store the reply; a tool call answered in place). Both run in Miniflare (one workerd each),
// against the same scripted model server, with turns alternating between them so drift in the
// machine's speed hits both alike. Prints each one's median and the paired difference: what
// edgent adds to a turn. Divided by the peer's median from `npm run bench:compare`, the floor
// is the best ratio any framework could reach on this machine and model server.
//
// With `--wrangler`, the floor alone runs under `wrangler dev` the way bench:compare runs both
// frameworks, through its URL (wrangler's proxy) and direct to the Worker's workerd: set beside
// the peer's medians from bench:compare (same machine and model server), it gives the lowest
// ratio to the peer that the harness could show for any framework.
//
// With `--peer DIR` (and `--wrangler`), also the floor's ratios to the peer's medians in DIR, a
// side-by-side run's results (`npm run bench:compare` passes its own right after it): the
// lowest ratio any framework could show in that run's table, from the same hour. Its memory
// comes from one more floor instance put through the harness's whole workload (the probes'
// threads, every sequential round on both paths, the concurrent rounds; ROUNDS and
// CONC_ROUNDS as the harness reads them; the project's node model server answers it), since a
// Worker's RSS grows with the threads and turns it has served.
//
// The model server is the side-by-side harness's scripted_openai.py when ../shared/bench-peer
// exists (what bench:compare measures with), else tests/support/model-server.mjs.
// Usage: npm run build && node bench/floor.mjs [turns] [--wrangler [--peer DIR]]
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { freePort } from '../tests/support/net.mjs';
import { HARNESS_DIR, HARNESS_TEXT, startScripted } from './lib.mjs';
import { floorSocket, startEdgent, startFloor } from './sides.mjs';

const WRANGLER = process.argv.includes('--wrangler');
const PEER = process.argv.includes('--peer') ? process.argv[process.argv.indexOf('--peer') + 1] : null;
const TURNS = Number(process.argv.slice(2).find((a, i, all) => !a.startsWith('--') && all[i - 1] !== '--peer') ?? 100);
const WARMUP = 10;
const HARNESS = HARNESS_DIR;
const SCRIPTED = join(HARNESS, 'scripted_openai.py');
const TEXT = HARNESS_TEXT;
const TOOL = { tool_calls: [{ name: 'get_current_time', arguments: {} }] };
const dir = mkdtempSync(join(tmpdir(), 'edgent-floor-'));

/** A model server answering every request of a phase in order: `text` turns get one text
 *  reply, `tool` turns a call of get_current_time and then text. */
async function modelServer(phase) {
  if (!existsSync(SCRIPTED)) {
    const fallback = (req) => {
      const last = req.body.messages?.at(-1);
      return phase === 'tool' && last?.role === 'user'
        ? { toolCalls: [{ name: 'get_current_time', arguments: {} }] }
        : { text: TEXT };
    };
    const m = await startModelServer({ fallback });
    return { name: 'tests/support/model-server.mjs', url: `${m.url}/v1`, stop: () => m.close() };
  }
  const turns = 2 * (TURNS + WARMUP) + 4;
  const script = phase === 'text' ? [{ text: TEXT }] : Array.from({ length: turns }, () => [TOOL, { text: TEXT }]).flat();
  const server = await startScripted(HARNESS, join(dir, `${phase}.json`), script);
  return { name: 'scripted_openai.py', ...server };
}

/** workerd's listening TCP ports (`ss -ltnp`), each with its process id. */
function workerdPorts() {
  const out = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  return new Map(
    out
      .split('\n')
      .filter((l) => l.includes('"workerd"'))
      .map((l) => [Number(l.split(/\s+/)[3].split(':').at(-1)), Number(/pid=(\d+)/.exec(l)?.[1])]),
  );
}

/** A process's resident memory in MiB. */
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

/** The floor under `wrangler dev`: its URL and the Worker's own workerd socket (the listening
 *  port, other than the proxy's, that answers as the floor). */
async function startFloorWrangler(modelUrl) {
  const wd = join(dir, 'wrangler');
  execFileSync('mkdir', ['-p', wd]);
  writeFileSync(join(wd, 'floor-worker.mjs'), readFileSync(new URL('./floor-worker.mjs', import.meta.url)));
  writeFileSync(
    join(wd, 'wrangler.toml'),
    'name = "floor"\nmain = "floor-worker.mjs"\ncompatibility_date = "2026-04-20"\n' +
      '[[durable_objects.bindings]]\nname = "FLOOR"\nclass_name = "Floor"\n' +
      '[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["Floor"]\n',
  );
  const before = workerdPorts();
  const port = await freePort();
  const proc = spawn(join(ROOT, 'node_modules', '.bin', 'wrangler'), ['dev', '--port', String(port), '--inspector-port', String(await freePort()), '--var', `MODEL_URL:${modelUrl}`, '--persist-to', join(wd, 'state')], { cwd: wd, stdio: 'ignore', detached: true });
  const answers = async (p) => {
    try {
      return (await (await fetch(`http://127.0.0.1:${p}/`)).text()) === 'floor';
    } catch {
      return false;
    }
  };
  for (let i = 0; !(await answers(port)); i++) {
    if (i > 600) {
      process.kill(-proc.pid, 'SIGTERM');
      throw new Error('wrangler dev did not start the floor');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  let direct;
  let pid;
  for (const [p, owner] of workerdPorts()) {
    if (!before.has(p) && p !== port && (await answers(p))) [direct, pid] = [p, owner];
  }
  return { proxy: port, direct, rss: () => rssMiB(pid), stop: () => process.kill(-proc.pid, 'SIGTERM') };
}

/**
 * The floor's Worker RSS (MiB) after what the side-by-side harness puts each framework through
 * before it reads theirs, in one `wrangler dev`: two probe threads of three turns, then ROUNDS
 * rounds of a text and a tool thread of TURNS + WARMUP turns on each path, then CONC_ROUNDS
 * rounds of 20 threads x 22 turns at once on each path. One model server answers both kinds
 * (a tool turn's first call gets the tool call).
 */
async function floorRssAfterHarnessWorkload() {
  const rounds = Number(process.env.ROUNDS || 3);
  const concRounds = Number(process.env.CONC_ROUNDS || 2);
  const model = await startModelServer({
    fallback: (req) => {
      const last = req.body.messages?.at(-1);
      return last?.role === 'user' && String(last.content).startsWith('tool')
        ? { toolCalls: TOOL.tool_calls }
        : { text: TEXT };
    },
  });
  const floor = await startFloorWrangler(`${model.url}/v1`);
  const open = (port, name) => floorSocket(`ws://127.0.0.1:${port}/${name}-${Date.now()}-${Math.random()}`);
  // Both paths, as the harness runs them (the direct one only when its socket was found).
  const paths = [floor.proxy, floor.direct].filter(Boolean);
  try {
    for (const kinds of [['text', 'text', 'tool'], ['text', 'text', 'tool']]) {
      const socket = await open(floor.proxy, 'probe');
      for (const kind of kinds) await socket.turn(`${kind} turn`);
      socket.close();
    }
    for (let round = 0; round < rounds; round++) {
      for (const port of paths) {
        for (const kind of ['text', 'tool']) {
          const socket = await open(port, `seq-${kind}`);
          await timeTurns(socket, kind);
          socket.close();
        }
      }
    }
    for (let round = 0; round < concRounds; round++) {
      for (const port of [...paths].reverse()) await turnsPerSecondAtOnce(port);
    }
    return floor.rss();
  } finally {
    floor.stop();
    await model.close();
  }
}

const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const p95 = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length * 0.95)];
/** `turns` turns on `side` after the warm-up; the times in ms. */
async function timeTurns(side, phase) {
  const times = [];
  for (let i = 0; i < TURNS + WARMUP; i++) {
    const t0 = performance.now();
    await side.turn(`${phase} turn ${i}: what time is it?`);
    if (i >= WARMUP) times.push(performance.now() - t0);
  }
  return times;
}

/** bench:compare's concurrency run against the floor's socket on `port`: 20 fresh instances
 *  x 20 text turns at once (after 2 warm-up turns each); the turns per second. */
async function turnsPerSecondAtOnce(port) {
  const sockets = await Promise.all(Array.from({ length: 20 }, (_, i) => floorSocket(`ws://127.0.0.1:${port}/conc-${i}-${Date.now()}-${Math.random()}`)));
  await Promise.all(sockets.map(async (s) => { for (let i = 0; i < 2; i++) await s.turn('warm-up'); }));
  const t0 = performance.now();
  await Promise.all(sockets.map(async (s) => { for (let i = 0; i < 20; i++) await s.turn(`turn ${i}`); }));
  const seconds = (performance.now() - t0) / 1000;
  for (const s of sockets) s.close();
  return 400 / seconds;
}

/** The peer's figure in a side-by-side results directory: the median over its rounds of
 *  `field` in the files named `<prefix>-r<round>-peer.json`. */
function peerMedian(prefix, field) {
  const values = readdirSync(PEER)
    .filter((f) => f.startsWith(`${prefix}-r`) && f.endsWith('-peer.json'))
    .map((f) => JSON.parse(readFileSync(join(PEER, f), 'utf8'))[field])
    .filter((v) => typeof v === 'number');
  return values.length ? med(values) : NaN;
}

/** The floor's ratios to the peer (`floor` holds what this run measured under wrangler dev). */
function floorAgainstPeer(floor) {
  const ratio = (mine, theirs) => (Number.isFinite(mine / theirs) ? (mine / theirs).toFixed(3) : 'n/a');
  const facts = Object.fromEntries(readFileSync(join(PEER, 'facts.tsv'), 'utf8').split('\n').map((l) => l.split('\t')));
  const rows = [
    ['text turn, direct', floor['text direct'], peerMedian('seq-direct-text', 'median_ms')],
    ['text turn, via the URL', floor['text via the URL'], peerMedian('seq-proxy-text', 'median_ms')],
    ['tool turn, direct', floor['tool direct'], peerMedian('seq-direct-tool', 'median_ms')],
    ['tool turn, via the URL', floor['tool via the URL'], peerMedian('seq-proxy-tool', 'median_ms')],
  ].map(([name, mine, theirs]) => `${name} ${ratio(mine, theirs)}`);
  rows.push(`20 x 20 at once, direct, turns/s ${ratio(floor.concurrent, peerMedian('conc-direct', 'turns_per_s'))}x`);
  rows.push(`Worker RSS after the harness's workload ${ratio(floor.rss * 1024, Number(facts['peer.rss_kb.after']))}`);
  console.log(`the floor / peer (${PEER}): ${rows.join('; ')}`);
}

const ms = (a) => `median ${med(a).toFixed(2)} ms (p95 ${p95(a).toFixed(2)}, ${a.filter((t) => t > 150).length}/${a.length} > 150 ms)`;
const floorMedians = {};
try {
  for (const phase of ['text', 'tool']) {
    const model = await modelServer(phase);
    if (WRANGLER) {
      const floor = await startFloorWrangler(model.url);
      try {
        const line = [];
        for (const [path, port] of [['via the URL', floor.proxy], ['direct', floor.direct]]) {
          if (!port) continue;
          const socket = await floorSocket(`ws://127.0.0.1:${port}/floor-${path.length}-${Date.now()}`);
          const times = await timeTurns(socket, phase);
          floorMedians[`${phase} ${path}`] = med(times);
          line.push(`${path} ${ms(times)}`);
          socket.close();
        }
        console.log(`floor under wrangler dev, ${phase} turn (${TURNS}, ${model.name}): ${line.join('; ')}`);
        if (phase === 'text' && floor.direct) {
          floorMedians.concurrent = await turnsPerSecondAtOnce(floor.direct);
          console.log(`floor under wrangler dev, 20 x 20 text turns at once, direct: ${floorMedians.concurrent.toFixed(1)} turns/s`);
        }
      } finally {
        floor.stop();
        await model.stop();
      }
      continue;
    }
    const sides = { floor: await startFloor(model.url), edgent: await startEdgent(model.url) };
    const times = { floor: [], edgent: [] };
    try {
      for (let i = 0; i < TURNS + WARMUP; i++) {
        for (const k of i % 2 ? ['floor', 'edgent'] : ['edgent', 'floor']) {
          const t0 = performance.now();
          await sides[k].turn(`${phase} turn ${i}: what time is it?`);
          if (i >= WARMUP) times[k].push(performance.now() - t0);
        }
      }
    } finally {
      for (const s of Object.values(sides)) await s.dispose();
      await model.stop();
    }
    const diffs = times.edgent.map((t, i) => t - times.floor[i]);
    console.log(
      `${phase} turn (${TURNS} each, ${model.name}): floor ${ms(times.floor)}, edgent ${ms(times.edgent)}; ` +
        `edgent adds ${med(diffs).toFixed(2)} ms (paired median), edgent / floor ${(med(times.edgent) / med(times.floor)).toFixed(2)}`,
    );
  }
  if (WRANGLER && PEER) {
    floorMedians.rss = await floorRssAfterHarnessWorkload();
    console.log(`floor under wrangler dev: the Worker's workerd RSS after the harness's workload ${floorMedians.rss.toFixed(1)} MiB`);
    floorAgainstPeer(floorMedians);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
