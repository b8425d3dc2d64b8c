// End-to-end tests of a prompt's MCP servers: the real built Worker in Miniflare (workerd)
// calls a real MCP server built with the official @modelcontextprotocol/sdk in this process
// (tests/support/mcp-server.mjs), while the scripted model asks for its tools.
// Proves: the server's tools offered to the model as <server>__<tool> with their schemas; the
// bearer token from an allowed secret; calls through the durable tool path (text and image
// results, an error result, a 503 retried by the tool's policy, approval when the prompt asks
// for it, the execution history); the session kept and re-initialised once after the server
// restarts; a tool list refreshed when the server says it changed; the operator's rules (a
// secret not in MCP_SECRETS refused at write time).
// Does not prove: MCP servers other than the official SDK's; the 5-minute list TTL (a host
// detail: the stored list's age).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';
import { startMcpServer, PIXEL } from '../support/mcp-server.mjs';

const TOKEN = 'kb-token-0123456789';

let model;
let mcp;
let client;

withWorker({ bindings: { MCP_SECRETS: 'KB_TOKEN', KB_TOKEN: TOKEN }, setup: async (env) => {
  ({ model, client } = env);
  mcp = await startMcpServer({ token: TOKEN });
  const prompt = {
    model: 'default',
    system: 'You answer with the knowledge base.',
    tools: ['get_current_time'],
    mcp_servers: [{ name: 'kb', url: mcp.url, token_secret: 'KB_TOKEN', approval: ['delete_doc'] }],
  };
  const put = await client.request('PUT', '/api/prompts/kb_prompt', { body: prompt });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const agent = await client.request('PUT', '/api/agents/kb_agent', { body: { side_a: { prompt: 'kb_prompt' } } });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
} });

after(async () => {
  await mcp?.close();
});

const toolsOffered = (request) => request.body.tools.map((t) => t.function.name).sort();

// The socket, once its first status frame arrived (so a later wait for `idle` cannot take it).
async function open(id) {
  const sock = await client.connect(id);
  await sock.waitFor((f) => f.type === 'status');
  return sock;
}

async function turn(sock, id, content) {
  const from = sock.frames.length;
  const r = await client.request('POST', `/api/threads/${id}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout: 15000, from });
}

test("the server's tools are offered as <server>__<tool> and run through the tool path", async () => {
  const id = await client.createThread('kb_agent');
  const sock = await open(id);
  model.push(
    { toolCalls: [{ id: 'c_search', name: 'kb__search', arguments: { query: 'refunds' } }, { id: 'c_chart', name: 'kb__chart', arguments: {} }] },
    { text: 'Found 3 articles.' },
  );
  await turn(sock, id, 'What do we say about refunds?');
  const [first, second] = model.requests;
  assert.deepEqual(toolsOffered(first), ['get_current_time', 'kb__chart', 'kb__delete_doc', 'kb__enable_more', 'kb__fail', 'kb__search']);
  const search = first.body.tools.find((t) => t.function.name === 'kb__search').function;
  assert.equal(search.description, 'Searches the knowledge base for articles.');
  assert.equal(search.parameters.properties.query.type, 'string');
  assert.deepEqual(search.parameters.required, ['query']);
  assert.ok(mcp.log.requests.every((r) => r.auth === `Bearer ${TOKEN}`), 'the token from the allowed secret');

  const results = second.body.messages.filter((m) => m.role === 'tool');
  assert.equal(results.find((m) => m.tool_call_id === 'c_search').content, '3 articles about refunds');
  const { body } = await client.request('GET', `/api/threads/${id}/messages`);
  const chart = body.messages.find((m) => m.tool_call_id === 'c_chart');
  assert.deepEqual(chart.parts?.[1], { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } });
  const history = await client.request('GET', `/api/threads/${id}/tool-calls`);
  const searched = history.body.tool_calls.find((c) => c.id === 'c_search');
  assert.equal(searched.status, 'success');
  assert.deepEqual(mcp.log.calls.slice(-2).map((c) => c.tool).sort(), ['chart', 'search']);
  sock.close();
});

test('an error result reaches the model; a passing outage is retried; approval is asked when the prompt says', async () => {
  const id = await client.createThread('kb_agent');
  const sock = await open(id);
  model.push({ toolCalls: [{ id: 'c_fail', name: 'kb__fail', arguments: {} }] }, { text: 'The index is down.' });
  await turn(sock, id, 'Search please');
  const failed = model.requests[1].body.messages.find((m) => m.tool_call_id === 'c_fail');
  assert.match(failed.content, /the index is offline/);

  // Two 503s, then the call works: retried under the default policy (3 attempts).
  mcp.failNext(2);
  model.push({ toolCalls: [{ id: 'c_retry', name: 'kb__search', arguments: { query: 'outage' } }] }, { text: 'Done.' });
  const from = sock.frames.length;
  const retrying = sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === 'c_retry' && f.status === 'retrying', { timeout: 10000 });
  await client.request('POST', `/api/threads/${id}/messages`, { body: { content: 'Try again' } });
  await retrying;
  await sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === 'c_retry' && f.status === 'success', { timeout: 20000 });
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout: 10000, from });
  const calls = await client.request('GET', `/api/threads/${id}/tool-calls`);
  assert.equal(calls.body.tool_calls.find((c) => c.id === 'c_retry').attempts, 3);

  model.push({ toolCalls: [{ id: 'c_delete', name: 'kb__delete_doc', arguments: { id: 'a1' } }] }, { text: 'Deleted.' });
  const waiting = sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === 'c_delete' && f.status === 'waiting');
  await client.request('POST', `/api/threads/${id}/messages`, { body: { content: 'Delete article a1' } });
  await waiting;
  assert.ok(!mcp.log.calls.some((c) => c.tool === 'delete_doc'), 'not before approval');
  const answered = sock.frames.length;
  const approved = await client.request('POST', `/api/threads/${id}/tool-calls/c_delete/approve`, { body: {} });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  await sock.waitFor((f) => f.type === 'message' && f.message.tool_call_id === 'c_delete', { timeout: 10000 });
  assert.deepEqual(mcp.log.calls.at(-1), { tool: 'delete_doc', id: 'a1' });
  // The turn's last model call ('Deleted.') is this test's: a later test's model must not
  // answer it (the next test resets the scripted model and counts its requests).
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout: 10000, from: answered });
  assert.equal(model.requests.length, 6);
  sock.close();
});

test('the session is kept across calls and opened again once the server forgot it', async () => {
  const id = await client.createThread('kb_agent');
  const sock = await open(id);
  const before = mcp.log.initializes;
  model.push({ toolCalls: [{ id: 'c1', name: 'kb__search', arguments: { query: 'a' } }] }, { text: 'one' });
  await turn(sock, id, 'first');
  model.push({ toolCalls: [{ id: 'c2', name: 'kb__search', arguments: { query: 'b' } }] }, { text: 'two' });
  await turn(sock, id, 'second');
  assert.equal(mcp.log.initializes, before + 1, 'one session for the thread');

  mcp.restart();
  model.push({ toolCalls: [{ id: 'c3', name: 'kb__search', arguments: { query: 'c' } }] }, { text: 'three' });
  await turn(sock, id, 'third');
  assert.equal(mcp.log.initializes, before + 2, 'initialised again after the 404');
  const third = model.requests.at(-1).body.messages.find((m) => m.tool_call_id === 'c3');
  assert.equal(third.content, '3 articles about c');
  sock.close();
});

test('a tool list the server says changed is listed again before the next model call', async () => {
  const id = await client.createThread('kb_agent');
  const sock = await open(id);
  model.push({ toolCalls: [{ id: 'c_more', name: 'kb__enable_more', arguments: {} }] }, { text: 'enabled' });
  await turn(sock, id, 'enable more');
  assert.equal(model.requests.length, 2, 'both model calls are this thread\'s');
  assert.ok(toolsOffered(model.requests[0]).includes('kb__enable_more'));
  assert.ok(!toolsOffered(model.requests[0]).includes('kb__more'));
  assert.ok(toolsOffered(model.requests[1]).includes('kb__more'), 'offered right after the notification');
  sock.close();
});

test("the operator's rules: a secret not allowed for MCP servers, or plain http elsewhere, is refused", async () => {
  const base = { model: 'default', tools: [] };
  const secret = await client.request('PUT', '/api/prompts/bad_mcp', {
    body: { ...base, mcp_servers: [{ name: 'kb', url: mcp.url, token_secret: 'OPENAI_API_KEY' }] },
  });
  assert.equal(secret.status, 400);
  assert.match(secret.body.error.message, /MCP_SECRETS/);
  const http = await client.request('PUT', '/api/prompts/bad_mcp', {
    body: { ...base, mcp_servers: [{ name: 'kb', url: 'http://example.com/mcp' }] },
  });
  assert.equal(http.status, 400);
  assert.match(http.body.error.message, /https/);
  const name = await client.request('PUT', '/api/prompts/bad_mcp', {
    body: { ...base, mcp_servers: [{ name: 'K B', url: mcp.url }] },
  });
  assert.equal(name.status, 400);
  const clash = await client.request('PUT', '/api/prompts/bad_mcp', {
    body: { ...base, tools: [], mcp_servers: [{ name: 'kb', url: mcp.url }, { name: 'kb', url: mcp.url }] },
  });
  assert.equal(clash.status, 400);
});
