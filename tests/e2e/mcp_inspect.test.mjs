// End-to-end tests of `GET /api/threads/:id/mcp` (the inspector's MCP tab): the real built
// Worker in Miniflare (workerd) lists a real MCP server built with the official
// @modelcontextprotocol/sdk in this process (tests/support/mcp-server.mjs) before a model call,
// and the thread's Durable Object answers what it kept.
// Proves: after one turn the route lists the server (its URL's host only, an open session,
// when its list was fetched and goes stale) and its tools as offered (`kb__search`, with the
// server's name and description); a server that cannot be reached shows its pause and no
// tools; neither the bearer token, nor the session id, nor the URL's path or query is in the
// answer; a thread with no MCP server answers an empty list; an unknown thread is a 404; a
// client token reads its own thread's servers and gets 403 on another thread's.
// Does not prove: the UI's rendering (tests/browser/mcp.test.mjs), the listing's TTL or the
// refresh after list_changed (tests/e2e/mcp_client.test.mjs and the host tests).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { withWorker } from '../support/setup.mjs';
import { startMcpServer } from '../support/mcp-server.mjs';
import { freePort } from '../support/net.mjs';
import { EdgentClient } from '../support/client.mjs';

const TOKEN = 'kb-inspect-token-0123456789';
const TTL_MS = 5 * 60_000;

let model;
let mcp;
let client;
let worker;
let downUrl;

withWorker({ bindings: { MCP_SECRETS: 'KB_TOKEN', KB_TOKEN: TOKEN }, setup: async (env) => {
  ({ model, client, worker } = env);
  mcp = await startMcpServer({ token: TOKEN });
  // Nothing listens there: its listing fails.
  downUrl = `http://127.0.0.1:${await freePort()}/mcp?key=in-the-url`;
  const prompt = {
    model: 'default',
    system: 'You answer with the knowledge base.',
    tools: ['get_current_time'],
    mcp_servers: [
      { name: 'kb', url: `${mcp.url}?tenant=in-the-url`, token_secret: 'KB_TOKEN' },
      { name: 'down', url: downUrl },
    ],
  };
  const put = await client.request('PUT', '/api/prompts/kb_inspect', { body: prompt });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const agent = await client.request('PUT', '/api/agents/kb_inspect', { body: { side_a: { prompt: 'kb_inspect' } } });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
} });

after(async () => {
  await mcp?.close();
});

async function oneTurn(id, content) {
  const sock = await client.connect(id);
  await sock.waitFor((f) => f.type === 'status');
  const from = sock.frames.length;
  const r = await client.request('POST', `/api/threads/${id}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout: 15000, from });
  sock.close();
}

test('after one turn the thread lists its MCP servers, their state and tools, and no secret', async () => {
  const id = await client.createThread('kb_inspect');
  const empty = await client.request('GET', `/api/threads/${id}/mcp`);
  assert.equal(empty.status, 200, JSON.stringify(empty.body));
  assert.deepEqual(empty.body, { servers: [] }, 'nothing before the first model call');

  model.push({ text: 'Nothing to look up.' });
  const before = Date.now();
  await oneTurn(id, 'Hello');
  const offered = model.requests[0].body.tools.map((t) => t.function.name).sort();
  assert.deepEqual(offered, ['get_current_time', 'kb__chart', 'kb__delete_doc', 'kb__enable_more', 'kb__fail', 'kb__search']);

  const r = await client.request('GET', `/api/threads/${id}/mcp`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const [down, kb] = r.body.servers;
  assert.deepEqual(r.body.servers.map((s) => s.name), ['down', 'kb'], 'by name');

  const port = new URL(mcp.url).port;
  assert.equal(kb.host, `127.0.0.1:${port}`);
  assert.equal(kb.session_open, true);
  assert.match(kb.protocol_version, /^\d{4}-\d{2}-\d{2}$/);
  assert.ok(kb.listed_at >= before - 1000 && kb.listed_at <= Date.now(), `listed during the turn: ${kb.listed_at}`);
  assert.equal(kb.expires_at, kb.listed_at + TTL_MS);
  assert.equal(kb.paused_until, undefined);
  assert.deepEqual(kb.tools.map((t) => t.name).sort(), ['kb__chart', 'kb__delete_doc', 'kb__enable_more', 'kb__fail', 'kb__search']);
  assert.deepEqual(kb.tools.find((t) => t.name === 'kb__search'), {
    name: 'kb__search',
    tool: 'search',
    description: 'Searches the knowledge base for articles.',
  });

  // The unreachable one: paused a minute after its failed listing, no tools, no session.
  assert.equal(down.host, new URL(downUrl).host);
  assert.equal(down.session_open, false);
  assert.deepEqual(down.tools, []);
  assert.equal(down.listed_at, undefined);
  assert.ok(down.paused_until >= before + 60_000 - 1000 && down.paused_until <= Date.now() + 60_000, `${down.paused_until}`);

  // No token, no session id, no path or query of the URLs.
  const text = JSON.stringify(r.body);
  assert.ok(!text.includes(TOKEN), 'no token value');
  const sessions = new Set(mcp.log.requests.map((q) => q.session).filter(Boolean));
  assert.ok(sessions.size > 0, 'the server gave a session');
  for (const s of sessions) assert.ok(!text.includes(s), 'no session id');
  assert.ok(!text.includes('in-the-url') && !text.includes('/mcp'), 'no path or query');
  assert.ok(text.includes('KB_TOKEN') === false, 'nothing of the secret either (the table holds none)');
});

test('a thread without MCP servers lists none; an unknown thread is a 404', async () => {
  const id = await client.createThread();
  model.push({ text: 'Hi.' });
  await oneTurn(id, 'Hi');
  const r = await client.request('GET', `/api/threads/${id}/mcp`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, { servers: [] });

  const missing = await client.request('GET', `/api/threads/${randomUUID()}/mcp`);
  assert.equal(missing.status, 404, JSON.stringify(missing.body));
  assert.equal(missing.body.error.code, 'not_found');
  const wrongMethod = await client.request('POST', `/api/threads/${id}/mcp`, { body: {} });
  assert.equal(wrongMethod.status, 404, 'read only');
});

test("a client token reads its own thread's MCP servers, and no other thread's", async () => {
  const mine = await client.createThread('kb_inspect');
  const other = await client.createThread('kb_inspect');
  model.push({ text: 'One.' });
  await oneTurn(mine, 'first');

  const minted = await client.request('POST', `/api/threads/${mine}/tokens`, { body: { scopes: ['chat'] } });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const browser = new EdgentClient(worker.url, minted.body.token);

  const own = await browser.request('GET', `/api/threads/${mine}/mcp`);
  assert.equal(own.status, 200, JSON.stringify(own.body));
  assert.deepEqual(own.body.servers.map((s) => s.name), ['down', 'kb']);
  assert.ok(!JSON.stringify(own.body).includes(TOKEN));

  const refused = await browser.request('GET', `/api/threads/${other}/mcp`);
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'forbidden');
  const anonymous = await client.request('GET', `/api/threads/${mine}/mcp`, { key: null });
  assert.equal(anonymous.status, 401);
});
