// End-to-end tests with the router and the thread objects in separate isolates, as in
// production (Miniflare runs the built Worker twice and binds the router's Durable Object
// namespaces to the second copy, `startWorker({ objectsApart: true })`). Everywhere else the
// tests run one isolate, where the router and every object share module state: the
// configuration cache, the tool registry. Here nothing is shared but D1 and the bindings.
// Proves: a conversation created in one request runs a tool turn and is listed; the object,
// not the router, refuses an unknown agent, and an agent added through the API serves a new
// thread at once; a prompt changed through the API (which clears only the router's cache)
// reaches a running thread in the objects' isolate once their cached copy is 5 s old (the
// documented bound), through the version stamp; an MCP session and its refusal.
// Does not prove: Cloudflare's placement of objects, or D1's latency (bench/production.mjs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { API_KEY } from '../support/worker.mjs';
import { withWorker } from '../support/setup.mjs';
import { until } from '../support/until.mjs';

let model;
let worker;
let client;
withWorker({ objectsApart: true, setup: (env) => ({ model, worker, client } = env) });

const api = (method, path, body) => client.request(method, path, { body });

/** Sends a message on `sock` and returns the final assistant frame of its turn. */
async function turn(sock, content) {
  const from = sock.frames.length;
  const sent = await sock.rpc('send_message', { content });
  assert.equal(sent.ok, true, JSON.stringify(sent));
  return sock.finalAssistant(from, 15_000);
}

/** The system text of the model request `i`. */
const systemOf = (i) => model.requests[i].body.messages[0].content;

test('a conversation created in one request runs a tool turn and is listed', async (t) => {
  const sock = await client.openNew('support');
  t.after(() => sock.close());
  model.push({ toolCalls: [{ name: 'get_current_time', arguments: {} }] });
  model.push({ text: 'It is now.' });
  const final = await turn(sock, 'What time is it?');
  assert.equal(final.message.content, 'It is now.');
  const result = sock.frames.find((f) => f.type === 'message' && f.message.role === 'tool');
  assert.ok(result, 'the tool ran in the objects\' isolate');
  assert.equal(model.requests.length, 2);

  // The index row is written in the background by the object, read by the router.
  await until(async () => {
    const listed = await api('GET', '/api/threads?agent=support&limit=100');
    return listed.body.threads.some((r) => r.thread_id === sock.threadId && r.turn_count === 1);
  }, 'the thread in the index', 5_000, 50);
});

test('the object refuses an unknown agent; an agent added through the API serves a thread at once', async (t) => {
  const refused = await api('POST', '/api/threads', { agent_id: 'isolates_agent' });
  assert.equal(refused.status, 404, JSON.stringify(refused.body));
  assert.equal(refused.body.error.message, 'agent "isolates_agent" does not exist');
  await assert.rejects(client.openNew('isolates_agent'), (e) => e.status === 404);

  // Added in the router's isolate; the objects' isolate caches no refusal, so it is there.
  t.after(() => api('DELETE', '/api/agents/isolates_agent'));
  const put = await api('PUT', '/api/agents/isolates_agent', { side_a: { prompt: 'support' } });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const created = await api('POST', '/api/threads', { agent_id: 'isolates_agent' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal(created.body.agent_id, 'isolates_agent');
});

test('a prompt changed through the API reaches a thread in the objects\' isolate within 5 s', async (t) => {
  // A prompt and agent of this test's own: the objects' isolate keeps its copy of what this
  // test changes, so a later test using `support` would meet a copy that turns stale mid-call.
  const { name: _, ...original } = (await api('GET', '/api/prompts/support')).body;
  // One hook, the agent first: hooks run in the order they were added, and a prompt an agent
  // still uses cannot be deleted.
  t.after(async () => {
    await api('DELETE', '/api/agents/isolates_haiku');
    await api('DELETE', '/api/prompts/isolates_prompt');
  });
  const own = await api('PUT', '/api/prompts/isolates_prompt', original);
  assert.equal(own.status, 201, JSON.stringify(own.body));
  const agent = await api('PUT', '/api/agents/isolates_haiku', { side_a: { prompt: 'isolates_prompt' } });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  const sock = await client.openNew('isolates_haiku');
  t.after(() => sock.close());
  model.push({ text: 'one' });
  await turn(sock, 'first');
  const loadedBy = Date.now();
  assert.equal(systemOf(0), original.system);

  // The API clears the router's cache only: the objects' copy holds until it is 5 s old...
  const put = await api('PUT', '/api/prompts/isolates_prompt', { ...original, system: 'Answer in haiku.' });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  model.push({ text: 'two' });
  await turn(sock, 'second');
  if (Date.now() - loadedBy < 4_000) assert.equal(systemOf(1), original.system, 'within the bound');

  // ...then the version stamp, bumped by the API's write, says it moved. The request went out
  // with the old copy while the version was checked: it is cancelled unread and sent again.
  await sleep(Math.max(0, loadedBy + 5_100 - Date.now()));
  model.push({ text: 'never read' }, { text: 'three' });
  const frames = await turn(sock, 'third');
  assert.deepEqual([systemOf(2), systemOf(3)], [original.system, 'Answer in haiku.']);
  assert.equal(model.requests.length, 4);
  const said = JSON.stringify(frames);
  assert.ok(said.includes('three') && !said.includes('never read'), said);
});

test('an MCP session is a thread in the objects\' isolate; an unknown agent is 404', async () => {
  const mcp = new Client({ name: 'edgent-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp/support', worker.url), {
    requestInit: { headers: { authorization: `Bearer ${API_KEY}` } },
  });
  await mcp.connect(transport);
  try {
    model.push({ text: 'Hello from the session.' });
    const answer = await mcp.callTool({ name: 'ask_support', arguments: { message: 'Hi' } });
    assert.notEqual(answer.isError, true, JSON.stringify(answer));
    assert.ok(answer.content.some((c) => c.type === 'text' && c.text.includes('Hello from the session.')), JSON.stringify(answer));
    const summary = await api('GET', `/api/threads/${transport.sessionId}`);
    assert.equal(summary.body.agent_id, 'support');
  } finally {
    await mcp.close();
  }

  const nobody = await fetch(new URL('/mcp/nobody', worker.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
  });
  assert.equal(nobody.status, 404);
  await nobody.body?.cancel();
});
