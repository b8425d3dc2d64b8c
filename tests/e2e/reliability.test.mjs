// Layer: real `wrangler dev` (workerd with persisted Durable Objects and D1), SIGKILLed while
// durable tools run, sleep and wait for webhooks, then started again on the same state dir.
// Proves: after a kill the thread finishes by itself (the watchdog alarm resumes an interrupted
// run, a sleep's alarm wakes it, a webhook resumes it); a step that completed before a kill is
// never run again (counted at the step server); an in-flight step runs once more and the call
// records the interruption; every call has exactly one result, no message is lost or stored
// twice, and no call is interrupted often enough to be abandoned.
// No request is needed to resume a thread after a restart: the first two scenarios leave their
// thread untouched until the rerun is seen at the step server (a watchdog due after the restart,
// and a sleep that fell due while the Worker was down, which workerd fires as it starts).
// Does not prove: behaviour on Cloudflare's network (eviction, deploys, regional failover).
// Run alone: node --test --test-concurrency=1 tests/e2e/reliability.test.mjs (about 2 minutes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, readdirSync, cpSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { parse as parseToml } from 'smol-toml';
import { ROOT } from '../support/worker.mjs';
import { freePort } from '../support/net.mjs';
import { EdgentClient } from '../support/client.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { startStepServer, temperatureOf } from '../support/step-server.mjs';
import { loadDefinitions, seedLocal } from '../../scripts/lib/d1.mjs';

const KEY = 'reliability-key-0123456789abcdef';
const WRANGLER = join(ROOT, 'node_modules', '.bin', 'wrangler');
/** The turn watchdog (crates/edgent/src/engine/wake.rs): an interrupted run nobody touches resumes this long after it started (a request to the thread resumes it at once). */
const WATCHDOG_MS = 5_000;
const FINISHED = new Set(['success', 'error']);
const t0 = Date.now();
const log = (...args) => console.log(`[reliability +${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...args);

/**
 * Copies build/ to `to` once no build is writing it, and checks the copy is whole. wrangler dev
 * watches its `main`: a rebuild of /work/main/build during the run (another test run's
 * `npm test`) would reload or crash it, an unplanned restart in the middle of the kills.
 */
async function snapshotBuild(to) {
  const from = join(ROOT, 'build');
  const stamp = () => readdirSync(from, { recursive: true }).map((f) => {
    const st = statSync(join(from, f));
    return `${f}:${st.size}:${st.mtimeMs}`;
  }).sort().join('|');
  const deadline = Date.now() + 180_000;
  for (;;) {
    const newest = Math.max(...readdirSync(from, { recursive: true }).map((f) => statSync(join(from, f)).mtimeMs));
    if (Date.now() - newest > 5000) {
      const before = stamp();
      rmSync(to, { recursive: true, force: true });
      cpSync(from, to, { recursive: true });
      const wasm = readFileSync(join(to, 'index_bg.wasm'));
      const whole = wasm.length === statSync(join(from, 'index_bg.wasm')).size && wasm.subarray(0, 4).toString('latin1') === '\0asm';
      if (stamp() === before && whole) return;
    }
    if (Date.now() > deadline) throw new Error('build/ kept changing (a build is running?) for 3 minutes');
    await sleep(1000);
  }
}

// ---------------------------------------------------------------------------------------------
// wrangler dev under our control: its own process group, so a SIGKILL takes workerd with it.
// ---------------------------------------------------------------------------------------------

/** Whether nothing listens on 127.0.0.1:`port` (we can bind it). */
function portFree(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Live (non-zombie) processes, from /proc: `{ pid, ppid, pgrp }`. */
function processes() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z') out.push({ pid: Number(name), ppid: Number(fields[1]), pgrp: Number(fields[2]) });
  }
  return out;
}

/** `pid` and every live process below it. */
function descendants(pid) {
  const all = processes();
  const found = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of all) {
      if (!found.has(p.pid) && found.has(p.ppid)) {
        found.add(p.pid);
        grew = true;
      }
    }
  }
  return [...found];
}

/** Which of `pids`, or of process group `pgid`, are still alive. */
function survivors(pgid, pids) {
  return processes().filter((p) => p.pgrp === pgid || pids.includes(p.pid)).map((p) => p.pid);
}

class Wrangler {
  constructor({ dir, port, vars }) {
    Object.assign(this, { dir, port, vars });
    this.proc = null;
    this.output = '';
    this.crashed = null;
    this.starts = 0;
    this.kills = 0;
    this.errors = [];
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    const began = Date.now();
    // An inspector port of its own: wrangler's default (9229) is taken by any other `wrangler
    // dev` running at the same time (the e2e files run in parallel), and wrangler then exits.
    const args = ['dev', '--config', join(this.dir, 'wrangler.toml'), '--ip', '127.0.0.1', '--port', String(this.port),
      '--inspector-port', String(await freePort()),
      '--persist-to', join(this.dir, 'state'), '--show-interactive-dev-session=false'];
    for (const [k, v] of Object.entries(this.vars)) args.push('--var', `${k}:${v}`);
    const proc = spawn(WRANGLER, args, {
      cwd: this.dir,
      detached: true, // a process group of its own: wrangler, its node child and workerd
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    this.starts += 1;
    const n = this.starts;
    let partial = '';
    const keep = (d) => {
      this.output = (this.output + d).slice(-200_000);
      // Errors the Worker or the runtime logged, and 5xx answers, in every start's output.
      const lines = (partial + d).split('\n');
      partial = lines.pop();
      for (const line of lines) {
        if (/ENOTFOUND workers\.cloudflare\.com|Request\.cf|GetAddrInfoReqWrap/.test(line)) continue;
        if (/error|uncaught|panick/i.test(line) || /\s5\d\d [A-Z][\w ]*\(\d+ms\)/.test(line)) this.errors.push(`start #${n}: ${line.trim()}`);
      }
    };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    this.output += `\n===== wrangler start #${n} (pid ${proc.pid}) =====\n`;
    proc.on('exit', (code, signal) => {
      if (proc.killedByUs) return;
      this.crashed = `wrangler start #${n} exited by itself (code ${code}, signal ${signal})`;
      log(this.crashed);
    });
    const deadline = Date.now() + 90_000;
    for (;;) {
      this.check();
      try {
        const r = await fetch(`${this.base}/api/health`);
        if (r.ok) break;
      } catch {}
      if (Date.now() > deadline) throw new Error(`wrangler dev did not come up:\n${this.tail()}`);
      await sleep(100);
    }
    this.readyAt = Date.now();
    return this.readyAt - began;
  }

  /** SIGKILLs the whole process group, then waits until none of it is alive and the port is free. */
  async kill() {
    const proc = this.proc;
    proc.killedByUs = true;
    // wrangler's node child and workerd: all must die with it, even one that left the group.
    const tree = descendants(proc.pid);
    this.killedProcesses = (this.killedProcesses ?? 0) + tree.length;
    const exited = proc.exitCode !== null || proc.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => proc.once('exit', resolve));
    try {
      process.kill(-proc.pid, 'SIGKILL');
    } catch (e) {
      if (e.code !== 'ESRCH') throw e;
    }
    this.kills += 1;
    const killedAt = Date.now();
    await Promise.race([exited, sleep(10_000)]);
    const deadline = Date.now() + 10_000;
    while (survivors(proc.pid, tree).length) {
      if (Date.now() > deadline) throw new Error(`processes of wrangler ${proc.pid} survived SIGKILL: ${survivors(proc.pid, tree)}`);
      await sleep(50);
    }
    while (!(await portFree(this.port))) {
      if (Date.now() > deadline) {
        // Someone else took the port meanwhile: move on. Webhook URLs are rebuilt from their path.
        this.port = await freePort();
        break;
      }
      await sleep(100);
    }
    return killedAt;
  }

  /** Throws if wrangler died without us killing it. */
  check() {
    if (this.crashed) throw new Error(`${this.crashed}\n${this.tail()}`);
  }

  tail(n = 6000) {
    return this.output.slice(-n);
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    await this.kill();
  }
}

// ---------------------------------------------------------------------------------------------
// The world: servers, the thread bookkeeping and the invariants.
// ---------------------------------------------------------------------------------------------

let dir, wr, client, steps, model;
/** Threads the test created: id → { sent: [user message texts], reminders: [texts], untouched }. */
const threads = new Map();
/** Calls the test tracks, with what they must end as. */
const tracked = [];
/** Every kill: { n, name, loop, killedAt, readyAt, pending: [call ids not finished at the kill] }. */
const kills = [];
/** Steps seen `done` before a kill: `${call}/${step}` → finished_at. They must never run again. */
const doneSteps = new Map();
const modelCalls = {}; // tag → how many model requests carried it

/** The scripted model: answers by the `[Mn]` tag of the conversation's first user message. */
function modelAnswer(request) {
  const msgs = request.body?.messages ?? [];
  const text = (m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''));
  const tag = /\[(M\d+)\]/.exec(text(msgs.find((m) => m.role === 'user') ?? {}))?.[1] ?? 'none';
  const n = (modelCalls[tag] = (modelCalls[tag] ?? 0) + 1);
  const last = msgs.at(-1);
  if (tag === 'M6') {
    // A long answer streamed slowly: the kill lands mid-stream. The second call answers at once.
    return n === 1 ? { text: 'Once upon a time, in a data centre far away, '.repeat(12), chunkSize: 6, chunkDelayMs: 150 } : { text: 'M6 done.' };
  }
  if (tag === 'M11') {
    return last?.role === 'tool' ? { text: 'M11 done.' } : { toolCalls: [{ name: 'get_weather', arguments: { city: 'Loop-11' } }] };
  }
  return { text: 'ok' };
}

async function until(fn, { timeout = 20_000, every = 150, what = 'a condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    wr.check();
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(every);
  }
}

async function get(path) {
  const r = await client.request('GET', path);
  assert.equal(r.status, 200, `GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

const toolCalls = async (id) => (await get(`/api/threads/${id}/tool-calls?limit=200`)).tool_calls;
const messagesOf = async (id) => (await get(`/api/threads/${id}/messages?limit=200&include_silent=true`)).messages;

async function newThread({ untouched = false } = {}) {
  const id = await client.createThread('support');
  threads.set(id, { sent: [], reminders: [], untouched });
  return id;
}

/** A socket on the thread; dies with the Worker (errors are expected then). */
async function socket(id) {
  const sock = await client.connect(id);
  sock.ws.on('error', () => {});
  return sock;
}

async function queue(sock, name, args) {
  const r = await sock.rpc('queue_tool', { name, args });
  assert.equal(r.ok, true, `queue_tool ${name}: ${JSON.stringify(r)}`);
  return r.result.tool_call_id;
}

async function say(sock, id, content) {
  const r = await sock.rpc('send_message', { content });
  assert.equal(r.ok, true, `send_message: ${JSON.stringify(r)}`);
  threads.get(id).sent.push(content);
}

/** POSTs a webhook body to the current Worker (the URL's origin may be an earlier port). */
async function postWebhook(url, body) {
  const res = await fetch(wr.base + new URL(url).pathname, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

/**
 * Registers a call to check after every restart. `kind`: weather | compare | webhook | reminder.
 * `interruptions`: the exact count, or [min, max] when the kill point races the start.
 */
function track(spec) {
  const entry = { finishedBy: 'itself', ...spec };
  tracked.push(entry);
  return entry;
}

const isTool = (m, callId) => m.role === 'tool' && m.tool_call_id === callId;
const carries = (m, callId) => (m.tool_calls ?? []).some((c) => c.id === callId);

/** Resolves a tracked call's id (model-made calls are found by tool and city). */
function resolveCall(entry, calls) {
  if (entry.callId) return calls.find((c) => c.id === entry.callId);
  const found = calls.find((c) => c.tool === entry.tool && c.arguments?.city === entry.city);
  if (found) entry.callId = found.id;
  return found;
}

/**
 * Checks every invariant over every thread and call so far; `final` also requires every call
 * finished. Returns counters for the summary. Threads marked untouched are skipped.
 */
async function verify(label, { final = false } = {}) {
  const problems = [];
  const fail = (msg) => problems.push(`${label}: ${msg}`);
  const view = new Map();
  for (const [id, t] of threads) {
    if (t.untouched) continue;
    // One consistent view: the calls read before and after the messages must agree (a resumed
    // call may finish between two reads; a request resumes an interrupted turn at once).
    for (let tries = 0; ; tries++) {
      const calls = await toolCalls(id);
      const messages = await messagesOf(id);
      const again = await toolCalls(id);
      if (JSON.stringify(calls) === JSON.stringify(again) || tries >= 50) {
        view.set(id, { calls, messages, summary: await get(`/api/threads/${id}`) });
        break;
      }
      await sleep(100);
    }
  }
  let duplicated = 0;
  let lost = 0;
  for (const [id, { calls, messages }] of view) {
    const t = threads.get(id);
    const ids = messages.map((m) => m.id);
    if (new Set(ids).size !== ids.length) {
      duplicated += ids.length - new Set(ids).size;
      fail(`thread ${id}: duplicate message ids`);
    }
    for (const content of t.sent) {
      const n = messages.filter((m) => m.role === 'user' && m.content === content).length;
      if (n !== 1) {
        if (n === 0) lost += 1;
        else duplicated += n - 1;
        fail(`thread ${id}: user message ${JSON.stringify(content)} stored ${n} times`);
      }
    }
    for (const c of calls) {
      const results = messages.filter((m) => isTool(m, c.id)).length;
      const holders = messages.filter((m) => carries(m, c.id)).length;
      const want = FINISHED.has(c.status) ? 1 : 0;
      if (results !== want) {
        if (results < want) lost += 1;
        else duplicated += results - want;
        fail(`call ${c.id} (${c.tool}, ${c.status}): ${results} result messages, want ${want}`);
      }
      if (holders !== 1) fail(`call ${c.id}: ${holders} assistant messages carry it, want 1`);
      if (c.interruptions > 2) fail(`call ${c.id} was interrupted ${c.interruptions} times (3 abandon it)`);
      if (c.status === 'success' && c.attempts !== c.interruptions + 1) {
        fail(`call ${c.id}: ${c.attempts} attempts for ${c.interruptions} interruptions and no failure`);
      }
      if (c.attempt_log.length !== c.attempts) fail(`call ${c.id}: attempt_log has ${c.attempt_log.length} entries for ${c.attempts} attempts`);
      for (const s of c.steps) {
        const seen = doneSteps.get(`${c.id}/${s.name}`);
        if (seen !== undefined && (s.status !== 'done' || s.finished_at !== seen)) {
          fail(`call ${c.id}: step ${s.name} was done (finished ${seen}) before a kill and ran again (now ${s.status}, ${s.finished_at})`);
        }
      }
      if (final && !FINISHED.has(c.status)) fail(`call ${c.id} (${c.tool}) is still ${c.status}`);
    }
    for (const text of t.reminders) {
      const n = messages.filter((m) => m.content === `Reminder: ${text}`).length;
      if (n > 1) {
        duplicated += n - 1;
        fail(`thread ${id}: reminder ${text} posted ${n} times`);
      }
    }
  }
  for (const entry of tracked) {
    const v = view.get(entry.thread);
    if (!v) continue;
    const call = resolveCall(entry, v.calls);
    if (!call) {
      if (final || entry.callId) fail(`${entry.label}: call not found`);
      continue;
    }
    const io = entry.city ? steps.count(entry.city) : null;
    const [lo, hi] = Array.isArray(entry.interruptions) ? entry.interruptions : [entry.interruptions, entry.interruptions];
    if (call.interruptions > hi) fail(`${entry.label}: ${call.interruptions} interruptions, at most ${hi} planned`);
    const answersWanted = entry.kind === 'compare' ? 2 : entry.kind === 'weather' ? 1 : 0;
    if (io && io.answered > answersWanted) fail(`${entry.label}: the step server answered ${io.answered} requests, want ${answersWanted}`);
    if (!FINISHED.has(call.status)) continue;
    entry.finishedAt = call.finished_at;
    if (call.status !== 'success') {
      fail(`${entry.label}: finished ${call.status}: ${call.result}`);
      continue;
    }
    if (call.interruptions < lo) fail(`${entry.label}: ${call.interruptions} interruptions, at least ${lo} planned`);
    entry.interrupted = call.interruptions;
    if (io) {
      // Each interrupted run cut exactly one request short; the finished call needed `answersWanted`.
      if (io.pending !== 0) fail(`${entry.label}: ${io.pending} requests still pending after it finished`);
      if (io.answered !== answersWanted) fail(`${entry.label}: ${io.answered} answered requests, want ${answersWanted}`);
      if (entry.kind !== 'weather' || !Array.isArray(entry.interruptions)) {
        if (io.aborted !== call.interruptions) fail(`${entry.label}: ${io.aborted} requests cut by kills but ${call.interruptions} interruptions recorded`);
      } else if (io.aborted > call.interruptions) {
        fail(`${entry.label}: ${io.aborted} requests cut by kills but only ${call.interruptions} interruptions recorded`);
      }
    }
    const result = call.result ?? '';
    const answered = entry.city ? steps.of(entry.city).filter((r) => r.state === 'answered') : [];
    if (entry.kind === 'weather') {
      const w = JSON.parse(result);
      if (w.city !== entry.city || w.temperature !== temperatureOf(answered[0]?.index)) {
        fail(`${entry.label}: result ${result} is not the answer to request ${answered[0]?.index}`);
      }
    } else if (entry.kind === 'compare') {
      const r = JSON.parse(result);
      // "before" is the first answered reading (from the record on every later run), "after" the second.
      if (r.before?.temperature !== temperatureOf(answered[0]?.index) || r.after?.temperature !== temperatureOf(answered[1]?.index)) {
        fail(`${entry.label}: readings ${result} do not match answered requests ${answered.map((a) => a.index)}`);
      }
      const names = call.steps.map((s) => `${s.name}:${s.kind}:${s.status}`).join(',');
      if (names !== 'before:step:done,wait:sleep:done,after:step:done') fail(`${entry.label}: steps ${names}`);
    } else if (entry.kind === 'webhook') {
      if (!isDeepStrictEqual(JSON.parse(result), { received: entry.body })) fail(`${entry.label}: result ${result}, want the webhook body ${JSON.stringify(entry.body)}`);
      const names = call.steps.map((s) => `${s.name}:${s.status}`).join(',');
      if (names !== 'announce:done,callback:done') fail(`${entry.label}: steps ${names}`);
    } else if (entry.kind === 'reminder') {
      const n = v.messages.filter((m) => m.content === `Reminder: ${entry.text}`).length;
      if (n !== 1) {
        if (n === 0) lost += 1;
        fail(`${entry.label}: reminder posted ${n} times, want 1`);
      }
      if (!/^reminder posted as message /.test(result)) fail(`${entry.label}: result ${result}`);
      const names = call.steps.map((s) => `${s.name}:${s.kind}:${s.status}`).join(',');
      if (names !== 'wait:sleep:done,post:step:done') fail(`${entry.label}: steps ${names}`);
    }
  }
  if (final) {
    for (const [id, { summary }] of view) {
      if (summary.status !== 'idle') fail(`thread ${id} is ${summary.status} at the end, want idle`);
    }
  }
  return { problems, duplicated, lost, view };
}

async function assertInvariants(label, opts) {
  const out = await verify(label, opts);
  assert.deepEqual(out.problems, [], out.problems.join('\n'));
  return out;
}

/** Tool calls (of threads we may touch) not finished, with their state: used at each kill. */
async function snapshot() {
  const pending = [];
  for (const [id, t] of threads) {
    if (t.untouched) continue;
    for (const c of await toolCalls(id)) {
      for (const s of c.steps) if (s.status === 'done') doneSteps.set(`${c.id}/${s.name}`, s.finished_at);
      if (!FINISHED.has(c.status)) pending.push(c.id);
    }
  }
  return pending;
}

/**
 * The moments at which something will happen by itself (a watchdog resumes a running call or a
 * model call, a sleep wakes), except in `exceptThreads`. A kill must not land on one unplanned.
 */
async function upcoming(exceptThreads = []) {
  const events = [];
  for (const [id, t] of threads) {
    if (t.untouched || exceptThreads.includes(id)) continue;
    for (const c of await toolCalls(id)) {
      if (c.status === 'running') events.push({ at: (c.attempt_log.at(-1)?.started_at ?? c.created_at) + WATCHDOG_MS, what: `${c.tool} ${c.id} resumes` });
      else if (!FINISHED.has(c.status) && c.wake_at) events.push({ at: c.wake_at, what: `${c.tool} ${c.id} wakes` });
      else if (c.status === 'queued') {
        // Runs at once, unless a kill came after the turn loop armed its watchdog but before
        // the call started: then the watchdog starts it.
        const fresh = Date.now() - Math.max(c.created_at, wr.readyAt) < 1500;
        events.push({ at: fresh ? Date.now() : c.created_at + WATCHDOG_MS, what: `${c.tool} ${c.id} is queued` });
      }
    }
    for (const m of await messagesOf(id)) {
      if (m.status === 'pending') events.push({ at: m.created_at + WATCHDOG_MS, what: `model call ${m.id} resumes` });
    }
  }
  return events;
}

/** Whether a kill now (and for `horizon` ms) can only hit what `exceptThreads` plan. */
async function quietFor(horizon, exceptThreads = []) {
  const soon = (await upcoming(exceptThreads)).filter((e) => e.at < Date.now() + horizon);
  // A request in flight that no round targets is a run in progress: never cut it unplanned.
  const targetCities = tracked.filter((e) => exceptThreads.includes(e.thread)).map((e) => e.city);
  const flying = steps.pending().filter((r) => !targetCities.includes(r.city));
  return soon.length === 0 && flying.length === 0 ? true : { soon, flying };
}

/** SIGKILLs wrangler (counted), restarts it on the same state, and checks every invariant. */
async function killAndRestart(name, { loop = false, pending, downMs = 0 } = {}) {
  const kill = { n: kills.length + 1, name, loop, pending };
  const killedAt = await wr.kill();
  if (downMs) await sleep(Math.max(0, downMs - (Date.now() - killedAt)));
  const down = Date.now() - killedAt;
  const startup = await wr.start();
  Object.assign(kill, { killedAt, readyAt: wr.readyAt });
  kills.push(kill);
  client = new EdgentClient(wr.base, KEY);
  log(`kill #${kill.n}${loop ? ` (loop ${kills.filter((k) => k.loop).length})` : ''}: ${name} — down ${down} ms, wrangler ready in ${startup} ms`);
  return kill;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'edgent-reliability-'));
  const config = parseToml(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'));
  const d1 = config.d1_databases.find((d) => d.binding === 'DB');
  model = await startModelServer({ fallback: modelAnswer });
  steps = await startStepServer();
  const defs = loadDefinitions(join(ROOT, 'agents'));
  for (const m of defs.models) m.base_url = `${model.url}/v1`;
  await seedLocal({ persistTo: join(dir, 'state'), databaseId: d1.database_id, migrationsDir: join(ROOT, 'migrations'), defs });
  // The project's config without [build] (the Worker is already built), in a folder of its own,
  // running a copy of the build that no concurrent rebuild can change under it.
  await snapshotBuild(join(dir, 'build'));
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace(/^\[build\][^\[]*/m, '')
    .replace(/^main = .*$/m, `main = ${JSON.stringify(join(dir, 'build', 'index.js'))}`)
    .replace(/^migrations_dir = .*$/m, `migrations_dir = ${JSON.stringify(join(ROOT, 'migrations'))}`);
  writeFileSync(join(dir, 'wrangler.toml'), toml);
  wr = new Wrangler({
    dir,
    port: await freePort(),
    vars: { EDGENT_API_KEY: KEY, OPENAI_API_KEY: 'sk-reliability', EDGENT_ALLOW_HTTP_MODELS: '1', WEATHER_API_URL: steps.url, WEATHER_API_KEY: 'k' },
  });
  // Never leave a wrangler of ours behind, even when the test process is interrupted.
  const killGroup = () => {
    try {
      if (wr.proc && wr.proc.exitCode === null && wr.proc.signalCode === null) process.kill(-wr.proc.pid, 'SIGKILL');
    } catch {}
  };
  process.once('exit', killGroup);
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { killGroup(); process.exit(130); });
  log(`wrangler ready in ${await wr.start()} ms on ${wr.base}`);
  client = new EdgentClient(wr.base, KEY);
});

after(async () => {
  await wr?.stop();
  // RELIABILITY_WRANGLER_LOG=<file> keeps wrangler's output (every start) for a post-mortem.
  if (wr && process.env.RELIABILITY_WRANGLER_LOG) writeFileSync(process.env.RELIABILITY_WRANGLER_LOG, wr.output);
  await model?.close();
  await steps?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

test('a kill while a step tool waits for its answer: the watchdog reruns the call by itself, once', { timeout: 90_000 }, async () => {
  const city = 'S1-Lisbon';
  steps.delay(city, [4000]);
  // Nothing touches this thread between the restart and the rerun: the watchdog alarm must fire on its own.
  const id = await newThread({ untouched: true });
  const sock = await socket(id);
  const callId = await queue(sock, 'get_weather', { city });
  const entry = track({ label: 'S1 get_weather', thread: id, callId, kind: 'weather', city, interruptions: 1 });
  const first = await until(() => steps.of(city)[0], { what: 'the first weather request' });
  await sleep(800);
  assert.equal(first.state, 'pending', 'the kill lands while the request waits for its answer');
  const kill = await killAndRestart('get_weather in flight', { pending: [callId] });
  assert.equal(first.state, 'aborted');
  const rerun = await until(() => steps.of(city)[1], { timeout: WATCHDOG_MS + 15_000, what: 'the rerun by the watchdog (no request touched the thread)' });
  log(`S1: rerun ${rerun.at - kill.readyAt} ms after the restart (${rerun.at - first.at} ms after the first run began), untouched`);
  assert.ok(rerun.at - first.at >= WATCHDOG_MS - 1000, 'the rerun waited for the watchdog');
  threads.get(id).untouched = false;
  await until(async () => FINISHED.has((await toolCalls(id))[0].status), { what: 'S1 to finish' });
  const [call] = await toolCalls(id);
  assert.equal(call.status, 'success');
  assert.equal(call.interruptions, 1);
  assert.equal(call.attempts, 2);
  assert.deepEqual(steps.count(city), { total: 2, answered: 1, aborted: 1, pending: 0 });
  const results = (await messagesOf(id)).filter((m) => isTool(m, callId));
  assert.equal(results.length, 1, 'exactly one result message');
  assert.equal(JSON.parse(results[0].content).temperature, temperatureOf(1), 'the result is the rerun\'s answer');
  await assertInvariants('S1');
  assert.equal(entry.interrupted, 1);
});

test('a kill while a workflow sleeps: the sleep falls due while the Worker is down, it wakes by itself and the done step is not repeated', { timeout: 60_000 }, async () => {
  const city = 'S2-Porto';
  const id = await newThread({ untouched: true });
  const sock = await socket(id);
  const callId = await queue(sock, 'compare_weather', { city, wait_seconds: 4 });
  track({ label: 'S2 compare_weather', thread: id, callId, kind: 'compare', city, interruptions: 0 });
  const sleeping = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'sleeping', { timeout: 10_000 });
  assert.equal(sleeping.waiting_for.sleep, 'wait');
  assert.deepEqual(steps.count(city), { total: 1, answered: 1, aborted: 0, pending: 0 });
  // Down until well past the wake time: the alarm is overdue when workerd starts again.
  const kill = await killAndRestart('compare_weather sleeping (wake time passes while down)', { pending: [callId], downMs: 5500 });
  assert.ok(kill.readyAt > sleeping.wake_at, 'the wake time passed while the Worker was down');
  const afterReading = await until(() => steps.of(city)[1], { timeout: 30_000, what: 'the "after" reading (no request touched the thread)' });
  log(`S2: the overdue sleep woke ${afterReading.at - kill.readyAt} ms after the restart, untouched`);
  threads.get(id).untouched = false;
  await until(async () => FINISHED.has((await toolCalls(id))[0].status), { what: 'S2 to finish' });
  const [call] = await toolCalls(id);
  assert.equal(call.status, 'success');
  assert.equal(call.interruptions, 0);
  assert.deepEqual(steps.count(city), { total: 2, answered: 2, aborted: 0, pending: 0 }, 'two readings: "before" is not fetched again');
  const r = JSON.parse(call.result);
  assert.equal(r.before.temperature, temperatureOf(0));
  assert.equal(r.after.temperature, temperatureOf(1));
  assert.equal((await messagesOf(id)).filter((m) => isTool(m, callId)).length, 1);
  await assertInvariants('S2');
});

test('a kill while a workflow waits for a webhook: the POST after the restart resumes it with the body', { timeout: 60_000 }, async () => {
  const id = await newThread();
  const sock = await socket(id);
  const callId = await queue(sock, 'wait_for_callback', { purpose: 'S3 payment', timeout_seconds: 600 });
  const body = { paid: true, scenario: 'S3', amount: 42 };
  track({ label: 'S3 wait_for_callback', thread: id, callId, kind: 'webhook', body, interruptions: 0, finishedBy: 'webhook' });
  const announced = await sock.waitFor((f) => f.type === 'event' && f.event === 'callback_url' && f.data.tool_call_id === callId, { timeout: 10_000 });
  const waiting = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'waiting', { timeout: 10_000 });
  assert.equal(waiting.waiting_for.url, announced.data.url);
  await killAndRestart('wait_for_callback waiting', { pending: await snapshot() });
  await assertInvariants('S3 after the restart');
  const [parked] = await toolCalls(id);
  assert.equal(parked.status, 'waiting');
  assert.equal(parked.waiting_for.url, announced.data.url, 'the same URL after the restart');
  const sock2 = await socket(id);
  const from = sock2.frames.length;
  const posted = await postWebhook(announced.data.url, body);
  assert.equal(posted.status, 202, JSON.stringify(posted.body));
  await sock2.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'success', { timeout: 15_000, from });
  assert.equal((await postWebhook(announced.data.url, { again: true })).status, 409, 'a webhook takes one body');
  assert.ok(!sock2.frames.some((f) => f.type === 'event' && f.event === 'callback_url'), 'the announce step is not repeated');
  sock2.close();
  const [call] = await toolCalls(id);
  assert.equal(JSON.parse(call.result).received.amount, 42);
  assert.equal((await messagesOf(id)).filter((m) => isTool(m, callId)).length, 1);
  await assertInvariants('S3');
});

// ---------------------------------------------------------------------------------------------
// The loop: kills at varying points across threads, every invariant checked after each restart.
// ---------------------------------------------------------------------------------------------

/**
 * A round sets up one situation on a thread of its own and returns at its kill point with
 * `{ threads, check, pending? }` (`check()`: still at the kill point); `after` runs once the
 * Worker is back. A triggered round waits for something the Worker does by itself (a watchdog
 * rerun): `due()` says when, and the loop runs it then.
 */
function loopRounds() {
  const r2 = {};
  const ids = {}; // threads the final checks look at
  const deferred = []; // { afterKills, run }
  const rounds = [
    {
      name: 'step: get_weather waiting for its answer',
      async prepare() {
        const city = 'Loop-1';
        steps.delay(city, [4000]);
        const id = await newThread();
        const callId = await queue(await socket(id), 'get_weather', { city });
        track({ label: 'L1 get_weather', thread: id, callId, kind: 'weather', city, interruptions: 1 });
        await until(() => steps.of(city)[0]?.state === 'pending' && Date.now() - steps.of(city)[0].at > 600, { what: 'L1 in flight' });
        return { threads: [id], check: () => steps.of(city)[0].state === 'pending' };
      },
    },
    {
      name: 'step: get_weather waiting for its answer (1st of 2 kills of this call)',
      async prepare() {
        const city = 'Loop-2';
        steps.delay(city, [4000, 7000]);
        const id = await newThread();
        const callId = await queue(await socket(id), 'get_weather', { city });
        Object.assign(r2, { id, callId, city });
        track({ label: 'L2 get_weather (killed twice)', thread: id, callId, kind: 'weather', city, interruptions: 2 });
        await until(() => steps.of(city)[0]?.state === 'pending' && Date.now() - steps.of(city)[0].at > 600, { what: 'L2 in flight' });
        return { threads: [id], check: () => steps.of(city)[0].state === 'pending' };
      },
    },
    {
      name: 'workflow step in flight: compare_weather "before"',
      async prepare() {
        const city = 'Loop-7';
        steps.delay(city, [4000]);
        const id = await newThread();
        const callId = await queue(await socket(id), 'compare_weather', { city, wait_seconds: 2 });
        track({ label: 'L7 compare_weather (kill in "before")', thread: id, callId, kind: 'compare', city, interruptions: 1 });
        await until(() => steps.of(city)[0]?.state === 'pending' && Date.now() - steps.of(city)[0].at > 600, { what: 'L7 "before" in flight' });
        return { threads: [id], check: () => steps.of(city)[0].state === 'pending' };
      },
    },
    {
      name: 'model turn: get_weather called by the model, in flight',
      horizon: 7000,
      async prepare() {
        const city = 'Loop-11';
        steps.delay(city, [4000]);
        const id = await newThread();
        const sock = await socket(id);
        track({ label: 'L11 get_weather from the model', thread: id, tool: 'get_weather', kind: 'weather', city, interruptions: 1 });
        await say(sock, id, '[M11] What is the weather in Loop-11?');
        await until(() => steps.of(city)[0]?.state === 'pending' && Date.now() - steps.of(city)[0].at > 600, { what: 'L11 in flight' });
        return { threads: [id], check: () => steps.of(city)[0].state === 'pending' };
      },
    },
    {
      name: 'workflow step in flight: compare_weather "after" (once "before" is done and the sleep woke)',
      horizon: 8000,
      async prepare() {
        const city = 'Loop-12';
        steps.delay(city, [0, 4000]);
        const id = await newThread();
        const callId = await queue(await socket(id), 'compare_weather', { city, wait_seconds: 1 });
        track({ label: 'L12 compare_weather (kill in "after")', thread: id, callId, kind: 'compare', city, interruptions: 1 });
        await until(() => steps.of(city)[1]?.state === 'pending' && Date.now() - steps.of(city)[1].at > 600, { what: 'L12 "after" in flight' });
        return { threads: [id], check: () => steps.of(city)[1].state === 'pending' };
      },
    },
    {
      name: 'model call streaming its answer',
      horizon: 7000,
      async prepare() {
        const id = await newThread();
        const sock = await socket(id);
        await say(sock, id, '[M6] Tell me a long story.');
        await until(() => modelCalls.M6 === 1, { what: 'the M6 model request' });
        const asked = Date.now();
        const chunk = await sock.waitFor((f) => f.type === 'message_chunk', { timeout: 10_000 });
        await sleep(500);
        // The scripted stream lasts ~13 s: the kill lands while it streams into a pending message.
        const pendingMessage = sock.frames.find((f) => f.type === 'message' && f.message.id === chunk.message_id && f.message.status === 'pending');
        assert.ok(pendingMessage, 'the answer streams into a pending message');
        ids.m6 = id;
        return { threads: [id], check: () => Date.now() - asked < 8000 && modelCalls.M6 === 1 };
      },
    },
    {
      name: 'right after queueing get_weather',
      async prepare(ctx) {
        const city = 'Loop-5';
        steps.delay(city, [4000]);
        const id = await newThread();
        const sock = await socket(id);
        await ctx.ready([id]);
        const callId = await queue(sock, 'get_weather', { city });
        // Killed before the Worker started it, or just after: both are fine; the final check
        // tells them apart by the first attempt's start time.
        track({ label: 'L5 get_weather (kill right after queueing)', thread: id, callId, kind: 'weather', city, interruptions: [0, 1] });
        return { threads: [id], check: () => true, pending: [callId] };
      },
    },
    {
      name: 'compare_weather sleeping',
      async prepare() {
        const city = 'Loop-3';
        const id = await newThread();
        const sock = await socket(id);
        const callId = await queue(sock, 'compare_weather', { city, wait_seconds: 9 });
        track({ label: 'L3 compare_weather (kill while sleeping)', thread: id, callId, kind: 'compare', city, interruptions: 0 });
        const sleeping = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'sleeping', { timeout: 10_000 });
        return { threads: [id], check: () => Date.now() < sleeping.wake_at - 1000 && steps.count(city).total === 1 };
      },
    },
    {
      name: 'wait_for_callback waiting (the POST comes 3 kills later)',
      async prepare() {
        const id = await newThread();
        const sock = await socket(id);
        const callId = await queue(sock, 'wait_for_callback', { purpose: 'L4 approval', timeout_seconds: 600 });
        const body = { loop: 4, ok: true };
        track({ label: 'L4 wait_for_callback (kill while waiting)', thread: id, callId, kind: 'webhook', body, interruptions: 0, finishedBy: 'webhook' });
        const waiting = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'waiting', { timeout: 10_000 });
        deferred.push({
          afterKills: kills.length + 4,
          async run() {
            const [c] = await toolCalls(id);
            assert.equal(c.status, 'waiting', 'L4 still waits after 3 more kills');
            const posted = await postWebhook(waiting.waiting_for.url, body);
            assert.equal(posted.status, 202, JSON.stringify(posted.body));
            log('L4: webhook posted');
          },
        });
        return { threads: [id], check: () => !sock.frames.some((f) => f.type === 'tool' && f.tool_call_id === callId && FINISHED.has(f.status)) };
      },
    },
    {
      name: 'remind_later sleeping',
      async prepare() {
        const id = await newThread();
        const sock = await socket(id);
        const text = 'Loop-8 stand up';
        threads.get(id).reminders.push(text);
        const callId = await queue(sock, 'remind_later', { text, in_seconds: 8 });
        track({ label: 'L8 remind_later (kill while sleeping)', thread: id, callId, kind: 'reminder', text, interruptions: 0 });
        const sleeping = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'sleeping', { timeout: 10_000 });
        return { threads: [id], check: () => Date.now() < sleeping.wake_at - 1000 };
      },
    },
    {
      name: 'right after a webhook was accepted (202)',
      async prepare(ctx) {
        const id = await newThread();
        const sock = await socket(id);
        const callId = await queue(sock, 'wait_for_callback', { purpose: 'L9 delivery', timeout_seconds: 600 });
        const body = { loop: 9, delivered: 'yes' };
        // The body is stored before the 202; the kill may come before the resumed run, or during it.
        track({ label: 'L9 wait_for_callback (kill right after the POST)', thread: id, callId, kind: 'webhook', body, interruptions: [0, 1] });
        const waiting = await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === 'waiting', { timeout: 10_000 });
        await ctx.ready([id]);
        const posted = await postWebhook(waiting.waiting_for.url, body);
        assert.equal(posted.status, 202, JSON.stringify(posted.body));
        this.url = waiting.waiting_for.url;
        return { threads: [id], check: () => true };
      },
      async after() {
        // The body was stored before the 202: after the kill a second POST is refused.
        const again = await postWebhook(this.url, { again: true });
        assert.equal(again.status, 409, `a second POST after the kill: ${again.status} ${JSON.stringify(again.body)}`);
      },
    },
  ];
  // L2's second kill: the watchdog reruns it ~30 s after its first run began; kill that rerun too.
  const second = {
    name: 'step: the watchdog\'s rerun of L2, waiting for its answer (2nd kill of this call)',
    async due() {
      if (!r2.callId || second.done) return null;
      const [c] = await toolCalls(r2.id);
      if (c.status !== 'running' || c.attempts !== 1) return c.attempts > 1 && !second.done ? 0 : null;
      return c.attempt_log[0].started_at + WATCHDOG_MS;
    },
    async prepare() {
      await until(() => {
        const rerun = steps.of(r2.city)[1];
        if (rerun && rerun.state !== 'pending') throw new Error(`L2's rerun was ${rerun.state} before its planned kill`);
        return rerun && Date.now() - rerun.at > 600;
      }, { timeout: 45_000, what: 'L2 rerun in flight' });
      return { threads: [r2.id], check: () => steps.of(r2.city)[1].state === 'pending' };
    },
  };
  return { rounds, triggered: [second], deferred, ids };
}

test('the loop: ≥10 SIGKILLs at varying points; after every restart nothing is lost, duplicated or run twice', { timeout: 240_000 }, async () => {
  // A round starts only if nothing unplanned falls due while it sets up and kills (what falls
  // due while the Worker is down happens when it is back, before the next round starts).
  const HORIZON = 5000;
  const { rounds, triggered, deferred, ids } = loopRounds();
  const loopStart = Date.now();
  const loopDeadline = loopStart + 200_000;
  let maxProblems = { duplicated: 0, lost: 0 };

  /** Waits until a kill can hit only `targets` (or `valid()` turns false); returns the last guard answer. */
  async function clear(targets, valid) {
    const deadline = Date.now() + 20_000;
    let guard;
    while ((guard = await quietFor(1000, targets)) !== true && valid() && Date.now() < deadline) await sleep(100);
    return guard;
  }

  async function run(round) {
    const began = Date.now();
    // A round that kills right after an action calls ctx.ready(threads) just before that action.
    const ctx = {
      async ready(targets) {
        const guard = await clear(targets, () => true);
        assert.equal(guard, true, `kill "${round.name}" would hit something unplanned: ${JSON.stringify(guard)}`);
        ctx.pending = await snapshot();
      },
    };
    const info = await round.prepare(ctx);
    if (!ctx.pending) {
      // Right before the kill: only what this round targets may be in flight or due.
      const guard = await clear(info.threads, info.check);
      assert.equal(guard, true, `kill "${round.name}" would hit something unplanned: ${JSON.stringify(guard)}`);
      ctx.pending = await snapshot();
    }
    assert.ok(info.check(), `"${round.name}": the kill point passed before the kill`);
    const pending = [...ctx.pending, ...(info.pending ?? [])];
    log(`round "${round.name}": at its kill point after ${Date.now() - began} ms`);
    const kill = await killAndRestart(round.name, { loop: true, pending });
    round.done = true;
    if (round.after) await round.after(kill);
    for (const d of deferred.filter((x) => !x.done && kills.length >= x.afterKills)) {
      d.done = true;
      await d.run();
    }
    const out = await assertInvariants(`after kill #${kill.n} (${round.name})`);
    maxProblems = { duplicated: Math.max(maxProblems.duplicated, out.duplicated), lost: Math.max(maxProblems.lost, out.lost) };
  }

  const queueOfRounds = [...rounds];
  while (queueOfRounds.length || triggered.some((r) => !r.done)) {
    assert.ok(Date.now() < loopDeadline, `the loop ran out of time with ${queueOfRounds.length} rounds left`);
    let ran = false;
    for (const r of triggered.filter((x) => !x.done)) {
      const due = await r.due();
      if (due !== null && due < Date.now() + HORIZON) {
        await run(r);
        ran = true;
        break;
      }
    }
    if (ran) continue;
    if (!queueOfRounds.length || (await quietFor(queueOfRounds[0].horizon ?? HORIZON)) !== true) {
      await sleep(250);
      continue;
    }
    await run(queueOfRounds.shift());
  }
  for (const d of deferred.filter((x) => !x.done)) {
    d.done = true;
    await d.run();
  }
  const loopKills = kills.filter((k) => k.loop).length;
  assert.ok(loopKills >= 10, `${loopKills} kills in the loop`);

  // Then nothing but waiting: every call finishes by itself (watchdogs, sleeps) or from its webhook.
  await until(async () => (await verify('waiting for the end', { final: true })).problems.length === 0, {
    timeout: WATCHDOG_MS + 30_000, every: 500, what: 'every call to finish with every invariant holding',
  }).catch(async (e) => {
    const out = await verify('final', { final: true });
    throw new Error(`${e.message}\n${out.problems.join('\n')}\n--- wrangler output ---\n${wr.tail(8000)}`);
  });
  const final = await assertInvariants('final', { final: true });

  // The model-call kill: the cut answer is kept as failed, the call was made again, and answered once.
  const m6msgs = final.view.get(ids.m6).messages.filter((m) => m.role === 'assistant');
  assert.equal(m6msgs.filter((m) => m.status === 'failed').length, 1, 'the interrupted answer is marked failed');
  assert.deepEqual(m6msgs.filter((m) => m.status === 'completed').map((m) => m.content), ['M6 done.']);
  assert.equal(modelCalls.M6, 2);
  // The model-made call: the model saw exactly one result for it.
  const l11 = tracked.find((e) => e.label.startsWith('L11'));
  const toolTurn = model.requests.filter((r) => JSON.stringify(r.body?.messages ?? []).includes('[M11]')).at(-1);
  assert.equal(toolTurn.body.messages.filter((m) => m.role === 'tool' && m.tool_call_id === l11.callId).length, 1);
  assert.equal(modelCalls.M11, 2, 'the model was called once before and once after the tool');
  const l11Thread = final.view.get(l11.thread).messages.filter((m) => m.role === 'assistant' && m.status === 'completed').map((m) => m.content);
  assert.equal(l11Thread.at(-1), 'M11 done.');

  // Summary. Restart-to-finish: from the restart after the last kill a call lived through to its
  // finish, for calls that finish by themselves (not those waiting for a webhook POST).
  const loopKillList = kills.filter((k) => k.loop);
  const samples = [];
  for (const e of tracked) {
    if (e.finishedBy !== 'itself' || !e.finishedAt) continue;
    const lived = kills.filter((k) => k.pending?.includes(e.callId) && k.killedAt < e.finishedAt);
    if (!lived.length) continue;
    samples.push(e.finishedAt - lived.at(-1).readyAt);
  }
  samples.sort((a, b) => a - b);
  const p50 = samples.length ? samples[Math.floor((samples.length - 1) / 2)] : 0;
  const maxInterruptions = Math.max(...tracked.map((e) => e.interrupted ?? 0));
  const calls = [...final.view.values()].reduce((n, v) => n + v.calls.length, 0);
  const loopCalls = tracked.filter((e) => e.label.startsWith('L')).length;
  // The kill right after queueing: interrupted exactly when its first attempt had started.
  const l5 = tracked.find((e) => e.label.startsWith('L5'));
  const l5call = final.view.get(l5.thread).calls.find((c) => c.id === l5.callId);
  const l5kill = kills.find((k) => k.pending?.includes(l5.callId));
  const startedBeforeKill = l5call.attempt_log[0].started_at < l5kill.killedAt;
  assert.equal(l5call.interruptions, startedBeforeKill ? 1 : 0, `L5 ${JSON.stringify(l5call.attempt_log)} killed at ${l5kill.killedAt}`);
  const l5started = l5call.attempt_log.at(-1).started_at - l5kill.readyAt;
  log(`L5 (kill right after queueing): ${startedBeforeKill ? 'its first attempt had started: interrupted once' : 'not started yet: no interruption'}; ` +
    `the attempt that finished started ${l5started} ms after the restart; step I/O ${JSON.stringify(steps.count('Loop-5'))}`);
  const l9 = tracked.find((e) => e.label.startsWith('L9'));
  const l9kill = kills.find((k) => k.pending?.includes(l9.callId));
  log(`L9 (kill right after the webhook's 202): ${l9.interrupted ? 'its resumed run had started: interrupted once' : 'killed before its resumed run'}; ` +
    `finished ${l9.finishedAt - l9kill.readyAt} ms after the restart`);
  assert.deepEqual(wr.errors, [], 'wrangler logged errors or answered 5xx');
  console.log(
    `reliability: ${loopKillList.length} kills, ${loopKillList.length} restarts in the loop (${kills.length} kills, ${wr.starts - 1} restarts in all), ` +
    `${calls} calls (${loopCalls} in the loop), ${final.lost + maxProblems.lost} lost, ${final.duplicated + maxProblems.duplicated} duplicated, ` +
    `max interruptions per call ${maxInterruptions}, restart-to-finish p50 ${p50} ms (max ${samples.at(-1) ?? 0} ms, ${samples.length} calls), ` +
    `loop ${Math.round((Date.now() - loopStart) / 1000)} s, ${wr.killedProcesses} processes killed, none left, ${wr.errors.length} worker errors`,
  );
  assert.equal(wr.starts - 1, kills.length, 'one restart per kill');
});
