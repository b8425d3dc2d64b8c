// End-to-end tests of durable tool calls: the real built Worker in Miniflare (workerd), each
// thread's SQLite-backed Durable Object, real WebSockets, the scripted model server standing in
// for OpenAI, and a local stand-in for OpenWeatherMap.
// Proves: retries with backoff and per-attempt timeouts (and the attempt log that records them),
// durable sleeps that park a call without repeating its finished steps, parked queued calls
// that hold nothing up, webhooks (URL, token checks, one delivery, timeouts), approvals, rate
// limits per thread and per deployment (wait or fail), parallel calls where one sleeps, calls
// that resume after the Worker went away, cancellation by stop, and the execution history
// served at GET /api/threads/:id/tool-calls.
// Does not prove: Cloudflare's own alarm and eviction timing, or a real weather service.

import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorker } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { startWeatherServer, defaultReply } from '../support/weather-server.mjs';

const WEATHER_KEY = 'owm-test-key-5b8e1d3f7a20';
const HEX64 = /^[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let model;
let weather;
let worker;
let client;
const dirs = [];

before(async () => {
  model = await startModelServer();
  weather = await startWeatherServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings() });
  client = worker.client;
});

after(async () => {
  await worker?.dispose();
  await model?.close();
  await weather?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

// Every test scripts its own answers and reads only its own requests.
beforeEach(() => {
  model.reset();
  weather.reset();
});

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function weatherBindings(extra = {}) {
  return { WEATHER_API_URL: weather.url, WEATHER_API_KEY: WEATHER_KEY, ...extra };
}

/** A second Worker with extra vars (policy overrides), disposed when the test ends. */
async function extraWorker(t, bindings, { persistDir } = {}) {
  const w = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings(bindings), persistDir });
  t.after(() => w.dispose().catch(() => {}));
  return w;
}

function tempDir() {
  const dir = fs.mkdtempSync(os.tmpdir() + '/edgent-durable-');
  dirs.push(dir);
  return dir;
}

/** Creates a thread (of `agent`) and opens a socket on it that is closed when the test ends. */
async function thread(t, c = client, agent = 'support') {
  const id = await c.createThread(agent);
  const sock = await c.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  sock.threadId = id;
  sock.client = c;
  return sock;
}

/** Waits for an `idle` status frame from frame index `from` on. */
function idle(sock, from, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { from, timeout });
}

/** Sends an rpc that must succeed; returns its result. */
async function rpcOk(sock, method, params) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, true, `${method} ${JSON.stringify(params)} failed: ${JSON.stringify(r)}`);
  return r.result;
}

/** Sends an rpc that must fail with `code`; returns the error body. */
async function rpcErr(sock, method, params, code) {
  const r = await sock.rpc(method, params);
  assert.equal(r.ok, false, `${method} ${JSON.stringify(params)} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.error?.code, code, `${method} ${JSON.stringify(params)}: ${JSON.stringify(r.error)}`);
  return r.error;
}

/** The `tool` frame of `callId` with status `status`, from frame index `from` on. */
function toolFrame(sock, callId, status, from = 0, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && f.status === status, { from, timeout });
}

/** The final state (`success`/`error`) of a tool call, from frame index `from` on. */
function toolDone(sock, callId, from = 0, timeout = 10000) {
  return sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && (f.status === 'success' || f.status === 'error'), { from, timeout });
}

/** The `tool` message answering `callId`, from frame index `from` on. */
function toolMessage(sock, callId, from = 0, timeout = 10000) {
  return sock
    .waitFor((f) => f.type === 'message' && f.message.role === 'tool' && f.message.tool_call_id === callId, { from, timeout })
    .then((f) => f.message);
}

/** Queues `name` over the rpc; returns the call id and the frame index before it. */
async function queue(sock, name, args) {
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', { name, args });
  assert.match(callId, /^queued_[0-9a-f]{32}$/);
  return { callId, from };
}

/**
 * Queues `name` on an idle thread and waits until it finished and the thread is idle again.
 * Returns the call id, its final status, its tool message and the frames it produced.
 */
async function runQueued(sock, name, args, { timeout = 10000 } = {}) {
  const { callId, from } = await queue(sock, name, args);
  const done = await toolDone(sock, callId, from, timeout);
  const message = await toolMessage(sock, callId, from);
  await idle(sock, sock.frames.indexOf(done));
  return { callId, status: done.status, message, frames: sock.frames.slice(from) };
}

/** The `tool` frames of one call among `frames`. */
const toolFrames = (frames, callId) => frames.filter((f) => f.type === 'tool' && f.tool_call_id === callId);

/** The `tool_progress` event data of one call among `frames`, as [step, kind, status]. */
const progressOf = (frames, callId) =>
  frames
    .filter((f) => f.type === 'event' && f.event === 'tool_progress' && f.data.tool_call_id === callId)
    .map((f) => [f.data.step, f.data.kind, f.data.status]);

/** A page of GET /api/threads/:id/tool-calls (must answer 200). */
async function toolCallPage(c, threadId, query = '') {
  const r = await c.request('GET', `/api/threads/${threadId}/tool-calls${query}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** One call's record in the execution history. */
async function callRecord(c, threadId, callId) {
  const page = await toolCallPage(c, threadId, '?limit=200');
  const record = page.tool_calls.find((x) => x.id === callId);
  assert.ok(record, `call ${callId} is in the history: ${JSON.stringify(page)}`);
  return record;
}

/** Polls a call's record until `done(record)` holds; fails with the last record seen. */
async function pollCall(c, threadId, callId, done, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await callRecord(c, threadId, callId);
    if (done(last)) return last;
    await sleep(200);
  }
  assert.fail(`call ${callId} did not reach the expected state within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
}

async function threadSummary(c, threadId) {
  const r = await c.request('GET', `/api/threads/${threadId}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function allMessages(c, threadId) {
  const r = await c.request('GET', `/api/threads/${threadId}/messages?limit=200`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

/** The chat-completions messages after the system prompt, of model request `i`. */
function sentMessages(i) {
  const messages = model.requests[i].body.messages;
  assert.equal(messages[0].role, 'system');
  return messages.slice(1);
}

function within(value, lo, hi, label) {
  assert.ok(typeof value === 'number' && value >= lo && value <= hi, `${label}: ${value} is not within [${lo}, ${hi}]`);
}

function assertApiError(r, status, code) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body?.error?.code, code, JSON.stringify(r.body));
  assert.equal(typeof r.body.error.message, 'string');
}

/** A call's webhook URL split into what a test needs, checked against the Worker's origin. */
function webhookParts(url, c, threadId) {
  const u = new URL(url);
  const [, root, thread, token] = u.pathname.split('/');
  assert.equal(root, 'webhooks', url);
  assert.equal(thread, threadId, url);
  assert.match(token, HEX64, url);
  assert.equal(u.origin, new URL(c.baseUrl).origin, 'the URL points at this Worker');
  return { path: u.pathname, token };
}

/** POSTs to a webhook path without an API key. */
const postHook = (c, path, opts) => c.request('POST', path, { key: null, ...opts });

// ---------------------------------------------------------------------------------------------
// 1. Retries and timeouts (get_weather: 3 attempts, 500 ms backoff, 15 s timeout)
// ---------------------------------------------------------------------------------------------

test('retries: two 503s then a 200 go running(1) → retrying → running(2) → retrying → running(3) → success, and the history logs 3 attempts', async (t) => {
  const sock = await thread(t);
  let n = 0;
  weather.reply((r) => (++n <= 2 ? { status: 503, body: 'Service Unavailable' } : defaultReply(r)));
  const run = await runQueued(sock, 'get_weather', { city: 'Lisbon' });
  assert.equal(run.status, 'success', run.message.content);
  assert.equal(JSON.parse(run.message.content).city, 'Lisbon');
  assert.equal(weather.requests.length, 3);

  const frames = toolFrames(run.frames, run.callId);
  assert.deepEqual(
    frames.map((f) => [f.status, f.attempt ?? null]),
    [['queued', null], ['running', 1], ['retrying', 1], ['running', 2], ['retrying', 2], ['running', 3], ['success', null]],
  );
  const retrying = frames.filter((f) => f.status === 'retrying');
  for (const [i, f] of retrying.entries()) {
    assert.match(f.error, /HTTP 503/, 'a retrying frame says why the attempt failed');
    assert.deepEqual(f.waiting_for, { retry: i + 2, of: 3 });
    // The next attempt starts at the wake time, not before.
    within(weather.requests[i + 1].at - f.wake_at, -50, 1500, `attempt ${i + 2} started after its wake time`);
  }
  // Backoff with equal jitter: 250-500 ms after attempt 1, 500-1000 ms after attempt 2.
  within(retrying[0].wake_at - weather.requests[0].at, 200, 700, 'first backoff');
  within(retrying[1].wake_at - weather.requests[1].at, 450, 1200, 'second backoff');

  const record = await callRecord(client, sock.threadId, run.callId);
  assert.equal(record.tool, 'get_weather');
  assert.equal(record.origin, 'queue');
  assert.equal(record.status, 'success');
  assert.equal(record.attempts, 3);
  assert.equal(record.interruptions, 0);
  assert.equal(record.result, run.message.content);
  assert.match(record.last_error, /HTTP 503/);
  assert.deepEqual(record.attempt_log.map((a) => [a.attempt, a.outcome]), [[1, 'failed'], [2, 'failed'], [3, 'success']]);
  for (const a of record.attempt_log) {
    assert.ok(Number.isInteger(a.started_at) && Number.isInteger(a.finished_at), JSON.stringify(a));
    assert.ok(a.finished_at >= a.started_at, JSON.stringify(a));
  }
  assert.match(record.attempt_log[0].error, /HTTP 503/);
  assert.match(record.attempt_log[1].error, /HTTP 503/);
  assert.equal(record.attempt_log[2].error, null);
  assert.ok(record.attempt_log[1].started_at >= record.attempt_log[0].finished_at);
  assert.ok(record.attempt_log[2].started_at >= record.attempt_log[1].finished_at);
  assert.equal(record.started_at, record.attempt_log[0].started_at);
  assert.equal(record.duration_ms, record.finished_at - record.started_at);
  assert.equal(model.requests.length, 0);
});

test('retries: a fatal answer (404 unknown city) is asked once and becomes an error at once', async (t) => {
  const sock = await thread(t);
  weather.reply(() => ({ status: 404, body: { cod: '404', message: 'city not found' } }));
  const run = await runQueued(sock, 'get_weather', { city: 'Atlantis' });
  assert.equal(run.status, 'error');
  assert.match(run.message.content, /^Error: no city named "Atlantis"/);
  assert.doesNotMatch(run.message.content, /gave up/);
  assert.equal(weather.requests.length, 1);
  assert.deepEqual(toolFrames(run.frames, run.callId).map((f) => f.status), ['queued', 'running', 'error']);
  const record = await callRecord(client, sock.threadId, run.callId);
  assert.equal(record.attempts, 1);
  assert.deepEqual(record.attempt_log.map((a) => [a.attempt, a.outcome]), [[1, 'error']]);
  assert.match(record.attempt_log[0].error, /no city named/);
});

test('retries: with TOOL_GET_WEATHER_TIMEOUT_MS=1000 a service that hangs times out after ~1 s per attempt, 3 times', async (t) => {
  const w = await extraWorker(t, { TOOL_GET_WEATHER_TIMEOUT_MS: '1000' });
  const sock = await thread(t, w.client);
  weather.reply(() => ({ hang: true }));
  const started = Date.now();
  const run = await runQueued(sock, 'get_weather', { city: 'Nowhere' }, { timeout: 15000 });
  const elapsed = Date.now() - started;
  assert.equal(run.status, 'error');
  assert.equal(run.message.content, 'Error: timed out after 1 s (gave up after 3 attempts)');
  assert.equal(weather.requests.length, 3);
  // 3 × 1 s plus two backoffs (250-500 ms, 500-1000 ms).
  within(elapsed, 3500, 9000, 'total time');
  const retrying = toolFrames(run.frames, run.callId).filter((f) => f.status === 'retrying');
  assert.deepEqual(retrying.map((f) => f.error), ['timed out after 1 s', 'timed out after 1 s']);

  const record = await callRecord(w.client, sock.threadId, run.callId);
  assert.equal(record.attempts, 3);
  assert.deepEqual(record.attempt_log.map((a) => a.outcome), ['timeout', 'timeout', 'error']);
  for (const a of record.attempt_log) within(a.finished_at - a.started_at, 900, 2500, `attempt ${a.attempt} duration`);
  console.log(`timeout: 3 attempts of ~1 s (${record.attempt_log.map((a) => a.finished_at - a.started_at).join(', ')} ms), error after ${elapsed} ms`);
});

// ---------------------------------------------------------------------------------------------
// 2. Durable sleep (compare_weather: step "before" → sleep "wait" → step "after")
// ---------------------------------------------------------------------------------------------

test('durable sleep: compare_weather parks with wake_at ≈ now + 2 s, wakes, and does not repeat its first step', async (t) => {
  const sock = await thread(t);
  const { callId, from } = await queue(sock, 'compare_weather', { city: 'Lisbon', wait_seconds: 2 });
  const sleeping = await toolFrame(sock, callId, 'sleeping', from);
  assert.equal(weather.requests.length, 1, 'step "before" fetched once');
  within(sleeping.wake_at - weather.requests[0].at, 1900, 2500, 'wake_at after the first reading');
  assert.equal(sleeping.waiting_for.sleep, 'wait');
  assert.equal(sleeping.waiting_for.until, sleeping.wake_at);
  assert.equal(sleeping.attempt, 1);
  await idle(sock, sock.frames.indexOf(sleeping));
  const parked = await callRecord(client, sock.threadId, callId);
  assert.equal(parked.status, 'sleeping');
  assert.equal(parked.wake_at, sleeping.wake_at);
  assert.deepEqual(parked.waiting_for, sleeping.waiting_for);
  assert.equal(parked.result, null);

  const done = await toolDone(sock, callId, from, 8000);
  assert.equal(done.status, 'success');
  assert.equal(weather.requests.length, 2, 'step "before" was not repeated');
  assert.ok(weather.requests[1].at >= sleeping.wake_at - 50, 'the second reading came after the wake time');
  const result = JSON.parse((await toolMessage(sock, callId, from)).content);
  assert.equal(result.before.city, 'Lisbon');
  assert.equal(result.after.city, 'Lisbon');
  assert.equal(result.temperature_change, 0);

  const frames = sock.frames.slice(from);
  assert.deepEqual(progressOf(frames, callId), [
    ['before', 'step', 'running'],
    ['before', 'step', 'done'],
    ['wait', 'sleep', 'sleeping'],
    ['wait', 'sleep', 'done'],
    ['after', 'step', 'running'],
    ['after', 'step', 'done'],
  ]);
  // Resuming is not a new attempt.
  assert.deepEqual(toolFrames(frames, callId).map((f) => [f.status, f.attempt ?? null]), [
    ['queued', null], ['running', 1], ['sleeping', 1], ['running', 1], ['success', null],
  ]);

  const record = await callRecord(client, sock.threadId, callId);
  assert.equal(record.attempts, 1);
  assert.equal(record.attempt_log.length, 1);
  assert.deepEqual(record.steps.map((s) => [s.name, s.kind, s.status]), [
    ['before', 'step', 'done'], ['wait', 'sleep', 'done'], ['after', 'step', 'done'],
  ]);
  for (const s of record.steps) assert.ok(Number.isInteger(s.duration_ms) && s.duration_ms >= 0, JSON.stringify(s));
  const wait = record.steps[1];
  assert.equal(wait.wake_at, sleeping.wake_at);
  within(wait.duration_ms, 1900, 4000, 'the sleep step lasted about 2 s');
  assert.equal(model.requests.length, 0);
});

// ---------------------------------------------------------------------------------------------
// 3. A parked queued call holds nothing up (remind_later)
// ---------------------------------------------------------------------------------------------

test('remind_later: while it sleeps the thread is idle and answers messages; after ~2 s it posts "Reminder: …" and succeeds', async (t) => {
  const sock = await thread(t);
  const { callId, from } = await queue(sock, 'remind_later', { text: 'call Ada back', in_seconds: 2 });
  const sleeping = await toolFrame(sock, callId, 'sleeping', from);
  await idle(sock, sock.frames.indexOf(sleeping));
  assert.equal((await threadSummary(client, sock.threadId)).status, 'idle');

  // The conversation goes on; the model does not see the parked call.
  model.push({ text: 'Happy to help.' });
  const from2 = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'hello' });
  const answer = await sock.finalAssistant(from2);
  assert.equal(answer.message.content, 'Happy to help.');
  await idle(sock, from2);
  assert.ok(Date.now() < sleeping.wake_at, 'answered while the reminder still slept');
  assert.equal(model.requests.length, 1);
  assert.deepEqual(sentMessages(0), [{ role: 'user', content: 'hello' }]);
  assert.ok(!model.requests[0].rawBody.includes(callId), 'the parked call is not in the model history');

  // The reminder arrives on its own.
  const reminder = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.content === 'Reminder: call Ada back', { from, timeout: 8000 });
  assert.ok(reminder.message.created_at >= sleeping.wake_at, 'posted at the wake time');
  const done = await toolDone(sock, callId, from);
  assert.equal(done.status, 'success');
  assert.match((await toolMessage(sock, callId, from)).content, new RegExp(`^reminder posted as message ${reminder.message.id}$`));
  const event = sock.frames.slice(from).find((f) => f.type === 'event' && f.event === 'reminder');
  assert.deepEqual(event?.data, { text: 'call Ada back' });
  await idle(sock, sock.frames.indexOf(done));
  await sleep(300); // bounded: the reminder does not make the model speak
  assert.equal(model.requests.length, 1);
  assert.equal((await callRecord(client, sock.threadId, callId)).status, 'success');

  // Once finished, the next model call sees the call, its result and the reminder.
  model.push({ text: 'Noted.' });
  const from3 = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'thanks' });
  await sock.finalAssistant(from3);
  const sent = sentMessages(1);
  assert.ok(sent.some((m) => m.role === 'tool' && m.tool_call_id === callId), JSON.stringify(sent));
  assert.ok(sent.some((m) => m.role === 'assistant' && m.content === 'Reminder: call Ada back'), JSON.stringify(sent));
});

// ---------------------------------------------------------------------------------------------
// 4. Webhooks (wait_for_callback)
// ---------------------------------------------------------------------------------------------

test('webhooks: the URL is announced, refuses wrong tokens, bad bodies and GET, accepts one JSON POST without a key, then answers 409', async (t) => {
  const sock = await thread(t);
  const { callId, from } = await queue(sock, 'wait_for_callback', { purpose: 'payment confirmation', timeout_seconds: 60 });
  const waiting = await toolFrame(sock, callId, 'waiting', from);
  // The frame names the wait but not its URL (a capability; every watcher gets frames).
  assert.equal(waiting.waiting_for.url, undefined);
  assert.ok(!JSON.stringify(sock.frames.filter((f) => f.type === 'tool')).includes('/webhooks/'));
  const url = await client.webhookUrl(sock.threadId, callId);
  assert.equal(waiting.waiting_for.webhook, 'callback');
  within(waiting.waiting_for.until - Date.now(), 50_000, 61_000, 'the wait ends in ~60 s');
  assert.equal(waiting.wake_at, waiting.waiting_for.until);
  const { path, token } = webhookParts(url, client, sock.threadId);
  const announced = sock.frames.slice(from).find((f) => f.type === 'event' && f.event === 'callback_url');
  assert.deepEqual(announced?.data, { purpose: 'payment confirmation', url, tool_call_id: callId });
  assert.deepEqual(progressOf(sock.frames.slice(from), callId), [
    ['announce', 'step', 'running'], ['announce', 'step', 'done'], ['callback', 'webhook', 'waiting'],
  ]);
  await idle(sock, sock.frames.indexOf(waiting));

  const stillWaiting = async (label) => {
    const r = await callRecord(client, sock.threadId, callId);
    assert.equal(r.status, 'waiting', `${label}: ${JSON.stringify(r)}`);
    assert.equal(r.result, null, label);
  };

  // Wrong token (well formed), malformed tokens, a thread id that is not a uuid, an unknown thread.
  const wrong = token.replace(/^./, (c) => (c === '0' ? '1' : '0'));
  assertApiError(await postHook(client, `/webhooks/${sock.threadId}/${wrong}`, { body: { paid: true } }), 404, 'not_found');
  assertApiError(await postHook(client, `/webhooks/${sock.threadId}/${token.slice(1)}`, { body: { paid: true } }), 404, 'not_found');
  assertApiError(await postHook(client, `/webhooks/${sock.threadId}/${token.slice(1)}g`, { body: { paid: true } }), 404, 'not_found');
  assertApiError(await postHook(client, `/webhooks/not-a-thread/${token}`, { body: { paid: true } }), 404, 'not_found');
  assertApiError(await postHook(client, `/webhooks/00000000-0000-4000-8000-000000000000/${token}`, { body: { paid: true } }), 404, 'not_found');
  await stillWaiting('after wrong tokens');

  // The right token with a bad request: nothing changes.
  assertApiError(await postHook(client, path, { raw: 'paid=yes', headers: { 'content-type': 'text/plain' } }), 400, 'invalid_json');
  assertApiError(await postHook(client, path, { raw: JSON.stringify({ pad: 'x'.repeat(65 * 1024) }), headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large');
  assertApiError(await client.request('GET', path, { key: null }), 405, 'method_not_allowed');
  await stillWaiting('after refused deliveries');
  assert.deepEqual(toolFrames(sock.frames.slice(from), callId).map((f) => f.status), ['queued', 'running', 'waiting'], 'no refusal changed the call');

  // The delivery: no API key needed.
  const from2 = sock.frames.length;
  const accepted = await postHook(client, path, { body: { paid: true } });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  assert.deepEqual(accepted.body, { ok: true, tool_call_id: callId });
  const done = await toolDone(sock, callId, from2);
  assert.equal(done.status, 'success');
  const content = (await toolMessage(sock, callId, from2)).content;
  assert.ok(content.includes('"received":{"paid":true}'), content);
  assert.deepEqual(JSON.parse(content), { received: { paid: true } });
  const frames = sock.frames.slice(from2);
  assert.ok(!frames.some((f) => f.type === 'event' && f.event === 'callback_url'), 'the announcement is not repeated');
  assert.deepEqual(progressOf(frames, callId), [['callback', 'webhook', 'done']]);

  // One body only.
  const again = await postHook(client, path, { body: { paid: false } });
  assertApiError(again, 409, 'webhook_closed');
  assert.match(again.body.error.message, /already delivered/);
  const record = await callRecord(client, sock.threadId, callId);
  assert.equal(record.status, 'success');
  assert.equal(record.result, content);
  assert.deepEqual(record.steps.map((s) => [s.name, s.kind, s.status]), [['announce', 'step', 'done'], ['callback', 'webhook', 'done']]);
  assert.equal(model.requests.length, 0);
});

test('webhooks: an unanswered wait times out after ~2 s with timed_out: true, and a later POST gets 409', async (t) => {
  const sock = await thread(t);
  const { callId, from } = await queue(sock, 'wait_for_callback', { purpose: 'signature', timeout_seconds: 2 });
  const waiting = await toolFrame(sock, callId, 'waiting', from);
  void waiting;
  const { path } = webhookParts(await client.webhookUrl(sock.threadId, callId), client, sock.threadId);
  const done = await toolDone(sock, callId, from, 8000);
  assert.equal(done.status, 'success');
  assert.ok(Date.now() >= waiting.waiting_for.until, 'not before the timeout');
  assert.deepEqual(JSON.parse((await toolMessage(sock, callId, from)).content), { timed_out: true, waited_seconds: 2 });
  assert.deepEqual(progressOf(sock.frames.slice(from), callId).at(-1), ['callback', 'webhook', 'timed_out']);
  const late = await postHook(client, path, { body: { signed: true } });
  assertApiError(late, 409, 'webhook_closed');
  assert.match(late.body.error.message, /timed out/);
});

// ---------------------------------------------------------------------------------------------
// 5. Approval (issue_refund needs one)
// ---------------------------------------------------------------------------------------------

test('approval: issue_refund waits for approval; approve_tool runs it; a rejection with a reason becomes an error result', async (t) => {
  const sock = await thread(t);
  const refund = { customer_id: 'cus_1001', amount_cents: 1250, reason: 'damaged item' };
  const first = await queue(sock, 'issue_refund', refund);
  const waiting = await toolFrame(sock, first.callId, 'waiting', first.from);
  assert.deepEqual(waiting.waiting_for, { approval: 'pending' });
  assert.equal(waiting.wake_at, undefined, 'no wake time: it waits for a person');
  await idle(sock, sock.frames.indexOf(waiting));
  const pending = await callRecord(client, sock.threadId, first.callId);
  assert.equal(pending.status, 'waiting');
  assert.equal(pending.attempts, 0, 'nothing ran before the approval');
  assert.deepEqual(pending.waiting_for, { approval: 'pending' });
  await sleep(300); // bounded: it does not run by itself
  assert.ok(!toolFrames(sock.frames.slice(first.from), first.callId).some((f) => f.status === 'running'));

  const from2 = sock.frames.length;
  assert.deepEqual(await rpcOk(sock, 'approve_tool', { tool_call_id: first.callId, approved: true }), { tool_call_id: first.callId, approved: true });
  const done = await toolDone(sock, first.callId, from2);
  assert.equal(done.status, 'success');
  assert.match((await toolMessage(sock, first.callId, from2)).content, /^refund re_[0-9a-f]{32} of 1250 cents issued to cus_1001$/);
  await idle(sock, sock.frames.indexOf(done));

  // A second refund, rejected over HTTP with a reason.
  const second = await queue(sock, 'issue_refund', { ...refund, amount_cents: 99999 });
  await toolFrame(sock, second.callId, 'waiting', second.from);
  const base = `/api/threads/${sock.threadId}/tool-calls`;
  assertApiError(await client.request('POST', `${base}/${second.callId}/reject`, { body: { reason: 'too large' }, key: null }), 401, 'unauthorized');
  assertApiError(await client.request('POST', `${base}/${second.callId}/approve`, { key: 'wrong-key' }), 401, 'unauthorized');
  const from3 = sock.frames.length;
  const rejected = await client.request('POST', `${base}/${second.callId}/reject`, { body: { reason: 'too large' } });
  assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
  assert.deepEqual(rejected.body, { tool_call_id: second.callId, approved: false });
  const rejectedDone = await toolDone(sock, second.callId, from3);
  assert.equal(rejectedDone.status, 'error');
  const text = (await toolMessage(sock, second.callId, from3)).content;
  assert.match(text, /^Error: /);
  assert.match(text, /rejected/);
  assert.match(text, /too large/);
  assert.ok(!toolFrames(sock.frames.slice(from3), second.callId).some((f) => f.status === 'running'), 'a rejected call never runs');

  // Deciding again, or on what is not there.
  assertApiError(await client.request('POST', `${base}/${first.callId}/approve`), 409, 'conflict');
  assertApiError(await client.request('POST', `${base}/${second.callId}/approve`), 409, 'conflict');
  await rpcErr(sock, 'approve_tool', { tool_call_id: first.callId, approved: true }, 'conflict');
  assertApiError(await client.request('POST', `${base}/call_nope/approve`), 400, 'invalid_request');
  await rpcErr(sock, 'approve_tool', { tool_call_id: 'call_nope', approved: false }, 'invalid_request');
  assertApiError(await client.request('POST', `${base}/${second.callId}/reject`, { body: { reason: 42 } }), 400, 'invalid_request');

  // Only the approved refund was written.
  const calls = (await toolCallPage(client, sock.threadId)).tool_calls;
  assert.deepEqual(calls.map((c) => [c.id, c.status]), [[first.callId, 'success'], [second.callId, 'error']]);
  assert.equal(model.requests.length, 0);
});

// ---------------------------------------------------------------------------------------------
// 6. Rate limits (TOOL_GET_CURRENT_TIME_RATE_PER_MINUTE=3)
// ---------------------------------------------------------------------------------------------

test('rate limit (wait): of 5 calls 3 run at once and 2 park as rate_limited until the first start + 60 s', async (t) => {
  const w = await extraWorker(t, { TOOL_GET_CURRENT_TIME_RATE_PER_MINUTE: '3' });
  const sock = await thread(t, w.client);
  const from = sock.frames.length;
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await queue(sock, 'get_current_time', {})).callId);
  for (const id of ids.slice(0, 3)) assert.equal((await toolDone(sock, id, from)).status, 'success');
  const limited = [];
  for (const id of ids.slice(3)) limited.push(await toolFrame(sock, id, 'rate_limited', from));
  await idle(sock, Math.max(...limited.map((f) => sock.frames.indexOf(f))));

  const records = (await toolCallPage(w.client, sock.threadId)).tool_calls;
  assert.deepEqual(records.map((r) => r.status), ['success', 'success', 'success', 'rate_limited', 'rate_limited']);
  const firstStart = records[0].attempt_log[0].started_at;
  for (const f of limited) {
    assert.equal(f.wake_at, firstStart + 60_000, 'runs when the first call leaves the window');
    assert.deepEqual(f.waiting_for, { rate_limit: { per_minute: 3, scope: 'thread' } });
  }
  for (const r of records.slice(3)) {
    assert.equal(r.attempts, 0, 'a parked call has not started');
    assert.equal(r.wake_at, firstStart + 60_000);
  }
  const ranIn = records[2].finished_at - records[0].started_at;
  within(ranIn, 0, 3000, 'the first three ran at once');
  assert.ok(!toolFrames(sock.frames.slice(from), ids[3]).some((f) => f.status === 'running'));

  // The thread's tool statuses: a full window wins over "busy" (calls are parked for it).
  const tools = await w.client.request('GET', `/api/threads/${sock.threadId}/tools`);
  assert.equal(tools.status, 200, JSON.stringify(tools.body));
  const status = tools.body.tools.find((x) => x.name === 'get_current_time')?.status;
  assert.equal(status, 'rate_limited');
  assert.equal(tools.body.tools.find((x) => x.name === 'get_weather')?.status, 'available');
  console.log(`rate limit (wait): 3 calls ran within ${ranIn} ms; calls 4-5 rate_limited, wake_at = first start + ${limited[0].wake_at - firstStart} ms; GET /tools says get_current_time is "${status}"`);
});

test('rate limit (fail): with TOOL_GET_CURRENT_TIME_WHEN_LIMITED=fail calls 4 and 5 get "rate limited: … 3 calls per minute …"', async (t) => {
  const w = await extraWorker(t, { TOOL_GET_CURRENT_TIME_RATE_PER_MINUTE: '3', TOOL_GET_CURRENT_TIME_WHEN_LIMITED: 'fail' });
  const sock = await thread(t, w.client);
  const runs = [];
  for (let i = 0; i < 5; i++) runs.push(await runQueued(sock, 'get_current_time', {}));
  assert.deepEqual(runs.map((r) => r.status), ['success', 'success', 'success', 'error', 'error']);
  for (const r of runs.slice(3)) {
    assert.match(r.message.content, /^Error: rate limited: this tool allows 3 calls per minute per thread; try again in \d+ s$/);
    within(Number(/in (\d+) s/.exec(r.message.content)[1]), 55, 60, 'seconds until the window has room');
    assert.ok(!toolFrames(r.frames, r.callId).some((f) => f.status === 'running' || f.status === 'rate_limited'));
  }
  const tools = (await w.client.request('GET', `/api/threads/${sock.threadId}/tools`)).body.tools;
  assert.equal(tools.find((x) => x.name === 'get_current_time').status, 'rate_limited', 'the window is full');
  assert.equal(tools.find((x) => x.name === 'get_weather').status, 'available');
  console.log(`rate limit (fail): calls 4-5 answered "${runs[3].message.content}"`);
});

test('rate limit (deployment scope): 2 calls in thread A and 2 in thread B; the 4th overall fails', async (t) => {
  const w = await extraWorker(t, {
    TOOL_GET_CURRENT_TIME_RATE_PER_MINUTE: '3',
    TOOL_GET_CURRENT_TIME_WHEN_LIMITED: 'fail',
    TOOL_GET_CURRENT_TIME_RATE_SCOPE: 'deployment',
  });
  const a = await thread(t, w.client);
  const b = await thread(t, w.client);
  const statuses = [];
  for (const sock of [a, a, b, b]) {
    const r = await runQueued(sock, 'get_current_time', {});
    statuses.push([sock === a ? 'A' : 'B', r.status, r.message.content]);
  }
  assert.deepEqual(statuses.map(([s, st]) => [s, st]), [['A', 'success'], ['A', 'success'], ['B', 'success'], ['B', 'error']]);
  assert.match(statuses[3][2], /^Error: rate limited: this tool allows 3 calls per minute per deployment; try again in \d+ s$/);
  console.log(`rate limit (deployment): A ok, A ok, B ok, B → "${statuses[3][2]}"`);
  // A third thread is refused too.
  const c = await thread(t, w.client);
  assert.equal((await runQueued(c, 'get_current_time', {})).status, 'error');
});

test('GET /api/tools lists the effective policy and deployment status under operator overrides', async (t) => {
  const w = await extraWorker(t, {
    TOOL_GET_CURRENT_TIME_RATE_PER_MINUTE: '3',
    TOOL_GET_CURRENT_TIME_WHEN_LIMITED: 'fail',
    TOOL_GET_CURRENT_TIME_RATE_SCOPE: 'deployment',
    TOOL_GET_WEATHER_TIMEOUT_MS: '1000',
    TOOL_GET_WEATHER_MAX_ATTEMPTS: '2',
  });
  const sock = await thread(t, w.client);
  for (let i = 0; i < 3; i++) assert.equal((await runQueued(sock, 'get_current_time', {})).status, 'success');
  // The deployment window is full: a fourth call anywhere fails (the runtime applies the overrides).
  assert.equal((await runQueued(sock, 'get_current_time', {})).status, 'error');
  const tools = (await w.client.request('GET', '/api/tools')).body.tools;
  const time = tools.find((x) => x.name === 'get_current_time');
  const weatherTool = tools.find((x) => x.name === 'get_weather');
  const listed = { time: [time.policy.rate_limit, time.status], weather: [weatherTool.policy.timeout_ms, weatherTool.policy.max_attempts] };
  t.diagnostic(`GET /api/tools under overrides: ${JSON.stringify(listed)}`);
  assert.deepEqual(time.policy.rate_limit, { per_minute: 3, when_limited: 'fail', scope: 'deployment' });
  assert.equal(time.status, 'rate_limited', 'the deployment window is full');
  assert.equal(weatherTool.policy.timeout_ms, 1000);
  assert.equal(weatherTool.policy.max_attempts, 2);
});

// ---------------------------------------------------------------------------------------------
// 7. Parallel calls where one sleeps
// ---------------------------------------------------------------------------------------------

test('parallel: two get_weather calls finish while compare_weather sleeps; the model waits, then gets all three results in call order', async (t) => {
  const name = `durable_parallel_${process.pid}`;
  const put = async (path, body) => {
    const r = await client.request('PUT', path, { body });
    assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.status} ${JSON.stringify(r.body)}`);
  };
  await put(`/api/prompts/${name}`, { model: 'default', system: 'You compare weather.', tools: ['get_weather', 'compare_weather'], parallel_tool_calls: true });
  await put(`/api/agents/${name}`, { side_a: { prompt: name } });
  t.after(async () => {
    await client.request('DELETE', `/api/agents/${name}`);
    await client.request('DELETE', `/api/prompts/${name}`);
  });

  const sock = await thread(t, client, name);
  model.push(
    {
      toolCalls: [
        { id: 'call_w1', name: 'get_weather', arguments: { city: 'Lisbon' } },
        { id: 'call_w2', name: 'get_weather', arguments: { city: 'Paris' } },
        { id: 'call_cmp', name: 'compare_weather', arguments: { city: 'Oslo', wait_seconds: 2 } },
      ],
    },
    { text: 'Lisbon and Paris are rainy; Oslo did not change.' },
  );
  const from = sock.frames.length;
  await rpcOk(sock, 'send_message', { content: 'weather in Lisbon and Paris, and how Oslo changes' });
  const sleeping = await toolFrame(sock, 'call_cmp', 'sleeping', from);
  assert.equal((await toolDone(sock, 'call_w1', from)).status, 'success');
  assert.equal((await toolDone(sock, 'call_w2', from)).status, 'success');
  const early = sock.frames.slice(from);
  const running = early.filter((f) => f.type === 'tool' && f.status === 'running').map((f) => f.tool_call_id);
  assert.deepEqual(running.slice(0, 3), ['call_w1', 'call_w2', 'call_cmp'], 'all three started together');
  assert.deepEqual(weather.requests.map((r) => r.query.q).sort(), ['Lisbon', 'Oslo', 'Paris']);

  // While compare_weather sleeps, the model is not called and the turn stays open.
  await sleep(Math.max(0, sleeping.wake_at - Date.now() - 400));
  assert.equal(model.requests.length, 1, 'the model waits for the sleeping call');
  assert.equal((await threadSummary(client, sock.threadId)).status, 'running');

  const fin = await sock.finalAssistant(from, 10000);
  assert.equal(fin.message.content, 'Lisbon and Paris are rainy; Oslo did not change.');
  assert.equal((await toolDone(sock, 'call_cmp', from)).status, 'success');
  await idle(sock, sock.frames.indexOf(fin));
  assert.equal(model.requests.length, 2, 'called once more, after compare_weather finished');
  assert.equal(weather.requests.length, 4);
  const sent = sentMessages(1);
  assert.deepEqual(sent.map((m) => [m.role, m.tool_call_id ?? null]), [
    ['user', null], ['assistant', null], ['tool', 'call_w1'], ['tool', 'call_w2'], ['tool', 'call_cmp'],
  ]);
  assert.equal(JSON.parse(sent[2].content).city, 'Lisbon');
  assert.equal(JSON.parse(sent[3].content).city, 'Paris');
  assert.equal(JSON.parse(sent[4].content).after.city, 'Oslo');
  const cmpDone = sock.frames.findIndex((f) => f.type === 'tool' && f.tool_call_id === 'call_cmp' && f.status === 'success');
  const secondCall = sock.frames.findIndex((f) => f.type === 'message' && f.message.id === fin.message.id);
  assert.ok(cmpDone < secondCall, 'the second model call started after compare_weather finished');
});

// ---------------------------------------------------------------------------------------------
// 8. The Worker goes away while a call is parked (dispose, start again on the same storage)
// ---------------------------------------------------------------------------------------------

test('eviction: a sleeping compare_weather resumes after the Worker restarts, without repeating its first step', { timeout: 90_000 }, async (t) => {
  const dir = tempDir();
  let w = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings(), persistDir: dir });
  const id = await w.client.createThread('support');
  const sock = await w.client.connect(id);
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', { name: 'compare_weather', args: { city: 'Lisbon', wait_seconds: 3 } });
  const sleeping = await toolFrame(sock, callId, 'sleeping', from);
  await idle(sock, sock.frames.indexOf(sleeping));
  sock.close();
  await w.dispose();
  const cutAt = Date.now();
  assert.ok(cutAt < sleeping.wake_at, 'the Worker went away while the call slept');
  assert.equal(weather.requests.length, 1);

  w = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings(), persistDir: dir });
  t.after(() => w.dispose().catch(() => {}));
  const record = await pollCall(w.client, id, callId, (r) => r.status === 'success' || r.status === 'error', 60_000);
  console.log(`eviction: the sleeping call resumed ${Date.now() - sleeping.wake_at} ms after its wake time (Worker restarted ${sleeping.wake_at - cutAt} ms before it)`);
  assert.equal(record.status, 'success', JSON.stringify(record));
  assert.equal(weather.requests.length, 2, 'step "before" came from the record');
  assert.ok(weather.requests[1].at >= sleeping.wake_at - 50);
  assert.equal(record.attempts, 1);
  assert.equal(record.interruptions, 0, 'a sleeping call was not cut short');
  assert.deepEqual(record.steps.map((s) => [s.name, s.status]), [['before', 'done'], ['wait', 'done'], ['after', 'done']]);
  const results = (await allMessages(w.client, id)).filter((m) => m.role === 'tool' && m.tool_call_id === callId);
  assert.equal(results.length, 1, 'exactly one result message');
  assert.equal(results[0].content, record.result);
  assert.equal(JSON.parse(record.result).after.city, 'Lisbon');
});

test('eviction: a call waiting for a webhook survives a restart, and the POST to the new Worker resumes it', { timeout: 60_000 }, async (t) => {
  const dir = tempDir();
  let w = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings(), persistDir: dir });
  const id = await w.client.createThread('support');
  const sock = await w.client.connect(id);
  const from = sock.frames.length;
  const { tool_call_id: callId } = await rpcOk(sock, 'queue_tool', { name: 'wait_for_callback', args: { purpose: 'delivery', timeout_seconds: 60 } });
  const waiting = await toolFrame(sock, callId, 'waiting', from);
  const { path } = webhookParts(await w.client.webhookUrl(id, callId), w.client, id);
  await idle(sock, sock.frames.indexOf(waiting));
  sock.close();
  await w.dispose();

  w = await startWorker({ modelUrl: `${model.url}/v1`, bindings: weatherBindings(), persistDir: dir });
  t.after(() => w.dispose().catch(() => {}));
  assert.equal((await callRecord(w.client, id, callId)).status, 'waiting', 'still waiting after the restart');
  const accepted = await postHook(w.client, path, { body: { delivered: 'yes' } });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const record = await pollCall(w.client, id, callId, (r) => r.status === 'success' || r.status === 'error', 10_000);
  assert.equal(record.status, 'success');
  assert.deepEqual(JSON.parse(record.result), { received: { delivered: 'yes' } });
  const results = (await allMessages(w.client, id)).filter((m) => m.role === 'tool' && m.tool_call_id === callId);
  assert.equal(results.length, 1);
  assertApiError(await postHook(w.client, path, { body: { delivered: 'twice' } }), 409, 'webhook_closed');
});

// ---------------------------------------------------------------------------------------------
// 9. Stop cancels parked calls
// ---------------------------------------------------------------------------------------------

test('stop: a sleeping compare_weather is cancelled with an error result and never wakes', async (t) => {
  const sock = await thread(t);
  const { callId, from } = await queue(sock, 'compare_weather', { city: 'Lisbon', wait_seconds: 2 });
  const sleeping = await toolFrame(sock, callId, 'sleeping', from);
  await idle(sock, sock.frames.indexOf(sleeping));
  const from2 = sock.frames.length;
  const stopped = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
  const done = await toolDone(sock, callId, from2);
  assert.equal(done.status, 'error');
  const content = (await toolMessage(sock, callId, from2)).content;
  assert.match(content, /^Error: cancelled/);
  assert.match(content, /stopped/);

  await sleep(Math.max(0, sleeping.wake_at - Date.now()) + 1000); // bounded: past the wake time
  assert.equal(weather.requests.length, 1, 'no reading after the wake time');
  const record = await callRecord(client, sock.threadId, callId);
  assert.equal(record.status, 'error');
  assert.equal(record.result, content);
  assert.equal(record.wake_at, null);
  assert.equal(toolFrames(sock.frames.slice(from2), callId).length, 1, 'no frame after the cancellation');
  assert.equal((await threadSummary(client, sock.threadId)).status, 'stopped');
});

// ---------------------------------------------------------------------------------------------
// 10. GET /api/threads/:id/tool-calls
// ---------------------------------------------------------------------------------------------

test('GET /api/threads/:id/tool-calls pages like /messages and refuses bad queries, unknown threads and missing keys', async (t) => {
  const sock = await thread(t);
  const ids = [];
  for (const name of ['get_current_time', 'conversation_stats', 'get_current_time']) {
    ids.push((await runQueued(sock, name, {})).callId);
  }
  const all = await toolCallPage(client, sock.threadId);
  assert.equal(all.total, 3);
  assert.equal(all.has_more, false);
  assert.deepEqual(all.tool_calls.map((c) => c.id), ids);
  assert.deepEqual(all.tool_calls.map((c) => c.tool), ['get_current_time', 'conversation_stats', 'get_current_time']);
  for (const c of all.tool_calls) {
    assert.deepEqual(c.arguments, {});
    assert.equal(c.origin, 'queue');
    assert.equal(c.status, 'success');
    assert.equal(c.attempts, 1);
    assert.deepEqual(c.steps, []);
    assert.ok(c.created_at <= c.started_at && c.started_at <= c.finished_at, JSON.stringify(c));
  }

  const first = await toolCallPage(client, sock.threadId, '?limit=2');
  assert.deepEqual([first.tool_calls.map((c) => c.id), first.total, first.has_more], [ids.slice(0, 2), 3, true]);
  const rest = await toolCallPage(client, sock.threadId, '?limit=2&offset=2');
  assert.deepEqual([rest.tool_calls.map((c) => c.id), rest.total, rest.has_more], [ids.slice(2), 3, false]);
  const desc = await toolCallPage(client, sock.threadId, '?order=desc&limit=2');
  assert.deepEqual([desc.tool_calls.map((c) => c.id), desc.has_more], [[ids[2], ids[1]], true]);
  const past = await toolCallPage(client, sock.threadId, '?offset=10');
  assert.deepEqual([past.tool_calls, past.total, past.has_more], [[], 3, false]);

  // The rpc serves the same history.
  const viaRpc = await rpcOk(sock, 'get_tool_calls', { limit: 2, offset: 1 });
  assert.deepEqual(viaRpc.tool_calls.map((c) => c.id), ids.slice(1, 3));
  assert.equal(viaRpc.total, 3);
  // One operation behind both transports: the rpc pages and validates exactly like the route.
  const descRpc = await rpcOk(sock, 'get_tool_calls', { order: 'desc', limit: 2 });
  assert.deepEqual([descRpc.tool_calls.map((c) => c.id), descRpc.has_more], [[ids[2], ids[1]], true]);
  for (const p of [{ limit: 'abc' }, { limit: 0 }, { limit: 201 }, { offset: -1 }, { order: 'sideways' }, { limit: [2] }]) {
    await rpcErr(sock, 'get_tool_calls', p, 'invalid_request');
  }

  for (const q of ['?limit=abc', '?limit=0', '?limit=201', '?offset=-1', '?order=sideways']) {
    assertApiError(await client.request('GET', `/api/threads/${sock.threadId}/tool-calls${q}`), 400, 'invalid_request');
  }
  assertApiError(await client.request('GET', '/api/threads/00000000-0000-4000-8000-000000000000/tool-calls'), 404, 'not_found');
  assertApiError(await client.request('GET', '/api/threads/not-a-uuid/tool-calls'), 404, 'not_found');
  assertApiError(await client.request('GET', `/api/threads/${sock.threadId}/tool-calls`, { key: null }), 401, 'unauthorized');
  assertApiError(await client.request('GET', `/api/threads/${sock.threadId}/tools`, { key: null }), 401, 'unauthorized');
  assert.match(sock.threadId, UUID);
});

test('webhooks: a 100 MB chunked body without Content-Length is refused long before it ends', { timeout: 30_000 }, async () => {
  const { request } = await import('node:http');
  const url = new URL(`/webhooks/00000000-0000-4000-8000-000000000000/${'a'.repeat(64)}`, client.baseUrl);
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const total = 100 * 1024 * 1024;
  let written = 0;
  // The Worker answers 413 and closes while we still write: we see the 413, or (when the
  // close reaches us first) the connection reset. Either way it did not read the 100 MB.
  const outcome = await new Promise((resolve) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode });
      req.destroy();
    });
    req.on('error', (error) => resolve({ error: error.code ?? String(error) }));
    const pump = () => {
      while (written < total && !req.destroyed) {
        written += chunk.length;
        if (!req.write(chunk)) return req.once('drain', pump);
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
  assert.ok(outcome.status === 413 || ['ECONNRESET', 'EPIPE'].includes(outcome.error), JSON.stringify(outcome));
  assert.ok(written < total / 2, `refused after ${written} bytes, not after reading it all`);
  assert.equal((await fetch(new URL('/api/health', client.baseUrl))).status, 200, 'the Worker is still up');
});

test('a tool fetch whose body never ends is refused at 1 MiB, not read until its timeout', { timeout: 60_000 }, async (t) => {
  // The tool's timeout is long: reading the body whole (as before) would end in a timeout.
  const w = await extraWorker(t, { TOOL_GET_WEATHER_TIMEOUT_MS: '20000' });
  const sock = await thread(t, w.client);
  weather.reply(() => ({ endless: true }));
  const started = Date.now();
  const run = await runQueued(sock, 'get_weather', { city: 'Lisbon' }, { timeout: 30_000 });
  weather.reply(defaultReply);
  assert.equal(run.status, 'error', run.message.content);
  assert.match(run.message.content, /larger than 1048576 bytes/);
  assert.ok(Date.now() - started < 15_000, `refused after ${Date.now() - started} ms`);
});
