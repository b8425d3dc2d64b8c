// End-to-end tests of durable races (`flow.race`): the real built Worker in Miniflare
// (workerd), the thread's SQLite-backed Durable Object and its alarm, real WebSockets, and the
// example workflow `await_reply_or_timeout` (a webhook raced against a sleep), queued with
// `queue_tool`.
// Proves: a POST before the timeout wins with its body and the sleep never wakes the call
// again; the timeout wins when no POST comes, and a later POST gets 409 `webhook_closed`
// naming the race; a race parked across a Worker restart is won by a POST to the new Worker;
// watchers never see the webhook's URL in frames.
// Does not prove: Cloudflare's own alarm timing. The orderings that need a clock under the
// test's control (a POST after the sleep fell due but before the alarm ran, two webhooks, a
// webhook's own timeout, a restart after the race was decided) are host tests
// (tests/host/durable/races.rs).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorker } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

const HEX64 = /^[0-9a-f]{64}$/;
const RACE = 'reply_or_timeout';

let model;
let worker;
const dirs = [];

before(async () => {
  model = await startModelServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1` });
});

after(async () => {
  await worker?.dispose();
  await model?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** Opens a socket on a new thread of `c`'s Worker, closed when the test ends. */
async function thread(t, c) {
  const id = await c.createThread('support');
  const sock = await c.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  sock.threadId = id;
  return sock;
}

/** Queues the racing workflow; returns the call id and the frame index before it. */
async function queueRace(sock, args) {
  const from = sock.frames.length;
  const r = await sock.rpc('queue_tool', { name: 'await_reply_or_timeout', args });
  assert.equal(r.ok, true, JSON.stringify(r));
  return { callId: r.result.tool_call_id, from };
}

function toolFrame(sock, callId, status, from, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === status, { from, timeout });
}

function toolDone(sock, callId, from, timeout = 10000) {
  return sock.waitFor(
    (f) => f.type === 'tool' && f.tool_call_id === callId && (f.status === 'success' || f.status === 'error'),
    { from, timeout },
  );
}

/** The path of the race's webhook, from the call's record (server key), checked. */
async function replyPath(c, threadId, callId) {
  const record = await c.toolCall(threadId, callId);
  const wait = record.waiting_for?.waits?.find((w) => w.webhook === 'reply');
  assert.ok(wait?.url, `the race names its webhook's URL: ${JSON.stringify(record.waiting_for)}`);
  const u = new URL(wait.url);
  const [, root, thread, token] = u.pathname.split('/');
  assert.deepEqual([root, thread], ['webhooks', threadId], wait.url);
  assert.match(token, HEX64);
  return u.pathname;
}

const postHook = (c, path, body) => c.request('POST', path, { key: null, body });

function assertClosed(r, pattern) {
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body?.error?.code, 'webhook_closed', JSON.stringify(r.body));
  assert.match(r.body.error.message, pattern);
}

const stepsOf = (record) => record.steps.map((s) => [s.name, s.kind, s.status]);

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

test('race: a POST before the timeout wins with its body, the sleep never wakes the call, and a second POST gets 409', async (t) => {
  const c = worker.client;
  const sock = await thread(t, c);
  const { callId, from } = await queueRace(sock, { question: 'approve the refund?', timeout_seconds: 3 });
  const waiting = await toolFrame(sock, callId, 'waiting', from);
  assert.equal(waiting.waiting_for.race, RACE);
  assert.deepEqual(waiting.waiting_for.waits.map((w) => w.webhook ?? w.sleep), ['reply', 'timeout']);
  assert.ok(
    !JSON.stringify(sock.frames.filter((f) => f.type === 'tool')).includes('/webhooks/'),
    'no webhook URL in tool frames',
  );
  const sleepEnd = waiting.waiting_for.waits[1].until;
  assert.equal(waiting.wake_at, sleepEnd, 'the call wakes at the sleep, the race\'s earliest end');
  const path = await replyPath(c, sock.threadId, callId);
  const announced = sock.frames.slice(from).find((f) => f.type === 'event' && f.event === 'reply_url');
  assert.equal(new URL(announced?.data?.url).pathname, path, 'the URL is announced once, in a step');

  const accepted = await postHook(c, path, { approved: true });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const done = await toolDone(sock, callId, from);
  assert.equal(done.status, 'success');
  const record = await c.toolCall(sock.threadId, callId);
  assert.deepEqual(JSON.parse(record.result), { replied: { approved: true } });
  assert.deepEqual(stepsOf(record), [
    ['announce', 'step', 'done'],
    ['reply', 'webhook', 'done'],
    ['timeout', 'sleep', 'cancelled'],
    [RACE, 'race', 'done'],
  ]);
  assertClosed(await postHook(c, path, { approved: false }), /already delivered/);

  // Past the sleep's end: the losing sleep runs nothing and changes nothing.
  const framesBefore = sock.frames.length;
  await sleep(Math.max(0, sleepEnd - Date.now()) + 1500);
  assert.deepEqual(
    sock.frames.slice(framesBefore).filter((f) => f.type === 'tool' && f.tool_call_id === callId),
    [],
    'no tool frame after the race was won',
  );
  assert.deepEqual(await c.toolCall(sock.threadId, callId), record);
  assert.equal(model.requests.length, 0, 'a queued race never calls the model');
});

test('race: the timeout wins when no POST comes, and a later POST gets 409 webhook_closed naming the race', async (t) => {
  const c = worker.client;
  const sock = await thread(t, c);
  const { callId, from } = await queueRace(sock, { question: 'sign the form?', timeout_seconds: 2 });
  const waiting = await toolFrame(sock, callId, 'waiting', from);
  const path = await replyPath(c, sock.threadId, callId);
  const done = await toolDone(sock, callId, from, 8000);
  assert.equal(done.status, 'success');
  assert.ok(Date.now() >= waiting.wake_at, 'not before the sleep ended');
  const record = await c.toolCall(sock.threadId, callId);
  assert.deepEqual(JSON.parse(record.result), { timed_out: true, waited_seconds: 2 });
  assert.deepEqual(stepsOf(record), [
    ['announce', 'step', 'done'],
    ['reply', 'webhook', 'cancelled'],
    ['timeout', 'sleep', 'done'],
    [RACE, 'race', 'done'],
  ]);
  assertClosed(await postHook(c, path, { signed: true }), new RegExp(`race "${RACE}"`));
  assert.deepEqual(await c.toolCall(sock.threadId, callId), record, 'the refused POST changed nothing');
});

test('race: a race parked across a Worker restart is won by a POST to the new Worker', { timeout: 60_000 }, async (t) => {
  const dir = fs.mkdtempSync(os.tmpdir() + '/edgent-races-');
  dirs.push(dir);
  let w = await startWorker({ modelUrl: `${model.url}/v1`, persistDir: dir });
  const id = await w.client.createThread('support');
  const sock = await w.client.connect(id);
  await sock.waitFor((f) => f.type === 'status');
  const from = sock.frames.length;
  const r = await sock.rpc('queue_tool', { name: 'await_reply_or_timeout', args: { question: 'ship it?', timeout_seconds: 60 } });
  assert.equal(r.ok, true, JSON.stringify(r));
  const callId = r.result.tool_call_id;
  await toolFrame(sock, callId, 'waiting', from);
  const path = await replyPath(w.client, id, callId);
  sock.close();
  await w.dispose();

  w = await startWorker({ modelUrl: `${model.url}/v1`, persistDir: dir });
  t.after(() => w.dispose().catch(() => {}));
  assert.equal((await w.client.toolCall(id, callId)).status, 'waiting', 'still racing after the restart');
  const accepted = await postHook(w.client, path, { shipped: 'yes' });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const record = await w.client.waitForToolCall(id, callId, (x) => x.status === 'success' || x.status === 'error');
  assert.deepEqual(JSON.parse(record.result), { replied: { shipped: 'yes' } });
  assert.equal(record.attempts, 1, 'a resumption, not a new attempt');
  assert.deepEqual(stepsOf(record).slice(1), [
    ['reply', 'webhook', 'done'],
    ['timeout', 'sleep', 'cancelled'],
    [RACE, 'race', 'done'],
  ]);
  const messages = await w.client.request('GET', `/api/threads/${id}/messages?limit=200`);
  assert.equal(messages.body.messages.filter((m) => m.role === 'tool' && m.tool_call_id === callId).length, 1, 'one result');
  assertClosed(await postHook(w.client, path, { shipped: 'twice' }), /already delivered/);
});
