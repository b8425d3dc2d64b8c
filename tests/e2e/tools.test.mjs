// End-to-end tests of tools and the thread utilities: the real built Worker in Miniflare
// (workerd), real WebSockets, the scripted model server standing in for OpenAI, local D1 with
// the example customers, and a local stand-in for OpenWeatherMap.
// Proves: the example agent's tools run with validated arguments and typed results (from a
// model call and from the `queue_tool` rpc), their failures become error results the model can
// read, queued calls run in order before the next model call, `inject_message`,
// `get_messages`, `force_turn` and thread events behave as documented, and the weather key
// never reaches a client.
// Does not prove: behaviour against the real OpenWeatherMap or a real model provider.

import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startWorker, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { startWeatherServer, CELSIUS, FAHRENHEIT } from '../support/weather-server.mjs';

const WEATHER_KEY = 'owm-test-key-7d3f0c2a9b1e';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$/;
const AGENT_TOOLS = ['get_current_time', 'lookup_customer', 'get_weather', 'process_order', 'issue_refund', 'update_context', 'conversation_stats'];
// The support prompt also offers a prompt (run as a sub-prompt) and an agent (a child thread).
const DELEGATES = ['summarize', 'review'];
// The other durable examples (docs/durable-tools.md) are registered too; no prompt offers them
// (support offers issue_refund, so a model's refund asks for approval).
const DURABLE_TOOLS = ['await_reply_or_timeout', 'compare_weather', 'remind_later', 'retry_with_cooldown', 'schedule_reminder', 'wait_for_callback', 'weather_brief'];
// `daily_summary` makes a schedule (docs/schedules.md); no prompt offers it either.
const ALL_TOOLS = [...AGENT_TOOLS, 'send_notification', 'approve_draft', 'daily_summary', ...DURABLE_TOOLS];
const ADA = { id: 'cus_1001', name: 'Ada Lovelace', email: 'ada@example.com', plan: 'enterprise' };
const GRACE = { id: 'cus_1002', name: 'Grace Hopper', email: 'grace@example.com', plan: 'pro' };

let model;
let weather;
let worker;
let client;

before(async () => {
  model = await startModelServer();
  weather = await startWeatherServer();
  worker = await startWorker({
    modelUrl: `${model.url}/v1`,
    bindings: { WEATHER_API_URL: weather.url, WEATHER_API_KEY: WEATHER_KEY },
  });
  client = worker.client;
});

after(async () => {
  await worker?.dispose();
  await model?.close();
  await weather?.close();
});

// Every test scripts its own answers and reads only its own requests.
beforeEach(() => {
  model.reset();
  weather.reset();
});

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function byNameOf(tools) {
  return Object.fromEntries(tools.map((x) => [x.name, x]));
}

/** Creates a thread and opens a socket on it that is closed when the test ends. */
async function thread(t) {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  sock.threadId = id;
  return sock;
}

/** Waits for an `idle` status frame from frame index `from` on (optionally with `turn` turns). */
function idle(sock, from, turn, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && (turn === undefined || f.turn === turn), { from, timeout });
}

/** Sends an rpc that must succeed; returns its result. */
async function rpcOk(sock, method, params) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, true, `${method} ${JSON.stringify(params)} failed: ${JSON.stringify(r)}`);
  assert.equal(r.error, undefined);
  return r.result;
}

/** Sends an rpc that must fail with `code`; returns the error body. */
async function rpcErr(sock, method, params, code) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, false, `${method} ${JSON.stringify(params)} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.result, undefined);
  assert.equal(r.error?.code, code, `${method} ${JSON.stringify(params)}: ${JSON.stringify(r.error)}`);
  assert.equal(typeof r.error.message, 'string');
  return r.error;
}

/** The final state (`success`/`error`) of a tool call, from frame index `from` on. */
function toolDone(sock, callId, from = 0, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && (f.status === 'success' || f.status === 'error'), { from, timeout });
}

/** The `tool` message answering `callId`, from frame index `from` on. */
function toolMessage(sock, callId, from = 0, timeout = 10000) {
  return sock
    .waitFor((f) => f.type === 'message' && f.message.role === 'tool' && f.message.tool_call_id === callId, { from, timeout })
    .then((f) => f.message);
}

/**
 * Queues `name` over the rpc on an idle thread and waits until it ran and the thread is idle
 * again. Returns the call id, its final status, its tool message and the frames it produced.
 */
async function runQueued(sock, name, args, { timeout = 10000 } = {}) {
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', args === undefined ? { name } : { name, args });
  assert.match(callId, /\S/);
  const done = await toolDone(sock, callId, from, timeout);
  const message = await toolMessage(sock, callId, from);
  await idle(sock, from);
  return { callId, status: done.status, message, frames: sock.frames.slice(from) };
}

async function allMessages(threadId, query = '') {
  const r = await client.request('GET', `/api/threads/${threadId}/messages?limit=200${query}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

/** The weather key went to the weather service only: never to a client, the store or the model. */
async function assertKeyNotLeaked(sock) {
  assert.ok(!JSON.stringify(sock.frames).includes(WEATHER_KEY), 'the weather key leaked into a frame');
  const stored = await allMessages(sock.threadId, '&include_silent=true');
  assert.ok(!JSON.stringify(stored).includes(WEATHER_KEY), 'the weather key leaked into a stored message');
  const summary = await client.request('GET', `/api/threads/${sock.threadId}`);
  assert.ok(!JSON.stringify(summary.body).includes(WEATHER_KEY), 'the weather key leaked into the summary');
  for (const r of model.requests) assert.ok(!r.rawBody.includes(WEATHER_KEY), 'the weather key was sent to the model');
}

/** The chat-completions messages after the system prompt, of model request `i`. */
function sentMessages(i) {
  const messages = model.requests[i].body.messages;
  assert.equal(messages[0].role, 'system');
  return messages.slice(1);
}

// ---------------------------------------------------------------------------------------------
// Tool catalogue
// ---------------------------------------------------------------------------------------------

// The Worker is built with edgent's `prebuilt-schemas` (Cargo.toml): it carries the schemas the
// host wrote before the build instead of generating them. Written again here from the current
// sources, they must be exactly what the Worker serves, tool by tool.
test('the Worker serves the JSON Schemas schemars generates on the host from the tools\' types', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgent-schemas-'));
  try {
    const file = join(dir, 'schemas.json');
    execFileSync('cargo', ['test', '--lib', '--quiet', 'edgent_export_schemas', '--', '--exact'], {
      cwd: ROOT, env: { ...process.env, EDGENT_SCHEMAS_OUT: file }, stdio: ['ignore', 'ignore', 'inherit'],
    });
    const generated = JSON.parse(readFileSync(file, 'utf8'));
    const r = await client.request('GET', '/api/tools');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const served = Object.fromEntries(r.body.tools.map((x) => [x.name, x]));
    // Every tool file and Rust workflow; the TOML workflow carries its schema in its definition.
    assert.deepEqual(Object.keys(generated.tools).sort(), ALL_TOOLS.filter((n) => n !== 'weather_brief').sort());
    for (const [name, { arguments: args, returns }] of Object.entries(generated.tools)) {
      assert.deepEqual(served[name].parameters, args, `${name}: arguments`);
      assert.deepEqual(served[name].returns ?? null, returns, `${name}: result`);
    }
    assert.deepEqual(Object.keys(generated.outputs), ['ticket_triage']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('GET /api/tools lists every registered tool with schemas, and the model is offered the prompt\'s tools with the same schemas', async (t) => {
  const r = await client.request('GET', '/api/tools');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const tools = r.body.tools;
  assert.deepEqual(tools.map((x) => x.name).sort(), [...ALL_TOOLS].sort());
  for (const tool of tools) {
    assert.equal(typeof tool.description, 'string', tool.name);
    assert.ok(tool.description.length > 10, tool.name);
    assert.equal(tool.parameters?.type, 'object', `${tool.name} parameters: ${JSON.stringify(tool.parameters)}`);
    assert.equal(tool.status, 'available', `${tool.name}: deployment status`);
    assert.equal(typeof tool.policy?.timeout_ms, 'number', `${tool.name}: policy`);
  }
  // How each tool runs is listed with it.
  assert.deepEqual(byNameOf(tools).get_weather.policy, {
    timeout_ms: 15000, max_attempts: 3, needs_approval: false, client_callable: false, mcp: false, deadline_ms: null, cache_ms: null,
    rate_limit: { per_minute: 60, when_limited: 'wait', scope: 'deployment' }, version: 1, kept_versions: [],
  });
  assert.equal(byNameOf(tools).issue_refund.policy.needs_approval, true);
  assert.equal(byNameOf(tools).get_current_time.policy.timeout_ms, 30000, 'the default timeout is 30 s');
  const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
  for (const name of ['process_order', 'lookup_customer', 'get_weather', 'conversation_stats', 'update_context']) {
    assert.equal(typeof byName[name].returns, 'object', `${name} declares what it returns`);
    assert.ok(byName[name].returns, name);
  }
  assert.ok(!('returns' in byName.get_current_time), 'get_current_time returns plain text and declares no schema');
  assert.ok(!('returns' in byName.send_notification));
  assert.equal(typeof byName.approve_draft.returns, 'object', 'approve_draft declares what it returns');

  // The schemas say what the handlers accept.
  assert.deepEqual(Object.keys(byName.get_current_time.parameters.properties ?? {}), []);
  assert.deepEqual(Object.keys(byName.get_weather.parameters.properties).sort(), ['city', 'units']);
  assert.deepEqual(byName.get_weather.parameters.required, ['city']);
  assert.deepEqual(byName.process_order.parameters.required.sort(), ['customer_id', 'items', 'shipping']);
  assert.deepEqual(Object.keys(byName.lookup_customer.parameters.properties).sort(), ['customer_id', 'email']);
  assert.deepEqual(Object.keys(byName.process_order.returns.properties).sort(), ['notification_call_id', 'order_id', 'status', 'units']);
  assert.deepEqual(Object.keys(byName.get_weather.returns.properties).sort(), ['city', 'conditions', 'humidity_percent', 'temperature', 'units']);

  // What the model is offered: exactly the agent's tools, with the same parameter schemas.
  const sock = await thread(t);
  model.push({ text: 'Hello.' });
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'hi' });
  await idle(sock, from, 1);
  const offered = model.requests[0].body.tools;
  assert.deepEqual(offered.map((x) => x.function.name).sort(), [...AGENT_TOOLS, ...DELEGATES].sort());
  for (const o of offered.filter((x) => DELEGATES.includes(x.function.name))) {
    assert.deepEqual(o.function.parameters.required, ['input'], `${o.function.name} takes one input`);
    assert.ok(o.function.description.length > 20, `${o.function.name} has its TOML description`);
  }
  for (const o of offered.filter((x) => !DELEGATES.includes(x.function.name))) {
    assert.equal(o.type, 'function');
    assert.deepEqual(o.function.parameters, byName[o.function.name].parameters, o.function.name);
    assert.equal(o.function.description, byName[o.function.name].description, o.function.name);
    assert.ok(!('returns' in o.function), 'providers get no return schema');
  }
});

// ---------------------------------------------------------------------------------------------
// queue_tool
// ---------------------------------------------------------------------------------------------

test('queue_tool on an idle thread runs the tool without calling the model and goes back to idle', async (t) => {
  const sock = await thread(t);
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', { name: 'get_current_time' });
  assert.match(callId, /\S/);
  await idle(sock, from, 0);
  const frames = sock.frames.slice(from);

  // The call is stored as an assistant message holding it, then it runs.
  const call = frames.find((f) => f.type === 'message' && f.message.role === 'assistant');
  assert.ok(call, `an assistant message holds the call: ${JSON.stringify(frames)}`);
  assert.equal(call.message.content, '');
  assert.deepEqual(call.message.tool_calls, [{ id: callId, name: 'get_current_time', arguments: '{}' }]);
  assert.deepEqual(
    frames.filter((f) => f.type === 'tool').map((f) => [f.tool_call_id, f.name, f.status]),
    [
      [callId, 'get_current_time', 'queued'],
      [callId, 'get_current_time', 'running'],
      [callId, 'get_current_time', 'success'],
    ],
  );
  const result = frames.find((f) => f.type === 'message' && f.message.role === 'tool');
  assert.equal(result.message.tool_call_id, callId);
  assert.equal(result.message.name, 'get_current_time');
  assert.match(result.message.content, ISO_UTC);
  assert.ok(Math.abs(Date.parse(result.message.content) - Date.now()) < 60_000, result.message.content);
  assert.ok(frames.indexOf(call) < frames.indexOf(result));
  assert.ok(frames.some((f) => f.type === 'status' && f.state === 'running'), 'the thread ran');

  await sleep(200); // bounded: nothing else happens
  assert.equal(model.requests.length, 0, 'the model is not called for a queued tool');
  const s = await client.request('GET', `/api/threads/${sock.threadId}`);
  assert.equal(s.body.status, 'idle');
  assert.equal(s.body.turn_count, 0, 'a turn without a model call is not counted');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['assistant', 'tool']);
  assert.deepEqual(stored.map((m) => m.status), ['completed', 'completed']);
});

test('queue_tool refuses unknown tools, invalid arguments and unknown params, and stores nothing', async (t) => {
  const sock = await thread(t);

  const unknown = await rpcErr(sock, 'queue_tool', { name: 'launch_rockets', args: {} }, 'unknown_tool');
  assert.match(unknown.message, /launch_rockets/);
  for (const name of ALL_TOOLS) assert.ok(unknown.message.includes(name), `the message lists ${name}: ${unknown.message}`);

  const cases = [
    ['get_weather', { city: 'Lisbon', units: 'kelvin' }, /unknown variant/],
    ['get_weather', { units: 'celsius' }, /missing field `city`/],
    ['get_weather', { city: '   ' }, /city must not be empty/],
    ['get_weather', { city: 'Lisbon', wind: true }, /unknown field `wind`/],
    ['lookup_customer', {}, /either customer_id or email is required/],
    ['lookup_customer', { customer_id: 1001 }, /customer_id/],
    ['process_order', {}, /missing field/],
    ['process_order', { customer_id: 'cus_1001', items: [], shipping: { method: 'standard' } }, /at least one line/],
    ['process_order', { customer_id: 'cus_1001', items: [{ sku: 'MUG', quantity: 0 }], shipping: { method: 'standard' } }, /items\[0\]\.quantity is 0; it must be 1-100/],
    ['process_order', { customer_id: 'cus_1001', items: [{ sku: 'MUG', quantity: 1 }], shipping: { method: 'drone' } }, /unknown variant/],
    ['process_order', { customer_id: 'cus_1001', items: [{ sku: 'MUG', quantity: 1 }], shipping: { method: 'express' } }, /missing field `deliver_by`/],
    ['update_context', {}, /give at least one key/],
    ['send_notification', { channel: 'pigeon', to: 'x', message: 'hi' }, /unknown variant/],
    ['send_notification', { channel: 'sms', to: 'x', message: 'y'.repeat(501) }, /501 characters; the limit is 500/],
    ['get_current_time', { timezone: 'UTC' }, /unknown field/],
    ['conversation_stats', { last: -1 }, /last/],
  ];
  for (const [name, args, reason] of cases) {
    const err = await rpcErr(sock, 'queue_tool', { name, args }, 'invalid_arguments');
    assert.match(err.message, reason, `${name} ${JSON.stringify(args)}: ${err.message}`);
    assert.ok(err.message.includes(name), `the message names the tool: ${err.message}`);
  }

  await rpcErr(sock, 'queue_tool', { name: 'get_current_time', args: {}, priority: 'high' }, 'invalid_request');
  await rpcErr(sock, 'queue_tool', { args: {} }, 'invalid_request');
  await rpcErr(sock, 'queue_tool', { name: 'get_current_time', args: [] }, 'invalid_arguments');
  await rpcErr(sock, 'summon_tool', { name: 'get_current_time' }, 'unknown_method');

  await sleep(200); // bounded: nothing ran
  assert.ok(!sock.frames.some((f) => f.type === 'tool' || f.type === 'message'), JSON.stringify(sock.frames));
  assert.equal(model.requests.length, 0);
  assert.equal(weather.requests.length, 0, 'invalid weather calls never reach the service');
  const page = await rpcOk(sock, 'get_messages', { include_silent: true });
  assert.equal(page.total, 0);

  // A stopped thread accepts no queued tool.
  await rpcOk(sock, 'stop', {});
  await rpcErr(sock, 'queue_tool', { name: 'get_current_time' }, 'thread_stopped');
});

// ---------------------------------------------------------------------------------------------
// Tools called by the model
// ---------------------------------------------------------------------------------------------

test('a model tool call with malformed JSON or wrong types gets an "invalid arguments" result, the model sees it, the thread stays usable', async (t) => {
  const sock = await thread(t);
  model.push(
    {
      toolCalls: [
        { id: 'call_bad_json', name: 'lookup_customer', arguments: '{"customer_id": "cus_1001"' },
        { id: 'call_bad_type', name: 'get_weather', arguments: { city: 42 } },
        { id: 'call_bad_rule', name: 'lookup_customer', arguments: { email: '  ' } },
      ],
    },
    { text: 'Sorry, let me try that differently.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'who is cus_1001 and how is the weather?' });
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Sorry, let me try that differently.');
  await idle(sock, from, 1);
  const frames = sock.frames.slice(from);

  const finals = frames.filter((f) => f.type === 'tool' && (f.status === 'success' || f.status === 'error'));
  assert.deepEqual(
    finals.map((f) => [f.tool_call_id, f.status]),
    [
      ['call_bad_json', 'error'],
      ['call_bad_type', 'error'],
      ['call_bad_rule', 'error'],
    ],
  );
  const results = Object.fromEntries(
    frames.filter((f) => f.type === 'message' && f.message.role === 'tool').map((f) => [f.message.tool_call_id, f.message.content]),
  );
  for (const content of Object.values(results)) assert.match(content, /^Error: invalid arguments/);
  assert.match(results.call_bad_json, /not valid JSON/);
  assert.match(results.call_bad_type, /city/);
  assert.match(results.call_bad_type, /invalid type/);
  assert.match(results.call_bad_rule, /either customer_id or email is required/);
  assert.ok(!frames.some((f) => f.type === 'error'), 'bad arguments are not a turn error');
  assert.equal(weather.requests.length, 0, 'the weather tool did not run');

  // The model was called again with each result after its call.
  assert.equal(model.requests.length, 2);
  const sent = sentMessages(1);
  assert.equal(sent[1].role, 'assistant');
  assert.deepEqual(sent[1].tool_calls.map((c) => c.function.arguments), ['{"customer_id": "cus_1001"', '{"city":42}', '{"email":"  "}']);
  assert.deepEqual(sent.slice(2), [
    { role: 'tool', tool_call_id: 'call_bad_json', content: results.call_bad_json },
    { role: 'tool', tool_call_id: 'call_bad_type', content: results.call_bad_type },
    { role: 'tool', tool_call_id: 'call_bad_rule', content: results.call_bad_rule },
  ]);

  // And the thread takes the next message normally.
  model.push({ text: 'All good now.' });
  const from2 = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'thanks' });
  const fin2 = await sock.finalAssistant(from2);
  assert.equal(fin2.message.status, 'completed');
  assert.equal(fin2.message.content, 'All good now.');
  await idle(sock, from2, 2);
});

test('a tool the agent does not offer (send_notification, or an invented one) is an "unknown tool" result listing the available tools', async (t) => {
  const sock = await thread(t);
  model.push(
    {
      toolCalls: [
        { id: 'call_notify', name: 'send_notification', arguments: { channel: 'email', to: 'ada@example.com', message: 'hi' } },
        { id: 'call_refund', name: 'refund_everything', arguments: {} },
      ],
    },
    { text: 'I cannot do that.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'email Ada and refund everyone' });
  await sock.finalAssistant(from);
  await idle(sock, from, 1);
  const frames = sock.frames.slice(from);

  for (const [id, name] of [['call_notify', 'send_notification'], ['call_refund', 'refund_everything']]) {
    const done = await toolDone(sock, id, from);
    assert.equal(done.status, 'error', name);
    const content = (await toolMessage(sock, id, from)).content;
    assert.match(content, /^Error: unknown tool/);
    assert.ok(content.includes(`"${name}"`), content);
    const available = content.split('available tools:')[1];
    assert.ok(available, `the result lists the available tools: ${content}`);
    assert.deepEqual(available.split(',').map((s) => s.trim().replace(/[.;]$/, '')).sort(), [...AGENT_TOOLS, ...DELEGATES].sort());
  }
  assert.ok(!frames.some((f) => f.type === 'event'), 'send_notification did not run');
  const sent = sentMessages(1).filter((m) => m.role === 'tool');
  assert.deepEqual(sent.map((m) => m.tool_call_id), ['call_notify', 'call_refund']);
  assert.ok(sent.every((m) => /unknown tool/.test(m.content)));
});

test('queued calls run in order (the model calls, then what they queued) before the next model call', async (t) => {
  const sock = await thread(t);
  const order = {
    customer_id: 'cus_1001',
    items: [
      { sku: 'TSHIRT-RED', quantity: 2, options: { size: 'M' } },
      { sku: 'MUG', quantity: 1 },
    ],
    shipping: { method: 'express', deliver_by: '2026-12-24' },
    confirmation_email: 'ada@example.com',
    gift_wrap: true,
  };
  model.push(
    { text: 'Placing it.', toolCalls: [{ id: 'call_order', name: 'process_order', arguments: order }, { id: 'call_time', name: 'get_current_time', arguments: {} }] },
    { text: 'Your order is confirmed.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'order two red M shirts and a mug, express by Christmas' });
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Your order is confirmed.');
  await idle(sock, from, 1);
  const frames = sock.frames.slice(from);

  const orderResult = JSON.parse((await toolMessage(sock, 'call_order', from)).content);
  assert.match(orderResult.order_id, /^ord_[0-9a-f]{32}$/);
  assert.equal(orderResult.units, 3);
  assert.equal(orderResult.status, 'confirmed');
  assert.equal(typeof orderResult.notification_call_id, 'string');
  const notifyId = orderResult.notification_call_id;

  // Finished in this order: the model's two calls, then the notification process_order queued.
  const finished = frames.filter((f) => f.type === 'tool' && (f.status === 'success' || f.status === 'error'));
  assert.deepEqual(
    finished.map((f) => [f.name, f.status]),
    [
      ['process_order', 'success'],
      ['get_current_time', 'success'],
      ['send_notification', 'success'],
    ],
  );
  assert.equal(finished[2].tool_call_id, notifyId);

  // The notification reached the socket as an event, before its call finished.
  const event = frames.find((f) => f.type === 'event');
  assert.ok(event, 'an event frame arrived');
  assert.equal(event.event, 'notification');
  assert.deepEqual(Object.keys(event.data).sort(), ['channel', 'message', 'to']);
  assert.equal(event.data.channel, 'email');
  assert.equal(event.data.to, 'ada@example.com');
  assert.equal(event.data.message, `Order ${orderResult.order_id} confirmed: 3 item(s), express by 2026-12-24.`);
  assert.ok(Math.abs(event.timestamp - Date.now()) < 60_000, `timestamp ${event.timestamp} is about now`);
  assert.ok(frames.indexOf(event) < frames.indexOf(finished[2]));
  assert.match((await toolMessage(sock, notifyId, from)).content, /notification sent by email to ada@example\.com/);

  // Only then the model was called, and it saw every result right after its call.
  assert.equal(model.requests.length, 2);
  const secondPending = frames.findIndex((f) => f.type === 'message' && f.message.id === fin.message.id);
  assert.ok(frames.indexOf(finished[2]) < secondPending, 'the notification ran before the next model call started');
  const sent = sentMessages(1);
  assert.equal(sent[0].role, 'user');
  assert.deepEqual(sent[1].tool_calls.map((c) => [c.id, c.function.name]), [['call_order', 'process_order'], ['call_time', 'get_current_time']]);
  assert.deepEqual(JSON.parse(sent[1].tool_calls[0].function.arguments), order);
  assert.deepEqual([sent[2].role, sent[2].tool_call_id], ['tool', 'call_order']);
  assert.deepEqual(JSON.parse(sent[2].content), orderResult);
  assert.deepEqual([sent[3].role, sent[3].tool_call_id], ['tool', 'call_time']);
  assert.match(sent[3].content, ISO_UTC);
  assert.equal(sent[4].role, 'assistant');
  assert.deepEqual(sent[4].tool_calls.map((c) => [c.id, c.function.name]), [[notifyId, 'send_notification']]);
  assert.deepEqual(JSON.parse(sent[4].tool_calls[0].function.arguments), { channel: 'email', to: 'ada@example.com', message: event.data.message });
  assert.deepEqual([sent[5].role, sent[5].tool_call_id], ['tool', notifyId]);
  assert.equal(sent.length, 6);
});

test('a tool queued by a client while the model streams runs after the stream, before the next model call', async (t) => {
  const sock = await thread(t);
  model.push(
    { text: 'Checking the time for you, one moment please.', chunkSize: 2, chunkDelayMs: 25, toolCalls: [{ id: 'call_time', name: 'get_current_time', arguments: {} }] },
    { text: 'Done.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'what time is it?' });
  await sock.waitFor((f) => f.type === 'message_chunk', { from });
  const queued = await sock.rpc('queue_tool', { name: 'lookup_customer', args: { customer_id: 'cus_1001' } });
  assert.equal(queued.ok, true, JSON.stringify(queued));
  const queuedId = queued.result.tool_call_id;
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Done.');
  await idle(sock, from, 1);
  const frames = sock.frames.slice(from);

  const firstReply = frames.findIndex((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed' && f.message.tool_calls?.some((c) => c.id === 'call_time'));
  const queuedRuns = frames.findIndex((f) => f.type === 'tool' && f.tool_call_id === queuedId && f.status === 'running');
  const secondCall = frames.findIndex((f) => f.type === 'message' && f.message.id === fin.message.id);
  const accepted = frames.indexOf(queued);
  assert.ok(accepted >= 0 && accepted < firstReply, 'the call was queued while the model was still streaming');
  assert.ok(firstReply >= 0 && queuedRuns > firstReply, 'the queued tool waits for the stream to finish');
  assert.ok(secondCall > queuedRuns, 'and runs before the next model call');
  assert.equal((await toolDone(sock, queuedId, from)).status, 'success');
  assert.equal((await toolDone(sock, 'call_time', from)).status, 'success');

  assert.equal(model.requests.length, 2);
  const sent = sentMessages(1);
  const results = sent.filter((m) => m.role === 'tool').map((m) => m.tool_call_id).sort();
  assert.deepEqual(results, ['call_time', queuedId].sort(), 'the model sees both results');
  for (const [i, m] of sent.entries()) {
    if (m.role !== 'tool') continue;
    const callAt = sent.findIndex((x) => x.tool_calls?.some((c) => c.id === m.tool_call_id));
    assert.ok(callAt >= 0 && callAt < i, `the result of ${m.tool_call_id} follows its call`);
  }
  assert.deepEqual(JSON.parse(sent.find((m) => m.tool_call_id === queuedId).content), ADA);
});

// ---------------------------------------------------------------------------------------------
// process_order, send_notification and events
// ---------------------------------------------------------------------------------------------

test('process_order queued on an idle thread places the order and makes the assistant speak (force_turn)', async (t) => {
  const sock = await thread(t);
  model.push({ text: 'Your pickup order is ready to collect.' });
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', {
    name: 'process_order',
    args: { customer_id: 'cus_1002', items: [{ sku: 'BOOK-COBOL', quantity: 5 }], shipping: { method: 'pickup', store_id: 'store_42' } },
  });
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Your pickup order is ready to collect.');
  await idle(sock, from, 1);
  const frames = sock.frames.slice(from);

  assert.equal((await toolDone(sock, callId, from)).status, 'success');
  const result = JSON.parse((await toolMessage(sock, callId, from)).content);
  assert.deepEqual(Object.keys(result).sort(), ['notification_call_id', 'order_id', 'status', 'units']);
  assert.match(result.order_id, /^ord_[0-9a-f]{32}$/);
  assert.equal(result.units, 5);
  assert.equal(result.status, 'confirmed');
  assert.equal(result.notification_call_id, null, 'no confirmation email, no notification');
  assert.ok(!frames.some((f) => f.type === 'tool' && f.name === 'send_notification'));
  assert.ok(!frames.some((f) => f.type === 'event'));

  // The model was called once, without a user message, and saw the order.
  assert.equal(model.requests.length, 1);
  const sent = sentMessages(0);
  assert.deepEqual(sent.map((m) => m.role), ['assistant', 'tool']);
  assert.equal(sent[0].tool_calls[0].function.name, 'process_order');
  assert.deepEqual(sent[1], { role: 'tool', tool_call_id: callId, content: JSON.stringify(result) });

  // Each order gets its own id.
  model.push({ text: 'Second order placed.' });
  const again = await runQueued(sock, 'process_order', {
    customer_id: 'cus_1002',
    items: [{ sku: 'BOOK-COBOL', quantity: 1 }],
    shipping: { method: 'standard' },
  });
  assert.equal(again.status, 'success');
  assert.notEqual(JSON.parse(again.message.content).order_id, result.order_id);
  assert.ok(again.frames.some((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.content === 'Second order placed.'));
  assert.equal(model.requests.length, 2);
});

test('send_notification queued by a client emits an event to every socket of its thread and to no other thread', async (t) => {
  const sock = await thread(t);
  const second = await client.connect(sock.threadId);
  t.after(() => second.close());
  const other = await thread(t);
  await sleep(100);
  const otherBefore = other.frames.length;
  const secondFrom = second.frames.length;

  const note = { channel: 'sms', to: '+15550100', message: 'Your parcel is out for delivery.' };
  const run = await runQueued(sock, 'send_notification', note);
  assert.equal(run.status, 'success');
  assert.equal(run.message.content, 'notification sent by sms to +15550100');
  const events = run.frames.filter((f) => f.type === 'event');
  assert.equal(events.length, 1, JSON.stringify(run.frames));
  // Logged for resuming sockets: `seq` comes last.
  assert.deepEqual(Object.keys(events[0]), ['type', 'event', 'data', 'timestamp', 'seq']);
  assert.equal(events[0].event, 'notification');
  assert.deepEqual(events[0].data, note);
  assert.ok(Number.isInteger(events[0].timestamp));
  assert.ok(Math.abs(events[0].timestamp - Date.now()) < 60_000);

  const seen = await second.waitFor((f) => f.type === 'event', { from: secondFrom });
  assert.deepEqual(seen, events[0], 'the other socket of the same thread got the same event');

  await sleep(500); // bounded: proving that nothing arrives
  const leaked = other.frames.slice(otherBefore);
  assert.deepEqual(leaked, [], `the other thread got: ${JSON.stringify(leaked)}`);
  assert.equal(model.requests.length, 0);

  // Control: the other thread's socket is alive and gets its own thread's events.
  const own = await runQueued(other, 'send_notification', { channel: 'push', to: 'cus_1003', message: 'Only for you.' });
  const ownEvents = own.frames.filter((f) => f.type === 'event');
  assert.deepEqual(ownEvents.map((f) => f.data), [{ channel: 'push', to: 'cus_1003', message: 'Only for you.' }]);
  await sleep(200);
  assert.equal(sock.frames.filter((f) => f.type === 'event').length, 1, 'and the first thread does not get the other one');
});

// ---------------------------------------------------------------------------------------------
// lookup_customer (D1)
// ---------------------------------------------------------------------------------------------

test('lookup_customer finds customers in D1 by id or case-insensitive email and reports unknown ones', async (t) => {
  const sock = await thread(t);
  model.push(
    { toolCalls: [{ id: 'call_by_email', name: 'lookup_customer', arguments: { email: 'ADA@Example.COM' } }] },
    { text: 'Found Ada.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'look up ADA@Example.COM' });
  await sock.finalAssistant(from);
  await idle(sock, from, 1);
  assert.equal((await toolDone(sock, 'call_by_email', from)).status, 'success');
  const viaModel = (await toolMessage(sock, 'call_by_email', from)).content;
  assert.deepEqual(JSON.parse(viaModel), ADA);
  assert.deepEqual(sentMessages(1).at(-1), { role: 'tool', tool_call_id: 'call_by_email', content: viaModel });

  const byId = await runQueued(sock, 'lookup_customer', { customer_id: 'cus_1002' });
  assert.equal(byId.status, 'success');
  assert.deepEqual(JSON.parse(byId.message.content), GRACE);

  const padded = await runQueued(sock, 'lookup_customer', { email: '  grace@EXAMPLE.com ' });
  assert.deepEqual(JSON.parse(padded.message.content), GRACE);

  const turing = await runQueued(sock, 'lookup_customer', { customer_id: 'cus_1003', email: 'alan@example.com' });
  assert.deepEqual(JSON.parse(turing.message.content), { id: 'cus_1003', name: 'Alan Turing', email: 'alan@example.com', plan: 'free' });

  const missingId = await runQueued(sock, 'lookup_customer', { customer_id: 'cus_9999' });
  assert.equal(missingId.status, 'error');
  assert.match(missingId.message.content, /^Error: no customer with id "cus_9999"/);

  const missingEmail = await runQueued(sock, 'lookup_customer', { email: 'nobody@example.com' });
  assert.equal(missingEmail.status, 'error');
  assert.match(missingEmail.message.content, /^Error: no customer with email "nobody@example\.com"/);

  // Arguments are bound, not spliced into the SQL.
  const injection = await runQueued(sock, 'lookup_customer', { customer_id: "x' OR '1'='1", email: "' OR 1=1 --" });
  assert.equal(injection.status, 'error');
  assert.match(injection.message.content, /no customer with/);

  assert.equal(model.requests.length, 2, 'queued lookups do not call the model');
});

// ---------------------------------------------------------------------------------------------
// get_weather (outbound fetch with a secret)
// ---------------------------------------------------------------------------------------------

test('get_weather: the model call reaches the weather API with the key and gets a typed result', async (t) => {
  const sock = await thread(t);
  model.push(
    { toolCalls: [{ id: 'call_weather', name: 'get_weather', arguments: { city: 'Lisbon' } }] },
    { text: 'Light rain in Lisbon.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'weather in Lisbon?' });
  await sock.finalAssistant(from);
  await idle(sock, from, 1);

  assert.equal(weather.requests.length, 1);
  const [req] = weather.requests;
  assert.equal(req.method, 'GET');
  assert.equal(req.path, '/weather');
  assert.deepEqual(req.query, { q: 'Lisbon', units: 'metric', appid: WEATHER_KEY });

  assert.equal((await toolDone(sock, 'call_weather', from)).status, 'success');
  const content = (await toolMessage(sock, 'call_weather', from)).content;
  assert.deepEqual(JSON.parse(content), {
    city: 'Lisbon',
    temperature: CELSIUS.temp,
    units: 'celsius',
    conditions: CELSIUS.description,
    humidity_percent: CELSIUS.humidity,
  });
  assert.deepEqual(sentMessages(1).at(-1), { role: 'tool', tool_call_id: 'call_weather', content });
  await assertKeyNotLeaked(sock);
});

test('get_weather: fahrenheit asks for imperial units and city names are encoded', async (t) => {
  const sock = await thread(t);
  const run = await runQueued(sock, 'get_weather', { city: '  São Paulo,BR & more?', units: 'fahrenheit' });
  assert.equal(run.status, 'success', run.message.content);
  assert.equal(weather.requests.length, 1);
  assert.deepEqual(weather.requests[0].query, { q: 'São Paulo,BR & more?', units: 'imperial', appid: WEATHER_KEY });
  assert.deepEqual(JSON.parse(run.message.content), {
    city: 'São Paulo',
    temperature: FAHRENHEIT.temp,
    units: 'fahrenheit',
    conditions: FAHRENHEIT.description,
    humidity_percent: FAHRENHEIT.humidity,
  });

  // Humidity may be missing and conditions empty: the result says so instead of failing.
  weather.reply((r) => ({ status: 200, body: { name: r.query.q, main: { temp: -3 }, weather: [] } }));
  const sparse = await runQueued(sock, 'get_weather', { city: 'Oslo' });
  assert.equal(sparse.status, 'success', sparse.message.content);
  assert.deepEqual(JSON.parse(sparse.message.content), { city: 'Oslo', temperature: -3, units: 'celsius', conditions: 'unknown', humidity_percent: null });
  assert.equal(model.requests.length, 0);
  await assertKeyNotLeaked(sock);
});

test('get_weather: each service failure becomes an error result the model can explain, without the key; outages are retried, answers are not', async (t) => {
  const sock = await thread(t);
  // [status, body, reason, requests]: fatal answers are asked once; outages 3 times (the
  // tool's retry policy), with `retrying` frames in between.
  const cases = [
    [401, { cod: 401, message: `Invalid API key ${WEATHER_KEY}` }, /rejected our API key/, 1],
    [403, { cod: 403, message: 'forbidden' }, /rejected our API key/, 1],
    [404, { cod: '404', message: 'city not found' }, /no city named "Atlantis"/, 1],
    [429, { cod: 429, message: 'too many requests' }, /rate limiting/, 3],
    [500, { cod: 500, message: 'internal error' }, /HTTP 500/, 3],
    [503, 'Service Unavailable', /HTTP 503/, 3],
    [200, 'this is not JSON', /could not read/, 1],
    [200, { name: 'Atlantis', weather: [] }, /could not read/, 1],
    ['dropped', null, /did not answer/, 3],
  ];
  for (const [status, body, reason, asked] of cases) {
    weather.reply(() => (status === 'dropped' ? { destroy: true } : { status, body }));
    const before = weather.requests.length;
    const run = await runQueued(sock, 'get_weather', { city: 'Atlantis' });
    const label = `${status} ${JSON.stringify(body)}`;
    assert.equal(weather.requests.length, before + asked, `${label}: ${asked} request(s)`);
    assert.equal(run.status, 'error', `${label}: ${run.message.content}`);
    assert.match(run.message.content, /^Error: /, label);
    assert.match(run.message.content, reason, `${label}: ${run.message.content}`);
    const retrying = run.frames.filter((f) => f.type === 'tool' && f.status === 'retrying');
    assert.equal(retrying.length, asked - 1, `${label}: retrying frames`);
    if (asked > 1) assert.match(run.message.content, /gave up after 3 attempts/, label);
    const final = run.frames.filter((f) => f.type === 'tool').at(-1);
    assert.deepEqual(final, { type: 'tool', tool_call_id: run.callId, name: 'get_weather', status: 'error', seq: final.seq });
  }
  assert.equal(model.requests.length, 0);
  await assertKeyNotLeaked(sock);
});

test('get_weather: a 429 with Retry-After is retried after that delay', async (t) => {
  const sock = await thread(t);
  let n = 0;
  weather.reply(() => (++n === 1 ? { status: 429, body: { cod: 429 }, headers: { 'retry-after': '2' } } : { status: 200, body: { name: 'Lisbon', main: { temp: 20, humidity: 50 }, weather: [{ description: 'clear sky' }] } }));
  const run = await runQueued(sock, 'get_weather', { city: 'Lisbon' });
  assert.equal(run.status, 'success', run.message.content);
  const retrying = run.frames.find((f) => f.type === 'tool' && f.status === 'retrying');
  const running = run.frames.filter((f) => f.type === 'tool' && f.status === 'running');
  assert.ok(retrying, 'a retrying frame');
  assert.equal(running.length, 2);
  const gap = weather.requests[1].at - weather.requests[0].at;
  assert.ok(gap >= 1900 && gap < 6000, `second request ${gap} ms after the first`);
});

test('get_weather: a service that never answers times out after about 8 s (one attempt when the operator sets TOOL_GET_WEATHER_MAX_ATTEMPTS=1)', async (t) => {
  const single = await startWorker({
    modelUrl: `${model.url}/v1`,
    bindings: { WEATHER_API_URL: weather.url, WEATHER_API_KEY: WEATHER_KEY, TOOL_GET_WEATHER_MAX_ATTEMPTS: '1' },
  });
  t.after(() => single.dispose());
  const id = await single.client.createThread('support');
  const sock = await single.client.connect(id);
  t.after(() => sock.close());
  weather.reply(() => ({ hang: true }));
  const started = Date.now();
  const run = await runQueued(sock, 'get_weather', { city: 'Nowhere' }, { timeout: 20000 });
  const elapsed = Date.now() - started;
  assert.equal(run.status, 'error');
  assert.match(run.message.content, /did not answer/);
  assert.match(run.message.content, /8000 ms/);
  assert.ok(elapsed >= 7500 && elapsed < 15000, `timed out after ${elapsed} ms`);
  assert.equal(weather.requests.length, 1);

  // The thread is usable afterwards.
  weather.reply();
  const ok = await runQueued(sock, 'get_weather', { city: 'Lisbon' });
  assert.equal(ok.status, 'success');
});

test('get_weather without a WEATHER_API_KEY says weather is not configured and calls nothing', async (t) => {
  const bare = await startWorker({ modelUrl: `${model.url}/v1`, bindings: { WEATHER_API_URL: weather.url } });
  t.after(() => bare.dispose());
  const id = await bare.client.createThread('support');
  const sock = await bare.client.connect(id);
  t.after(() => sock.close());
  const run = await runQueued(sock, 'get_weather', { city: 'Lisbon' });
  assert.equal(run.status, 'error');
  assert.match(run.message.content, /not configured/);
  assert.equal(weather.requests.length, 0);
  assert.equal(model.requests.length, 0);
});

// ---------------------------------------------------------------------------------------------
// update_context and conversation_stats
// ---------------------------------------------------------------------------------------------

test('update_context stores facts, tells the model with a system message, and forgets on request', async (t) => {
  const sock = await thread(t);
  model.push(
    { toolCalls: [{ id: 'call_ctx', name: 'update_context', arguments: { set: { preferred_language: 'pt', tier: 'gold' } } }] },
    { text: 'Noted.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'I prefer Portuguese' });
  await sock.finalAssistant(from);
  await idle(sock, from, 1);

  assert.equal((await toolDone(sock, 'call_ctx', from)).status, 'success');
  const result = (await toolMessage(sock, 'call_ctx', from)).content;
  assert.deepEqual(JSON.parse(result), { preferred_language: 'pt', tier: 'gold' });
  const system = sock.frames.slice(from).find((f) => f.type === 'message' && f.message.role === 'system');
  assert.ok(system, 'the context was announced as a system message');
  assert.equal(system.message.silent, false);
  assert.equal(system.message.content, 'Conversation context is now: preferred_language = "pt"; tier = "gold"');

  // The model saw the result right after its call, then the system message.
  const sent = sentMessages(1);
  assert.deepEqual(sent.slice(-2), [
    { role: 'tool', tool_call_id: 'call_ctx', content: result },
    { role: 'system', content: system.message.content },
  ]);

  // Removing a key (queued by a client).
  const removed = await runQueued(sock, 'update_context', { remove: ['tier'], set: { timezone: 'Europe/Lisbon' } });
  assert.equal(removed.status, 'success');
  assert.deepEqual(JSON.parse(removed.message.content), { preferred_language: 'pt', timezone: 'Europe/Lisbon' });
  const announced = removed.frames.find((f) => f.type === 'message' && f.message.role === 'system');
  assert.equal(announced.message.content, 'Conversation context is now: preferred_language = "pt"; timezone = "Europe/Lisbon"');
  const stored = await allMessages(sock.threadId);
  assert.equal(stored.filter((m) => m.role === 'system').length, 2);
  assert.equal(model.requests.length, 2);
});

test('conversation_stats counts the visible messages by role', async (t) => {
  const sock = await thread(t);
  await rpcOk(sock, 'inject_message', { content: 'q1' });
  await rpcOk(sock, 'inject_message', { content: 'a1', role: 'assistant' });
  await rpcOk(sock, 'inject_message', { content: 'q2', role: 'user' });
  await rpcOk(sock, 'inject_message', { content: 'hidden', role: 'system', silent: true });

  // The user and assistant messages, plus the assistant message holding this call.
  const all = await runQueued(sock, 'conversation_stats', {});
  assert.equal(all.status, 'success');
  assert.deepEqual(JSON.parse(all.message.content), { messages: 4, by_role: { assistant: 2, user: 2 } });

  // The newest two: the previous result and the message holding this call.
  const last = await runQueued(sock, 'conversation_stats', { last: 2 });
  assert.deepEqual(JSON.parse(last.message.content), { messages: 2, by_role: { assistant: 1, tool: 1 } });
  assert.equal(model.requests.length, 0);
});

// ---------------------------------------------------------------------------------------------
// inject_message, get_messages, force_turn
// ---------------------------------------------------------------------------------------------

test('inject_message stores without starting a turn; silent messages stay hidden from frames, listings and the model', async (t) => {
  const sock = await thread(t);
  const watcher = await client.connect(sock.threadId); // sends nothing: sees broadcasts only
  t.after(() => watcher.close());
  await watcher.waitFor((f) => f.type === 'status');
  const watched = watcher.frames.length;
  const from = sock.frames.length;

  const visible = (await rpcOk(sock, 'inject_message', { content: 'The customer is on the enterprise plan.', role: 'system' })).message;
  assert.equal(visible.role, 'system');
  assert.equal(visible.content, 'The customer is on the enterprise plan.');
  assert.equal(visible.silent, false);
  assert.equal(visible.status, 'completed');
  assert.match(visible.id, /\S/);
  const broadcast = await sock.waitFor((f) => f.type === 'message' && f.message.id === visible.id, { from });
  assert.deepEqual(broadcast.message, visible);

  const silent = (await rpcOk(sock, 'inject_message', { content: 'Internal note: VIP.', role: 'system', silent: true, id: 'note-1' })).message;
  assert.equal(silent.id, 'note-1');
  assert.equal(silent.silent, true);

  const early = (await rpcOk(sock, 'inject_message', { content: 'Hi, I was here first.', id: 'early-1', before_message_id: visible.id, name: 'ada' })).message;
  assert.equal(early.role, 'user', 'role defaults to user');
  assert.equal(early.name, 'ada');

  await rpcErr(sock, 'inject_message', { content: 'again', id: 'note-1' }, 'conflict');
  await rpcErr(sock, 'inject_message', { content: 'where?', before_message_id: 'no-such-message' }, 'invalid_request');
  await rpcErr(sock, 'inject_message', { content: 'x', colour: 'red' }, 'invalid_request');
  await rpcErr(sock, 'inject_message', { content: 'x', id: 'has space' }, 'invalid_request');
  await rpcErr(sock, 'inject_message', { content: 'x', role: 'tool' }, 'invalid_request');
  await rpcErr(sock, 'inject_message', { content: 'x', role: 'wizard' }, 'invalid_request');
  await rpcErr(sock, 'inject_message', { role: 'user' }, 'invalid_request');

  await sleep(300); // bounded: no turn starts
  const frames = sock.frames.slice(from);
  assert.ok(!frames.some((f) => f.type === 'status'), `no turn started: ${JSON.stringify(frames)}`);
  assert.ok(!frames.some((f) => f.type === 'message' && f.message.id === 'note-1'), 'silent messages are not broadcast');
  const broadcasts = watcher.frames.slice(watched);
  assert.deepEqual(
    broadcasts.map((f) => [f.type, f.message?.id]),
    [
      ['message', visible.id],
      ['message', 'early-1'],
    ],
    'another socket sees the visible injections only',
  );
  assert.ok(!JSON.stringify(broadcasts).includes('Internal note'));
  assert.equal(model.requests.length, 0);

  // Listings: silent only on request; before_message_id decides the position.
  const page = await rpcOk(sock, 'get_messages', {});
  assert.deepEqual(page.messages.map((m) => m.id), ['early-1', visible.id]);
  assert.equal(page.total, 2);
  assert.equal(page.has_more, false);
  const withSilent = await rpcOk(sock, 'get_messages', { include_silent: true });
  assert.deepEqual(withSilent.messages.map((m) => m.id), ['early-1', visible.id, 'note-1']);
  assert.equal(withSilent.total, 3);
  assert.equal(withSilent.messages[2].silent, true);
  const desc = await rpcOk(sock, 'get_messages', { include_silent: true, order: 'desc', limit: 2 });
  assert.deepEqual(desc.messages.map((m) => m.id), ['note-1', visible.id]);
  assert.equal(desc.has_more, true);
  const http = await client.request('GET', `/api/threads/${sock.threadId}/messages?include_silent=true`);
  assert.equal(http.status, 200);
  assert.deepEqual(http.body.messages.map((m) => m.id), ['early-1', visible.id, 'note-1']);
  const httpPlain = await client.request('GET', `/api/threads/${sock.threadId}/messages`);
  assert.deepEqual(httpPlain.body.messages.map((m) => m.id), ['early-1', visible.id]);

  // The next turn shows the model the visible injected messages in order, never the silent one.
  model.push({ text: 'Hello Ada.' });
  const from2 = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'hello?' });
  await sock.finalAssistant(from2);
  await idle(sock, from2, 1);
  assert.deepEqual(sentMessages(0), [
    { role: 'user', content: 'Hi, I was here first.', name: 'ada' },
    { role: 'system', content: 'The customer is on the enterprise plan.' },
    { role: 'user', content: 'hello?' },
  ]);
  assert.ok(!model.requests[0].rawBody.includes('Internal note'));
});

test('force_turn makes side a answer without a new user message; a side the agent lacks is refused', async (t) => {
  const sock = await thread(t);
  await rpcOk(sock, 'inject_message', { content: 'Please call me back about my order.' });
  await sleep(200);
  assert.equal(model.requests.length, 0, 'injecting does not call the model');

  model.push({ text: 'Calling you back now.' });
  const from = sock.frames.length;
  assert.deepEqual(await rpcOk(sock, 'force_turn', { side: 'a' }), { side: 'a' });
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Calling you back now.');
  await idle(sock, from, 1);
  assert.equal(model.requests.length, 1);
  assert.deepEqual(sentMessages(0), [{ role: 'user', content: 'Please call me back about my order.' }]);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.content]), [
    ['user', 'Please call me back about my order.'],
    ['assistant', 'Calling you back now.'],
  ]);

  // The side defaults to a; a bad side or an unknown key is refused.
  model.push({ text: 'Anything else?' });
  const from2 = sock.frames.length;
  assert.deepEqual(await rpcOk(sock, 'force_turn', {}), { side: 'a' });
  await idle(sock, from2, 2);
  assert.equal(model.requests.length, 2);
  await rpcErr(sock, 'force_turn', { side: 'c' }, 'invalid_request');
  await rpcErr(sock, 'force_turn', { side: 'a', now: true }, 'invalid_request');

  // Side b: the example agent configures no side b, so the rpc is refused and nothing changes.
  const other = await thread(t);
  const from3 = other.frames.length;
  const refused = await rpcErr(other, 'force_turn', { side: 'b' }, 'invalid_request');
  assert.match(refused.message, /has no side b configured/);
  await sleep(300);
  assert.deepEqual(other.frames.slice(from3).filter((f) => f.type !== 'result'), [], 'no status change, no turn');
  const summary = await worker.client.request('GET', `/api/threads/${other.threadId}`);
  assert.equal(summary.body.current_side, 'a');
  assert.equal(model.requests.length, 2, 'no model call for side b');

  // A stopped thread cannot be forced.
  await rpcOk(other, 'stop', {});
  await rpcErr(other, 'force_turn', { side: 'a' }, 'thread_stopped');
});

test('after a refused side-b force_turn, the next user message is answered by side a', async (t) => {
  const sock = await thread(t);
  await rpcErr(sock, 'force_turn', { side: 'b' }, 'invalid_request');
  model.push({ text: 'Side a here.' });
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'hello, anyone?' });
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'Side a here.');
  assert.deepEqual(sock.frames.slice(from).filter((f) => f.type === 'error'), [], 'answered without an error');
  assert.equal(model.requests.length, 1, 'side a was called');
});
