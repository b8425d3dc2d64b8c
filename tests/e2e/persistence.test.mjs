// End-to-end tests of durability: the real built Worker in Miniflare with a persistence directory,
// disposed and started again on the same directory (as a deploy or a crash would).
// Proves: a thread's messages survive a restart and the conversation continues with its history;
// a turn cut off mid-stream by the process going away resumes by itself (the watchdog alarm),
// marks the interrupted answer failed, answers again, and loses no user message.
// Does not prove: behaviour on Cloudflare's own runtime, where eviction timing differs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorker } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

let model;
const dirs = [];
const workers = new Set();

before(async () => {
  model = await startModelServer();
});

after(async () => {
  for (const w of workers) await w.dispose().catch(() => {});
  await model?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function tempDir() {
  const dir = fs.mkdtempSync(os.tmpdir() + '/edgent-');
  dirs.push(dir);
  return dir;
}

async function start(persistDir) {
  const w = await startWorker({ modelUrl: `${model.url}/v1`, persistDir });
  workers.add(w);
  return w;
}

async function stop(w) {
  workers.delete(w);
  await w.dispose();
}

async function summary(client, id) {
  const r = await client.request('GET', `/api/threads/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function messages(client, id) {
  const r = await client.request('GET', `/api/threads/${id}/messages?limit=200`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** Polls the summary until `done(summary)` holds; fails with the last summary seen. */
async function pollSummary(client, id, done, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await summary(client, id);
    if (done(last)) return last;
    await sleep(250);
  }
  assert.fail(`thread did not reach the expected state within ${timeoutMs} ms; last summary: ${JSON.stringify(last)}`);
}

test('messages survive a restart and the conversation continues with its history', async (t) => {
  model.reset();
  const dir = tempDir();

  let w = await start(dir);
  const id = await w.client.createThread();
  let sock = await w.client.connect(id);
  model.push({ text: 'Nice to meet you, Ada.' });
  let from = sock.frames.length;
  const sent = await sock.rpc('send_message', { content: 'My name is Ada.' });
  assert.equal(sent.ok, true);
  const first = await sock.finalAssistant(from);
  assert.equal(first.message.status, 'completed');
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === 1, { from });
  sock.close();
  const before = await messages(w.client, id);
  const summaryBefore = await summary(w.client, id);
  assert.equal(before.total, 2);
  await stop(w);

  w = await start(dir);
  const after = await messages(w.client, id);
  assert.deepEqual(after, before, 'the same messages after the restart');
  const s = await summary(w.client, id);
  assert.equal(s.turn_count, 1);
  assert.equal(s.status, 'idle');
  assert.equal(s.created_at, summaryBefore.created_at);
  assert.equal(s.agent_id, 'support');

  // The thread keeps going, and the model sees what was said before the restart.
  sock = await w.client.connect(id);
  t.after(() => sock.close());
  const status = await sock.waitFor((f) => f.type === 'status');
  assert.deepEqual([status.state, status.turn], ['idle', 1]);
  model.push({ text: 'Your name is Ada.' });
  from = sock.frames.length;
  await sock.rpc('send_message', { content: 'What is my name?' });
  const second = await sock.finalAssistant(from);
  assert.equal(second.message.status, 'completed');
  assert.equal(second.message.content, 'Your name is Ada.');
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === 2, { from });

  assert.equal(model.requests.length, 2);
  assert.deepEqual(
    model.requests[1].body.messages.slice(1),
    [
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Nice to meet you, Ada.' },
      { role: 'user', content: 'What is my name?' },
    ],
  );
  const final = await messages(w.client, id);
  assert.equal(final.total, 4);
  assert.deepEqual(final.messages.slice(0, 2), before.messages);
  await stop(w);
});

test('a turn cut off mid-stream by a restart resumes by itself', { timeout: 60_000 }, async (t) => {
  model.reset();
  const dir = tempDir();

  let w = await start(dir);
  const id = await w.client.createThread();
  const sock = await w.client.connect(id);
  const longText = 'This is a long answer that will never finish streaming. '.repeat(6);
  model.push({ text: longText, chunkSize: 2, chunkDelayMs: 50 });
  const from = sock.frames.length;
  const sent = await sock.rpc('send_message', { content: 'Tell me a long story.' });
  assert.equal(sent.ok, true);
  const userId = sent.result.message_id;
  const chunk = await sock.waitFor((f) => f.type === 'message_chunk', { from });
  const interruptedId = chunk.message_id;
  sock.close();
  await stop(w); // the process goes away mid-stream
  const cutAt = Date.now();

  // The resumed call gets a fresh answer.
  model.push({ text: 'Here is the story, told again.' });
  w = await start(dir);
  const s = await pollSummary(w.client, id, (x) => x.status === 'idle' && x.turn_count === 1, 45_000);
  t.diagnostic(`the turn resumed and finished ${Date.now() - cutAt} ms after the process was cut off`);
  assert.equal(s.last_error ?? null, null);

  const page = await messages(w.client, id);
  const list = page.messages;
  assert.deepEqual(
    list.map((m) => [m.role, m.status]),
    [
      ['user', 'completed'],
      ['assistant', 'failed'],
      ['assistant', 'completed'],
    ],
    JSON.stringify(list),
  );
  assert.equal(list[0].id, userId, 'the user message is not lost');
  assert.equal(list[0].content, 'Tell me a long story.');
  assert.equal(list[1].id, interruptedId, 'the interrupted answer is kept, marked failed');
  assert.notEqual(list[2].id, interruptedId);
  assert.equal(list[2].content, 'Here is the story, told again.');

  // The second model call was the resumed one: same user message, no trace of the broken answer.
  assert.equal(model.requests.length, 2);
  assert.deepEqual(model.requests[1].body.messages.slice(1), [{ role: 'user', content: 'Tell me a long story.' }]);
  assert.equal(model.pending, 0);

  // And the thread is usable afterwards.
  const again = await w.client.connect(id);
  t.after(() => again.close());
  model.push({ text: 'Anything else?' });
  const from2 = again.frames.length;
  await again.rpc('send_message', { content: 'Thanks.' });
  const fin = await again.finalAssistant(from2);
  assert.equal(fin.message.status, 'completed');
  await again.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === 2, { from: from2 });
  await stop(w);
});
