// End-to-end tests of edgent as an MCP server (`POST /mcp`, `POST /mcp/:agent`), with the
// official `@modelcontextprotocol/sdk` client on the other side of the real built Worker in
// Miniflare (workerd), and the scripted model answering the agents' turns.
// Proves: the SDK's handshake and Streamable HTTP transport against our JSON answers; a
// session per client on /mcp/:agent that is one thread (ask_<agent> goes on with the same
// conversation; registered tools marked `mcp` run in it through the durable path, their
// results and validation errors as MCP results); /mcp's stateless ask_<agent> for every agent
// (new thread, or the one thread_id names); client tokens (their thread is the session, only
// tools that are also client_callable); the transport's refusals (no credential, a forged
// token, GET, no session, an unknown or deleted session, malformed JSON-RPC).
// Does not prove: MCP clients other than the official SDK; Cloudflare's edge.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { API_KEY } from '../support/worker.mjs';
import { withWorker } from '../support/setup.mjs';

let model;
let worker;
withWorker({ setup: (env) => ({ model, worker } = env) });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function connect(path, { token = API_KEY, sessionId } = {}) {
  const client = new Client({ name: 'edgent-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(path, worker.url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    sessionId,
  });
  await client.connect(transport);
  return { client, transport };
}

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

async function post(path, body, headers = {}) {
  const r = await fetch(new URL(path, worker.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const raw = await r.text();
  return { status: r.status, headers: r.headers, body: raw ? JSON.parse(raw) : null };
}

test('a session on /mcp/:agent is one conversation: ask_<agent> goes on in it, tools run in it', async () => {
  const { client, transport } = await connect('/mcp/support');
  assert.match(transport.sessionId, UUID, 'the session id is the thread');
  assert.equal(client.getServerVersion().name, 'edgent');

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['ask_support', 'get_current_time', 'lookup_customer'], 'the agent and the tools marked mcp');
  const ask = tools.find((t) => t.name === 'ask_support');
  assert.deepEqual(ask.inputSchema.required, ['message']);
  assert.equal(ask.inputSchema.properties.thread_id, undefined, 'the session is the conversation');
  assert.ok(tools.find((t) => t.name === 'lookup_customer').inputSchema.properties.email);

  model.push({ text: 'Hello! How can I help?' });
  const first = await client.callTool({ name: 'ask_support', arguments: { message: 'Hi there' } });
  assert.equal(first.isError, false);
  assert.equal(text(first), 'Hello! How can I help?');
  assert.equal(first.structuredContent.thread_id, transport.sessionId);
  assert.equal(first.structuredContent.status, 'idle');

  model.push({ text: 'You said hi.' });
  const second = await client.callTool({ name: 'ask_support', arguments: { message: 'What did I say?' } });
  assert.equal(text(second), 'You said hi.');
  const sent = model.requests.at(-1).body.messages.map((m) => m.content);
  assert.deepEqual(sent.slice(-3), ['Hi there', 'Hello! How can I help?', 'What did I say?'], 'the same thread');

  // A registered tool runs in the session's thread, without a model call.
  const calls = model.requests.length;
  const customer = await client.callTool({ name: 'lookup_customer', arguments: { email: 'ada@example.com' } });
  assert.equal(customer.isError, false);
  assert.equal(JSON.parse(text(customer)).id, 'cus_1001');
  assert.equal(model.requests.length, calls, 'queued calls do not call the model');
  const history = await worker.client.request('GET', `/api/threads/${transport.sessionId}/messages`);
  const tool = history.body.messages.find((m) => m.role === 'tool');
  assert.equal(tool.name, 'lookup_customer');

  // A failure of the tool is its result, with isError; a call that breaks the schema or the
  // refine rules is refused before it is stored.
  const missing = await client.callTool({ name: 'lookup_customer', arguments: { customer_id: 'cus_9999' } });
  assert.equal(missing.isError, true);
  assert.match(text(missing), /no customer with id "cus_9999"/);
  const invalid = await client.callTool({ name: 'lookup_customer', arguments: {} });
  assert.equal(invalid.isError, true);
  assert.match(text(invalid), /either customer_id or email is required/);
  const wrongType = await client.callTool({ name: 'lookup_customer', arguments: { email: 42 } });
  assert.equal(wrongType.isError, true);

  // Tools not marked mcp, and other agents, are not reachable here.
  for (const name of ['issue_refund', 'ask_review', 'no_such_tool']) {
    await assert.rejects(client.callTool({ name, arguments: {} }), (e) => e.code === -32602 && /Unknown tool/.test(e.message), name);
  }
  await client.close();
});

test('/mcp offers every agent; each ask is a new thread unless thread_id names one', async () => {
  const { client, transport } = await connect('/mcp');
  assert.equal(transport.sessionId, undefined, 'stateless');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['ask_review', 'ask_support', 'get_current_time', 'lookup_customer']);
  assert.ok(tools.find((t) => t.name === 'ask_support').inputSchema.properties.thread_id, 'thread_id goes on with a conversation');

  model.push({ text: 'First answer.' });
  const first = await client.callTool({ name: 'ask_support', arguments: { message: 'One' } });
  const thread = first.structuredContent.thread_id;
  assert.match(thread, UUID);
  model.push({ text: 'Second answer.' });
  const again = await client.callTool({ name: 'ask_support', arguments: { message: 'Two', thread_id: thread } });
  assert.equal(again.structuredContent.thread_id, thread);
  assert.deepEqual(model.requests.at(-1).body.messages.filter((m) => m.role === 'user').map((m) => m.content), ['One', 'Two']);
  model.push({ text: 'Fresh.' });
  const fresh = await client.callTool({ name: 'ask_support', arguments: { message: 'Three' } });
  assert.notEqual(fresh.structuredContent.thread_id, thread);

  // A thread of another agent, or none at all, is the caller's mistake: a tool error.
  const other = await client.callTool({ name: 'ask_review', arguments: { message: 'x', thread_id: thread } });
  assert.equal(other.isError, true);
  assert.match(text(other), /not a conversation with the agent "review"/);
  const nowhere = await client.callTool({ name: 'ask_support', arguments: { message: 'x', thread_id: '0b7c3f0e-6a1d-4c2e-9f5a-2d8e4b6a1c3f' } });
  assert.equal(nowhere.isError, true);
  await assert.rejects(client.callTool({ name: 'ask_support', arguments: { message: '' } }), (e) => e.code === -32602);
  await assert.rejects(client.callTool({ name: 'ask_nobody', arguments: { message: 'x' } }), (e) => e.code === -32602);
  await client.close();
});

test('/mcp offers the tools marked mcp too: each call names the thread it runs in', async () => {
  const { client } = await connect('/mcp');
  const { tools } = await client.listTools();
  const lookup = tools.find((t) => t.name === 'lookup_customer');
  assert.ok(lookup.inputSchema.properties.email, 'the tool\'s own arguments');
  assert.ok(lookup.inputSchema.required.includes('thread_id'), 'and the thread it runs in');
  assert.equal(tools.find((t) => t.name === 'issue_refund'), undefined, 'only tools marked mcp');

  const thread = await worker.client.createThread('support');
  const calls = model.requests.length;
  const customer = await client.callTool({ name: 'lookup_customer', arguments: { email: 'ada@example.com', thread_id: thread } });
  assert.equal(customer.isError, false, text(customer));
  assert.equal(JSON.parse(text(customer)).id, 'cus_1001');
  assert.equal(customer.structuredContent?.thread_id ?? thread, thread);
  assert.equal(model.requests.length, calls, 'queued calls do not call the model');
  const history = await worker.client.request('GET', `/api/threads/${thread}/messages`);
  const stored = history.body.messages.find((m) => m.role === 'tool');
  assert.equal(stored.name, 'lookup_customer', 'the call ran in the thread it named');

  // Without a thread, or with one that does not exist: the caller's mistake, said clearly.
  await assert.rejects(client.callTool({ name: 'get_current_time', arguments: {} }), (e) => e.code === -32602 && /"thread_id" is required/.test(e.message));
  const nowhere = await client.callTool({ name: 'get_current_time', arguments: { thread_id: '0b7c3f0e-6a1d-4c2e-9f5a-2d8e4b6a1c3f' } });
  assert.equal(nowhere.isError, true);
  assert.match(text(nowhere), /not found/);
  const notAnId = await client.callTool({ name: 'get_current_time', arguments: { thread_id: 'x' } });
  assert.equal(notAnId.isError, true);
  await client.close();
});

test('a turn that parks on an approval answers `waiting`, and goes on once decided', async () => {
  const { client } = await connect('/mcp');
  const refund = { customer_id: 'cus_1001', amount_cents: 500, reason: 'late delivery' };
  model.push({ text: 'I will refund you.', toolCalls: [{ id: 'call_refund', name: 'issue_refund', arguments: refund }] });
  const parked = await client.callTool({ name: 'ask_support', arguments: { message: 'Refund me please' } });
  assert.equal(parked.isError, false);
  assert.equal(parked.structuredContent.status, 'waiting');
  assert.match(text(parked), /call_refund \(waiting\)/);
  const thread = parked.structuredContent.thread_id;
  model.push({ text: 'Refunded 5.00.' });
  const approved = await worker.client.request('POST', `/api/threads/${thread}/tool-calls/call_refund/approve`, { body: {} });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  model.push({ text: 'Anything else?' });
  const next = await client.callTool({ name: 'ask_support', arguments: { message: 'Thanks', thread_id: thread } });
  assert.equal(text(next), 'Anything else?');
  const history = await worker.client.request('GET', `/api/threads/${thread}/messages`);
  assert.ok(history.body.messages.some((m) => m.role === 'assistant' && m.content === 'Refunded 5.00.'));
  await client.close();
});

test('a failed turn is an error result that says why', async () => {
  const { client } = await connect('/mcp');
  model.push({ error: { status: 400, message: 'model-server: this request is bad' } });
  const failed = await client.callTool({ name: 'ask_support', arguments: { message: 'Hi' } });
  assert.equal(failed.isError, true);
  assert.match(text(failed), /The turn failed/);
  await client.close();
});

test('a client token: its thread is the session, and only tools a browser may call', async () => {
  const thread = await worker.client.createThread('support');
  const minted = await worker.client.request('POST', `/api/threads/${thread}/tokens`, { body: {} });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const { client, transport } = await connect('/mcp/support', { token: minted.body.token });
  assert.equal(transport.sessionId, undefined, 'no new session: the token names it');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['ask_support', 'get_current_time']);
  model.push({ text: 'Hi, token holder.' });
  const answer = await client.callTool({ name: 'ask_support', arguments: { message: 'Hello' } });
  assert.equal(answer.structuredContent.thread_id, thread);
  const time = await client.callTool({ name: 'get_current_time', arguments: {} });
  assert.match(text(time), /^\d{4}-\d{2}-\d{2}T/);
  await assert.rejects(client.callTool({ name: 'lookup_customer', arguments: { email: 'ada@example.com' } }), (e) => e.code === -32602);
  await client.close();

  // /mcp would reach every agent: not for a token. A token for a thread of another agent
  // cannot ask in its name.
  const shared = await post('/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { authorization: `Bearer ${minted.body.token}` });
  assert.equal(shared.status, 403);
  await assert.rejects(connect('/mcp/review', { token: minted.body.token }), /404|not a conversation/, 'refused at initialize');

  // A revoked token: the transport's 401 on the next request, not a tool error.
  assert.equal((await worker.client.request('POST', `/api/threads/${thread}/tokens/revoke`, { body: {} })).status, 200);
  const revoked = await post('/mcp/support', { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'ask_support', arguments: { message: 'x' } } }, { authorization: `Bearer ${minted.body.token}` });
  assert.equal(revoked.status, 401);
});

test('the transport refuses what it must, with clear errors', async () => {
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
  assert.equal((await post('/mcp', init, { authorization: '' })).status, 401, 'no credential');
  assert.equal((await post('/mcp', init, { authorization: 'Bearer et1.forged.token' })).status, 401, 'forged token');
  const get = await fetch(new URL('/mcp/support', worker.url), { headers: { authorization: `Bearer ${API_KEY}` } });
  assert.equal(get.status, 405);
  assert.equal(get.headers.get('allow'), 'POST');

  const parse = await post('/mcp', '{not json');
  assert.equal(parse.status, 400);
  assert.equal(parse.body.error.code, -32700);
  const unknown = await post('/mcp', { jsonrpc: '2.0', id: 7, method: 'resources/list' });
  assert.equal(unknown.body.error.code, -32601);
  assert.equal(unknown.body.id, 7);
  const notJsonRpc = await post('/mcp', { id: 8, method: 'ping' });
  assert.equal(notJsonRpc.body.error.code, -32600);
  const version = await post('/mcp', { jsonrpc: '2.0', id: 9, method: 'ping' }, { 'mcp-protocol-version': '1999-01-01' });
  assert.equal(version.status, 400);
  const notification = await post('/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(notification.status, 202);
  const batch = await post('/mcp', [{ jsonrpc: '2.0', id: 'a', method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/initialized' }]);
  assert.deepEqual(batch.body, [{ jsonrpc: '2.0', id: 'a', result: {} }]);

  // A stateful endpoint: calls outside a session are refused, an unknown session is 404.
  const noSession = await post('/mcp/support', { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  assert.equal(noSession.status, 400);
  const negotiated = await post('/mcp/support', { ...init, params: { ...init.params, protocolVersion: '2031-01-01' } });
  assert.equal(negotiated.body.result.protocolVersion, '2025-11-25', 'our newest when theirs is unknown');
  assert.match(negotiated.headers.get('mcp-session-id'), UUID);
  const ghost = await connect('/mcp/support', { sessionId: '0b7c3f0e-6a1d-4c2e-9f5a-2d8e4b6a1c3f' });
  await assert.rejects(ghost.client.callTool({ name: 'ask_support', arguments: { message: 'x' } }), /404|not found/i);
  assert.equal((await post('/mcp/support', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': 'not-a-uuid' })).status, 404);
  await post('/mcp/nobody', init).then((r) => assert.equal(r.status, 404, 'no such agent'));

  // A deleted conversation ends its session.
  const { client, transport } = await connect('/mcp/support');
  assert.equal((await worker.client.request('DELETE', `/api/threads/${transport.sessionId}`)).status, 200);
  await assert.rejects(client.callTool({ name: 'get_current_time', arguments: {} }), /404|not found/i);
});
