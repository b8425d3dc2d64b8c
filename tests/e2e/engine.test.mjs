// End-to-end tests of the agent engine: the real built Worker in Miniflare (workerd), local D1
// holding definitions each test writes for itself, real WebSockets, and the scripted model
// server standing in for OpenAI and Anthropic.
// Proves: what the engine sends to each provider (streamed replies with split frames, parallel
// tool calls, Anthropic tool_use round trips), the retry/fallback/timeout policy, the model
// request log, the stop rules of ai_human and dual_ai agents, history trimming, sub-prompts,
// agents called as tools (child threads and handoffs), configuration read from D1 per turn,
// and clear errors for broken configuration.
// Does not prove: behaviour against real providers, or across Worker restarts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { withWorker } from '../support/setup.mjs';
import { seed } from '../../scripts/lib/d1.mjs';

const OPENAI_KEY = 'sk-test-secret'; // OPENAI_API_KEY in worker.mjs's bindings
const ANTHROPIC_KEY = 'sk-ant-test';
// A key that does not look like a provider key, so only redacting the secret's value hides it.
const LOG_KEY = 'zq-log-secret-4f9a2c7e81';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$/;

let model;
let worker;
let client;

// Every test scripts its own answers and reads only its own requests (withWorker resets the
// model before each).
withWorker({ bindings: { ANTHROPIC_API_KEY: ANTHROPIC_KEY, LOG_API_KEY: LOG_KEY }, setup: async (env) => {
  ({ model, worker, client } = env);
} });

// ---------------------------------------------------------------------------------------------
// Definitions: every test writes its own models, prompts and agents under unique names.
// ---------------------------------------------------------------------------------------------

let unique = 0;
/** A fresh name prefix, so tests never share a definition. */
const fresh = (what) => `${what}-${++unique}`;

function modelRow(name, o = {}) {
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

function promptRow(name, modelName, o = {}) {
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

function agentRow(id, sideA, o = {}) {
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

async function define({ models = [], prompts = [], agents = [] }) {
  await seed(worker.db, { models, prompts, agents });
}

/**
 * One model, one prompt on it and an ai_human agent on the prompt, all freshly named.
 * Returns the names (agent id, prompt, model, model id, system text).
 */
async function simpleAgent({ modelOpts = {}, promptOpts = {}, side = {}, agentOpts = {} } = {}) {
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
async function thread(t, agentId) {
  const id = await client.createThread(agentId);
  const sock = await client.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  sock.threadId = id;
  return sock;
}

/** Posts a user message over HTTP (202). */
async function send(sock, content) {
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.message_id;
}

/** Waits for an `idle` status frame from `from` on (with `turn` completed turns when given). */
function idle(sock, from, turn, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && (turn === undefined || f.turn === turn), { from, timeout });
}

/** Waits for the `stopped` status frame from `from` on. */
function stopped(sock, from, timeout = 15000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'stopped', { from, timeout });
}

/** Sends `content` and waits until the thread is idle again; returns the frames of the turn. */
async function turn(sock, content, turnNo) {
  const from = sock.frames.length;
  await send(sock, content);
  await idle(sock, from, turnNo);
  return sock.frames.slice(from);
}

async function summary(threadId) {
  const r = await client.request('GET', `/api/threads/${threadId}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function allMessages(threadId, query = '') {
  const r = await client.request('GET', `/api/threads/${threadId}/messages?limit=200${query}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

async function logs(threadId, query = '') {
  const r = await client.request('GET', `/api/threads/${threadId}/logs${query}`);
  assert.equal(r.status, 200, `GET logs: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function rpcOk(sock, method, params) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, true, `${method} ${JSON.stringify(params)} failed: ${JSON.stringify(r)}`);
  return r.result;
}

async function rpcErr(sock, method, params, code) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, false, `${method} ${JSON.stringify(params)} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.error?.code, code, JSON.stringify(r.error));
  return r.error;
}

const errors = (frames) => frames.filter((f) => f.type === 'error');
const toolFrames = (frames) => frames.filter((f) => f.type === 'tool').map((f) => [f.tool_call_id, f.name, f.status]);
/** The final (non-pending) state of each assistant message in `frames`, by id, last frame wins. */
function finalMessages(frames) {
  const byId = new Map();
  for (const f of frames) if (f.type === 'message') byId.set(f.message.id, f.message);
  return [...byId.values()];
}

/** Waits a little and checks no further model request arrived. */
async function noMoreRequests(n, ms = 400) {
  await sleep(ms);
  assert.equal(model.requests.length, n, `expected exactly ${n} model request(s): ${JSON.stringify(model.requests.map(brief))}`);
}

/** A short description of a request, for failure messages. */
function brief(r) {
  return { path: r.path, model: r.body?.model, system: systemOf(r), last: r.body?.messages?.at(-1) };
}

/** The system text of a request in either format. */
function systemOf(r) {
  if (r.format === 'anthropic') return r.body.system;
  const first = r.body?.messages?.[0];
  return first?.role === 'system' ? first.content : undefined;
}

/** The chat-completions messages of a request after the system message. */
function chat(r) {
  const messages = r.body.messages;
  return messages[0]?.role === 'system' ? messages.slice(1) : messages;
}

/** Every tool result in `messages` follows an assistant message holding its call, and none comes first. */
function assertPaired(messages, label = '') {
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

// ---------------------------------------------------------------------------------------------
// 1. OpenAI: streaming, split frames, parallel tool calls
// ---------------------------------------------------------------------------------------------

test('openai: split text and tool-call frames, two parallel calls run together and pair with their results', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'], parallel_tool_calls: 1 } });
  const sock = await thread(t, d.agent);
  const intro = 'Let me check both of those for you.';
  const finalText = 'Ada Lovelace is on the enterprise plan.';
  model.push(
    {
      text: intro,
      chunkSize: 3,
      argsChunkSize: 2,
      toolCalls: [
        { id: 'call_lookup', name: 'lookup_customer', arguments: { email: 'ada@example.com' } },
        { id: 'call_time', name: 'get_current_time', arguments: {} },
      ],
    },
    { text: finalText, chunkSize: 2 },
  );
  const frames = await turn(sock, 'Who is ada@example.com, and what time is it?', 1);

  // Both calls were started before either finished (one batch); each result is stored as its
  // call finishes (get_current_time, with no I/O, usually first).
  const tools = toolFrames(frames);
  assert.deepEqual(tools.slice(0, 4), [
    ['call_lookup', 'lookup_customer', 'queued'],
    ['call_time', 'get_current_time', 'queued'],
    ['call_lookup', 'lookup_customer', 'running'],
    ['call_time', 'get_current_time', 'running'],
  ]);
  assert.deepEqual(tools.slice(4).sort(), [
    ['call_lookup', 'lookup_customer', 'success'],
    ['call_time', 'get_current_time', 'success'],
  ]);

  // The first reply streamed in many small chunks that add up to its text; its calls arrived whole.
  const [callMsg, finalMsg] = finalMessages(frames).filter((m) => m.role === 'assistant');
  const chunksOf = (id) => frames.filter((f) => f.type === 'message_chunk' && f.message_id === id);
  assert.ok(chunksOf(callMsg.id).length >= 10, `expected many chunks, got ${chunksOf(callMsg.id).length}`);
  assert.equal(chunksOf(callMsg.id).map((c) => c.delta).join(''), intro);
  assert.equal(callMsg.content, intro);
  assert.deepEqual(callMsg.tool_calls, [
    { id: 'call_lookup', name: 'lookup_customer', arguments: '{"email":"ada@example.com"}' },
    { id: 'call_time', name: 'get_current_time', arguments: '{}' },
  ]);
  assert.equal(finalMsg.content, finalText);
  assert.equal(chunksOf(finalMsg.id).map((c) => c.delta).join(''), finalText);

  // Stored: the results after the message holding the calls, in the order they finished.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'tool', 'assistant']);
  const result = (id) => stored.find((m) => m.tool_call_id === id);
  assert.match(result('call_lookup').content, /Ada Lovelace/);
  assert.match(result('call_time').content, ISO_UTC);

  // What the model was sent.
  await noMoreRequests(2);
  const [first, second] = model.requests;
  assert.equal(first.format, 'openai');
  assert.equal(first.path, '/v1/chat/completions');
  assert.equal(first.headers.authorization, `Bearer ${OPENAI_KEY}`);
  assert.equal(first.body.model, d.modelId);
  assert.equal(first.body.stream, true);
  assert.deepEqual(first.body.stream_options, { include_usage: true });
  assert.deepEqual(first.body.tools.map((x) => x.function.name).sort(), ['get_current_time', 'lookup_customer']);
  assert.ok(first.body.tools.every((x) => x.type === 'function' && x.function.parameters?.type === 'object'));
  assert.equal(first.body.tool_choice, 'auto');
  assert.equal(first.body.parallel_tool_calls, true);
  assert.deepEqual(first.body.messages, [
    { role: 'system', content: d.system },
    { role: 'user', content: 'Who is ada@example.com, and what time is it?' },
  ]);
  // The second request pairs each call with its result, in call order.
  const sent = chat(second);
  assert.deepEqual(sent.map((m) => m.role), ['user', 'assistant', 'tool', 'tool']);
  assert.deepEqual(sent[1], {
    role: 'assistant',
    content: intro,
    tool_calls: [
      { id: 'call_lookup', type: 'function', function: { name: 'lookup_customer', arguments: '{"email":"ada@example.com"}' } },
      { id: 'call_time', type: 'function', function: { name: 'get_current_time', arguments: '{}' } },
    ],
  });
  assert.equal(sent[2].tool_call_id, 'call_lookup');
  assert.equal(sent[2].content, result('call_lookup').content);
  assert.equal(sent[3].tool_call_id, 'call_time');
  assert.equal(sent[3].content, result('call_time').content);
});

test('openai: the prompt\'s tool_choice and parallel_tool_calls are sent as set; without parallel calls they run one by one', async (t) => {
  const d = await simpleAgent({
    promptOpts: { tools: ['get_current_time'], tool_choice: 'required', parallel_tool_calls: 0 },
    modelOpts: { max_output_tokens: 321 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_1', name: 'get_current_time', arguments: {} }, { id: 'call_2', name: 'get_current_time', arguments: {} }] },
    { text: 'Done.' },
  );
  const frames = await turn(sock, 'time twice', 1);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s !== 'queued'), [
    ['call_1', 'get_current_time', 'running'],
    ['call_1', 'get_current_time', 'success'],
    ['call_2', 'get_current_time', 'running'],
    ['call_2', 'get_current_time', 'success'],
  ]);
  await noMoreRequests(2);
  for (const r of model.requests) {
    assert.equal(r.body.tool_choice, 'required');
    assert.equal(r.body.parallel_tool_calls, false);
    assert.equal(r.body.max_tokens, 321);
  }
  assert.deepEqual(chat(model.requests[1]).map((m) => [m.role, m.tool_call_id ?? null]), [
    ['user', null],
    ['assistant', null],
    ['tool', 'call_1'],
    ['tool', 'call_2'],
  ]);
});

// ---------------------------------------------------------------------------------------------
// 2. Anthropic
// ---------------------------------------------------------------------------------------------

test('anthropic: streamed text and a tool_use round trip, with x-api-key, anthropic-version and a top-level system', async (t) => {
  const d = await simpleAgent({
    modelOpts: { provider: 'anthropic', model: 'claude-scripted', base_url: `${model.url}/v1`, api_key_secret: 'ANTHROPIC_API_KEY' },
    promptOpts: { system: 'You are a careful Claude.', tools: ['get_current_time'] },
  });
  const sock = await thread(t, d.agent);
  const finalText = 'It is exactly the time the tool said.';
  model.push(
    { text: 'Let me look.', chunkSize: 4, argsChunkSize: 1, toolCalls: [{ id: 'toolu_time1', name: 'get_current_time', arguments: {} }] },
    { text: finalText, chunkSize: 3 },
  );
  const frames = await turn(sock, 'What time is it?', 1);

  const assistants = finalMessages(frames).filter((m) => m.role === 'assistant');
  assert.equal(assistants.length, 2);
  assert.equal(assistants[0].content, 'Let me look.');
  assert.deepEqual(assistants[0].tool_calls, [{ id: 'toolu_time1', name: 'get_current_time', arguments: '{}' }]);
  assert.equal(assistants[1].content, finalText);
  assert.equal(assistants[1].status, 'completed');
  const chunks = frames.filter((f) => f.type === 'message_chunk' && f.message_id === assistants[1].id);
  assert.ok(chunks.length >= 5, `several chunks: ${chunks.length}`);
  assert.equal(chunks.map((c) => c.delta).join(''), finalText);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);

  await noMoreRequests(2);
  const [first, second] = model.requests;
  for (const r of [first, second]) {
    assert.equal(r.format, 'anthropic');
    assert.equal(r.path, '/v1/messages');
    assert.equal(r.headers['x-api-key'], ANTHROPIC_KEY);
    assert.equal(r.headers['anthropic-version'], '2023-06-01');
    assert.equal(r.headers.authorization, undefined, 'no OpenAI-style bearer header');
    assert.ok(!r.rawBody.includes(OPENAI_KEY));
    assert.equal(r.body.model, 'claude-scripted');
    assert.equal(r.body.stream, true);
    assert.equal(r.body.system, 'You are a careful Claude.');
    assert.equal(typeof r.body.max_tokens, 'number');
    assert.ok(r.body.messages.every((m) => m.role !== 'system'), 'no system message in messages');
    assert.deepEqual(r.body.tools.map((x) => x.name), ['get_current_time']);
    assert.equal(r.body.tools[0].input_schema.type, 'object');
    assert.deepEqual(r.body.tool_choice, { type: 'auto' });
  }
  assert.deepEqual(first.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'What time is it?' }] }]);
  const m = second.body.messages;
  assert.deepEqual(m.map((x) => x.role), ['user', 'assistant', 'user']);
  assert.deepEqual(m[1].content, [
    { type: 'text', text: 'Let me look.' },
    { type: 'tool_use', id: 'toolu_time1', name: 'get_current_time', input: {} },
  ]);
  assert.equal(m[2].content.length, 1);
  const result = m[2].content[0];
  assert.equal(result.type, 'tool_result');
  assert.equal(result.tool_use_id, 'toolu_time1');
  const resultText = typeof result.content === 'string' ? result.content : result.content.map((b) => b.text).join('');
  assert.match(resultText, ISO_UTC);
  assert.notEqual(result.is_error, true);
});

test('anthropic: an error event mid-stream is retried without doubling the text; usage reaches the log', async (t) => {
  const d = await simpleAgent({
    modelOpts: { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY', input_price_per_mtok: 3, output_price_per_mtok: 15 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'This first attempt breaks off', chunkSize: 5, midStreamError: { message: 'Overloaded right now' } },
    { text: 'Second attempt, whole.', usage: { input_tokens: 77, output_tokens: 11 } },
  );
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  assert.match(errors(frames)[0].message, /Overloaded right now/);
  const fin = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(fin.content, 'Second attempt, whole.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.content]), [['user', 'completed', 'hi'], ['assistant', 'completed', 'Second attempt, whole.']]);
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.provider, l.status, l.attempt]), [['anthropic', 'error', 1], ['anthropic', 'ok', 2]]);
  assert.match(log[0].error, /Overloaded right now/);
  assert.equal(log[1].input_tokens, 77);
  assert.equal(log[1].output_tokens, 11);
  assert.ok(Math.abs(log[1].cost - (77 * 3 + 11 * 15) / 1e6) < 1e-9, `cost ${log[1].cost}`);
});

test('anthropic: an HTTP error body is read in Anthropic\'s format', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY' } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 400, message: 'messages: roles must alternate' } });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(1);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_http_error']);
  assert.match(errors(frames)[0].message, /400: messages: roles must alternate$/);
});

// ---------------------------------------------------------------------------------------------
// 3. Retries, fallbacks, fail-fast and timeouts
// ---------------------------------------------------------------------------------------------

test('retry: a 429 with retry-after 1 is retried after about a second, within the same turn', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'Slow down', headers: { 'retry-after': '1' } } }, { text: 'Second time lucky.' });
  const frames = await turn(sock, 'hello', 1);
  await noMoreRequests(2);
  const [a, b] = model.requests;
  assert.ok(b.at - a.at >= 950, `the retry waited ${b.at - a.at} ms; retry-after asked for 1000`);
  assert.deepEqual(b.body, a.body, 'the retry sends the same request');

  const errs = errors(frames);
  assert.equal(errs.length, 1, JSON.stringify(errs));
  assert.equal(errs[0].code, 'model_retry');
  assert.match(errs[0].message, /429/);
  const retryAt = frames.indexOf(errs[0]);
  const done = frames.findIndex((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed');
  assert.ok(retryAt >= 0 && retryAt < done, 'the retry is reported before the completed reply');
  assert.equal(frames[done].message.content, 'Second time lucky.');

  const s = await summary(sock.threadId);
  assert.equal(s.turn_count, 1);
  assert.equal(s.status, 'idle');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.content]), [
    ['user', 'completed', 'hello'],
    ['assistant', 'completed', 'Second time lucky.'],
  ]);
});

test('retry: tool calls of a stream cut short are forgotten; only the retried reply\'s calls run', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] } });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'Looking', toolCalls: [{ id: 'call_lost', name: 'lookup_customer', arguments: { customer_id: 'cus_1001' } }], truncate: true },
    { text: 'No tools needed after all.' },
  );
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  assert.deepEqual(toolFrames(frames), []);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.content, m.tool_calls ?? []]), [
    ['user', 'hi', []],
    ['assistant', 'No tools needed after all.', []],
  ]);
});

test('fallback: a model failing twice with 503 falls back to its fallback model and the reply completes', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'fallback-model-id' })] });
  const d = await simpleAgent({ modelOpts: { model: 'primary-model-id', fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 503, message: 'Overloaded' } }, { error: { status: 503, message: 'Still overloaded' } }, { text: 'From the fallback.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.body.model), ['primary-model-id', 'primary-model-id', 'fallback-model-id']);
  assert.deepEqual(chat(model.requests[2]), [{ role: 'user', content: 'hi' }]);
  const retries = errors(frames);
  assert.deepEqual(retries.map((e) => e.code), ['model_retry', 'model_retry']);
  assert.match(retries[0].message, /retrying/);
  assert.match(retries[1].message, new RegExp(`falling back to model "${f}"`));
  const fin = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(fin.status, 'completed');
  assert.equal(fin.content, 'From the fallback.');
});

test('fallback: an OpenAI model can fall back to an Anthropic one; the request is rebuilt in its format', async (t) => {
  const f = fresh('claude-fb');
  await define({ models: [modelRow(f, { provider: 'anthropic', model: 'claude-fallback', api_key_secret: 'ANTHROPIC_API_KEY' })] });
  const d = await simpleAgent({ modelOpts: { fallbacks: [f] }, promptOpts: { system: 'Either provider.' } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 500 } }, { error: { status: 500 } }, { text: 'Claude took over.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.format), ['openai', 'openai', 'anthropic']);
  const last = model.requests[2];
  assert.equal(last.headers['x-api-key'], ANTHROPIC_KEY);
  assert.equal(last.body.model, 'claude-fallback');
  assert.equal(last.body.system, 'Either provider.');
  assert.deepEqual(last.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
  assert.equal(finalMessages(frames).find((m) => m.role === 'assistant').content, 'Claude took over.');
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.model, l.provider, l.attempt, l.status]), [
    [d.model, 'openai', 1, 'error'],
    [d.model, 'openai', 2, 'error'],
    [f, 'anthropic', 1, 'ok'],
  ]);
});

test('stop during a retry wait: no further attempt is made', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'wait', headers: { 'retry-after': '2' } } }, { text: 'must not be asked for' });
  const from = sock.frames.length;
  await send(sock, 'hi');
  await sock.waitFor((f) => f.type === 'error' && f.code === 'model_retry', { from });
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200);
  await stopped(sock, from);
  await noMoreRequests(1, 2500);
  assert.equal((await summary(sock.threadId)).stopped_by, 'user');
});

test('fallback: a Retry-After beyond 30 s is not waited for; the fallback is called at once', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'patient-fallback-id' })] });
  const d = await simpleAgent({ modelOpts: { fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'quota', headers: { 'retry-after': '120' } } }, { text: 'Fallback answered.' });
  await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  const [a, b] = model.requests;
  assert.equal(b.body.model, 'patient-fallback-id');
  assert.ok(b.at - a.at < 1000, `the fallback was called ${b.at - a.at} ms later`);
});

test('fallback: a model whose secret is not set is skipped for its fallback; without one the turn fails with model_config', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'keyed-fallback-id' })] });
  const d = await simpleAgent({ modelOpts: { api_key_secret: 'NOT_A_SET_SECRET', fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Fallback with a key.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(1);
  assert.equal(model.requests[0].body.model, 'keyed-fallback-id');
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  assert.match(errors(frames)[0].message, /NOT_A_SET_SECRET/);

  const lone = await simpleAgent({ modelOpts: { api_key_secret: 'NOT_A_SET_SECRET' } });
  const other = await thread(t, lone.agent);
  const failed = await turn(other, 'hi', 0);
  await noMoreRequests(1);
  assert.deepEqual(errors(failed).map((e) => e.code), ['model_config']);
  assert.match(errors(failed)[0].message, /secret NOT_A_SET_SECRET is empty: set it in .dev.vars, or use the demo model/);
});

test('fallback: only the first model\'s fallbacks are tried, not a fallback\'s own fallbacks', async (t) => {
  const f1 = fresh('fb1');
  const f2 = fresh('fb2');
  await define({ models: [modelRow(f2, { model: 'second-level-id' }), modelRow(f1, { model: 'first-level-id', fallbacks: [f2] })] });
  const d = await simpleAgent({ modelOpts: { model: 'primary-id', fallbacks: [f1] } });
  const sock = await thread(t, d.agent);
  for (let i = 0; i < 4; i++) model.push({ error: { status: 503, message: `down ${i}` } });
  model.push({ text: 'the second-level fallback must not be asked' });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(4);
  assert.deepEqual(model.requests.map((r) => r.body.model), ['primary-id', 'primary-id', 'first-level-id', 'first-level-id']);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_retry', 'model_retry', 'model_http_error']);
});

test('fallback: a fallback missing from D1 is skipped; the call fails once the primary gives up', async (t) => {
  const d = await simpleAgent({ modelOpts: { fallbacks: ['no-such-model'] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 503, message: 'down' } }, { error: { status: 503, message: 'still down' } });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_http_error']);
  assert.match(errors(frames)[1].message, /still down/);
  assert.equal((await summary(sock.threadId)).status, 'idle');
});

test('fail fast: a 400 is not retried, reported as model_http_error, and the thread stays usable', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 400, message: 'Invalid schema for tools' } });
  let frames = await turn(sock, 'first', 0); // a failed turn is not counted
  await noMoreRequests(1);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_http_error'], JSON.stringify(errs));
  assert.match(errs[0].message, /400/);
  assert.match(errs[0].message, /Invalid schema for tools/);
  const failed = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(failed.status, 'failed');
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error ?? '', /Invalid schema for tools/);

  model.push({ text: 'Working again.' });
  frames = await turn(sock, 'second', 1);
  assert.equal(finalMessages(frames).find((m) => m.role === 'assistant').content, 'Working again.');
  // The failed reply is not sent back to the model.
  assert.deepEqual(chat(model.requests[1]), [{ role: 'user', content: 'first' }, { role: 'user', content: 'second' }]);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
});

test('stall timeout: a stream that goes silent fails after stall_timeout_ms, is retried once, then model_timeout', async (t) => {
  const d = await simpleAgent({ modelOpts: { stall_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'I will stop talking soon', stallAfter: 2 }, { text: 'I will stop talking soon', stallAfter: 2 });
  const started = Date.now();
  const frames = await turn(sock, 'talk', 0);
  const took = Date.now() - started;
  await noMoreRequests(2);
  assert.ok(took < 5000, `the stall timer is 300 ms, the turn took ${took} ms`);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  assert.match(errors(frames)[1].message, /stall/);
  // The partial text of the failed attempt is withdrawn before the retry.
  const reset = frames.find((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'pending' && f.message.content === '' && frames.indexOf(f) > frames.indexOf(errors(frames)[0]));
  assert.ok(reset, 'the pending message is emptied before the retry');
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error, /stall/);
});

test('first-chunk timeout: a model that never answers fails after first_chunk_timeout_ms with model_timeout', async (t) => {
  const d = await simpleAgent({ modelOpts: { first_chunk_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  model.push({ hang: true }, { stallAfter: 0 });
  const started = Date.now();
  const frames = await turn(sock, 'anyone there?', 0);
  assert.ok(Date.now() - started < 5000);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  // Usable afterwards.
  model.push({ text: 'Here now.' });
  const next = await turn(sock, 'again', 1);
  assert.equal(finalMessages(next).find((m) => m.role === 'assistant').content, 'Here now.');
});

// ---------------------------------------------------------------------------------------------
// 4. The request log
// ---------------------------------------------------------------------------------------------

test('request log: one row per attempt with status, http status, latency, tokens and cost; paged; the key is redacted', async (t) => {
  const d = await simpleAgent({
    modelOpts: { api_key_secret: 'LOG_API_KEY', input_price_per_mtok: 1.5, output_price_per_mtok: 4 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { error: { status: 500, message: `upstream rejected credentials ${LOG_KEY} (internal)` } },
    { text: 'Logged answer.', usage: { prompt_tokens: 1000, completion_tokens: 250 }, chunkDelayMs: 20 },
  );
  await turn(sock, 'log me', 1);
  await noMoreRequests(2);
  assert.equal(model.requests[0].headers.authorization, `Bearer ${LOG_KEY}`, 'the key was read from the named secret');

  const page = await logs(sock.threadId);
  assert.equal(page.total, 2);
  assert.equal(page.has_more, false);
  const [fail, ok] = page.logs;
  assert.equal(fail.model, d.model);
  assert.equal(fail.provider, 'openai');
  assert.equal(fail.attempt, 1);
  assert.equal(fail.status, 'error');
  assert.equal(fail.http_status, 500);
  assert.match(fail.error, /upstream rejected credentials/);
  assert.match(fail.error, /\[redacted\]/);
  assert.equal(fail.cost, 0);
  assert.equal(ok.model, d.model);
  assert.equal(ok.attempt, 2);
  assert.equal(ok.status, 'ok');
  assert.equal(ok.http_status, 200);
  assert.equal(ok.error ?? null, null);
  assert.equal(ok.input_tokens, 1000);
  assert.equal(ok.output_tokens, 250);
  assert.ok(Math.abs(ok.cost - (1000 * 1.5 + 250 * 4) / 1e6) < 1e-9, `cost ${ok.cost}`);
  assert.ok(ok.cost > 0);
  assert.equal(typeof ok.ttft_ms, 'number');
  assert.ok(ok.ttft_ms >= 0 && ok.latency_ms >= ok.ttft_ms, `ttft ${ok.ttft_ms} ≤ latency ${ok.latency_ms}`);
  assert.ok(ok.latency_ms >= 20, `latency ${ok.latency_ms} covers the streamed reply`);
  assert.ok(ok.seq > fail.seq);
  assert.ok(ok.created_at >= fail.created_at);
  const stored = await allMessages(sock.threadId);
  assert.equal(fail.message_id, stored[1].id, 'rows point at the assistant message');
  assert.equal(ok.message_id, stored[1].id);

  // Paging like messages.
  const second = await logs(sock.threadId, '?limit=1&offset=1');
  assert.deepEqual(second.logs.map((l) => l.seq), [ok.seq]);
  assert.equal(second.total, 2);
  const firstOnly = await logs(sock.threadId, '?limit=1');
  assert.deepEqual(firstOnly.logs.map((l) => l.seq), [fail.seq]);
  assert.equal(firstOnly.has_more, true);
  const desc = await logs(sock.threadId, '?order=desc');
  assert.deepEqual(desc.logs.map((l) => l.seq), [ok.seq, fail.seq]);
  const bad = await client.request('GET', `/api/threads/${sock.threadId}/logs?limit=0`);
  assert.equal(bad.status, 400);

  assert.ok(!JSON.stringify(page).includes(LOG_KEY), 'the key leaked into the log');
});

test('a provider error that echoes the API key never shows it to clients (frames, summary, messages, log)', async (t) => {
  const d = await simpleAgent({ modelOpts: { api_key_secret: 'LOG_API_KEY' } });
  const sock = await thread(t, d.agent);
  model.push(
    { error: { status: 503, message: `temporarily unavailable for key ${LOG_KEY}` } },
    { error: { status: 401, message: `Incorrect API key provided: ${LOG_KEY}` } },
  );
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_http_error']);
  assert.match(errors(frames)[1].message, /Incorrect API key provided/);
  const places = {
    frames: sock.frames.filter((f) => JSON.stringify(f).includes(LOG_KEY)),
    summary: await summary(sock.threadId),
    messages: await allMessages(sock.threadId),
    log: await logs(sock.threadId),
  };
  const leaks = Object.entries(places).filter(([, v]) => JSON.stringify(v).includes(LOG_KEY));
  assert.deepEqual(leaks, [], 'the key reached a client');
});

// ---------------------------------------------------------------------------------------------
// 5. ai_human stop rules
// ---------------------------------------------------------------------------------------------

test('ai_human: an answer without tool calls ends the turn (stop_on_response default)', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Just text.' });
  await turn(sock, 'hi', 1);
  await noMoreRequests(1);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.equal(s.turn_count, 1);
});

test('ai_human: calling the stop tool ends the turn after the tool runs, with no further model call', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_stop', name: 'get_current_time', arguments: {} }] }, { text: 'must not be asked for' });
  const frames = await turn(sock, 'what time is it', 1);
  await noMoreRequests(1);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.equal(s.turn_count, 1);
  assert.equal(s.result, stored[2].content, 'the stop tool\'s result is the answer');

  // A non-stop tool keeps the turn going.
  model.reset();
  model.push({ toolCalls: [{ name: 'lookup_customer', arguments: { customer_id: 'cus_1002' } }] }, { text: 'Grace is on pro.' });
  await turn(sock, 'and cus_1002?', 2);
  await noMoreRequests(2);
});

test('ai_human: the stop tool\'s reply may hold other calls; they all run and the model is not called again', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_stop', name: 'get_current_time', arguments: {} }, { id: 'call_other', name: 'lookup_customer', arguments: { customer_id: 'cus_1003' } }] },
    { text: 'must not be asked for' },
  );
  const frames = await turn(sock, 'both', 1);
  await noMoreRequests(1);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s === 'success').map(([id]) => id), ['call_stop', 'call_other']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.tool_call_id ?? null]), [['user', null], ['assistant', null], ['tool', 'call_stop'], ['tool', 'call_other']]);
  assert.match(stored[3].content, /Alan Turing/);
});

test('ai_human: a stop tool call that fails (bad arguments) does not end the turn; the model reads the error', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_bad', name: 'get_current_time', arguments: { timezone: 'Mars' } }] },
    { toolCalls: [{ id: 'call_good', name: 'get_current_time', arguments: {} }] },
    { text: 'must not be asked for' },
  );
  const frames = await turn(sock, 'time', 1);
  await noMoreRequests(2);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st !== 'queued' && st !== 'running'), [
    ['call_bad', 'get_current_time', 'error'],
    ['call_good', 'get_current_time', 'success'],
  ]);
  const sent = chat(model.requests[1]);
  assert.equal(sent.at(-1).tool_call_id, 'call_bad');
  assert.match(sent.at(-1).content, /timezone/);
  assert.match((await summary(sock.threadId)).result ?? '', ISO_UTC);
});

test('ai_human: with stop_on_response off the model keeps going until its stop tool', async (t) => {
  const d = await simpleAgent({
    promptOpts: { tools: ['get_current_time'] },
    side: { stop_on_response: false, stop_tool: 'get_current_time', max_steps: 5 },
  });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Thinking out loud.' }, { text: 'Now the tool.', toolCalls: [{ name: 'get_current_time', arguments: {} }] }, { text: 'never' });
  await turn(sock, 'go', 1);
  await noMoreRequests(2);
  assert.deepEqual(chat(model.requests[1]), [
    { role: 'user', content: 'go' },
    { role: 'assistant', content: 'Thinking out loud.' },
  ]);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.result ?? '', ISO_UTC);
});

test('ai_human: max_steps ends a turn whose model keeps calling tools, with a max_steps error', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] }, side: { max_steps: 2 } });
  const sock = await thread(t, d.agent);
  const call = { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  model.push(call, call, { text: 'never asked' });
  const frames = await turn(sock, 'loop', 1);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['max_steps']);
  assert.match(errors(frames)[0].message, /2 model calls/);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error ?? '', /2 model calls/);
  // Both calls ran: the history stays valid for the next turn.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'tool']);
  model.push({ text: 'Fresh turn.' });
  await turn(sock, 'next', 2);
  assertPaired(chat(model.requests[2]));
  assert.equal(model.requests.length, 3);
});

test('ai_human: max_turns stops the thread after that many turns and refuses new messages', async (t) => {
  const d = await simpleAgent({ agentOpts: { max_turns: 2 } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'One.' }, { text: 'Two.' });
  await turn(sock, 'first', 1);
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  const from = sock.frames.length;
  await send(sock, 'second');
  const st = await stopped(sock, from);
  assert.equal(st.turn, 2);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.turn_count, 2);
  assert.equal(s.result, 'Two.');
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'third' } });
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'thread_stopped');
  await noMoreRequests(2);
});

// ---------------------------------------------------------------------------------------------
// 6. dual_ai
// ---------------------------------------------------------------------------------------------

/** A dual_ai agent with prompts A ("You are Alice...") and B ("You are Bob..."). */
async function dualAgent({ max_turns = 4, sideA = {}, sideB = {}, promptA = {}, promptB = {}, agentOpts = {} } = {}) {
  const m = fresh('m');
  const pa = fresh('alice');
  const pb = fresh('bob');
  const id = fresh('dual');
  const a = promptRow(pa, m, { system: `You are Alice (${pa}).`, ...promptA });
  const b = promptRow(pb, m, { system: `You are Bob (${pb}).`, ...promptB });
  await define({
    models: [modelRow(m)],
    prompts: [a, b],
    agents: [agentRow(id, { prompt: pa, label: 'Alice', ...sideA }, { kind: 'dual_ai', max_turns, side_b: { prompt: pb, label: 'Bob', ...sideB }, ...agentOpts })],
  });
  return { agent: id, systemA: a.system, systemB: b.system, model: m };
}

test('dual_ai: sides alternate, each sees the other as a named user, and max_turns ends it with the last answer', async (t) => {
  const d = await dualAgent({ max_turns: 4 });
  const sock = await thread(t, d.agent);
  const seen = [];
  const answer = (text) => async (request) => {
    // Read while the model "thinks": the summary shows whose turn it is.
    const s = await summary(sock.threadId);
    seen.push([s.status, s.current_side, s.turn_count]);
    return { text };
  };
  model.push(answer('A1: cats are independent.'), answer('B1: dogs are loyal.'), answer('A2: cats purr.'), answer('B2: dogs win.'));
  const from = sock.frames.length;
  await send(sock, 'Topic: cats or dogs?');
  await stopped(sock, from);
  await noMoreRequests(4);

  const systems = model.requests.map(systemOf);
  assert.deepEqual(systems, [d.systemA, d.systemB, d.systemA, d.systemB]);
  assert.deepEqual(seen, [['running', 'a', 0], ['running', 'b', 1], ['running', 'a', 2], ['running', 'b', 3]]);

  const topic = { role: 'user', content: 'Topic: cats or dogs?' };
  assert.deepEqual(chat(model.requests[0]), [topic]);
  assert.deepEqual(chat(model.requests[1]), [topic, { role: 'user', content: 'A1: cats are independent.', name: 'Alice' }]);
  assert.deepEqual(chat(model.requests[2]), [
    topic,
    { role: 'assistant', content: 'A1: cats are independent.' },
    { role: 'user', content: 'B1: dogs are loyal.', name: 'Bob' },
  ]);
  assert.deepEqual(chat(model.requests[3]), [
    topic,
    { role: 'user', content: 'A1: cats are independent.', name: 'Alice' },
    { role: 'assistant', content: 'B1: dogs are loyal.' },
    { role: 'user', content: 'A2: cats purr.', name: 'Alice' },
  ]);

  // Status frames walk the sides and turns.
  const statuses = sock.frames.slice(from).filter((f) => f.type === 'status').map((f) => [f.state, f.side, f.turn]);
  const running = statuses.filter(([state]) => state === 'running');
  for (const expected of [['running', 'a', 0], ['running', 'b', 1], ['running', 'a', 2], ['running', 'b', 3]]) {
    assert.ok(running.some((s) => JSON.stringify(s) === JSON.stringify(expected)), `status ${expected} in ${JSON.stringify(statuses)}`);
  }
  assert.deepEqual(statuses.at(-1).slice(0, 1), ['stopped']);
  assert.equal(statuses.at(-1)[2], 4);

  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.turn_count, 4);
  assert.equal(s.result, 'B2: dogs win.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.side ?? null]), [['user', null], ['assistant', 'a'], ['assistant', 'b'], ['assistant', 'a'], ['assistant', 'b']]);
});

test('dual_ai: a side\'s tool calls and results are its own; the other side sees only its words', async (t) => {
  const d = await dualAgent({ max_turns: 3, promptA: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_a_time', name: 'get_current_time', arguments: {} }] },
    { text: 'It is late, says Alice.' },
    { text: 'Then sleep, says Bob.' },
    { text: 'Good night.' },
  );
  const from = sock.frames.length;
  await send(sock, 'Chat.');
  await stopped(sock, from);
  await noMoreRequests(4);
  assert.deepEqual(model.requests.map(systemOf), [d.systemA, d.systemA, d.systemB, d.systemA]);
  assert.deepEqual(chat(model.requests[2]), [
    { role: 'user', content: 'Chat.' },
    { role: 'user', content: 'It is late, says Alice.', name: 'Alice' },
  ]);
  assert.equal(model.requests[2].body.tools, undefined, 'Bob has no tools');
  const own = chat(model.requests[3]);
  assert.deepEqual(own.map((m) => [m.role, m.tool_call_id ?? m.tool_calls?.[0]?.id ?? null]), [
    ['user', null],
    ['assistant', 'call_a_time'],
    ['tool', 'call_a_time'],
    ['assistant', null],
    ['user', null],
  ]);
  assert.equal(own[4].name, 'Bob');
  assert.equal((await summary(sock.threadId)).result, 'Good night.');
});

test('dual_ai on an Anthropic model: the other side\'s words join the user turn, and turns alternate', async (t) => {
  const m = fresh('claude');
  const pa = fresh('alice');
  const pb = fresh('bob');
  const id = fresh('dual');
  await define({
    models: [modelRow(m, { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY' })],
    prompts: [promptRow(pa, m, { system: 'Alice here.' }), promptRow(pb, m, { system: 'Bob here.' })],
    agents: [agentRow(id, { prompt: pa, label: 'Alice' }, { kind: 'dual_ai', max_turns: 3, side_b: { prompt: pb, label: 'Bob' } })],
  });
  const sock = await thread(t, id);
  model.push({ text: 'A1' }, { text: 'B1' }, { text: 'A2' });
  const from = sock.frames.length;
  await send(sock, 'Topic.');
  await stopped(sock, from);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.body.system), ['Alice here.', 'Bob here.', 'Alice here.']);
  const text = (v) => ({ type: 'text', text: v });
  assert.deepEqual(model.requests[1].body.messages, [{ role: 'user', content: [text('Topic.'), text('A1')] }]);
  assert.deepEqual(model.requests[2].body.messages, [
    { role: 'user', content: [text('Topic.')] },
    { role: 'assistant', content: [text('A1')] },
    { role: 'user', content: [text('B1')] },
  ]);
});

test('dual_ai: a side\'s stop_tool ends the conversation with the stop_tool_response_property as the result', async (t) => {
  const d = await dualAgent({
    max_turns: 10,
    sideB: { stop_tool: 'send_notification', stop_tool_response_property: 'message' },
    promptB: { tools: ['send_notification'] },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'I think we agree.' },
    { toolCalls: [{ id: 'call_verdict', name: 'send_notification', arguments: { channel: 'email', to: 'judge@example.com', message: 'Verdict: we agree.' } }] },
    { text: 'must not be asked for' },
  );
  const from = sock.frames.length;
  await send(sock, 'Debate, then send the verdict.');
  await stopped(sock, from);
  await noMoreRequests(2);
  assert.deepEqual(model.requests.map(systemOf), [d.systemA, d.systemB]);
  assert.deepEqual(model.requests[1].body.tools.map((x) => x.function.name), ['send_notification']);
  const frames = sock.frames.slice(from);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'stop_tool');
  assert.equal(s.result, 'Verdict: we agree.');
});

test('dual_ai: the stop tool\'s answer property is read from its result before its arguments', async (t) => {
  const d = await dualAgent({
    max_turns: 10,
    sideA: { stop_tool: 'update_context', stop_tool_response_property: 'verdict' },
    promptA: { tools: ['update_context'] },
  });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ name: 'update_context', arguments: { set: { verdict: 'tabs win' } } }] }, { text: 'must not be asked for' });
  const from = sock.frames.length;
  await send(sock, 'Decide.');
  await stopped(sock, from);
  await noMoreRequests(1);
  const s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'stop_tool');
  assert.equal(s.result, 'tabs win');
});

test('dual_ai: POST /stop mid-reply stops the conversation and no further model request is made', async (t) => {
  const d = await dualAgent({ max_turns: 10 });
  const sock = await thread(t, d.agent);
  const long = 'B speaks slowly and at great length about everything. '.repeat(4);
  model.push({ text: 'A opens.' }, { text: long, chunkSize: 2, chunkDelayMs: 40 }, { text: 'must not be asked for' }, { text: 'nor this' });
  const from = sock.frames.length;
  await send(sock, 'Begin.');
  await model.waitForRequests(2);
  // Wait until B is visibly streaming, then stop.
  const pendingB = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.side === 'b' && f.message.status === 'pending', { from });
  await sock.waitFor((f) => f.type === 'message_chunk' && f.message_id === pendingB.message.id, { from });
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await stopped(sock, from, 5000);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'user');
  await noMoreRequests(2, 800);
  // What B said before the stop is kept, cut short.
  await sleep(200);
  const stored = await allMessages(sock.threadId);
  const b = stored.find((m) => m.id === pendingB.message.id);
  assert.ok(b, 'B\'s message is stored');
  assert.notEqual(b.status, 'pending');
  assert.ok(b.content.length < long.length, `B was cut short (${b.content.length} of ${long.length} characters)`);
  const refused = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'more' } });
  assert.equal(refused.status, 409);
});

test('force_turn side b: refused on an ai_human agent, and on dual_ai it makes side b speak', async (t) => {
  const human = await simpleAgent();
  const hs = await thread(t, human.agent);
  const err = await rpcErr(hs, 'force_turn', { side: 'b' }, 'invalid_request');
  assert.match(err.message, /no side b/);
  await noMoreRequests(0, 200);

  const d = await dualAgent({ max_turns: 1 });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Bob starts, unasked.' });
  const from = sock.frames.length;
  assert.deepEqual(await rpcOk(sock, 'force_turn', { side: 'b' }), { side: 'b' });
  await stopped(sock, from);
  await noMoreRequests(1);
  assert.equal(systemOf(model.requests[0]), d.systemB);
  const s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.result, 'Bob starts, unasked.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.side, m.content]), [['assistant', 'b', 'Bob starts, unasked.']]);
});

// ---------------------------------------------------------------------------------------------
// 7. History budget
// ---------------------------------------------------------------------------------------------

test('history budget: with a small max_history_tokens the oldest messages are dropped, never splitting a call from its result', async (t) => {
  // Estimated tokens (characters / 4 + 4 per message): a question ~61, a call ~9, its result
  // (a timestamp) ~10, an answer ~49. A budget of 140 makes some cuts land between a call and
  // its result: the result then pulls its call in, so the request starts at the call.
  const d = await simpleAgent({ modelOpts: { max_history_tokens: 140 }, promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  const long = (n) => `Message ${n}: ` + 'lorem ipsum dolor sit amet '.repeat(8);
  const answer = (n) => `Answer ${n}: ` + 'consectetur adipiscing elit '.repeat(6);
  // Each turn: a long question, a tool call, its result, a long answer.
  for (let i = 1; i <= 5; i++) {
    model.push({ toolCalls: [{ id: `call_t${i}`, name: 'get_current_time', arguments: {} }] }, { text: answer(i) });
    await turn(sock, long(i), i);
  }
  await noMoreRequests(10);
  const stored = await allMessages(sock.threadId);
  assert.equal(stored.length, 20, 'the stored thread keeps everything');
  let orphanDropped = 0;
  for (const [i, r] of model.requests.entries()) {
    const sent = chat(r);
    assertPaired(sent, `request ${i}:`);
    // What was sent is the newest part of the stored history, in order, minus orphaned results.
    const key = (m) => JSON.stringify([m.role, m.content || '', m.tool_call_id ?? null, (m.tool_calls ?? []).map((c) => c.id)]);
    const at = stored.findIndex((m) => key(m) === key(sent[0]));
    assert.ok(at >= 0, `request ${i}: its first message is stored`);
    const end = 4 * Math.floor(i / 2) + (i % 2 === 0 ? 1 : 3); // what was stored when request i was made
    assert.deepEqual(sent.map(key), stored.slice(at, end).map(key), `request ${i} sends a contiguous, newest part of the history`);
    const before = stored[at - 1];
    if (before?.role === 'tool') orphanDropped++;
    const tokens = sent.reduce((n, m) => n + Math.ceil(((m.content ?? '').length + JSON.stringify(m.tool_calls ?? []).length) / 4) + 4, 0);
    assert.ok(tokens < 140 + 80, `request ${i} stays near the budget: ~${tokens} tokens`);
  }
  // Later requests start well after the beginning of the conversation.
  const last = chat(model.requests.at(-1));
  assert.ok(!last.some((m) => m.content === long(1)), 'the first message was dropped');
  assert.ok(last.length <= 8, `${last.length} of 19 messages sent`);
  assert.equal(last.at(-1).role, 'tool');
  assert.equal(last.at(-1).tool_call_id, 'call_t5');
  assert.ok(last.some((m) => m.content === long(5)));
  assert.equal(orphanDropped, 0, 'a result is never sent without its call, nor left out while newer messages are sent');
  assert.ok(
    model.requests.some((r) => chat(r)[0]?.tool_calls?.length),
    'some request starts at a call that its result pulled in past the budget',
  );
});

test('history budget smaller than one exchange: the latest call is still sent with its result', async (t) => {
  const d = await simpleAgent({ modelOpts: { max_history_tokens: 15 }, promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_tiny', name: 'get_current_time', arguments: {} }] }, { text: 'Done.' });
  await turn(sock, 'What time is it? ' + 'Please answer precisely. '.repeat(4), 1);
  await noMoreRequests(2);
  assert.ok(chat(model.requests[0]).length >= 1, 'the first request holds the question');
  const sent = chat(model.requests[1]);
  assertPaired(sent);
  assert.ok(sent.length > 0, `the second request holds no message at all: ${JSON.stringify(model.requests[1].body.messages)}`);
  assert.equal(sent.at(-1).tool_call_id, 'call_tiny');
});

// ---------------------------------------------------------------------------------------------
// 8. Sub-prompts
// ---------------------------------------------------------------------------------------------

async function subPromptAgent({ include_chat }) {
  const m = fresh('m');
  const ms = fresh('msub');
  const s = fresh('summariser');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m), modelRow(ms, { model: 'sub-model-id' })],
    prompts: [
      promptRow(s, ms, { system: 'You are the summariser.', description: 'Summarises any text it is given.', include_chat }),
      promptRow(p, m, { system: 'You are the main assistant.', tools: ['get_current_time', s] }),
    ],
    agents: [agentRow(a, { prompt: p })],
  });
  return { agent: a, sub: s, main: m, subModel: ms };
}

test('sub-prompt: the sub-prompt runs with its own system text and the chat, and its answer is the tool result', async (t) => {
  const d = await subPromptAgent({ include_chat: 1 });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Hello, how can I help?' });
  await turn(sock, 'Hi there.', 1);
  model.reset();
  model.push(
    { toolCalls: [{ id: 'call_sum', name: d.sub, arguments: { input: 'Summarise: the sky is blue because of Rayleigh scattering.' } }] },
    { text: 'Summary: scattering makes the sky blue.' },
    { text: 'Here is the summary: scattering makes the sky blue.' },
  );
  const frames = await turn(sock, 'Please summarise my notes.', 2);
  await noMoreRequests(3);
  const [main1, sub, main2] = model.requests;

  // The sub-prompt is offered as a tool with its description and an `input` parameter.
  const offered = main1.body.tools.find((x) => x.function.name === d.sub);
  assert.ok(offered, JSON.stringify(main1.body.tools.map((x) => x.function.name)));
  assert.equal(offered.function.description, 'Summarises any text it is given.');
  assert.deepEqual(offered.function.parameters.required, ['input']);

  // The sub-prompt's request: its model, its system text, the chat before the call, then the input.
  assert.equal(sub.body.model, 'sub-model-id');
  assert.equal(systemOf(sub), 'You are the summariser.');
  assert.deepEqual(chat(sub), [
    { role: 'user', content: 'Hi there.' },
    { role: 'assistant', content: 'Hello, how can I help?' },
    { role: 'user', content: 'Please summarise my notes.' },
    { role: 'user', content: 'Summarise: the sky is blue because of Rayleigh scattering.' },
  ]);
  assert.equal(sub.body.tools, undefined, 'the summariser has no tools');

  // Its answer is the result of the call in the main prompt's next request.
  assert.equal(systemOf(main2), 'You are the main assistant.');
  const result = chat(main2).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_sum');
  assert.equal(result.content, 'Summary: scattering makes the sky blue.');
  assert.deepEqual(toolFrames(frames), [
    ['call_sum', d.sub, 'queued'],
    ['call_sum', d.sub, 'running'],
    ['call_sum', d.sub, 'success'],
  ]);

  // Depth-0 clients never see the sub-prompt's own messages.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
  assert.ok(stored.every((m) => (m.depth ?? 0) === 0));
  assert.ok(!stored.some((m) => m.role === 'user' && m.content.startsWith('Summarise:')));
  assert.ok(!frames.some((f) => f.type === 'message' && f.message.role === 'user' && f.message.content.startsWith('Summarise:')), 'the sub-prompt\'s input is not broadcast');
  // They are kept at depth 1, linked to the call, and readable on request.
  const deep = await allMessages(sock.threadId, '&depth=1');
  assert.deepEqual(deep.map((m) => [m.role, m.content, m.parent_tool_call_id]), [
    ['user', 'Summarise: the sky is blue because of Rayleigh scattering.', 'call_sum'],
    ['assistant', 'Summary: scattering makes the sky blue.', 'call_sum'],
  ]);
  // The request log has the sub-prompt's call at depth 1, under its own model.
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.depth, l.model, l.status]), [
    [0, d.main, 'ok'],
    [0, d.main, 'ok'],
    [1, d.subModel, 'ok'],
    [0, d.main, 'ok'],
  ]);
  const topIds = new Set(stored.map((m) => m.id));
  assert.ok(frames.filter((f) => f.type === 'message_chunk').every((c) => topIds.has(c.message_id)), 'only depth-0 messages stream to clients');
  assert.ok(frames.filter((f) => f.type === 'message').every((f) => topIds.has(f.message.id)), 'only depth-0 messages are broadcast');
});

test('sub-prompt: two calls in one reply run concurrently and each result answers its own call', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  const echo = (request) => ({ text: `Answer to ${chat(request).at(-1).content}`, chunkSize: 2, chunkDelayMs: 80 }); // ~1.5 s each
  model.push(
    { toolCalls: [{ id: 'call_x', name: d.sub, arguments: { input: 'question X' } }, { id: 'call_y', name: d.sub, arguments: { input: 'question Y' } }] },
    echo,
    echo,
    { text: 'Both answered.' },
  );
  const frames = await turn(sock, 'two questions', 1);
  await noMoreRequests(4);
  const subInputs = model.requests.slice(1, 3).map((r) => chat(r));
  assert.deepEqual(subInputs.map((m) => m.map((x) => x.content)).sort(), [['question X'], ['question Y']]);
  // Started together: both sub-prompt requests arrived before either answer finished.
  assert.ok(model.requests[2].at - model.requests[1].at < 500, `the two sub-prompts ran concurrently (${model.requests[2].at - model.requests[1].at} ms apart)`);
  const results = chat(model.requests[3]).filter((m) => m.role === 'tool');
  assert.deepEqual(results.map((m) => [m.tool_call_id, m.content]), [
    ['call_x', 'Answer to question X'],
    ['call_y', 'Answer to question Y'],
  ]);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st === 'success').map(([id]) => id), ['call_x', 'call_y']);
  const deep = await allMessages(sock.threadId, '&depth=1');
  for (const id of ['call_x', 'call_y']) {
    const mine = deep.filter((m) => m.parent_tool_call_id === id).map((m) => m.content);
    const q = id === 'call_x' ? 'question X' : 'question Y';
    assert.deepEqual(mine, [q, `Answer to ${q}`]);
  }
});

test('sub-prompt with include_chat off sees only its input', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_alone', name: d.sub, arguments: { input: 'Only this.' } }] },
    { text: 'Only that.' },
    { text: 'Done.' },
  );
  await turn(sock, 'Secret earlier chat.', 1);
  await noMoreRequests(3);
  const sub = model.requests[1];
  assert.equal(systemOf(sub), 'You are the summariser.');
  assert.deepEqual(chat(sub), [{ role: 'user', content: 'Only this.' }]);
  assert.ok(!sub.rawBody.includes('Secret earlier chat.'));
  assert.equal(chat(model.requests[2]).at(-1).content, 'Only that.');
});

test('sub-prompt: it may call its own registered tools; calls and results stay at depth 1', async (t) => {
  const m = fresh('m');
  const s = fresh('clock');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(s, m, { system: 'You read clocks.', tools: ['get_current_time'], include_chat: 0 }),
      promptRow(p, m, { system: 'You are the main assistant.', tools: [s] }),
    ],
    agents: [agentRow(a, { prompt: p })],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_clock', name: s, arguments: { input: 'What time is it?' } }] },
    { toolCalls: [{ id: 'call_inner', name: 'get_current_time', arguments: {} }] },
    (request) => ({ text: `The clock says ${chat(request).at(-1).content}.` }),
    { text: 'Done.' },
  );
  const frames = await turn(sock, 'time please', 1);
  await noMoreRequests(4);
  const [, sub1, sub2, main2] = model.requests;
  assert.equal(systemOf(sub1), 'You read clocks.');
  assert.deepEqual(sub1.body.tools.map((x) => x.function.name), ['get_current_time']);
  // The sub-prompt's call got an id of ours (its provider's may repeat or collide), paired
  // with its result.
  const inner = chat(sub2)[1].tool_calls?.[0]?.id;
  assert.match(inner, /^call_[0-9a-f]{32}$/);
  assert.deepEqual(chat(sub2).map((x) => [x.role, x.tool_call_id ?? x.tool_calls?.[0]?.id ?? null]), [
    ['user', null],
    ['assistant', inner],
    ['tool', inner],
  ]);
  const time = chat(sub2)[2].content;
  assert.match(time, ISO_UTC);
  assert.equal(chat(main2).at(-1).content, `The clock says ${time}.`);
  assert.ok(!frames.some((f) => f.type === 'tool' && (f.tool_call_id === 'call_inner' || f.tool_call_id === inner)), 'the inner call is not shown at depth 0');
  const top = await allMessages(sock.threadId);
  assert.deepEqual(top.map((x) => x.role), ['user', 'assistant', 'tool', 'assistant']);
  const deep = await allMessages(sock.threadId, '&depth=1');
  assert.deepEqual(deep.map((x) => [x.role, x.parent_tool_call_id]), [
    ['user', 'call_clock'], ['assistant', 'call_clock'], ['tool', 'call_clock'], ['assistant', 'call_clock'],
  ]);
});

test('sub-prompt: a failing sub-prompt becomes an error result the calling model reads', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_broken', name: d.sub, arguments: { input: 'Try this.' } }] },
    { error: { status: 400, message: 'context too long' } },
    { text: 'The summariser is unavailable.' },
  );
  const frames = await turn(sock, 'summarise', 1);
  await noMoreRequests(3);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s !== 'queued'), [['call_broken', d.sub, 'running'], ['call_broken', d.sub, 'error']]);
  const result = chat(model.requests[2]).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_broken');
  assert.ok(result.content.includes(d.sub) && /context too long/.test(result.content), result.content);
  assert.equal(finalMessages(frames).filter((m) => m.role === 'assistant').at(-1).content, 'The summariser is unavailable.');
  assert.deepEqual(errors(frames), [], 'the sub-prompt\'s failure is the model\'s to handle, not a turn error');
});

test('sub-prompt: a bad `input` argument is an error result naming the expected shape, and no sub-prompt request is made', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_bad', name: d.sub, arguments: { text: 'wrong field' } }] }, { text: 'Sorry.' });
  await turn(sock, 'go', 1);
  await noMoreRequests(2);
  const result = chat(model.requests[1]).at(-1);
  assert.equal(result.tool_call_id, 'call_bad');
  assert.match(result.content, /input/);
  assert.equal(systemOf(model.requests[1]), 'You are the main assistant.');
});

test('budget: a thread that spent its agent\'s max_cost_usd stops before the next model call with stopped_by "budget"', async (t) => {
  // $2 per million input tokens: 500,000 tokens cost $1.00, the whole budget.
  const d = await simpleAgent({
    modelOpts: { input_price_per_mtok: 2, output_price_per_mtok: 0 },
    agentOpts: { max_cost_usd: 1 },
  });
  const sock = await thread(t, d.agent);
  model.push({ text: 'That was expensive.', usage: { prompt_tokens: 500000, completion_tokens: 5 } });
  await turn(sock, 'Spend.', 1);
  let s = await summary(sock.threadId);
  assert.equal(s.tokens_used, 500005);
  assert.ok(Math.abs(s.cost_usd - 1) < 1e-9, String(s.cost_usd));
  assert.equal(s.status, 'idle');

  const from = sock.frames.length;
  await send(sock, 'Once more?');
  await stopped(sock, from);
  await noMoreRequests(1);
  const budget = sock.frames.slice(from).find((f) => f.type === 'error' && f.code === 'budget');
  assert.ok(budget, 'an error frame names the budget');
  assert.match(budget.message, /spent \$1\.0000, its agent's budget is \$1\.0000 \(max_cost_usd\)/);
  s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'budget');
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'and now?' } });
  assert.equal(r.status, 409);
});

// ---------------------------------------------------------------------------------------------
// 9-10. Agents as tools: dual_ai child threads and ai_human handoff
// ---------------------------------------------------------------------------------------------

test('agent tool (dual_ai): the child conversation runs to its end and its final answer is the tool result', async (t) => {
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(ca, m, { system: 'You argue for tabs.' }),
      promptRow(cb, m, { system: 'You argue for spaces.' }),
      promptRow(p, m, { system: 'You are the moderator.', tools: [c] }),
    ],
    agents: [
      agentRow(c, { prompt: ca, label: 'Tabs' }, { kind: 'dual_ai', max_turns: 2, expose_as_tool: 1, tool_description: 'Runs a debate on a topic.', side_b: { prompt: cb, label: 'Spaces' } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_debate', name: c, arguments: { input: 'Debate: tabs or spaces?' } }] },
    { text: 'Tabs are one keystroke.' },
    { text: 'Spaces look the same everywhere.' },
    { text: 'The debate ended: spaces look the same everywhere.' },
  );
  const frames = await turn(sock, 'Settle tabs vs spaces.', 1);
  await noMoreRequests(4);
  const [main1, childA, childB, main2] = model.requests;
  const offered = main1.body.tools.map((x) => x.function);
  assert.deepEqual(offered.map((f) => f.name), [c]);
  assert.equal(offered[0].description, 'Runs a debate on a topic.');
  assert.deepEqual(offered[0].parameters.required, ['input']);

  assert.equal(systemOf(childA), 'You argue for tabs.');
  assert.deepEqual(chat(childA), [{ role: 'user', content: 'Debate: tabs or spaces?' }]);
  assert.equal(systemOf(childB), 'You argue for spaces.');
  assert.deepEqual(chat(childB), [
    { role: 'user', content: 'Debate: tabs or spaces?' },
    { role: 'user', content: 'Tabs are one keystroke.', name: 'Tabs' },
  ]);

  assert.equal(systemOf(main2), 'You are the moderator.');
  const result = chat(main2).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_debate');
  assert.ok(result.content.startsWith('Spaces look the same everywhere.'), result.content);
  assert.match(result.content, /max_turns/);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  // The parent's own messages do not include the child's conversation.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  // The child is a thread of its own, linked to the parent, that ran to max_turns.
  const childId = result.content.match(/child thread ([0-9a-f-]{36})/)?.[1];
  assert.ok(childId, `the result names the child thread: ${result.content}`);
  const child = await summary(childId);
  assert.equal(child.agent_id, c);
  assert.equal(child.parent_thread_id, sock.threadId);
  assert.equal(child.status, 'stopped');
  assert.equal(child.stopped_by, 'max_turns');
  assert.equal(child.turn_count, 2);
  assert.equal(child.result, 'Spaces look the same everywhere.');
  assert.deepEqual((await allMessages(childId)).map((m) => [m.role, m.side ?? null, m.content]), [
    ['user', null, 'Debate: tabs or spaces?'],
    ['assistant', 'a', 'Tabs are one keystroke.'],
    ['assistant', 'b', 'Spaces look the same everywhere.'],
  ]);
});

test('agent tool (dual_ai): a child conversation that fails is an error result for the parent', async (t) => {
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [promptRow(ca, m), promptRow(cb, m), promptRow(p, m, { system: 'You are the moderator.', tools: [c] })],
    agents: [
      agentRow(c, { prompt: ca }, { kind: 'dual_ai', max_turns: 2, expose_as_tool: 1, side_b: { prompt: cb } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_child', name: c, arguments: { input: 'Argue.' } }] },
    { error: { status: 400, message: 'child request rejected' } },
    { text: 'The debate could not happen.' },
  );
  const frames = await turn(sock, 'go', 1);
  await noMoreRequests(3);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st !== 'queued'), [['call_child', c, 'running'], ['call_child', c, 'error']]);
  const result = chat(model.requests[2]).at(-1);
  assert.equal(result.tool_call_id, 'call_child');
  assert.match(result.content, /child request rejected/);
});

test('agent tool (dual_ai): an agent that calls itself ends at the nesting limit (4 child threads deep) with an error result, and every level answers', async (t) => {
  const m = fresh('m');
  const loopPrompt = fresh('loop-p');
  const p = fresh('main');
  const c = fresh('looper');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(loopPrompt, m, { system: 'You delegate to yourself.', tools: [c] }),
      promptRow(p, m, { system: 'You are the moderator.', tools: [c] }),
    ],
    agents: [
      agentRow(c, { prompt: loopPrompt }, { kind: 'dual_ai', max_turns: 1, expose_as_tool: 1, side_b: { prompt: loopPrompt } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  const again = (n) => ({ toolCalls: [{ id: `call_${n}`, name: c, arguments: { input: `level ${n}` } }] });
  model.push(
    again(0), again(1), again(2), again(3), again(4), // the main thread, then children 1-4 each call it again
    { text: 'answer 4' }, { text: 'answer 3' }, { text: 'answer 2' }, { text: 'answer 1' },
    { text: 'All levels answered.' },
  );
  const frames = await turn(sock, 'Recurse.', 1);
  await noMoreRequests(10);
  // The fourth child's call was refused: a fifth level is past the limit.
  const refused = chat(model.requests[5]).at(-1);
  assert.equal(refused.tool_call_id, 'call_4');
  assert.match(refused.content, /more than 4 child threads deep/);
  // Every other level got its child's answer.
  for (const [i, answer] of [[6, 'answer 4'], [7, 'answer 3'], [8, 'answer 2'], [9, 'answer 1']]) {
    const result = chat(model.requests[i]).at(-1);
    assert.equal(result.role, 'tool');
    assert.ok(result.content.startsWith(answer), `${i}: ${result.content}`);
  }
  assert.equal(finalMessages(frames).filter((x) => x.role === 'assistant').at(-1).content, 'All levels answered.');
});

test('agent tool (dual_ai): stopping the parent does not stop the child; its result is still stored, and the parent stays stopped', async (t) => {
  // Documented in docs/agents.md ("Stopping the calling thread does not stop the child").
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [promptRow(ca, m, { system: 'Child A.' }), promptRow(cb, m, { system: 'Child B.' }), promptRow(p, m, { system: 'Parent.', tools: [c] })],
    agents: [
      agentRow(c, { prompt: ca }, { kind: 'dual_ai', max_turns: 4, expose_as_tool: 1, side_b: { prompt: cb } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  const slow = (text) => ({ text, chunkSize: 4, chunkDelayMs: 30 });
  model.push(
    { toolCalls: [{ id: 'call_long', name: c, arguments: { input: 'Debate.' } }] },
    slow('Child A, turn one.'), slow('Child B, turn two.'), slow('Child A, turn three.'), slow('Child B, last word.'),
    { text: 'the stopped parent must not be asked again' },
  );
  const from = sock.frames.length;
  await send(sock, 'go');
  await model.waitForRequests(3, 10000);
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200);
  await stopped(sock, from);
  // The child goes on to its end; then the call's result is stored in the stopped parent.
  const result = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'tool' && f.message.tool_call_id === 'call_long', { from, timeout: 15000 });
  assert.ok(result.message.content.startsWith('Child B, last word.'), result.message.content);
  await noMoreRequests(5, 800);
  assert.deepEqual(model.requests.map(systemOf), ['Parent.', 'Child A.', 'Child B.', 'Child A.', 'Child B.']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'user');
  const childId = result.message.content.match(/child thread ([0-9a-f-]{36})/)?.[1];
  const child = await summary(childId);
  assert.equal(child.stopped_by, 'max_turns');
  assert.equal(child.parent_thread_id, sock.threadId);
});

test('agent tool (ai_human): calling it hands the thread over; the next request uses the new agent\'s prompt', async (t) => {
  const m = fresh('m');
  const hp = fresh('billing');
  const h = fresh('billing-agent');
  const p = fresh('front');
  const a = fresh('front-agent');
  const hidden = fresh('not-exposed');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(hp, m, { system: 'You are the billing specialist.', tools: ['lookup_customer'] }),
      promptRow(p, m, { system: 'You are the front desk.', tools: ['get_current_time', h, hidden] }),
    ],
    agents: [
      agentRow(hidden, { prompt: hp }),
      agentRow(h, { prompt: hp }, { expose_as_tool: 1, description: 'Billing questions.' }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_handoff', name: h, arguments: { input: 'Customer wants a refund.' } }] },
    { text: 'Billing here: your refund is on its way.' },
  );
  await turn(sock, 'I want a refund.', 1);
  await noMoreRequests(2);
  const [front, billing] = model.requests;
  assert.equal(systemOf(front), 'You are the front desk.');
  assert.equal(front.body.tools.find((x) => x.function.name === h)?.function.description, 'Billing questions.');
  assert.deepEqual(front.body.tools.map((x) => x.function.name).sort(), ['get_current_time', h].sort(), 'an agent not exposed as a tool is not offered');
  assert.equal(systemOf(billing), 'You are the billing specialist.');
  assert.deepEqual(billing.body.tools.map((x) => x.function.name), ['lookup_customer']);
  const sent = chat(billing);
  assert.deepEqual(sent.map((m) => m.role), ['user', 'assistant', 'tool']);
  assert.match(sent[2].content, /Customer wants a refund\./);
  const s = await summary(sock.threadId);
  assert.equal(s.agent_id, h);

  // It stays with the new agent.
  model.push({ text: 'Still billing.' });
  await turn(sock, 'Thanks!', 2);
  assert.equal(systemOf(model.requests[2]), 'You are the billing specialist.');
});

// ---------------------------------------------------------------------------------------------
// 11-12. Configuration from D1
// ---------------------------------------------------------------------------------------------

test('a prompt changed in D1 by hand reaches the thread within the cache bound (5 s); a change through the API at once', async (t) => {
  const d = await simpleAgent({ promptOpts: { system: 'Version one.' } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'v1' });
  await turn(sock, 'one', 1);
  // By hand (as `wrangler d1 execute` would): the cached configuration is still used...
  await define({ prompts: [promptRow(d.prompt, d.model, { system: 'Version two.', tools: ['get_current_time'] })] });
  model.push({ text: 'v1 again' });
  await turn(sock, 'two', 2);
  // ...until the cache's 5 s are over and the version stamp says it moved: the request that
  // went out with the old copy while the version was checked is cancelled unread, and sent again.
  await new Promise((r) => setTimeout(r, 5_100));
  model.push({ text: 'never read' }, { text: 'v2' });
  const third = await turn(sock, 'three', 3);
  assert.ok(JSON.stringify(third).includes('"v2"') && !JSON.stringify(third).includes('never read'));
  // Through the API: this isolate forgets its cache, so the next turn sees it.
  const put = await worker.client.request('PUT', `/api/prompts/${d.prompt}`, {
    body: { model: d.model, system: 'Version three.' },
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  model.push({ text: 'v3' });
  await turn(sock, 'four', 4);
  await noMoreRequests(5);
  assert.deepEqual(model.requests.map(systemOf), ['Version one.', 'Version one.', 'Version one.', 'Version two.', 'Version three.']);
  assert.equal(model.requests[2].body.tools, undefined);
  assert.deepEqual(model.requests[3].body.tools.map((x) => x.function.name), ['get_current_time']);
});

test('a missing prompt fails the turn with model_config and the thread works once it is defined', async (t) => {
  // D1 enforces the prompts → models foreign key, so a prompt cannot name a missing model; an
  // agent's side names its prompt inside JSON, which D1 cannot check.
  const m = fresh('m');
  const p = fresh('later');
  const a = fresh('a');
  await define({ models: [modelRow(m)], agents: [agentRow(a, { prompt: p })] });
  const sock = await thread(t, a);
  const frames = await turn(sock, 'hello?', 0);
  await noMoreRequests(0, 200);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_config']);
  assert.ok(errs[0].message.includes(p), errs[0].message);
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.ok(s.last_error.includes(p));

  await define({ prompts: [promptRow(p, m, { system: 'Now I exist.' })] });
  model.push({ text: 'Hello!' });
  await turn(sock, 'hello again', 1);
  assert.equal(systemOf(model.requests[0]), 'Now I exist.');
  assert.deepEqual(chat(model.requests[0]), [{ role: 'user', content: 'hello?' }, { role: 'user', content: 'hello again' }]);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
});

test('a workers_ai model without an AI binding fails the turn with a model_config error naming the binding', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'workers_ai', model: '@cf/meta/llama-3.1-8b-instruct', base_url: '', api_key_secret: null } });
  const sock = await thread(t, d.agent);
  const frames = await turn(sock, 'hello', 0);
  await noMoreRequests(0, 200);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_config']);
  assert.match(errors(frames)[0].message, /AI binding/);
});

test('a model row with an unknown provider fails the turn with a clear model_config error', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'gemini' } });
  const sock = await thread(t, d.agent);
  const frames = await turn(sock, 'hello', 0);
  await noMoreRequests(0, 200);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_config']);
  assert.match(errs[0].message, /gemini/);
  assert.equal((await summary(sock.threadId)).status, 'idle');

  await define({ models: [modelRow(d.model, { provider: 'openai' })] });
  model.push({ text: 'Fixed.' });
  const next = await turn(sock, 'again', 1);
  assert.equal(finalMessages(next).find((m) => m.role === 'assistant').content, 'Fixed.');
});
