// ThreadConnection against a fake server in this process: the credential as subprotocol, rpc
// results, errors and timeouts, reconnection with backoff and `?after=` resume, duplicate seqs
// dropped, `reset`, the heartbeat, refusals, and close(). What it does not prove: that the
// real Worker speaks the same wire (tests/e2e/js_client.test.mjs does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { ThreadConnection, EdgentError, EdgentTimeoutError } from '../dist/index.js';
import { FakeServer, until } from './fake-server.mjs';

async function setup(serverOpts = {}, connOpts = {}) {
  const server = new FakeServer(serverOpts);
  await server.ready;
  const conn = new ThreadConnection({
    url: server.url,
    threadId: 't1',
    token: 'et1.payload.sig',
    WebSocket,
    heartbeatIntervalMs: 0,
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, jitter: 0 },
    ...connOpts,
  });
  const frames = [];
  conn.on('frame', (f) => frames.push(f));
  const states = [];
  conn.on('state', (s) => states.push(s));
  return { server, conn, frames, states };
}

async function teardown({ server, conn }) {
  conn.close();
  await server.close();
}

test('the token travels as the subprotocol, never in the URL', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const c = await ctx.server.connectionCount(1);
  assert.deepEqual(c.protocols.split(/,\s*/), ['edgent', 'et1.payload.sig']);
  assert.equal(c.url.searchParams.get('token'), null);
  assert.equal(c.url.pathname, '/api/threads/t1/stream');
  await until(() => ctx.conn.state === 'open', 3000, 'open');
  assert.deepEqual(ctx.states, ['open']);
  assert.equal(ctx.frames[0].type, 'hello');
});

test('tokenIn: "query" sends ?token= instead', async (t) => {
  const ctx = await setup({}, { tokenIn: 'query' });
  t.after(() => teardown(ctx));
  const c = await ctx.server.connectionCount(1);
  assert.equal(c.protocols, undefined);
  assert.equal(c.url.searchParams.get('token'), 'et1.payload.sig');
});

test('rpc: a result resolves, an error rejects with its code, on(type) unsubscribes', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  ctx.server.handle('send_message', (p) => (p.content ? { message_id: 'm1' } : { error: { code: 'invalid_request', message: '"content" must not be empty' } }));
  const statuses = [];
  const off = ctx.conn.on('status', (f) => statuses.push(f.state));
  assert.deepEqual(await ctx.conn.sendMessage('hi'), { message_id: 'm1' });
  await assert.rejects(ctx.conn.sendMessage(''), (e) => e instanceof EdgentError && e.code === 'invalid_request' && e.status === 0 && /empty/.test(e.message));
  off();
  ctx.server.broadcast({ type: 'status', state: 'running', turn: 0, side: 'a' });
  await until(() => ctx.frames.some((f) => f.type === 'status' && f.state === 'running'));
  assert.deepEqual(statuses, ['idle']);
  const rpc = ctx.server.rpcs[0];
  assert.equal(rpc.type, 'rpc');
  assert.equal(typeof rpc.id, 'string');
  assert.deepEqual(rpc.params, { content: 'hi' });
});

test('rpc timeout: rejects with EdgentTimeoutError; the late result is ignored', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  ctx.server.handle('get_messages', () => new Promise((r) => setTimeout(() => r({ messages: [], total: 0, has_more: false }), 150)));
  const started = Date.now();
  await assert.rejects(
    ctx.conn.call('get_messages', { limit: 1 }, { timeoutMs: 50 }),
    (e) => e instanceof EdgentTimeoutError && e instanceof EdgentError && e.code === 'timeout' && e.method === 'get_messages' && e.timeoutMs === 50,
  );
  assert.ok(Date.now() - started < 140, 'rejected at the timeout, before the result');
  // The late result arrives and is dropped without effect; the connection keeps working.
  await new Promise((r) => setTimeout(r, 200));
  ctx.server.handle('stop', () => ({ ok: true }));
  assert.deepEqual(await ctx.conn.stop(), { ok: true });
});

test('an error frame naming an rpc id rejects that call', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  ctx.server.handle('stop', (_p, c) => {
    const id = c.server.rpcs.at(-1).id;
    c.send({ type: 'error', code: 'bad_frame', message: 'nope', id });
    return undefined;
  });
  await assert.rejects(ctx.conn.stop(), (e) => e.code === 'bad_frame');
});

test('reconnects with exponential backoff and resumes with ?after=<last seq>; duplicates are dropped', async (t) => {
  const ctx = await setup({}, { reconnect: { initialDelayMs: 40, factor: 2, maxDelayMs: 1000, jitter: 0 } });
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  assert.equal(first.after, undefined, 'a fresh socket asks for no replay');
  await until(() => ctx.conn.state === 'open');
  ctx.server.broadcast({ type: 'message_chunk', message_id: 'm', delta: 'a' }); // seq 1
  ctx.server.broadcast({ type: 'message_chunk', message_id: 'm', delta: 'b' }); // seq 2
  await until(() => ctx.conn.lastSeq === 2, 3000, 'seq 2');

  // Drop the socket twice in a row (the second before hello can arrive): delays 40 then 80 ms.
  let refuseNext = true;
  ctx.server.opts.refuse = () => {
    if (refuseNext) {
      refuseNext = false;
      return 503;
    }
    return undefined;
  };
  const lostAt = Date.now();
  first.ws.terminate();
  const second = await ctx.server.connectionCount(2, 3000);
  const elapsed = second.at - lostAt;
  assert.ok(elapsed >= 40 + 80 - 10, `two backoff delays (40 + 80 ms) passed, got ${elapsed} ms`);
  assert.equal(second.after, 2, 'the new socket resumes after the last seq delivered');
  assert.ok(ctx.states.includes('reconnecting'));

  // The server replays from its log: 1 and 2 again (a server bug or overlap) must not be delivered twice.
  const before = ctx.frames.filter((f) => f.type === 'message_chunk').length;
  second.send({ type: 'message_chunk', message_id: 'm', delta: 'a', seq: 1 });
  second.send({ type: 'message_chunk', message_id: 'm', delta: 'b', seq: 2 });
  second.send({ type: 'message_chunk', message_id: 'm', delta: 'c', seq: 3 });
  await until(() => ctx.conn.lastSeq === 3);
  const chunks = ctx.frames.filter((f) => f.type === 'message_chunk').map((f) => f.delta);
  assert.equal(chunks.length, before + 1);
  assert.deepEqual(chunks, ['a', 'b', 'c']);
});

test('open reports whether the socket resumed', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const opens = [];
  ctx.conn.on('open', (e) => opens.push({ resumed: e.resumed, reconnected: e.reconnected }));
  const first = await ctx.server.connectionCount(1);
  await until(() => opens.length === 1);
  first.ws.terminate();
  await ctx.server.connectionCount(2);
  await until(() => opens.length === 2);
  assert.deepEqual(opens, [
    { resumed: false, reconnected: false },
    { resumed: true, reconnected: true },
  ]);
});

test('reset: lastSeq jumps to the server seq and a reset event is emitted', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const resets = [];
  ctx.conn.on('reset', (f) => resets.push(f.seq));
  const c = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  c.send({ type: 'reset', seq: 40 });
  c.send({ type: 'message_chunk', message_id: 'm', delta: 'old', seq: 39 });
  c.send({ type: 'message_chunk', message_id: 'm', delta: 'new', seq: 41 });
  await until(() => ctx.conn.lastSeq === 41);
  assert.deepEqual(resets, [40]);
  assert.deepEqual(ctx.frames.filter((f) => f.type === 'message_chunk').map((f) => f.delta), ['new']);
});

test('heartbeat: pings, and reconnects when no pong comes back', async (t) => {
  const ctx = await setup({ pong: false }, { heartbeatIntervalMs: 30, heartbeatTimeoutMs: 40 });
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  await ctx.server.connectionCount(2, 2000);
  assert.ok(first.received.some((f) => f.type === 'ping'), 'the client pinged');
  assert.ok(ctx.states.includes('reconnecting'));
});

test('heartbeat: answered pings keep the socket', async (t) => {
  const ctx = await setup({}, { heartbeatIntervalMs: 20, heartbeatTimeoutMs: 40 });
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  await new Promise((r) => setTimeout(r, 250));
  assert.ok(first.received.filter((f) => f.type === 'ping').length >= 3);
  assert.equal(ctx.server.connections.length, 1);
});

test('close() stops reconnecting and fails pending calls', async (t) => {
  const ctx = await setup();
  t.after(() => ctx.server.close());
  const c = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  const pending = ctx.conn.call('get_messages', {}, { timeoutMs: 5000 });
  await until(() => ctx.server.rpcs.length === 1);
  ctx.conn.close();
  await assert.rejects(pending, (e) => e.code === 'closed');
  assert.equal(await c.closed, 1000);
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(ctx.server.connections.length, 1, 'no reconnection after close()');
  assert.equal(ctx.conn.state, 'closed');
  assert.deepEqual(ctx.states, ['open', 'closed']);
  await assert.rejects(ctx.conn.stop(), (e) => e.code === 'closed');
});

test('a refused token is surfaced and not retried', async (t) => {
  const ctx = await setup({ refuse: () => 401 });
  t.after(() => teardown(ctx));
  const failures = [];
  ctx.conn.on('failure', (e) => failures.push(e));
  const call = ctx.conn.call('get_messages', {}).catch((e) => e);
  await until(() => ctx.conn.state === 'closed');
  assert.equal(failures.length, 1);
  assert.ok(failures[0] instanceof EdgentError);
  assert.equal(failures[0].status, 401);
  assert.equal(failures[0].code, 'unauthorized');
  assert.equal((await call).code, 'unauthorized');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(ctx.server.connections.length, 0);
});

test('close code 4401 (tokens revoked) ends the connection', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const failures = [];
  ctx.conn.on('failure', (e) => failures.push(e));
  const c = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  c.ws.close(4401, 'token revoked');
  await until(() => ctx.conn.state === 'closed');
  assert.equal(failures[0].code, 'unauthorized');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(ctx.server.connections.length, 1);
});

test('calls made while reconnecting are sent once the socket is back', async (t) => {
  const ctx = await setup({}, { reconnect: { initialDelayMs: 60, jitter: 0 } });
  t.after(() => teardown(ctx));
  ctx.server.handle('send_message', () => ({ message_id: 'm9' }));
  const first = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  first.ws.terminate();
  await until(() => ctx.conn.state === 'reconnecting');
  const result = await ctx.conn.sendMessage('while away');
  assert.deepEqual(result, { message_id: 'm9' });
  assert.equal(ctx.server.rpcs[0].conn, ctx.server.connections[1]);
});

test('a call in flight when the socket drops fails with disconnected', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  const call = ctx.conn.call('get_messages', {}, { timeoutMs: 5000 });
  await until(() => ctx.server.rpcs.length === 1);
  first.ws.terminate();
  await assert.rejects(call, (e) => e.code === 'disconnected');
});

test('jittered backoff stays within [delay * (1 - jitter), delay]', async (t) => {
  const ctx = await setup({}, { reconnect: { initialDelayMs: 100, jitter: 0.5 }, random: () => 1 });
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  const lostAt = Date.now();
  first.ws.terminate();
  const second = await ctx.server.connectionCount(2);
  const elapsed = second.at - lostAt;
  assert.ok(elapsed >= 45 && elapsed < 100, `half of 100 ms with random() = 1, got ${elapsed}`);
});

test('reconnect.maxAttempts: gives up after that many failed attempts in a row', async (t) => {
  const ctx = await setup({}, { reconnect: { initialDelayMs: 10, jitter: 0, maxAttempts: 2 } });
  t.after(() => teardown(ctx));
  const failures = [];
  ctx.conn.on('failure', (e) => failures.push([ctx.conn.state, e.code]));
  const first = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  ctx.server.opts.refuse = () => 503;
  first.ws.terminate();
  await until(() => ctx.conn.state === 'closed', 3000, 'give up');
  // The drop, then two refused attempts; the last one reports a closed connection.
  assert.equal(failures.length, 3);
  assert.equal(failures[2][0], 'closed');
  assert.equal(failures[2][1], 'upgrade_refused');
});

test('reconnect: false never reconnects', async (t) => {
  const ctx = await setup({}, { reconnect: false });
  t.after(() => teardown(ctx));
  const first = await ctx.server.connectionCount(1);
  await until(() => ctx.conn.state === 'open');
  first.ws.terminate();
  await until(() => ctx.conn.state === 'closed');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(ctx.server.connections.length, 1);
});

test('schedule helpers send list_schedules, create_schedule and cancel_schedule; a schedule frame is delivered by type', async (t) => {
  const ctx = await setup();
  t.after(() => teardown(ctx));
  const made = { id: 's1', kind: 'every', spec: '60000', action: { message: 'tick' }, status: 'active', created_by: 'server', created_at: 1, fired_count: 0, next_at: 61000 };
  ctx.server.handle('list_schedules', (p) => ({ schedules: p.ended ? [made, { ...made, id: 's0', status: 'done' }] : [made] }));
  ctx.server.handle('create_schedule', () => ({ schedule: made }));
  ctx.server.handle('cancel_schedule', (p) =>
    p.schedule_id === 's1' ? { schedule: { ...made, status: 'cancelled' } } : { error: { code: 'invalid_request', message: `no active schedule "${p.schedule_id}"` } },
  );
  const seen = [];
  ctx.conn.on('schedule', (f) => seen.push(f.schedule.status));
  assert.deepEqual((await ctx.conn.listSchedules()).schedules.map((s) => s.id), ['s1']);
  assert.deepEqual((await ctx.conn.listSchedules({ ended: true })).schedules.map((s) => s.id), ['s1', 's0']);
  assert.equal((await ctx.conn.createSchedule({ every_seconds: 60, message: 'tick' })).schedule.id, 's1');
  assert.equal((await ctx.conn.cancelSchedule('s1')).schedule.status, 'cancelled');
  await assert.rejects(ctx.conn.cancelSchedule('s9'), (e) => e instanceof EdgentError && e.code === 'invalid_request' && /s9/.test(e.message));
  assert.deepEqual(
    ctx.server.rpcs.map((r) => [r.method, r.params]),
    [
      ['list_schedules', {}],
      ['list_schedules', { ended: true }],
      ['create_schedule', { every_seconds: 60, message: 'tick' }],
      ['cancel_schedule', { schedule_id: 's1' }],
      ['cancel_schedule', { schedule_id: 's9' }],
    ],
  );
  ctx.server.broadcast({ type: 'schedule', schedule: { ...made, status: 'cancelled' } });
  await until(() => seen.length === 1, 3000, 'the schedule frame');
  assert.deepEqual(seen, ['cancelled']);
});
