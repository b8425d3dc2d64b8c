#!/usr/bin/env node
// A new conversation on a fresh `wrangler dev`, edgent beside the Cloudflare Agents SDK peer:
// from nothing to the first reply, the way each framework's client starts one. The peer's side
// is the side-by-side harness's own probe (../shared/bench-peer/sidebyside/probe.mjs: a
// WebSocket to a new agent name, then a chat request). Edgent's side is written here because
// the harness's probe predates `GET /api/threads/new/stream`: it creates the thread and opens
// its socket in one request, then sends the message (the harness still measures the two-request
// path: POST /api/threads, then the socket).
//
// Per repetition, for each framework in alternating order: spawn `wrangler dev` on a fresh
// `--persist-to` directory, wait until it answers, then two brand-new conversations in a row
// (the first is also the first Durable Object the process creates). Same scripted model server
// for both (the harness's scripted_openai.py), answering at once.
//
// Usage: node bench/cold-compare.mjs [repetitions]   (npm run bench:cold; needs the harness)
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { freePort } from '../tests/support/net.mjs';
import WebSocket from 'ws';
import { ROOT } from '../tests/support/worker.mjs';
import { HARNESS_DIR, HARNESS_TEXT, startScripted as startScriptedIn } from './lib.mjs';

const REPS = Number(process.argv[2] ?? 3);
const HARNESS = HARNESS_DIR;
const PEER_DIR = join(HARNESS, 'cf-agents');
const PROBE = join(HARNESS, 'sidebyside', 'probe.mjs');
if (!existsSync(PROBE) || !existsSync(join(PEER_DIR, 'node_modules'))) {
  console.log(`bench:cold: no peer harness at ${HARNESS} (set EDGENT_BENCH_PEER); skipped`);
  process.exit(0);
}
const KEY = 'cold-compare-key-0123456789abcdef';

/** The harness's scripted server, serving `script` in order (see `bench/lib.mjs`). */
const startScripted = (dir, script) => startScriptedIn(HARNESS, join(dir, 'script.json'), script);
const T = { text: HARNESS_TEXT };
const C = { tool_calls: [{ name: 'get_current_time', arguments: {} }] };
const U = { text: 'The current time is in the tool result above, so that is the answer.' };


/** Starts `wrangler dev` in its own process group and waits until `ready(base)` holds. */
async function startWrangler(cwd, args, ready) {
  const port = await freePort();
  const proc = spawn(join(cwd, 'node_modules', '.bin', 'wrangler'),
    ['dev', ...args, '--ip', '127.0.0.1', '--port', String(port), '--inspector-port', String(await freePort()),
      '--show-interactive-dev-session=false'],
    { cwd, detached: true, stdio: 'ignore', env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' } });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      if (await ready(base)) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`wrangler dev in ${cwd} did not come up`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { base, stop: () => { try { process.kill(-proc.pid, 'SIGKILL'); } catch {} } };
}

async function peerRun(state) {
  // The probe's two conversations: text, text and tool turns each.
  const model = await startScripted(state, [T, T, C, U, T, T, C, U]);
  const w = await startWrangler(PEER_DIR, ['--persist-to', join(state, 'wrangler'), '--var', `MODEL_BASE_URL:${model.url}`],
    async (base) => { const r = await fetch(`${base}/`); return r.status === 404 && (await r.text()).trim() === 'Not found'; });
  try {
    const out = execFileSync('node', [PROBE, '--framework', 'peer', '--base', w.base], { encoding: 'utf8', timeout: 120_000 });
    const probe = JSON.parse(out.trim().split('\n').at(-1));
    return [probe.first_instance.new_instance_to_first_reply_ms, probe.second_instance.new_instance_to_first_reply_ms];
  } finally {
    w.stop();
    model.stop();
  }
}

/** One new conversation through `GET /api/threads/new/stream`: upgrade -> hello, then a
 *  message -> its final reply. Returns the whole time. */
async function edgentConversation(base) {
  const t0 = performance.now();
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/threads/new/stream?agent_id=bench_time`,
    { headers: { authorization: `Bearer ${KEY}` } });
  const frames = [];
  const waiters = new Set();
  ws.on('message', (raw) => { frames.push(JSON.parse(raw.toString())); for (const w of [...waiters]) w(); });
  const waitFor = (pred) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout; frames: ${JSON.stringify(frames).slice(0, 800)}`)), 30_000);
    const look = () => { const f = frames.find(pred); if (f) { clearTimeout(timer); waiters.delete(look); resolve(f); } };
    waiters.add(look);
    look();
  });
  await waitFor((f) => f.type === 'hello');
  const helloMs = performance.now() - t0;
  ws.send(JSON.stringify({ type: 'rpc', id: 'p0', method: 'send_message', params: { content: 'Turn 0: what time is it?' } }));
  const fin = await waitFor((f) => (f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed') || f.type === 'error');
  const ms = performance.now() - t0;
  ws.close();
  if (fin.type === 'error') throw new Error(`edgent error frame: ${JSON.stringify(fin)}`);
  if (process.env.DETAIL) console.log(`  edgent: hello after ${helloMs.toFixed(1)} ms, reply ${(ms - helloMs).toFixed(1)} ms later`);
  return ms;
}

async function edgentRun(dir) {
  const model = await startScripted(dir, [T, T]);
  const MODEL_URL = model.url;
  const state = join(dir, 'wrangler');
  execFileSync(join(ROOT, 'node_modules', '.bin', 'wrangler'),
    ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', state, '--config', '.wrangler.dev.toml'],
    { cwd: ROOT, stdio: 'ignore', env: { ...process.env, CI: 'true' } });
  const w = await startWrangler(ROOT, ['--config', '.wrangler.dev.toml', '--persist-to', state,
    '--var', `EDGENT_API_KEY:${KEY}`, '--var', 'BENCH_MODEL_KEY:bench-key',
    // The scripted server is plain http on loopback, and the key secret is the bench's own.
    '--var', 'EDGENT_ALLOW_HTTP_MODELS:1', '--var', 'MODEL_SECRETS:BENCH_MODEL_KEY'],
    async (base) => (await fetch(`${base}/api/health`)).ok);
  try {
    // The agent as a user configures it (as the harness does): one model, one prompt, one tool.
    const config = {
      models: [{ name: 'bench_scripted', provider: 'openai', model: 'scripted-model', base_url: MODEL_URL, api_key_secret: 'BENCH_MODEL_KEY' }],
      prompts: [{ name: 'bench_time', model: 'bench_scripted', system: 'You are a helpful assistant.', tools: ['get_current_time'] }],
      agents: [{ id: 'bench_time', kind: 'ai_human', max_turns: 10000, side_a: { prompt: 'bench_time', max_steps: 5 } }],
    };
    const r = await fetch(`${w.base}/api/config`, { method: 'PUT', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(config) });
    if (!r.ok) throw new Error(`PUT /api/config: ${r.status} ${await r.text()}`);
    return [await edgentConversation(w.base), await edgentConversation(w.base)];
  } finally {
    w.stop();
    model.stop();
  }
}

execFileSync('node', [join(ROOT, 'scripts', 'dev-config.mjs')], { cwd: ROOT, stdio: 'ignore' });
const results = { peer: [], edgent: [] };
for (let rep = 0; rep < REPS; rep++) {
  const order = rep % 2 ? ['edgent', 'peer'] : ['peer', 'edgent'];
  for (const fw of order) {
    const state = mkdtempSync(join(tmpdir(), `cold-${fw}-`));
    try {
      const [first, second] = await (fw === 'peer' ? peerRun(state) : edgentRun(state));
      results[fw].push({ first, second });
      console.log(`rep ${rep + 1} ${fw.padEnd(6)}: first conversation ${first.toFixed(1)} ms, second ${second.toFixed(1)} ms`);
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
for (const which of ['first', 'second']) {
  const p = median(results.peer.map((r) => r[which]));
  const e = median(results.edgent.map((r) => r[which]));
  console.log(`${which} new conversation -> first reply, median of ${REPS}: peer ${p.toFixed(1)} ms, edgent ${e.toFixed(1)} ms, ratio edgent/peer ${(e / p).toFixed(3)}`);
}
