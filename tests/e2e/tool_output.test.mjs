// End-to-end tests of a tool's streamed output (`flow.output()`), against the real built
// Worker in Miniflare (workerd): the example `conversation_stats` writes a `progress` data
// part per page of 100 messages it counts.
// Proves: the parts reach the socket live, in order, before the result, each an `event` frame
// `tool-output` with the call's id and its part number; they are logged, so a socket that
// resumes after an earlier seq gets them again; the AI SDK chat stream shows them as
// `data-tool-output` parts; the model never reads them.
// Does not prove: what a woken workflow writes again (outside its steps; see docs/tools.md).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';

const env = withWorker();

async function threadWith(messages) {
  const id = await env.client.createThread('support');
  const sock = await env.client.connect(id);
  await sock.waitFor((f) => f.type === 'status');
  for (let i = 0; i < messages; i++) {
    const r = await sock.rpc('inject_message', { role: i % 2 ? 'assistant' : 'user', content: `message ${i}` });
    assert.equal(r.ok, true);
  }
  return { id, sock };
}

const isOutput = (f) => f.type === 'event' && f.event === 'tool-output';

test('parts stream live and in order before the result, and a resumed socket gets them again', async () => {
  const { id, sock } = await threadWith(250);
  const from = sock.frames.length;
  const queued = await sock.rpc('queue_tool', { name: 'conversation_stats', args: {} });
  assert.equal(queued.ok, true, JSON.stringify(queued));
  const callId = queued.result.tool_call_id;
  const result = await sock.waitFor((f) => f.type === 'message' && f.message.tool_call_id === callId, { from, timeout: 10000 });
  const frames = sock.frames.slice(from);
  const parts = frames.filter(isOutput);
  assert.deepEqual(parts.map((f) => f.data.part), [0, 1, 2]);
  // 250 injected, and the assistant message that holds the queued call.
  assert.deepEqual(parts.map((f) => f.data.data.counted), [100, 200, 251]);
  assert.ok(parts.every((f) => f.data.tool_call_id === callId && f.data.type === 'data' && f.data.kind === 'progress'));
  assert.ok(parts.every((f, i) => i === 0 || f.seq > parts[i - 1].seq), 'numbered in order');
  assert.ok(frames.indexOf(parts.at(-1)) < frames.indexOf(result), 'before the result');
  assert.equal(JSON.parse(result.message.content).messages, 251);

  // A socket that saw nothing after the first part gets the rest again, from the log.
  const again = await env.client.connect(id);
  const resumed = await again.rpc('resume', { after: parts[0].seq });
  assert.equal(resumed.ok, true, JSON.stringify(resumed));
  const replayed = again.frames.filter(isOutput);
  assert.deepEqual(replayed.map((f) => f.data.part), [1, 2]);
  again.close();
  sock.close();
});

test('the AI SDK chat stream shows them as data-tool-output parts; the model never reads them', async () => {
  const { id, sock } = await threadWith(120);
  sock.close();
  env.model.push({ toolCalls: [{ id: 'call_stats', name: 'conversation_stats', arguments: {} }] }, { text: '120 messages.' });
  const r = await fetch(new URL(`/api/threads/${id}/chat`, env.worker.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${env.client.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'How many?' }] }] }),
  });
  assert.equal(r.status, 200);
  const chunks = (await r.text()).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  const parts = chunks.filter((c) => c.type === 'data-tool-output');
  assert.deepEqual(parts.map((c) => c.data.part), [0, 1]);
  assert.equal(parts[0].data.tool_call_id, 'call_stats');
  const toolOutput = chunks.findIndex((c) => c.type === 'tool-output-available');
  assert.ok(chunks.indexOf(parts.at(-1)) < toolOutput, 'streamed before the result');
  const sent = JSON.stringify(env.model.requests.at(-1).body.messages);
  assert.ok(!sent.includes('counted'), 'the model reads the result only');
});
