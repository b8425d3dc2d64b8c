// The thread state: the pure reducer (frames and pages in, snapshots out) and ThreadStore over
// a fake server (initial load, refetch on reset and on a reconnection that could not resume).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { emptyThread, messageText, reduceThread, ThreadConnection, ThreadStore } from '../dist/index.js';
import { FakeServer, until } from './fake-server.mjs';

const msg = (id, fields = {}) => ({
  id,
  role: 'assistant',
  content: '',
  created_at: 1000,
  silent: false,
  depth: 0,
  status: 'completed',
  ...fields,
});

const run = (frames, s = emptyThread) => frames.reduce((acc, frame) => reduceThread(acc, { type: 'frame', frame }), s);

test('chunks stream into the pending message; the final message replaces them with the same text', () => {
  let s = run([
    { type: 'message', message: msg('a1', { status: 'pending' }) },
    { type: 'message_chunk', message_id: 'a1', delta: 'Hello, ' },
    { type: 'message_chunk', message_id: 'a1', delta: 'world.' },
  ]);
  assert.equal(s.streaming.a1, 'Hello, world.');
  assert.equal(messageText(s, s.messages[0]), 'Hello, world.');
  s = run([{ type: 'message', message: msg('a1', { content: 'Hello, world.' }) }], s);
  assert.equal(s.messages.length, 1);
  assert.equal(s.messages[0].content, 'Hello, world.');
  assert.equal(s.messages[0].status, 'completed');
  assert.equal(s.streaming.a1, undefined);
  assert.equal(messageText(s, s.messages[0]), 'Hello, world.');
});

test('a page of the execution history gives a retrying call its error, as its frame would', () => {
  const s = reduceThread(emptyThread, {
    type: 'tool_calls',
    calls: [
      { id: 'c1', tool: 'get_weather', status: 'retrying', attempts: 1, wake_at: 5000, last_error: 'HTTP 429' },
      { id: 'c2', tool: 'get_weather', status: 'success', attempts: 2, last_error: 'HTTP 503' },
    ],
  });
  assert.deepEqual(s.toolCalls.c1, { tool_call_id: 'c1', name: 'get_weather', status: 'retrying', wake_at: 5000, attempt: 1, error: 'HTTP 429' });
  assert.equal(s.toolCalls.c2.error, undefined, 'a finished call has no current error');
});

test('a retried attempt (the pending message again, empty) drops the text assembled so far', () => {
  const s = run([
    { type: 'message', message: msg('a1', { status: 'pending' }) },
    { type: 'message_chunk', message_id: 'a1', delta: 'partial' },
    { type: 'error', code: 'model_retry', message: 'retrying' },
    { type: 'message', message: msg('a1', { status: 'pending' }) },
    { type: 'message_chunk', message_id: 'a1', delta: 'fresh' },
  ]);
  assert.equal(s.streaming.a1, 'fresh');
  assert.equal(s.error.code, 'model_retry');
});

test('a message frame replaces the message with the same id, in place', () => {
  const s = run([
    { type: 'message', message: msg('u1', { role: 'user', content: 'hi' }) },
    { type: 'message', message: msg('a1', { status: 'pending' }) },
    { type: 'message', message: msg('u2', { role: 'user', content: 'more' }) },
    { type: 'message', message: msg('a1', { content: 'done', status: 'failed' }) },
  ]);
  assert.deepEqual(s.messages.map((m) => [m.id, m.status, m.content]), [
    ['u1', 'completed', 'hi'],
    ['a1', 'failed', 'done'],
    ['u2', 'completed', 'more'],
  ]);
});

test('tool frames: the latest frame of a call is its state', () => {
  let s = run([
    { type: 'tool', tool_call_id: 'c1', name: 'get_weather', status: 'queued' },
    { type: 'tool', tool_call_id: 'c2', name: 'issue_refund', status: 'waiting', waiting_for: { approval: 'pending' }, attempt: 0 },
    { type: 'tool', tool_call_id: 'c1', name: 'get_weather', status: 'running', attempt: 1 },
    { type: 'tool', tool_call_id: 'c1', name: 'get_weather', status: 'retrying', attempt: 1, wake_at: 5, error: 'HTTP 503' },
  ]);
  assert.deepEqual(s.toolCalls.c1, { tool_call_id: 'c1', name: 'get_weather', status: 'retrying', attempt: 1, wake_at: 5, error: 'HTTP 503' });
  assert.deepEqual(s.toolCalls.c2.waiting_for, { approval: 'pending' });
  s = run([{ type: 'tool', tool_call_id: 'c1', name: 'get_weather', status: 'success' }], s);
  assert.deepEqual(s.toolCalls.c1, { tool_call_id: 'c1', name: 'get_weather', status: 'success' });
});

const sched = (id, fields = {}) => ({
  id,
  kind: 'once',
  spec: '5000',
  action: { message: 'ping' },
  status: 'active',
  created_by: 'server',
  created_at: 1000,
  fired_count: 0,
  next_at: 5000,
  ...fields,
});

test('schedule frames: the latest frame of a schedule is its state, by id', () => {
  let s = run([
    { type: 'schedule', schedule: sched('s1') },
    { type: 'schedule', schedule: sched('s2', { kind: 'cron', spec: '0 9 * * *', next_at: 9000 }) },
  ]);
  assert.deepEqual(Object.keys(s.schedules).sort(), ['s1', 's2']);
  const before = s;
  s = run([{ type: 'schedule', schedule: sched('s1', { status: 'done', next_at: undefined, fired_count: 1, last_fired_at: 5001 }), seq: 7 }], s);
  assert.equal(s.schedules.s1.status, 'done');
  assert.equal(s.schedules.s1.fired_count, 1);
  assert.equal(s.schedules.s1.last_fired_at, 5001);
  assert.equal(s.schedules.s2, before.schedules.s2, 'the other schedule is untouched');
  assert.equal(before.schedules.s1.status, 'active', 'snapshots are not mutated');
});

test('a list of schedules is the truth for what it covers: the active list drops held active ones it lacks', () => {
  let s = run([
    { type: 'schedule', schedule: sched('gone') },
    { type: 'schedule', schedule: sched('done', { status: 'done', fired_count: 1 }) },
    { type: 'schedule', schedule: sched('kept', { fired_count: 0 }) },
  ]);
  s = reduceThread(s, { type: 'schedules', ended: false, schedules: [sched('kept', { fired_count: 3 }), sched('new')] });
  assert.deepEqual(Object.keys(s.schedules).sort(), ['done', 'kept', 'new']);
  assert.equal(s.schedules.kept.fired_count, 3);
  assert.equal(s.schedules.done.status, 'done', 'an ended schedule the active list cannot hold stays');
  // With ended, the list is every schedule: nothing else stays.
  s = reduceThread(s, { type: 'schedules', ended: true, schedules: [sched('kept', { status: 'cancelled' })] });
  assert.deepEqual(Object.keys(s.schedules), ['kept']);
  assert.equal(s.schedules.kept.status, 'cancelled');
});

test('status, events (capped) and turn errors; rpc error frames do not count as turn errors', () => {
  let s = emptyThread;
  for (let i = 0; i < 5; i++) {
    s = reduceThread(s, { type: 'frame', frame: { type: 'event', event: 'tick', data: { i }, timestamp: i } }, { maxEvents: 3 });
  }
  assert.deepEqual(s.events.map((e) => e.data.i), [2, 3, 4]);
  s = run([{ type: 'status', state: 'running', turn: 2, side: 'a', seq: 9 }], s);
  assert.deepEqual(s.status, { state: 'running', turn: 2, side: 'a' });
  s = run([{ type: 'error', code: 'bad_frame', message: 'x', id: 'c1' }], s);
  assert.equal(s.error, null);
  s = run([{ type: 'error', code: 'model_http_error', message: 'model server answered 500' }], s);
  assert.equal(s.error.code, 'model_http_error');
});

test('a page merges with what frames brought: page wins for its ids, newer frames stay after it', () => {
  let s = run([{ type: 'message', message: msg('new', { created_at: 5000, role: 'user', content: 'live' }) }]);
  s = reduceThread(s, {
    type: 'page',
    order: 'desc',
    page: { messages: [msg('m2', { created_at: 2000 }), msg('m1', { created_at: 1000 })], total: 2, has_more: false },
  });
  assert.equal(s.loaded, true);
  assert.deepEqual(s.messages.map((m) => m.id), ['m1', 'm2', 'new']);
  // A refetch holding a message now completed ends its stream.
  s = run([
    { type: 'message', message: msg('m3', { created_at: 6000, status: 'pending' }) },
    { type: 'message_chunk', message_id: 'm3', delta: 'abc' },
  ], s);
  s = reduceThread(s, {
    type: 'page',
    order: 'asc',
    page: { messages: [msg('m3', { created_at: 6000, content: 'abcdef' })], total: 4, has_more: true },
  });
  assert.deepEqual(s.messages.map((m) => m.id), ['m1', 'm2', 'new', 'm3']);
  assert.equal(s.streaming.m3, undefined);
  assert.equal(s.messages[3].content, 'abcdef');
});

test('the reducer returns the same snapshot when nothing changed', () => {
  const s = reduceThread(emptyThread, { type: 'connection', state: 'connecting' });
  assert.equal(s, emptyThread);
  assert.equal(reduceThread(s, { type: 'frame', frame: { type: 'pong' } }), s);
});

async function storeSetup() {
  const server = new FakeServer();
  await server.ready;
  let pages = 0;
  server.handle('get_messages', (p) => {
    pages += 1;
    assert.equal(p.order, 'desc');
    return { messages: [msg(`m${pages}`, { created_at: pages })], total: 1, has_more: false };
  });
  server.handle('get_tool_calls', () => ({ tool_calls: [{ id: 'c9', tool: 'issue_refund', status: 'waiting', waiting_for: { approval: 'pending' } }], total: 1, has_more: false }));
  server.handle('list_schedules', (p) => {
    assert.deepEqual(p, {}, 'the store loads the active schedules only');
    return { schedules: [sched('s1')] };
  });
  const conn = new ThreadConnection({ url: server.url, threadId: 't1', token: 'tok', WebSocket, heartbeatIntervalMs: 0, reconnect: { initialDelayMs: 10, jitter: 0 } });
  const store = new ThreadStore(conn);
  let notified = 0;
  store.subscribe(() => notified++);
  return { server, conn, store, pages: () => pages, notified: () => notified };
}

test('ThreadStore loads the newest page and the execution history at connect', async (t) => {
  const ctx = await storeSetup();
  t.after(async () => {
    ctx.store.close();
    await ctx.server.close();
  });
  await until(() => ctx.store.getSnapshot().loaded && ctx.store.getSnapshot().toolCalls.c9);
  const s = ctx.store.getSnapshot();
  assert.deepEqual(s.messages.map((m) => m.id), ['m1']);
  assert.equal(s.connection, 'open');
  assert.deepEqual(s.status, { state: 'idle', turn: 0, side: 'a' });
  assert.equal(s.toolCalls.c9.status, 'waiting');
  assert.ok(ctx.notified() > 0);
  await until(() => ctx.store.getSnapshot().schedules.s1, 3000, 'the schedules loaded');
  assert.equal(ctx.store.getSnapshot().schedules.s1.status, 'active');
  // A frame then moves it on.
  ctx.server.broadcast({ type: 'schedule', schedule: sched('s1', { status: 'done', fired_count: 1 }) });
  await until(() => ctx.store.getSnapshot().schedules.s1.status === 'done', 3000, 'the schedule frame applied');
});

test('ThreadStore with loadSchedules: false does not list schedules; a Worker without them does not break the load', async (t) => {
  const server = new FakeServer();
  await server.ready;
  server.handle('get_messages', () => ({ messages: [msg('m1')], total: 1, has_more: false }));
  server.handle('get_tool_calls', () => ({ tool_calls: [], total: 0, has_more: false }));
  server.handle('list_schedules', () => ({ error: { code: 'unknown_method', message: 'unknown rpc method "list_schedules"' } }));
  const open = (options) =>
    new ThreadStore(new ThreadConnection({ url: server.url, threadId: 't1', token: 'tok', WebSocket, heartbeatIntervalMs: 0 }), options);
  const quiet = open({ loadSchedules: false });
  const old = open({});
  t.after(async () => {
    quiet.close();
    old.close();
    await server.close();
  });
  await until(() => quiet.getSnapshot().loaded && old.getSnapshot().loaded);
  await until(() => server.rpcs.filter((r) => r.method === 'list_schedules').length === 1, 3000, 'one list_schedules');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(server.rpcs.filter((r) => r.method === 'list_schedules').length, 1, 'only the store that loads schedules asked');
  assert.deepEqual(old.getSnapshot().schedules, {});
  assert.equal(old.getSnapshot().error, null, 'a failed schedules load is no error of the thread');
});

test('ThreadStore refetches on reset, and not after a resumed reconnection', async (t) => {
  const ctx = await storeSetup();
  t.after(async () => {
    ctx.store.close();
    await ctx.server.close();
  });
  await until(() => ctx.store.getSnapshot().loaded);
  assert.equal(ctx.pages(), 1);
  ctx.server.connections[0].send({ type: 'reset', seq: 100 });
  await until(() => ctx.pages() === 2, 3000, 'refetch after reset');
  await until(() => ctx.store.getSnapshot().messages.some((m) => m.id === 'm2'));
  // A dropped socket resumes with ?after= (the fake server's hello carries seq): no refetch.
  ctx.server.connections[0].ws.terminate();
  await ctx.server.connectionCount(2);
  await until(() => ctx.store.getSnapshot().connection === 'open');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(ctx.server.connections[1].after, 100);
  assert.equal(ctx.pages(), 2);
});

test('ThreadStore refetches after a reconnection the server could not resume (no seq)', async (t) => {
  const ctx = await storeSetup();
  t.after(async () => {
    ctx.store.close();
    await ctx.server.close();
  });
  await until(() => ctx.store.getSnapshot().loaded);
  // An older server: no seq in hello; the next socket cannot resume.
  ctx.server.opts.helloSeq = undefined;
  ctx.server.accept = ((orig) => function (ws, req) {
    ws.send = ((send) => (data, ...rest) => send.call(ws, data.replace(/,"seq":\d+/, ''), ...rest))(ws.send);
    return orig.call(this, ws, req);
  })(ctx.server.accept);
  ctx.server.connections[0].ws.terminate();
  await until(() => ctx.pages() === 2, 3000, 'refetch after an unresumed reconnection');
});

test('ThreadStore.send/approve/stop call the rpc methods; a failed send sets error', async (t) => {
  const ctx = await storeSetup();
  t.after(async () => {
    ctx.store.close();
    await ctx.server.close();
  });
  ctx.server.handle('send_message', (p) => (p.content === 'bad' ? { error: { code: 'thread_stopped', message: 'the thread is stopped' } } : { message_id: 'u1' }));
  ctx.server.handle('approve_tool', (p) => ({ approved: p.approved, tool_call_id: p.tool_call_id }));
  ctx.server.handle('stop', () => ({ ok: true }));
  assert.deepEqual(await ctx.store.send('hello'), { message_id: 'u1' });
  await ctx.store.approve('c9', false, 'too much');
  await ctx.store.stop();
  const approve = ctx.server.rpcs.find((r) => r.method === 'approve_tool');
  assert.deepEqual(approve.params, { tool_call_id: 'c9', approved: false, reason: 'too much' });
  await assert.rejects(ctx.store.send('bad'), (e) => e.code === 'thread_stopped');
  assert.equal(ctx.store.getSnapshot().error.code, 'thread_stopped');
});
