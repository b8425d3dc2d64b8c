// End-to-end tests of redirects on requests that carry a credential: the real built Worker in
// Miniflare (workerd) asks an MCP server (the official SDK's, tests/support/mcp-server.mjs)
// and the scripted model server through a server that answers every request with a 307 to
// them.
// Proves: an MCP request is not followed to where the redirect points (the real server never
// sees it, so the token never goes on); the call's result says why, and a redirect is final
// (one attempt, no retries); a model request is not followed either: the turn fails with the
// 307 and what to do, and the model server sees nothing.
// Does not prove: redirects between two allowed hosts (they are refused the same way).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { withWorker } from '../support/setup.mjs';
import { startMcpServer } from '../support/mcp-server.mjs';

const TOKEN = 'kb-token-redirect-0123456789';

let model;
let client;
let mcp;
let mover;

/// Answers every request with a 307 to `target` + the same path, and remembers what came.
async function startMover() {
  const seen = [];
  let target = '';
  const server = createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, auth: req.headers.authorization ?? null });
    req.resume();
    res.writeHead(307, { location: `${target}${req.url}` });
    res.end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    seen,
    to(t) { target = t; },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

withWorker({ bindings: { MCP_SECRETS: 'KB_TOKEN', KB_TOKEN: TOKEN }, setup: async (env) => {
  ({ model, client } = env);
  mcp = await startMcpServer({ token: TOKEN });
  mover = await startMover();
  const put = async (path, body) => {
    const r = await client.request('PUT', path, { body });
    assert.ok([200, 201].includes(r.status), `${path}: ${JSON.stringify(r.body)}`);
  };
  await put('/api/prompts/moved_kb', {
    model: 'default', system: 'You use a moved knowledge base.',
    mcp_servers: [{ name: 'moved', url: `${mover.url}/mcp`, token_secret: 'KB_TOKEN' }],
  });
  await put('/api/agents/moved_kb', { side_a: { prompt: 'moved_kb' } });
  await put('/api/models/moved_model', {
    provider: 'openai', model: 'scripted', base_url: `${mover.url}/v1`, api_key_secret: 'OPENAI_API_KEY',
  });
  await put('/api/prompts/moved_model', { model: 'moved_model', system: 'You answer.' });
  await put('/api/agents/moved_model', { side_a: { prompt: 'moved_model' } });
} });

after(async () => {
  await mcp?.close();
  await mover?.close();
});

const turn = (id, content) => client.turn(id, content);

test('an MCP server that redirects is not followed: the call fails at once, saying why, and the token goes no further', async () => {
  mover.seen.length = 0;
  mover.to(mcp.url.replace(/\/mcp$/, ''));
  const before = mcp.log.requests.length;
  const id = await client.createThread('moved_kb');
  model.push(
    { toolCalls: [{ id: 'c_moved', name: 'moved__search', arguments: { query: 'refunds' } }] },
    { text: 'The knowledge base moved.' },
  );
  await turn(id, 'What do we say about refunds?');
  const [first, second] = model.requests;
  assert.ok(!(first.body.tools ?? []).some((t) => t.function.name.startsWith('moved__')), 'a server that redirects lists no tools');
  const result = second.body.messages.find((m) => m.tool_call_id === 'c_moved');
  assert.match(result.content, /MCP server "moved": HTTP 307: a redirect, which is not followed/);
  assert.equal(mcp.log.requests.length, before, 'the real server never got a request');
  assert.ok(mover.seen.length >= 1 && mover.seen.every((r) => r.method === 'POST'));
  const calls = (await client.request('GET', `/api/threads/${id}/tool-calls`)).body.tool_calls;
  const call = calls.find((c) => c.id === 'c_moved');
  assert.equal(call.status, 'error');
  assert.equal(call.attempts, 1, 'a redirect is final: not retried');
});

test('a model server that redirects is not followed: the turn fails with the 307 and what to do', async () => {
  mover.seen.length = 0;
  mover.to(model.url);
  const id = await client.createThread('moved_model');
  model.push({ text: 'You should not see this.' });
  const frames = await turn(id, 'Hello?');
  const error = frames.find((f) => f.type === 'error' && f.code !== 'model_retry');
  assert.ok(error, JSON.stringify(frames));
  assert.match(error.message, /307/);
  assert.match(error.message, /redirect, which is not followed .*base_url/);
  assert.equal(model.requests.length, 0, 'the model server got nothing');
  assert.equal(mover.seen.length, 1, 'one request, not retried');
  assert.equal(mover.seen[0].url, '/v1/chat/completions');
});
