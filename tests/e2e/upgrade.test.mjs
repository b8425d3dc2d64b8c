// End-to-end test of a deploy that changes workflows: calls parked by one build of the Worker
// resume under another build over the same Durable Object storage and D1 (Miniflare,
// persisted to a directory). The first build is the example app; the second is
// tests/apps/upgraded, where `remind_later` is at version 2 keeping version 1's handler, and
// `wait_for_callback` is at version 2 without it.
// Proves: a parked call remembers the version it started on (the listing shows it); after the
// deploy it finishes on the kept handler, replaying its recorded steps as they were written
// (the version-1 reminder text, not version 2's); a call whose version has no handler ends
// with the `workflow_version_changed` error result when its webhook arrives, and nothing of
// the new code runs for it.
// Does not prove: a real `wrangler deploy` (Miniflare stands in for the platform's restart).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startWorker, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

const UPGRADED = join(ROOT, 'tests', 'apps', 'upgraded');
const persistDir = mkdtempSync(join(tmpdir(), 'edgent-upgrade-'));
const model = await startModelServer();
let worker;

after(async () => {
  await worker?.dispose();
  await model.close();
  rmSync(persistDir, { recursive: true, force: true });
});

const toolFrame = (sock, callId, statuses, from = 0, timeout = 15000) =>
  sock.waitFor((f) => f.type === 'tool' && f.tool_call_id === callId && statuses.includes(f.status), { from, timeout });

async function callRecord(client, threadId, callId) {
  const r = await client.request('GET', `/api/threads/${threadId}/tool-calls?limit=50`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.tool_calls.find((c) => c.id === callId);
}

test('calls parked before a deploy finish on the handler kept for their version, or end with workflow_version_changed', {
  skip: existsSync(join(UPGRADED, 'build', 'index.js')) ? false : 'tests/apps/upgraded is not built: EDGENT_APP_DIR=tests/apps/upgraded bash scripts/build.sh (npm test does it)',
}, async () => {
  // 1. The example app parks two calls on version 1.
  worker = await startWorker({ modelUrl: `${model.url}/v1`, persistDir });
  let client = worker.client;
  const threadId = await client.createThread('support');
  let sock = await client.connect(threadId);
  await sock.waitFor((f) => f.type === 'status');
  const queue = async (name, args) => {
    const r = await sock.rpc('queue_tool', { name, args });
    assert.equal(r.ok, true, JSON.stringify(r));
    return r.result.tool_call_id;
  };
  const remind = await queue('remind_later', { text: 'call Ada back', in_seconds: 4 });
  await toolFrame(sock, remind, ['sleeping']);
  const callback = await queue('wait_for_callback', { purpose: 'payment', timeout_seconds: 600 });
  await toolFrame(sock, callback, ['waiting']);
  const url = await client.webhookUrl(threadId, callback);
  for (const id of [remind, callback]) {
    assert.equal((await callRecord(client, threadId, id)).version, 1, 'started on version 1');
  }
  sock.close();
  await worker.dispose();

  // 2. The deploy: the upgraded build over the same storage.
  worker = await startWorker({ modelUrl: `${model.url}/v1`, persistDir, appDir: UPGRADED });
  client = worker.client;
  sock = await client.connect(threadId);
  await sock.waitFor((f) => f.type === 'status');

  // The reminder wakes and finishes on the kept version-1 handler: its recorded sleep is
  // replayed and the step it had not reached yet runs as version 1 wrote it.
  const done = await toolFrame(sock, remind, ['success', 'error']);
  assert.equal(done.status, 'success');
  const reminder = await callRecord(client, threadId, remind);
  assert.match(reminder.result, /^reminder posted as message .* \(kept version 1\)$/);
  assert.equal(reminder.version, 1);
  const { body } = await client.request('GET', `/api/threads/${threadId}/messages?limit=50`);
  const texts = body.messages.map((m) => m.content);
  assert.ok(texts.includes('Reminder: call Ada back'), JSON.stringify(texts));
  assert.ok(!texts.some((t) => t.startsWith('Reminder (v2)')), 'nothing of version 2 ran for it');

  // The callback's version has no handler: its webhook is taken, and the call ends with the
  // error result that says what happened and what to do.
  const from = sock.frames.length;
  // The URL names the first build's address (the origin it was created under); the same path
  // reaches the thread on the new one.
  const delivered = await fetch(new URL(new URL(url).pathname, worker.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ paid: true }) });
  assert.equal(delivered.status, 202, await delivered.text());
  const ended = await toolFrame(sock, callback, ['success', 'error'], from);
  assert.equal(ended.status, 'error');
  const changed = await callRecord(client, threadId, callback);
  assert.match(changed.result, /^Error: workflow_version_changed: this call of "wait_for_callback" started on version 1, and version 2 is deployed with no handler kept/);
  assert.equal(changed.version, 1);
  sock.close();
});
