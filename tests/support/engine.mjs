// The engine's end-to-end harness, shared by tests/e2e/engine_*.test.mjs: one Worker per file
// (Miniflare) with the Anthropic and log keys bound, the scripted model server, and helpers
// that write each test's own models, prompts and agents under unique names, open its thread
// and run turns. `model`, `worker` and `client` are live bindings, set before the first test.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { withWorker } from './setup.mjs';
import { seed } from '../../scripts/lib/d1.mjs';

export const OPENAI_KEY = 'sk-test-secret'; // OPENAI_API_KEY in worker.mjs's bindings
export const ANTHROPIC_KEY = 'sk-ant-test';
// A key that does not look like a provider key, so only redacting the secret's value hides it.
export const LOG_KEY = 'zq-log-secret-4f9a2c7e81';
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$/;

export let model;
export let worker;
export let client;

/** Starts this file's Worker and model server (see `withWorker`). Every test scripts its own
 * answers and reads only its own requests (the model is reset before each). */
export function useEngineWorker() {
  withWorker({ bindings: { ANTHROPIC_API_KEY: ANTHROPIC_KEY, LOG_API_KEY: LOG_KEY }, setup: async (env) => {
    ({ model, worker, client } = env);
  } });
}

// ---------------------------------------------------------------------------------------------
// Definitions: every test writes its own models, prompts and agents under unique names.
// ---------------------------------------------------------------------------------------------

let unique = 0;
/** A fresh name prefix, so tests never share a definition. */
export const fresh = (what) => `${what}-${++unique}`;

export function modelRow(name, o = {}) {
  return {
    name,
    provider: 'openai',
    model: `${name}-id`,
    base_url: `${model.url}/v1`,
    api_key_secret: 'OPENAI_API_KEY',
    input_price_per_mtok: 0,
    output_price_per_mtok: 0,
    first_chunk_timeout_ms: null,
    stall_timeout_ms: null,
    max_history_tokens: null,
    max_output_tokens: null,
    ...o,
    fallbacks: JSON.stringify(o.fallbacks ?? []),
  };
}

export function promptRow(name, modelName, o = {}) {
  return {
    name,
    system: `You are ${name}.`,
    model: modelName,
    tool_choice: 'auto',
    parallel_tool_calls: 1,
    include_chat: 1,
    description: '',
    ...o,
    tools: JSON.stringify(o.tools ?? []),
    hooks: JSON.stringify(o.hooks ?? []),
  };
}

export function agentRow(id, sideA, o = {}) {
  return {
    id,
    kind: 'ai_human',
    description: '',
    max_turns: 25,
    expose_as_tool: 0,
    tool_description: '',
    ...o,
    side_a: JSON.stringify(sideA),
    side_b: o.side_b ? JSON.stringify(o.side_b) : null,
    hooks: JSON.stringify(o.hooks ?? []),
  };
}

export async function define({ models = [], prompts = [], agents = [] }) {
  await seed(worker.db, { models, prompts, agents });
}

/**
 * One model, one prompt on it and an ai_human agent on the prompt, all freshly named.
 * Returns the names (agent id, prompt, model, model id, system text).
 */
export async function simpleAgent({ modelOpts = {}, promptOpts = {}, side = {}, agentOpts = {} } = {}) {
  const m = fresh('m');
  const p = fresh('p');
  const a = fresh('a');
  const models = [modelRow(m, modelOpts)];
  const prompts = [promptRow(p, m, promptOpts)];
  await define({ models, prompts, agents: [agentRow(a, { prompt: p, ...side }, agentOpts)] });
  return { agent: a, prompt: p, model: m, modelId: models[0].model, system: prompts[0].system };
}

// ---------------------------------------------------------------------------------------------
// Threads and frames
// ---------------------------------------------------------------------------------------------

/** Creates a thread of `agentId` and opens a socket that is closed when the test ends. */
export async function thread(t, agentId) {
  const id = await client.createThread(agentId);
  const sock = await client.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  sock.threadId = id;
  return sock;
}

/** Posts a user message over HTTP (202). */
export async function send(sock, content) {
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.message_id;
}

/** Waits for an `idle` status frame from `from` on (with `turn` completed turns when given). */
function idle(sock, from, turn, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && (turn === undefined || f.turn === turn), { from, timeout });
}

/** Waits for the `stopped` status frame from `from` on. */
export function stopped(sock, from, timeout = 15000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'stopped', { from, timeout });
}

/** Sends `content` and waits until the thread is idle again; returns the frames of the turn. */
export async function turn(sock, content, turnNo) {
  const from = sock.frames.length;
  await send(sock, content);
  await idle(sock, from, turnNo);
  return sock.frames.slice(from);
}

export async function summary(threadId) {
  const r = await client.request('GET', `/api/threads/${threadId}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

export async function allMessages(threadId, query = '') {
  const r = await client.request('GET', `/api/threads/${threadId}/messages?limit=200${query}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

export async function logs(threadId, query = '') {
  const r = await client.request('GET', `/api/threads/${threadId}/logs${query}`);
  assert.equal(r.status, 200, `GET logs: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function rpcOk(sock, method, params) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, true, `${method} ${JSON.stringify(params)} failed: ${JSON.stringify(r)}`);
  return r.result;
}

export async function rpcErr(sock, method, params, code) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, false, `${method} ${JSON.stringify(params)} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.error?.code, code, JSON.stringify(r.error));
  return r.error;
}

export const errors = (frames) => frames.filter((f) => f.type === 'error');
export const toolFrames = (frames) => frames.filter((f) => f.type === 'tool').map((f) => [f.tool_call_id, f.name, f.status]);
/** The final (non-pending) state of each assistant message in `frames`, by id, last frame wins. */
export function finalMessages(frames) {
  const byId = new Map();
  for (const f of frames) if (f.type === 'message') byId.set(f.message.id, f.message);
  return [...byId.values()];
}

/** Waits a little and checks no further model request arrived. */
export async function noMoreRequests(n, ms = 400) {
  await sleep(ms);
  assert.equal(model.requests.length, n, `expected exactly ${n} model request(s): ${JSON.stringify(model.requests.map(brief))}`);
}

/** A short description of a request, for failure messages. */
function brief(r) {
  return { path: r.path, model: r.body?.model, system: systemOf(r), last: r.body?.messages?.at(-1) };
}

/** The system text of a request in either format. */
export function systemOf(r) {
  if (r.format === 'anthropic') return r.body.system;
  const first = r.body?.messages?.[0];
  return first?.role === 'system' ? first.content : undefined;
}

/** The chat-completions messages of a request after the system message. */
export function chat(r) {
  const messages = r.body.messages;
  return messages[0]?.role === 'system' ? messages.slice(1) : messages;
}

/** Every tool result in `messages` follows an assistant message holding its call, and none comes first. */
export function assertPaired(messages, label = '') {
  assert.notEqual(messages[0]?.role, 'tool', `${label} history starts with a tool result: ${JSON.stringify(messages)}`);
  const open = new Set();
  for (const m of messages) {
    if (m.role === 'assistant') {
      assert.equal(open.size, 0, `${label} a tool call has no result before the next assistant message: ${JSON.stringify(messages)}`);
      for (const c of m.tool_calls ?? []) open.add(c.id);
    } else if (m.role === 'tool') {
      assert.ok(open.has(m.tool_call_id), `${label} tool result ${m.tool_call_id} without its call: ${JSON.stringify(messages)}`);
      open.delete(m.tool_call_id);
    } else {
      assert.equal(open.size, 0, `${label} a ${m.role} message comes between a call and its result: ${JSON.stringify(messages)}`);
    }
  }
}
