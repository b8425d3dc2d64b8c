// EdgentClient against a small HTTP server in this process: paths, methods, bodies, the
// bearer credential, and API errors as EdgentError {status, code, message}.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { EdgentClient, EdgentError } from '../dist/index.js';

async function fakeApi(answer) {
  const requests = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const r = { method: req.method, url: req.url, auth: req.headers.authorization, body: body ? JSON.parse(body) : undefined };
    requests.push(r);
    const [status, out] = answer(r);
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(typeof out === 'string' ? out : JSON.stringify(out));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/`;
  return { url, requests, close: () => new Promise((r) => server.close(r)) };
}

test('routes, methods and bodies', async (t) => {
  const api = await fakeApi((r) => [r.method === 'POST' && r.url === '/api/threads' ? 201 : 200, { ok: true, echo: r.url, models: [{ name: 'x' }] }]);
  t.after(api.close);
  const c = new EdgentClient({ url: api.url, token: 'KEY' });
  await c.createThread({ agent_id: 'support', tags: ['web'], token: { scopes: ['chat', 'approve'], ttl_seconds: 600 } });
  await c.getThread('t 1');
  await c.listThreads({ agent: 'support', status: 'idle', tag: 'web', limit: 10, cursor: 'abc', parent: undefined });
  await c.deleteThread('t1');
  await c.getMessages('t1', { limit: 5, order: 'desc' });
  await c.sendMessage('t1', 'hi');
  await c.getToolCalls('t1', { limit: 2 });
  await c.approveToolCall('t1', 'call_1');
  await c.rejectToolCall('t1', 'call_2', 'no');
  await c.stop('t1');
  await c.mintToken('t1', { scopes: ['chat'], ttl_seconds: 60 });
  await c.revokeTokens('t1');
  assert.deepEqual(await c.listConfig('models'), [{ name: 'x' }]);
  await c.getConfig('agents', 'support');
  await c.putConfig('prompts', 'p', { model: 'default' });
  await c.deleteConfig('models', 'old');
  assert.deepEqual(
    api.requests.map((r) => `${r.method} ${r.url}${r.body !== undefined ? ' ' + JSON.stringify(r.body) : ''}`),
    [
      'POST /api/threads {"agent_id":"support","tags":["web"],"token":{"scopes":["chat","approve"],"ttl_seconds":600}}',
      'GET /api/threads/t%201',
      'GET /api/threads?agent=support&status=idle&tag=web&limit=10&cursor=abc',
      'DELETE /api/threads/t1',
      'GET /api/threads/t1/messages?limit=5&order=desc',
      'POST /api/threads/t1/messages {"content":"hi","role":"user"}',
      'GET /api/threads/t1/tool-calls?limit=2',
      'POST /api/threads/t1/tool-calls/call_1/approve {}',
      'POST /api/threads/t1/tool-calls/call_2/reject {"reason":"no"}',
      'POST /api/threads/t1/stop',
      'POST /api/threads/t1/tokens {"scopes":["chat"],"ttl_seconds":60}',
      'POST /api/threads/t1/tokens/revoke',
      'GET /api/models',
      'GET /api/agents/support',
      'PUT /api/prompts/p {"model":"default"}',
      'DELETE /api/models/old',
    ],
  );
  assert.ok(api.requests.every((r) => r.auth === 'Bearer KEY'));
});

test('API errors become EdgentError with status, code and message', async (t) => {
  const api = await fakeApi((r) =>
    r.url.includes('nope')
      ? [404, { error: { code: 'not_found', message: 'thread not found' } }]
      : [502, '<html>bad gateway</html>'],
  );
  t.after(api.close);
  const c = new EdgentClient({ url: api.url, token: 'et1.a.b' });
  await assert.rejects(c.getThread('nope'), (e) => {
    assert.ok(e instanceof EdgentError);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'not_found');
    assert.equal(e.message, 'thread not found');
    return true;
  });
  await assert.rejects(c.getThread('x'), (e) => e.status === 502 && e.code === 'bad_response' && /bad gateway/.test(e.message));
});

test('a network failure is EdgentError network', async () => {
  const c = new EdgentClient({ url: 'http://127.0.0.1:1', token: 'k' });
  await assert.rejects(c.health(), (e) => e instanceof EdgentError && e.code === 'network' && e.status === 0);
});

test('connect() builds a ThreadConnection with the client URL and credential', async () => {
  const seen = [];
  class FakeWS {
    constructor(url, protocols) {
      seen.push({ url, protocols });
      this.readyState = 0;
    }
    send() {}
    close() {}
  }
  const c = new EdgentClient({ url: 'https://edgent.example.com', token: 'et1.x.y', fetch: async () => new Response('{}') });
  const conn = c.connect('abc', { WebSocket: FakeWS, heartbeatIntervalMs: 0 });
  conn.close();
  assert.deepEqual(seen, [{ url: 'wss://edgent.example.com/api/threads/abc/stream', protocols: ['edgent', 'et1.x.y'] }]);
});

test('schedules: list (active, or with ended), create with the spec as the body, cancel by id', async (t) => {
  const schedule = { id: 's 1', kind: 'once', spec: '5000', action: { message: 'hi' }, status: 'active', created_by: 'server', created_at: 1, fired_count: 0, next_at: 5000 };
  const api = await fakeApi((r) => {
    if (r.method === 'GET') return [200, { schedules: [schedule] }];
    if (r.method === 'POST') {
      return r.body.cron === 'nope'
        ? [400, { error: { code: 'invalid_request', message: 'cron: not a cron expression (…)' } }]
        : [201, { schedule }];
    }
    return [200, { schedule: { ...schedule, status: 'cancelled', next_at: undefined } }];
  });
  t.after(api.close);
  const c = new EdgentClient({ url: api.url, token: 'KEY' });
  assert.deepEqual(await c.listSchedules('t1'), { schedules: [schedule] });
  await c.listSchedules('t1', { ended: true });
  await c.listSchedules('t1', { ended: false });
  assert.deepEqual(await c.createSchedule('t1', { delay_seconds: 1, message: 'hi', name: 'n' }), { schedule });
  await c.createSchedule('t1', { tool: 'get_current_time', arguments: { tz: 'UTC' }, every_seconds: 60 });
  const cancelled = await c.cancelSchedule('t/1', 's 1');
  assert.equal(cancelled.schedule.status, 'cancelled');
  await assert.rejects(c.createSchedule('t1', { cron: 'nope', message: 'x' }), (e) => {
    assert.ok(e instanceof EdgentError);
    assert.equal(e.status, 400);
    assert.equal(e.code, 'invalid_request');
    assert.match(e.message, /^cron: not a cron expression/);
    return true;
  });
  assert.deepEqual(
    api.requests.map((r) => `${r.method} ${r.url}${r.body !== undefined ? ' ' + JSON.stringify(r.body) : ''}`),
    [
      'GET /api/threads/t1/schedules',
      'GET /api/threads/t1/schedules?ended=true',
      'GET /api/threads/t1/schedules',
      'POST /api/threads/t1/schedules {"delay_seconds":1,"message":"hi","name":"n"}',
      'POST /api/threads/t1/schedules {"tool":"get_current_time","arguments":{"tz":"UTC"},"every_seconds":60}',
      'DELETE /api/threads/t%2F1/schedules/s%201',
      'POST /api/threads/t1/schedules {"cron":"nope","message":"x"}',
    ],
  );
  assert.ok(api.requests.every((r) => r.auth === 'Bearer KEY'));
});
