// End-to-end tests of resumable sockets: the real built Worker in Miniflare (workerd), a
// scripted model streaming slowly, sockets cut part way and opened again with `?after=<seq>`
// (or the rpc `resume`).
// Proves: every broadcast frame carries a per-thread, strictly increasing `seq`; `hello`
// carries the newest; a socket reopened after a cut mid-answer, mid-tool or across a restart of
// the Worker on the same state gets every frame it missed, in order, then live frames: the text
// it assembles is the stored message, no seq twice, none missing (checked against a full
// replay); the log keeps the newest 2,000 frames, and a resume from before them is a `reset`;
// bad `after` values are refused before the upgrade (400) or as an rpc error. Prints the
// frames replayed and the time from reconnecting to the first replayed frame over 50 cuts.
// Does not prove: Cloudflare's production network between client and edge (its own socket
// drops and reconnect timing), or more than one Worker instance serving a thread.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { startWorker, API_KEY } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { startStepServer } from '../support/step-server.mjs';
import { FrameSocket } from '../support/client.mjs';

let model;
let steps;
let worker;
const dirs = [];

before(async () => {
  model = await startModelServer();
  steps = await startStepServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1`, bindings: stepBindings() });
});

after(async () => {
  await worker?.dispose();
  await model?.close();
  await steps?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function stepBindings() {
  return { WEATHER_API_URL: steps.url, WEATHER_API_KEY: 'owm-test-key-resume' };
}

/** Opens the thread's socket, with `?after=` when given; resolves once `hello` arrived. */
async function open(w, id, after) {
  const query = after === undefined ? '' : `?after=${encodeURIComponent(after)}`;
  const url = w.url.replace(/^http/, 'ws').replace(/\/$/, '') + `/api/threads/${id}/stream${query}`;
  const sock = new FrameSocket(new WebSocket(url, { headers: { authorization: `Bearer ${API_KEY}` } }));
  await sock.opened;
  await sock.waitFor((f) => f.type === 'hello');
  await sock.waitFor((f) => f.type === 'status'); // the greeting, always second
  return sock;
}

/** The answer to an upgrade that is refused: its status and JSON body. */
function refusal(w, id, after) {
  const url = w.url.replace(/^http/, 'ws').replace(/\/$/, '') + `/api/threads/${id}/stream?after=${encodeURIComponent(after)}`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${API_KEY}` } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.terminate();
      reject(new Error(`after=${after} was accepted`));
    });
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
    });
    ws.once('error', () => {});
  });
}

/** A directory for a Worker's state that outlives the Worker (removed after the file). */
function stateDir() {
  const dir = fs.mkdtempSync(os.tmpdir() + '/edgent-resume-');
  dirs.push(dir);
  return dir;
}

/** The Worker over the state kept in `dir` (start it again on the same `dir` for a restart). */
function startPersistent(dir) {
  return startWorker({ modelUrl: `${model.url}/v1`, persistDir: dir });
}

/** Cuts the socket at once (no closing handshake), as a dropped connection would; the frames seen. */
function cut(sock) {
  const seen = [...sock.frames];
  sock.ws.terminate();
  return seen;
}

// The logged frames: those with a seq, less `hello` and `reset` (which name the newest seq).
const logged = (frames) => frames.filter((f) => f.seq !== undefined && f.type !== 'hello' && f.type !== 'reset');
// The thread went idle (a broadcast status, not the greeting).
const idleLogged = (f) => f.type === 'status' && f.state === 'idle' && f.seq !== undefined;
const seqs = (frames) => logged(frames).map((f) => f.seq);

function assertStrictlyIncreasing(list, what) {
  for (let i = 1; i < list.length; i++) {
    assert.ok(list[i] > list[i - 1], `${what}: seq ${list[i]} after ${list[i - 1]} (at ${i}): ${list.join(',')}`);
  }
}

/** A client's view of a message: chunks appended, a `message` frame replaces it. */
function assemble(frames, messageId) {
  let text = '';
  let chunks = '';
  for (const f of frames) {
    if (f.type === 'message_chunk' && f.message_id === messageId) {
      text += f.delta;
      chunks += f.delta;
    }
    if (f.type === 'message' && f.message.id === messageId) text = f.message.content;
  }
  return { text, chunks };
}

async function storedMessage(w, id, messageId) {
  const r = await w.client.request('GET', `/api/threads/${id}/messages?limit=200`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages.find((m) => m.id === messageId);
}

/** The whole log as a fresh socket resuming from 0 gets it (hello, status, then the frames). */
async function fullReplay(w, id) {
  const sock = await open(w, id, 0);
  await sleep(150);
  sock.close();
  return logged(sock.frames.slice(2));
}

/**
 * Checks what a client saw over a cut and a resume: strictly increasing seqs, none twice, and
 * none missing: every frame the log holds after the first seq seen is among them (compaction
 * only drops frames a later one replaced).
 */
async function assertNoGapNoDuplicate(w, id, before, afterCut) {
  const all = [...logged(before), ...logged(afterCut)];
  assertStrictlyIncreasing(all.map((f) => f.seq), 'seqs over the cut');
  const seen = new Map(all.map((f) => [f.seq, f]));
  const lastBefore = seqs(before).at(-1) ?? 0;
  const log = await fullReplay(w, id);
  for (const f of log.filter((f) => f.seq > lastBefore)) {
    assert.ok(seen.has(f.seq), `frame ${f.seq} (${f.type}) was never sent to the resumed socket`);
    assert.deepEqual(seen.get(f.seq), f, 'a replayed frame is the frame as first sent');
  }
}

const SLOW_TEXT = 'Resuming works: every missed chunk arrives once, in order, after the cut.';

test('every frame carries an increasing seq, hello the newest; a fresh socket gets hello and status only', async () => {
  const id = await worker.client.createThread();
  const first = await open(worker, id);
  assert.deepEqual(first.frames[0], { type: 'hello', thread_id: id, protocol: 1, seq: 0 });
  model.push({ text: 'Hi there, how can I help?', chunkSize: 5 });
  const r = await first.rpc('send_message', { content: 'hello' });
  assert.equal(r.ok, true);
  assert.equal(r.seq, undefined, 'a result is for one socket: no seq');
  await first.finalAssistant();
  await first.waitFor(idleLogged);
  const numbered = seqs(first.frames);
  assert.ok(numbered.length >= 6, JSON.stringify(first.frames));
  assertStrictlyIncreasing(numbered, 'live frames');
  assert.equal(numbered[0], 1);
  for (const f of first.frames.slice(1)) {
    const oneSocket = ['result', 'pong'].includes(f.type) || f === first.frames[1];
    assert.equal(f.seq === undefined, oneSocket, `seq on ${JSON.stringify(f)}`);
  }
  first.close();

  const second = await open(worker, id);
  await sleep(100);
  assert.equal(second.frames[0].seq, numbered.at(-1), 'hello carries the newest seq');
  assert.deepEqual(second.frames.map((f) => f.type), ['hello', 'status']);
  assert.equal(second.frames[1].seq, undefined);
  second.close();
});

test('a socket cut mid-answer resumes with ?after=: the missed chunks, then live ones; the text is the stored message', async () => {
  const id = await worker.client.createThread();
  const sock = await open(worker, id);
  model.push({ text: SLOW_TEXT, chunkSize: 3, chunkDelayMs: 25 });
  const sent = await sock.rpc('send_message', { content: 'tell me about resuming' });
  assert.equal(sent.ok, true);
  const chunks = () => sock.frames.filter((f) => f.type === 'message_chunk');
  await sock.waitFor(() => chunks().length >= 4);
  const messageId = chunks()[0].message_id;
  const before = cut(sock);
  const lastSeen = seqs(before).at(-1);
  await sleep(120); // frames go on being broadcast while the client is away

  const again = await open(worker, id, lastSeen);
  const hello = again.frames[0];
  assert.ok(hello.seq > lastSeen, `frames were sent meanwhile: hello.seq ${hello.seq} > ${lastSeen}`);
  assert.equal(again.frames[1].type, 'status');
  await again.finalAssistant(2, 10000);
  await again.waitFor(idleLogged, { from: 2 });
  const after = again.frames.slice(2);
  const replayed = logged(after).filter((f) => f.seq <= hello.seq);
  assert.ok(replayed.length >= 1, 'the missed frames were replayed');
  assert.equal(replayed[0].seq, lastSeen + 1, 'the replay starts right after the last seq seen');
  assert.ok(replayed.some((f) => f.type === 'message_chunk'), 'mid-answer: chunks are replayed');

  const stored = await storedMessage(worker, id, messageId);
  assert.equal(stored.content, SLOW_TEXT);
  const view = assemble([...before, ...after], messageId);
  assert.equal(view.chunks, SLOW_TEXT, 'chunks before the cut + replayed and live chunks = the stored text');
  assert.equal(view.text, SLOW_TEXT);
  await assertNoGapNoDuplicate(worker, id, before, after);
  again.close();
});

test('a socket cut while a tool runs resumes with the frames of the call and its answer', async () => {
  const city = `Resume-${Date.now()}`;
  steps.delay(city, [1500]);
  const id = await worker.client.createThread();
  const sock = await open(worker, id);
  model.push({ toolCalls: [{ id: 'call_slow_weather', name: 'get_weather', arguments: JSON.stringify({ city }) }] });
  model.push({ text: 'It is clear there.', chunkSize: 4 });
  const sent = await sock.rpc('send_message', { content: `weather in ${city}?` });
  assert.equal(sent.ok, true);
  await sock.waitFor((f) => f.type === 'message' && f.message.role === 'user');
  const before = cut(sock);
  const lastSeen = seqs(before).at(-1);
  // The tool is running now (its request waits at the step server).
  const deadline = Date.now() + 5000;
  while (steps.count(city).pending === 0 && Date.now() < deadline) await sleep(20);
  assert.equal(steps.count(city).pending, 1, 'the tool is mid-call');

  const again = await open(worker, id, lastSeen);
  const hello = again.frames[0];
  await again.waitFor((f) => f.type === 'tool' && f.status === 'running', { from: 2 });
  const replayed = logged(again.frames.slice(2)).filter((f) => f.seq <= hello.seq);
  assert.ok(replayed.some((f) => f.type === 'tool' && f.status === 'running'), JSON.stringify(replayed));
  assert.ok(replayed.some((f) => f.type === 'message' && f.message.tool_calls?.length), 'the reply with the call');
  const fin = await again.finalAssistant(2, 10000);
  assert.equal(fin.message.content, 'It is clear there.');
  await again.waitFor(idleLogged, { from: 2 });
  const after = again.frames.slice(2);
  assert.ok(after.some((f) => f.type === 'tool' && f.tool_call_id === 'call_slow_weather' && f.status === 'success'));
  await assertNoGapNoDuplicate(worker, id, before, after);
  again.close();
});

test('the log survives a restart of the Worker: a resume gets the frames as first sent, seqs go on', async () => {
  const dir = stateDir();
  let w = await startPersistent(dir);
  try {
    const id = await w.client.createThread();
    const sock = await open(w, id);
    model.push({ text: 'Before the restart, this answer was streamed.', chunkSize: 6 });
    await sock.rpc('send_message', { content: 'hi' });
    await sock.finalAssistant();
    await sock.waitFor(idleLogged);
    const seen = logged(sock.frames);
    const lastSeen = seen.find((f) => f.type === 'message' && f.message.role === 'user').seq;
    const newest = seen.at(-1).seq;
    sock.close();
    await w.dispose();

    w = await startPersistent(dir);
    const again = await open(w, id, lastSeen);
    await again.waitFor((f) => f.seq === newest, { from: 2 });
    assert.equal(again.frames[0].seq, newest, `hello: the newest seq before the restart; ${JSON.stringify(again.frames)} ${JSON.stringify(seen)}`);
    const replayed = logged(again.frames.slice(2));
    assert.equal(replayed[0].seq, lastSeen + 1);
    for (const f of replayed) {
      assert.deepEqual(f, seen.find((s) => s.seq === f.seq), `frame ${f.seq} is replayed as first sent`);
    }
    assert.ok(!replayed.some((f) => f.type === 'message_chunk'), 'a completed answer replaces its chunks');
    assert.equal(replayed.filter((f) => f.type === 'message' && f.message.role === 'assistant').length, 1);

    model.push({ text: 'After the restart.' });
    await again.rpc('send_message', { content: 'still there?' });
    await again.finalAssistant(2 + replayed.length);
    const later = seqs(again.frames.slice(2));
    assertStrictlyIncreasing(later, 'replayed then live frames');
    assert.ok(later.at(-1) > newest, 'seqs go on after the restart, never reused');
    again.close();
  } finally {
    await w.dispose();
  }
});

test('a restart of the Worker mid-answer: the chunks sent before it are not replayed, no seq is reused, the answer comes again', { timeout: 60_000 }, async () => {
  // A reply's chunks live in the thread object's memory while it streams (only their seqs are
  // reserved in storage): a restart loses them, the interrupted message is marked failed and
  // answered again, and every frame after the restart has a seq above the last chunk seen.
  const dir = stateDir();
  let w = await startPersistent(dir);
  try {
    const id = await w.client.createThread();
    const sock = await open(w, id);
    model.push({ text: 'This answer is cut short by a restart of the Worker. '.repeat(4), chunkSize: 4, chunkDelayMs: 40 });
    await sock.rpc('send_message', { content: 'tell me' });
    await sock.waitFor((f) => f.type === 'message_chunk' && sock.frames.filter((x) => x.type === 'message_chunk').length >= 5);
    const seen = cut(sock);
    const chunks = seen.filter((f) => f.type === 'message_chunk');
    const lastChunk = chunks.at(-1).seq;
    const interrupted = chunks[0].message_id;
    assertStrictlyIncreasing(seqs(seen), 'before the restart');
    await w.dispose();

    model.push({ text: 'Told again after the restart.' });
    w = await startPersistent(dir);
    // Resumed from before the first chunk: whatever is replayed or sent live is above every
    // seq the old instance sent (the chunks are gone, their seqs never handed out again).
    const again = await open(w, id, chunks[0].seq - 1);
    assert.ok(again.frames[0].seq >= lastChunk, `hello's seq ${again.frames[0].seq} covers the chunks seen (${lastChunk})`);
    const final = await again.waitFor((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed', { timeout: 45_000 });
    await again.waitFor(idleLogged);
    const after = logged(again.frames.slice(2));
    assert.ok(after.length > 0);
    for (const f of after) assert.ok(f.seq > lastChunk, `frame ${f.seq} (${f.type}) after the restart is above the last chunk seen, ${lastChunk}`);
    assertStrictlyIncreasing(seqs(again.frames.slice(2)), 'after the restart');
    assert.ok(!after.some((f) => f.type === 'message_chunk' && f.message_id === interrupted), 'no chunk of the interrupted answer comes back');
    const failed = after.find((f) => f.type === 'message' && f.message.id === interrupted);
    assert.equal(failed?.message.status, 'failed', 'the interrupted answer is marked failed');
    assert.equal(final.message.content, 'Told again after the restart.');
    assert.equal((await storedMessage(w, id, final.message.id)).content, final.message.content);
    again.close();
  } finally {
    await w.dispose();
  }
});

test('past the bound of 2,000 frames a resume from before the floor is a reset; rpc resume replays on an open socket', async () => {
  const id = await worker.client.createThread();
  const sock = await open(worker, id);
  // 2,100 stored messages: one `message` frame each, sent in one burst of rpcs.
  const total = 2100;
  for (let i = 0; i < total; i++) {
    sock.send({ type: 'rpc', id: `inject-${i}`, method: 'inject_message', params: { content: `note ${i}`, role: 'user' } });
  }
  await sock.waitFor((f) => f.type === 'result' && f.id === `inject-${total - 1}`, { timeout: 60000 });
  const numbered = seqs(sock.frames);
  assert.equal(numbered.length, total);
  assertStrictlyIncreasing(numbered, 'a burst of frames');
  const newest = numbered.at(-1);

  const old = await open(worker, id, 1);
  await sleep(100);
  assert.deepEqual(old.frames.map((f) => f.type), ['hello', 'status', 'reset']);
  assert.deepEqual(old.frames[2], { type: 'reset', seq: newest });

  const recent = await open(worker, id, newest - 10);
  await recent.waitFor((f) => f.type === 'message' && f.seq === newest);
  assert.deepEqual(seqs(recent.frames), Array.from({ length: 10 }, (_, i) => newest - 9 + i));
  assert.deepEqual(logged(recent.frames), logged(sock.frames).slice(-10), 'replayed as first sent');

  // The rpc on the open socket: the frames, then the answer; below the floor a reset.
  const from = recent.frames.length;
  const r = await recent.rpc('resume', { after: newest - 3 });
  assert.deepEqual(r.result, { replayed: 3, seq: newest });
  assert.deepEqual(seqs(recent.frames.slice(from)), [newest - 2, newest - 1, newest]);
  const beforeReset = recent.frames.length;
  const reset = await recent.rpc('resume', { after: 0 });
  assert.deepEqual(reset.result, { replayed: 0, seq: newest, reset: true });
  assert.deepEqual(recent.frames[beforeReset], { type: 'reset', seq: newest });
  for (const s of [sock, old, recent]) s.close();
});

test('bad after values are refused before the upgrade; one past the newest replays nothing', async () => {
  const id = await worker.client.createThread();
  for (const bad of ['-1', 'abc', '1.5', '', '+3', '99999999999999999999']) {
    const err = await open(worker, id, bad).then(
      (s) => {
        s.close();
        return null;
      },
      (e) => e,
    );
    assert.ok(err, `after=${JSON.stringify(bad)} should be refused`);
    assert.equal(err.status, 400, `after=${JSON.stringify(bad)}`);
  }
  const r = await refusal(worker, id, 'x');
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'invalid_request');
  assert.match(r.body.error.message, /after/);

  const ahead = await open(worker, id, 1000);
  await sleep(100);
  assert.deepEqual(ahead.frames.map((f) => f.type), ['hello', 'status']);
  for (const params of [{}, { after: -1 }, { after: 'x' }, { after: 2.5 }]) {
    const res = await ahead.rpc('resume', params);
    assert.equal(res.ok, false, JSON.stringify(params));
    assert.equal(res.error.code, 'invalid_request');
  }
  const fine = await ahead.rpc('resume', { after: 1000 });
  assert.deepEqual(fine.result, { replayed: 0, seq: 0 });
  ahead.close();
});

test('resume measured: 50 cuts mid-answer, frames replayed and time from reconnect to the first replayed frame', async () => {
  let id;
  let sock;
  const waits = [];
  const replayedCounts = [];
  for (let i = 0; i < 50; i++) {
    if (i % 10 === 0) {
      // A thread stops after its agent's most turns (25): ten cuts per thread.
      sock?.close();
      id = await worker.client.createThread();
      sock = await open(worker, id);
    }
    const text = `Answer ${i}: ${'resumable '.repeat(4)}`;
    model.push({ text, chunkSize: 3, chunkDelayMs: 15 });
    const from = sock.frames.length;
    sock.send({ type: 'rpc', id: `m${i}`, method: 'send_message', params: { content: `question ${i}` } });
    await sock.waitFor((f) => f.type === 'message_chunk', { from });
    const before = cut(sock);
    const lastSeen = seqs(before).at(-1);
    await sleep(40); // a few chunks go by while the client is away
    const started = performance.now();
    const url = worker.url.replace(/^http/, 'ws').replace(/\/$/, '') + `/api/threads/${id}/stream?after=${lastSeen}`;
    sock = new FrameSocket(new WebSocket(url, { headers: { authorization: `Bearer ${API_KEY}` } }));
    const first = await sock.waitFor((f) => logged([f]).length === 1);
    waits.push(performance.now() - started);
    assert.equal(first.seq, lastSeen + 1, 'the first frame after hello is the first one missed');
    const fin = await sock.finalAssistant(0, 10000);
    await sock.waitFor(idleLogged);
    const hello = sock.frames[0];
    replayedCounts.push(logged(sock.frames).filter((f) => f.seq <= hello.seq).length);
    const view = assemble([...before, ...sock.frames], fin.message.id);
    assert.equal(view.chunks, text, `cut ${i}: the chunks add up to the answer`);
    assertStrictlyIncreasing(seqs([...before, ...sock.frames]), `cut ${i}`);
  }
  sock.close();
  const sorted = [...waits].sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))].toFixed(1);
  const counts = [...replayedCounts].sort((a, b) => a - b);
  console.log(
    `resume: 50 cuts mid-answer; frames replayed per resume median ${counts[25]} (min ${counts[0]}, max ${counts[49]}, ` +
      `total ${counts.reduce((a, b) => a + b, 0)}); reconnect to first replayed frame median ${pct(0.5)} ms, ` +
      `p90 ${pct(0.9)} ms, max ${sorted.at(-1).toFixed(1)} ms`,
  );
  assert.ok(counts[0] >= 1, 'every resume replayed something');
});
