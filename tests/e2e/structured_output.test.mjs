// End-to-end tests of structured output (a prompt's `response_format`) against the real built
// Worker in Miniflare (workerd), with definitions written through the configuration API and the
// scripted model server answering in the OpenAI and the Anthropic wire formats.
// Proves: what each format's request carries (OpenAI `response_format: json_schema`, strict;
// the Anthropic answer tool and its forced `tool_choice`), a fitting answer stored with
// `structured` (HTTP messages, the `message` frame), an answer that does not fit sent back once
// with what is wrong and then accepted, two that do not fit failing the turn with
// `invalid_structured_output`, a registered output type (`type_name`), the 400s for bad
// definitions, `ask_<agent>` over MCP (the official SDK, which checks `structuredContent` against
// the tool's `outputSchema`) and a child thread's `result`.
// Does not prove: real providers honouring the format (host tests cover each wire body:
// tests/host/runtime/structured.rs).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { API_KEY } from '../support/worker.mjs';
import { withWorker } from '../support/setup.mjs';

let model;
let worker;
let client;

withWorker({ bindings: { ANTHROPIC_API_KEY: 'sk-ant-test' }, setup: async (env) => {
  ({ model, worker, client } = env);
  await put('models', 'so-openai', { provider: 'openai', model: 'gpt-scripted', base_url: `${model.url}/v1`, api_key_secret: 'OPENAI_API_KEY' });
  await put('models', 'so-claude', { provider: 'anthropic', model: 'claude-scripted', base_url: `${model.url}/v1`, api_key_secret: 'ANTHROPIC_API_KEY' });
} });

/** A trip: strict (every object closed, every property required). */
const TRIP = {
  type: 'object',
  properties: {
    city: { type: 'string', description: 'Where to go.' },
    days: { type: 'integer', minimum: 1 },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};

async function put(kind, name, body, status) {
  const r = await client.request('PUT', `/api/${kind}/${name}`, { body });
  if (status === undefined) assert.ok([200, 201].includes(r.status), `${kind}/${name}: ${r.status} ${JSON.stringify(r.body)}`);
  else assert.equal(r.status, status, JSON.stringify(r.body));
  return r.body;
}

let unique = 0;
/** A prompt answering in `format` on `modelName` and an ai_human agent running it; the agent id. */
async function answeringAgent(modelName, format, promptOpts = {}) {
  const name = `so-${++unique}`;
  await put('prompts', name, { model: modelName, system: 'Plan trips.', response_format: format, ...promptOpts });
  await put('agents', name, { side_a: { prompt: name } });
  return name;
}

/** Sends `content` in a new thread of `agentId` and waits until it is idle; its id and frames. */
async function turn(t, agentId, content) {
  const id = await client.createThread(agentId);
  const sock = await client.connect(id);
  t.after(() => sock.close());
  const r = await client.request('POST', `/api/threads/${id}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  const running = await sock.waitFor((f) => f.type === 'status' && f.state === 'running');
  const from = sock.frames.indexOf(running);
  await sock.waitFor((f) => f.type === 'status' && f.state !== 'running', { from, timeout: 15000 });
  return { id, frames: sock.frames };
}

async function messages(id) {
  const r = await client.request('GET', `/api/threads/${id}/messages?limit=50`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

const errors = (frames) => frames.filter((f) => f.type === 'error').map((f) => [f.code, f.message]);
const finalReply = (frames) => frames.filter((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status !== 'pending').at(-1)?.message;

test('openai: the request asks for the json_schema, and a fitting answer is stored with its value', async (t) => {
  const agent = await answeringAgent('so-openai', { name: 'trip', schema: TRIP });
  model.push({ text: '{"city": "Porto", "days": 3}', chunkSize: 5 });
  const { id, frames } = await turn(t, agent, 'Plan a trip.');

  assert.equal(model.requests.length, 1);
  const [request] = model.requests;
  assert.equal(request.format, 'openai');
  assert.deepEqual(request.body.response_format, { type: 'json_schema', json_schema: { name: 'trip', schema: TRIP, strict: true } });
  const reply = finalReply(frames);
  assert.deepEqual(reply.structured, { city: 'Porto', days: 3 }, 'the message frame carries the value');
  const stored = await messages(id);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.structured]), [
    ['user', 'completed', undefined],
    ['assistant', 'completed', { city: 'Porto', days: 3 }],
  ]);
  assert.equal(stored[1].content, '{"city": "Porto", "days": 3}');
  assert.deepEqual(errors(frames), []);
});

test('openai: an answer that does not fit is sent back once with what is wrong, then accepted', async (t) => {
  const agent = await answeringAgent('so-openai', { name: 'trip', schema: TRIP });
  model.push({ text: '{"city": "Porto", "days": 0}' }, { text: '{"city": "Porto", "days": 2}' });
  const { id, frames } = await turn(t, agent, 'Plan a trip.');

  assert.equal(model.requests.length, 2);
  const resent = model.requests[1].body.messages.slice(-2);
  assert.deepEqual(resent[0], { role: 'assistant', content: '{"city": "Porto", "days": 0}' });
  assert.equal(resent[1].role, 'user');
  assert.match(resent[1].content, /format `trip`: at `days`: should be at least 1/);
  assert.deepEqual(errors(frames).map(([code]) => code), ['model_retry']);
  assert.match(errors(frames)[0][1], /does not fit response_format "trip"/);
  const stored = await messages(id);
  assert.deepEqual(stored.map((m) => [m.role, m.structured ?? m.content]), [
    ['user', 'Plan a trip.'],
    ['assistant', { city: 'Porto', days: 2 }],
  ], 'one reply is kept: the corrected one');
});

test('openai: two answers that do not fit fail the turn with invalid_structured_output', async (t) => {
  const agent = await answeringAgent('so-openai', { name: 'trip', schema: TRIP });
  model.push({ text: 'Porto, for three days.' }, { text: '{"city": "Porto"}' }, { text: 'never asked' });
  const { id, frames } = await turn(t, agent, 'Plan a trip.');

  assert.equal(model.requests.length, 2, 'one correction, no more');
  assert.match(model.requests[1].body.messages.at(-1).content, /it is not JSON/);
  const [retry, failed] = errors(frames);
  assert.equal(retry[0], 'model_retry');
  assert.equal(failed[0], 'invalid_structured_output');
  assert.match(failed[1], /is missing the required property `days`/);
  const summary = (await client.request('GET', `/api/threads/${id}`)).body;
  assert.equal(summary.status, 'idle');
  assert.match(summary.last_error, /invalid structured output/);
  const stored = await messages(id);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.structured]), [
    ['user', 'completed', undefined],
    ['assistant', 'failed', undefined],
  ]);
});

test('anthropic: the format is a forced answer tool, and its input is the stored answer', async (t) => {
  const agent = await answeringAgent('so-claude', { name: 'trip', schema: TRIP });
  model.push(
    { toolCalls: [{ id: 'toolu_a1', name: 'trip', arguments: { city: 'Lima' } }] },
    { toolCalls: [{ id: 'toolu_a2', name: 'trip', arguments: { city: 'Lima', days: 4 } }] },
  );
  const { id, frames } = await turn(t, agent, 'Plan a trip.');

  assert.equal(model.requests.length, 2);
  for (const r of model.requests) {
    assert.equal(r.format, 'anthropic');
    assert.deepEqual(r.body.tools.map((x) => [x.name, x.input_schema]), [['trip', TRIP]]);
    assert.deepEqual(r.body.tool_choice, { type: 'tool', name: 'trip' });
    assert.equal(r.body.response_format, undefined);
  }
  const resent = model.requests[1].body.messages;
  assert.deepEqual(resent[1], { role: 'assistant', content: [{ type: 'text', text: '{"city":"Lima"}' }] });
  assert.match(resent[2].content[0].text, /missing the required property `days`/);
  const stored = await messages(id);
  assert.deepEqual(stored[1].structured, { city: 'Lima', days: 4 });
  assert.equal(stored[1].tool_calls, undefined, 'the answer is not a call to run');
  const calls = (await client.request('GET', `/api/threads/${id}/tool-calls`)).body.tool_calls;
  assert.deepEqual(calls, []);
  assert.deepEqual(finalReply(frames).structured, { city: 'Lima', days: 4 });
});

test('anthropic: a prompt with tools may call them first, then must answer through the answer tool', async (t) => {
  const agent = await answeringAgent('so-claude', { name: 'trip', schema: TRIP }, { tools: ['get_current_time'] });
  model.push(
    { toolCalls: [{ id: 'toolu_t1', name: 'get_current_time', arguments: {} }] },
    { toolCalls: [{ id: 'toolu_t2', name: 'trip', arguments: { city: 'Oslo', days: 2 } }] },
  );
  const { id } = await turn(t, agent, 'Plan a trip for today.');
  assert.equal(model.requests.length, 2);
  assert.deepEqual(model.requests[0].body.tools.map((x) => x.name), ['get_current_time', 'trip']);
  assert.deepEqual(model.requests[0].body.tool_choice, { type: 'any' });
  const stored = await messages(id);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  assert.deepEqual(stored[3].structured, { city: 'Oslo', days: 2 });
});

test('a registered output type is sent by name; bad formats are refused with a clear 400', async (t) => {
  const agent = await answeringAgent('so-openai', { type_name: 'ticket_triage' });
  const answer = { category: 'billing', urgency: 4, summary: 'Double charge on the last invoice.' };
  model.push({ text: JSON.stringify(answer) });
  const { id } = await turn(t, agent, 'I was charged twice!');
  const format = model.requests[0].body.response_format.json_schema;
  assert.equal(format.name, 'ticket_triage');
  assert.deepEqual(format.schema.properties.category.enum, ['billing', 'shipping', 'account', 'other']);
  assert.equal(format.strict, true);
  assert.deepEqual((await messages(id))[1].structured, answer);

  const refused = async (format, why, opts = {}) => {
    const body = await put('prompts', 'so-bad', { model: 'so-openai', response_format: format, ...opts }, 400);
    assert.equal(body.error.code, 'invalid_definition');
    assert.match(body.error.message, why);
  };
  await refused({ schema: { type: 'array' } }, /prompt "so-bad": response_format: schema: the schema must describe a JSON object/);
  await refused({ schema: { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } } }, /at `a`: `pattern` is not supported/);
  await refused({ type_name: 'invoice' }, /type_name "invoice" is not an output type this app registers \(registered: ticket_triage\)/);
  await refused({}, /exactly one of "schema".*or "type_name"/);
  await refused({ schema: TRIP, strict: true }, /unknown field `strict`/);
  await refused({ schema: TRIP, name: 'get_current_time' }, /also one of the prompt's tools/, { tools: ['get_current_time'] });
  await refused({ schema: TRIP }, /tool_choice "required"/, { tools: ['get_current_time'], tool_choice: 'required' });
  assert.equal((await client.request('GET', '/api/prompts/so-bad')).status, 404, 'nothing was stored');
});

test('ask_<agent> over MCP returns the answer\'s value as structuredContent.structured', async () => {
  const agent = await answeringAgent('so-openai', { name: 'trip', schema: TRIP });
  const mcp = new Client({ name: 'edgent-e2e', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`/mcp/${agent}`, worker.url), {
    requestInit: { headers: { authorization: `Bearer ${API_KEY}` } },
  }));
  try {
    const { tools } = await mcp.listTools();
    assert.ok(tools.find((x) => x.name === `ask_${agent}`).outputSchema.properties.structured);
    model.push({ text: '{"city":"Rome","days":5}' });
    const result = await mcp.callTool({ name: `ask_${agent}`, arguments: { message: 'Plan Rome.' } });
    assert.equal(result.isError, false);
    assert.deepEqual(result.structuredContent.structured, { city: 'Rome', days: 5 });
    assert.equal(result.structuredContent.status, 'idle');
    assert.equal(result.content[0].text, '{"city":"Rome","days":5}');
  } finally {
    await mcp.close();
  }
});

test('a dual_ai agent run as a tool answers its caller with its structured result', async (t) => {
  const name = `so-${++unique}`;
  await put('prompts', `${name}-planner`, { model: 'so-openai', system: 'Plan.', response_format: { name: 'trip', schema: TRIP } });
  await put('prompts', `${name}-critic`, { model: 'so-openai', system: 'Criticise.' });
  await put('agents', `${name}-duo`, {
    kind: 'dual_ai', max_turns: 1, expose_as_tool: true, tool_description: 'Plans a trip.',
    side_a: { prompt: `${name}-planner` }, side_b: { prompt: `${name}-critic` },
  });
  await put('prompts', `${name}-desk`, { model: 'so-openai', system: 'Help.', tools: [`${name}-duo`] });
  await put('agents', `${name}-desk`, { side_a: { prompt: `${name}-desk` } });
  model.push(
    { toolCalls: [{ id: 'call_duo', name: `${name}-duo`, arguments: { input: 'Rome, please.' } }] },
    { text: '{ "city": "Rome", "days": 5 }' },
    { text: 'Five days in Rome.' },
  );
  const { id } = await turn(t, `${name}-desk`, 'Plan my trip.');
  assert.equal(model.requests.length, 3);
  const stored = await messages(id);
  const result = stored.find((m) => m.role === 'tool');
  assert.match(result.content, /^\{"city":"Rome","days":5\}\n\n\(child thread [0-9a-f-]{36}, stopped by max_turns\)$/);
  const child = result.content.match(/child thread ([0-9a-f-]{36})/)[1];
  const summary = (await client.request('GET', `/api/threads/${child}`)).body;
  assert.equal(summary.result, '{"city":"Rome","days":5}');
  assert.deepEqual((await messages(child))[1].structured, { city: 'Rome', days: 5 });
});
