#!/usr/bin/env node
// Durable workflow benchmarks, in Miniflare (real workerd + Durable Object SQLite), tools queued
// with the `queue_tool` rpc (no model involved) and timed from the client's side of the socket:
//   1. the cost of one recorded step: RUNS rounds (after a warm-up), each timing one
//      `get_current_time` (no I/O), one `get_weather` (one fetch to a local instant weather
//      server) and one `retry_with_cooldown {tries: 1}` (the same get_weather call inside one
//      `flow.step`, no sleep when it succeeds), from the rpc to the call's `success` frame;
//      workflow minus get_weather is what recording a step costs;
//   2. many sleeping workflows in one thread: K `remind_later {in_seconds: 3600}` calls queued
//      into a fresh thread (rpcs in batches of 100); each parks at once as `sleeping`. Then the
//      cost of unrelated work on that thread (a get_current_time round trip, a tool-calls page),
//      the thread's one alarm against the earliest wake_at, its SQLite size, and workerd's RSS.
// The alarm and the size are read from workerd's own SQLite file for the object (the
// `sqlite3` CLI, read-only); no API exposes them. Skipped if `sqlite3` is not installed.
// Usage: npm run build && node bench/durable.mjs [runs=200] [parked=1000]
import { execFileSync } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import WebSocket from 'ws';
import { median, summary } from './lib.mjs';
import { startWorker, API_KEY } from '../tests/support/worker.mjs';
import { startWeatherServer } from '../tests/support/weather-server.mjs';

const RUNS = Number(process.argv[2] ?? 200);
const PARKED = Number(process.argv[3] ?? 1000);
const SIZES = [...new Set([10, 100, 1000].filter((k) => k < PARKED).concat(PARKED))];
const WARMUP = 50; // rounds; workerd's JIT needs ~100 calls before times settle
const OPS = 50; // samples of each unrelated operation per K
const BATCH = 100; // queue_tool rpcs in flight while parking

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const ms = (x) => `${x.toFixed(2)} ms`;
const kib = (n) => `${(n / 1024).toFixed(0)} KiB`;

/** A bare socket: rpcs by id, and per-call arrival times of `tool` frames by status. */
async function open(url, threadId) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}api/threads/${threadId}/stream?token=${API_KEY}`);
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const pending = new Map();
  const seen = new Map(); // call id -> { status: arrival time, wake_at }
  const waiters = new Map(); // call id -> { status, resolve, reject }
  let idle = [];
  ws.on('message', (data) => {
    const at = performance.now();
    const f = JSON.parse(data.toString());
    if (f.type === 'result' && pending.has(f.id)) {
      pending.get(f.id)(f);
      pending.delete(f.id);
    } else if (f.type === 'tool') {
      const t = seen.get(f.tool_call_id) ?? {};
      t[f.status] = at;
      if (f.wake_at) t.wake_at = f.wake_at;
      seen.set(f.tool_call_id, t);
      const w = waiters.get(f.tool_call_id);
      if (w && (f.status === w.status || f.status === 'error')) {
        waiters.delete(f.tool_call_id);
        seen.delete(f.tool_call_id);
        if (f.status === w.status) w.resolve(t);
        else w.reject(new Error(`${f.name} ${f.tool_call_id} ended in error: ${JSON.stringify(f)}`));
      }
    } else if (f.type === 'status' && f.state === 'idle') {
      for (const resolve of idle) resolve(at);
      idle = [];
    }
  });
  let n = 0;
  return {
    ws,
    rpc(method, params) {
      const id = `d${n++}`;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        ws.send(JSON.stringify({ type: 'rpc', id, method, params }));
      });
    },
    /** Resolves with the call's frame times once it reports `status`. */
    until(callId, status) {
      const t = seen.get(callId);
      if (t?.[status] || t?.error) {
        seen.delete(callId);
        return t[status] ? Promise.resolve(t) : Promise.reject(new Error(`${callId} ended in error`));
      }
      return new Promise((resolve, reject) => waiters.set(callId, { status, resolve, reject }));
    },
    /** Resolves at the next `status: idle` frame. */
    nextIdle() {
      return new Promise((resolve) => idle.push(resolve));
    },
  };
}

async function queue(sock, name, args) {
  const r = await sock.rpc('queue_tool', { name, args });
  if (!r.ok) throw new Error(`queue_tool ${name}: ${JSON.stringify(r.error)}`);
  return r.result.tool_call_id;
}

/** One queued call from rpc to `success`, on an idle thread; waits for idle again (untimed). */
async function roundTrip(sock, name, args) {
  const idle = sock.nextIdle();
  const t0 = performance.now();
  const t = await sock.until(await queue(sock, name, args), 'success');
  const sample = { total: t.success - t0, run: t.success - t.running };
  await idle;
  return sample;
}

/** The workerd process Miniflare started (a child of this process). */
function workerdPid() {
  const rows = execFileSync('ps', ['-o', 'pid=,comm=', '--ppid', String(process.pid)]).toString();
  const row = rows.split('\n').map((l) => l.trim().split(/\s+/)).find(([, comm]) => comm === 'workerd');
  if (!row) throw new Error(`no workerd child process:\n${rows}`);
  return Number(row[0]);
}

const rssKib = (pid) => Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)]).toString().trim());

let HAVE_SQLITE = true;
try { execFileSync('sqlite3', ['-version']); } catch { HAVE_SQLITE = false; }
const sqlite = (file, query) =>
  execFileSync('sqlite3', ['-readonly', file, query], { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();

/** The SQLite file workerd keeps for thread `threadId`'s object (found among its open files). */
function threadFile(pid, threadId) {
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let path;
    try { path = readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
    if (!/-DurableThread\/[0-9a-f]+\.sqlite$/.test(path)) continue;
    try { if (sqlite(path, 'SELECT id FROM thread') === threadId) return path; } catch {}
  }
  return null;
}

/** The object's alarm (ms since the epoch, or null) and its database size (bytes). */
function objectState(file) {
  let ns = '';
  try { ns = sqlite(file, 'SELECT value FROM _cf_METADATA WHERE key = 1'); } catch {} // no alarm set yet
  const bytes = Number(sqlite(file, 'SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()'));
  return { alarm: ns ? Number(BigInt(ns) / 1_000_000n) : null, bytes };
}

/** Unrelated work: OPS get_current_time round trips and OPS tool-calls pages on thread `t`,
 * each sample paired with the same operation on the reference thread `ref` (no parked calls),
 * so noise from the machine shows up on both sides. */
async function unrelated(worker, t, ref, label) {
  const targets = [t, ref];
  const time = targets.map(() => []);
  const page = targets.map(() => []);
  for (let i = 0; i < OPS + 5; i++) {
    for (const [j, { sock }] of targets.entries()) {
      const { total } = await roundTrip(sock, 'get_current_time', {});
      if (i >= 5) time[j].push(total);
    }
  }
  for (let i = 0; i < OPS + 5; i++) {
    for (const [j, { id }] of targets.entries()) {
      const t0 = performance.now();
      const r = await worker.client.request('GET', `/api/threads/${id}/tool-calls?limit=50`);
      const dt = performance.now() - t0;
      if (r.status !== 200 || r.body.tool_calls.length !== Math.min(50, r.body.total)) {
        throw new Error(`bad tool-calls page: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      }
      if (i >= 5) page[j].push(dt);
    }
  }
  summary(`  get_current_time round trip, ${label}`, time[0]);
  summary('    same, reference thread (none parked)', time[1]);
  summary(`  GET tool-calls?limit=50, ${label}`, page[0]);
  summary('    same, reference thread (none parked)', page[1]);
}

console.log(`durable workflow bench: ${RUNS} runs per tool (after ${WARMUP} warm-up rounds), parked sizes ${SIZES.join(', ')}
  part 1 times are client-side, from the queue_tool rpc to the call's success frame ("round trip");
  "running->success" is the part after the call's running frame (the run itself plus settling it).
  get_weather's rate limit is lifted for the bench (TOOL_GET_WEATHER_RATE_PER_MINUTE, scope thread)
  so the plain call pays only the thread-window check, not the deployment limiter's object hop.
  part 2: per K, time to queue and park K sleeping workflows in a fresh thread, then the cost of
  unrelated operations on that thread (should stay flat in K), each sample paired with the same
  operation on a reference thread with nothing parked (this machine's noise hits both alike);
  then the object's alarm, its SQLite size and workerd's RSS.`);

const weather = await startWeatherServer();
const worker = await startWorker({
  bindings: {
    WEATHER_API_URL: weather.url,
    WEATHER_API_KEY: 'bench-weather-key',
    TOOL_GET_WEATHER_RATE_PER_MINUTE: '1000000',
    TOOL_GET_WEATHER_RATE_SCOPE: 'thread',
  },
});
try {
  const pid = workerdPid();

  // 1. A recorded step against the same plain tool call, interleaved round by round.
  {
    console.log('\n1. recorded step overhead (one thread, calls one at a time)');
    const id = await worker.client.createThread('support');
    const sock = await open(worker.url, id);
    const kinds = [
      ['get_current_time', 'get_current_time', {}],
      ['get_weather', 'get_weather', { city: 'Lisbon' }],
      ['retry_with_cooldown (1 step)', 'retry_with_cooldown', { city: 'Lisbon', tries: 1 }],
    ];
    const samples = kinds.map(() => ({ total: [], run: [] }));
    weather.reset();
    for (let i = 0; i < WARMUP + RUNS; i++) {
      for (const [k, [, name, args]] of kinds.entries()) {
        const s = await roundTrip(sock, name, args);
        if (i >= WARMUP) {
          samples[k].total.push(s.total);
          samples[k].run.push(s.run);
        }
      }
    }
    const fetches = weather.requests.length;
    if (fetches !== 2 * (WARMUP + RUNS)) throw new Error(`expected ${2 * (WARMUP + RUNS)} weather fetches, got ${fetches}`);
    for (const [k, [label]] of kinds.entries()) summary(`  ${label} round trip`, samples[k].total);
    for (const [k, [label]] of kinds.entries()) summary(`  ${label} running->success`, samples[k].run);
    const [time, plain, flow] = samples;
    const diff = (a, b, f) => ms(f(a) - f(b));
    console.log(`  one local fetch (get_weather - get_current_time): median ${diff(plain.total, time.total, median)}, mean ${diff(plain.total, time.total, mean)}`);
    console.log(`  one recorded step (workflow - get_weather), round trip: median ${diff(flow.total, plain.total, median)}, mean ${diff(flow.total, plain.total, mean)}`);
    console.log(`  one recorded step (workflow - get_weather), running->success: median ${diff(flow.run, plain.run, median)}, mean ${diff(flow.run, plain.run, mean)}`);
    const paired = (a, b) => ms(median(a.map((x, i) => x - b[i])));
    console.log(`  median of the ${RUNS} paired differences (same round), workflow - get_weather: round trip ${paired(flow.total, plain.total)}, running->success ${paired(flow.run, plain.run)}`);
    console.log(`  (the step: a SELECT for a recorded value, an INSERT and an UPDATE of tool_steps, two tool_progress events, the nested call_tool dispatch; ${fetches} weather fetches for ${2 * (WARMUP + RUNS)} calls)`);
    sock.ws.close();
  }

  // 2. K sleeping workflows in one thread each.
  console.log(`\n2. sleeping workflows in one thread (remind_later {in_seconds: 3600}, queued ${BATCH} rpcs at a time)`);
  // The reference thread: no parked calls, only the unrelated operations of every phase.
  const refId = await worker.client.createThread('support');
  const ref = { id: refId, sock: await open(worker.url, refId) };
  for (const k of SIZES) {
    const id = await worker.client.createThread('support');
    const sock = await open(worker.url, id);
    const file = HAVE_SQLITE ? threadFile(pid, id) : null;
    const before = file ? objectState(file) : null;
    const rss0 = rssKib(pid);
    const t0 = performance.now();
    const parked = [];
    for (let i = 0; i < k; i += BATCH) {
      const ids = await Promise.all(
        Array.from({ length: Math.min(BATCH, k - i) }, (_, j) =>
          queue(sock, 'remind_later', { text: `reminder ${i + j}`, in_seconds: 3600 })),
      );
      for (const callId of ids) parked.push(sock.until(callId, 'sleeping'));
    }
    const queuedMs = performance.now() - t0;
    const wakes = (await Promise.all(parked)).map((t) => t.wake_at);
    const dt = performance.now() - t0;
    const rss1 = rssKib(pid);
    const earliest = Math.min(...wakes);
    console.log(`K=${k}: ${k} queue_tool rpcs answered after ${queuedMs.toFixed(0)} ms, all ${k} sleeping after ${dt.toFixed(0)} ms (${ms(dt / k)} per workflow)`);
    // The turn loop sets the alarm after its last frame: give it a moment to land.
    const settled = async () => {
      let state = objectState(file);
      for (let i = 0; i < 40 && state.alarm !== earliest; i++) {
        await new Promise((r) => setTimeout(r, 50));
        state = objectState(file);
      }
      return state;
    };
    const alarmText = (state) => (state.alarm === null ? 'none'
      : `${new Date(state.alarm).toISOString()} (alarm - earliest wake_at = ${state.alarm - earliest} ms)`);
    const parkedState = file ? await settled() : null;
    await unrelated(worker, { id, sock }, ref, `K=${k} sleeping`);
    const listed = await worker.client.request('GET', `/api/threads/${id}/tool-calls?limit=1`);
    const status = (await worker.client.request('GET', `/api/threads/${id}/tools`)).body.tools
      .find((t) => t.name === 'remind_later')?.status;
    console.log(`  tool calls stored: ${listed.body.total} (${k} remind_later + ${OPS + 5} get_current_time); GET /tools: remind_later ${status}; earliest wake_at: ${new Date(earliest).toISOString()}`);
    if (file) {
      const after = await settled();
      console.log(`  object alarm (one slot per object) once parked: ${alarmText(parkedState)}; after the unrelated calls: ${alarmText(after)}`);
      console.log(`  object SQLite size: ${kib(before.bytes)} before, ${kib(parkedState.bytes)} with ${k} parked (${((parkedState.bytes - before.bytes) / k).toFixed(0)} bytes per parked workflow: call message, tool_calls, tool_attempts, tool_steps rows)`);
    } else {
      console.log('  object alarm and size: not read (no sqlite3 CLI, or the object\'s file was not found)');
    }
    console.log(`  workerd RSS: ${(rss0 / 1024).toFixed(1)} MiB before queueing, ${(rss1 / 1024).toFixed(1)} MiB with all ${k} parked (${((rss1 - rss0) / 1024).toFixed(1)} MiB), ${(rssKib(pid) / 1024).toFixed(1)} MiB after the unrelated operations`);
    sock.ws.close();
  }
  ref.sock.ws.close();
} finally {
  await worker.dispose();
  await weather.close();
}
