// End-to-end tests of schedules against the real built Worker in Miniflare (workerd): a
// schedule made over HTTP is kept in the thread's SQLite, the Durable Object alarm fires it,
// its message is answered by the (scripted) model over the socket, and the lists, the
// cancellation and the scope rules answer as docs/api.md says.
// Proves: the alarm set to a schedule's due time by the real driver, the `schedule` frames
// (made, fired, cancelled), a queued tool call from a schedule, the 400s with the field named,
// 403 for a client token making or cancelling one while it may list them.
// Does not prove: cron times days ahead (host tests: tests/host/schedules.rs, in virtual
// time), Cloudflare's alarm delivery in production.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';

let model;
let worker;
let client;

withWorker({ setup: async (env) => {
  ({ model, worker, client } = env);
} });

const schedules = (id, rest = '') => `/api/threads/${id}/schedules${rest}`;

async function make(id, body, expect = 201) {
  const r = await client.request('POST', schedules(id), { body });
  assert.equal(r.status, expect, JSON.stringify(r.body));
  return r.body;
}

test('a delayed message fires from the alarm and is answered; the schedule is then done', async () => {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  model.push({ text: 'Standup: nothing blocks.' });
  const made = Date.now();
  const { schedule } = await make(id, { delay_seconds: 1, message: 'Time for the standup.', name: 'standup' });
  assert.equal(schedule.status, 'active');
  assert.equal(schedule.kind, 'once');
  assert.equal(schedule.created_by, 'server');
  assert.ok(Math.abs(schedule.next_at - (made + 1000)) < 2000, JSON.stringify(schedule));
  await sock.waitFor((f) => f.type === 'schedule' && f.schedule.id === schedule.id && f.schedule.status === 'active');

  const answer = await sock.waitFor(
    (f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed',
    { timeout: 10000 },
  );
  assert.equal(answer.message.content, 'Standup: nothing blocks.');
  const fired = await sock.waitFor((f) => f.type === 'schedule' && f.schedule.status === 'done');
  assert.equal(fired.schedule.fired_count, 1);
  const [request] = model.requests;
  assert.equal(request.body.messages.at(-1).content, 'Time for the standup.');

  const active = await client.request('GET', schedules(id));
  assert.deepEqual(active.body.schedules, []);
  const all = await client.request('GET', `${schedules(id)}?ended=true`);
  assert.equal(all.body.schedules.length, 1);
  assert.equal(all.body.schedules[0].status, 'done');
  assert.equal(all.body.schedules[0].next_at, undefined);
  sock.close();
});

test('a schedule can queue a tool call instead of posting a message', async () => {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  await make(id, { delay_seconds: 1, tool: 'get_current_time', arguments: {} });
  const done = await sock.waitFor(
    (f) => f.type === 'tool' && f.name === 'get_current_time' && f.status === 'success',
    { timeout: 10000 },
  );
  assert.ok(done.tool_call_id);
  assert.equal(model.requests.length, 0, 'a queued call asks no model');
  sock.close();
});

test('bad schedules are refused with the field named, nothing is kept', async () => {
  const id = await client.createThread('support');
  for (const [body, says] of [
    [{ message: 'hi' }, 'exactly one of at, delay_seconds, every_seconds, cron'],
    [{ cron: '0 25 * * *', message: 'hi' }, 'cron: not a cron expression'],
    [{ at: 'tomorrow', message: 'hi' }, 'at: not an RFC 3339 instant'],
    [{ every_seconds: 0, message: 'hi' }, 'every_seconds: at least 1 s'],
    [{ delay_seconds: 5, tool: 'no_such_tool' }, 'unknown tool'],
    [{ delay_seconds: 5, message: 'hi', colour: 'red' }, 'unknown field'],
  ]) {
    const r = await client.request('POST', schedules(id), { body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.ok(r.body.error.message.includes(says), `${JSON.stringify(body)}: ${r.body.error.message}`);
  }
  const bad = await client.request('POST', schedules(id), { raw: '{not json' });
  assert.equal(bad.status, 400);
  const list = await client.request('GET', `${schedules(id)}?ended=true`);
  assert.deepEqual(list.body.schedules, []);
  const missing = await client.request('POST', schedules('00000000-0000-4000-8000-000000000000'), {
    body: { delay_seconds: 5, message: 'hi' },
  });
  assert.equal(missing.status, 404);
});

test('a cron schedule is listed with its next UTC time and cancelled; a client token may only list', async () => {
  const id = await client.createThread('support');
  const { schedule } = await make(id, { cron: '0 9 * * *', message: 'Daily summary, please.' });
  assert.equal(schedule.kind, 'cron');
  const next = new Date(schedule.next_at);
  assert.equal(next.getUTCHours(), 9);
  assert.equal(next.getUTCMinutes(), 0);
  assert.ok(schedule.next_at > Date.now() && schedule.next_at <= Date.now() + 24 * 3600 * 1000);

  const minted = await client.request('POST', `/api/threads/${id}/tokens`, { body: { scopes: ['chat'] } });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const token = minted.body.token;
  const listed = await client.request('GET', schedules(id), { key: token });
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  assert.equal(listed.body.schedules[0].id, schedule.id);
  const refused = await client.request('POST', schedules(id), { key: token, body: { delay_seconds: 5, message: 'x' } });
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  const notYours = await client.request('DELETE', schedules(id, `/${schedule.id}`), { key: token });
  assert.equal(notYours.status, 403, JSON.stringify(notYours.body));

  const cancelled = await client.request('DELETE', schedules(id, `/${schedule.id}`));
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  assert.equal(cancelled.body.schedule.status, 'cancelled');
  const again = await client.request('DELETE', schedules(id, `/${schedule.id}`));
  assert.equal(again.status, 409, JSON.stringify(again.body));
  const unknown = await client.request('DELETE', schedules(id, '/no-such-schedule'));
  assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
  const summary = await client.request('GET', `/api/threads/${id}`);
  assert.equal(summary.body.next_schedule_at, undefined, 'nothing left to wake for');
});

// A new thread has no `schedules` table (nor any other feature table) until its first write
// to one: workerd's "no such table" must read as an empty list, an unknown schedule and no MCP
// server, not as a 500 (docs/decisions/2026-12-02-feature-tables-created-on-first-use.md).
test('a new thread, before any schedule, lists none and knows none; its first one creates the table', async () => {
  const id = await client.createThread('support');
  for (const path of [schedules(id), `${schedules(id)}?ended=true`]) {
    const r = await client.request('GET', path);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.schedules, []);
  }
  const unknown = await client.request('DELETE', schedules(id, '/no-such-schedule'));
  assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
  const mcp = await client.request('GET', `/api/threads/${id}/mcp`);
  assert.equal(mcp.status, 200, JSON.stringify(mcp.body));
  assert.deepEqual(mcp.body.servers, []);
  const { schedule } = await make(id, { delay_seconds: 3600, message: 'later' });
  const listed = await client.request('GET', schedules(id));
  assert.deepEqual(listed.body.schedules.map((s) => s.id), [schedule.id]);
  const summary = await client.request('GET', `/api/threads/${id}`);
  assert.equal(summary.body.next_schedule_at, schedule.next_at, 'the table came with its triggers');
});

test('schedules over the socket: create_schedule, list_schedules and cancel_schedule', async () => {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  const made = await sock.rpc('create_schedule', { every_seconds: 3600, message: 'hourly check' });
  assert.equal(made.ok, true, JSON.stringify(made));
  const listed = await sock.rpc('list_schedules', {});
  assert.deepEqual(listed.result.schedules.map((s) => s.id), [made.result.schedule.id]);
  const cancelled = await sock.rpc('cancel_schedule', { schedule_id: made.result.schedule.id });
  assert.equal(cancelled.result.schedule.status, 'cancelled');
  const bad = await sock.rpc('cancel_schedule', {});
  assert.equal(bad.ok, false);
  assert.match(bad.error.message, /schedule_id/);
  sock.close();
});

test('the example tool daily_summary makes a cron schedule through flow.schedule', async () => {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  const queued = await sock.rpc('queue_tool', { name: 'daily_summary', args: { hour_utc: 18, weekdays_only: true } });
  assert.equal(queued.ok, true, JSON.stringify(queued));
  const made = await sock.waitFor((f) => f.type === 'schedule' && f.schedule.created_by === 'tool', { timeout: 10000 });
  assert.equal(made.schedule.kind, 'cron');
  assert.equal(made.schedule.spec, '0 18 * * 1-5');
  assert.equal(made.schedule.name, 'daily summary');
  const result = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'tool');
  assert.match(result.message.content, /daily summary scheduled at 18:00 UTC on weekdays/);
  const bad = await sock.rpc('queue_tool', { name: 'daily_summary', args: { hour_utc: 24 } });
  assert.equal(bad.ok, false);
  assert.match(bad.error.message, /not a time of day/);
  // Cancelled, so it can never fire the model during a later test.
  const cancelled = await client.request('DELETE', schedules(id, `/${made.schedule.id}`));
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  sock.close();
});
