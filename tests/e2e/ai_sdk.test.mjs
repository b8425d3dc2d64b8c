// End-to-end tests of the AI SDK chat transport (`POST /api/threads/:id/chat`) with the real
// `ai` and `@ai-sdk/react` packages (their `Chat` class and `DefaultChatTransport`, pinned in
// package.json) against the real built Worker and the scripted model server.
// Proves: `useChat`'s transport works against edgent with no adapter code: text streams into
// text parts, a tool round trip shows as a tool part with its input and output, a provider
// failure surfaces as the chat's error, regenerate answers again (the old answer stays stored,
// failed), approvals answered through the SDK decide the call, thread events arrive as data
// parts, and a client token is enough.
// Does not prove: the browser side of the hook (React rendering): the Chat class is the same
// state machine the hook wraps.

import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultChatTransport } from 'ai';
import { Chat } from '@ai-sdk/react';
import { startWorker } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

let model;
let worker;
let client;

before(async () => {
  model = await startModelServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1` });
  client = worker.client;
});

after(async () => {
  await worker?.dispose();
  await model?.close();
});

beforeEach(() => model.reset());

/** A thread, a chat token for it, and an SDK `Chat` posting to its chat route. */
async function chatFor(agentId = 'support', scopes = ['chat']) {
  const r = await client.request('POST', '/api/threads', { body: { agent_id: agentId, token: { scopes } } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const threadId = r.body.thread_id;
  const transport = new DefaultChatTransport({
    api: `${worker.url}api/threads/${threadId}/chat`,
    headers: { authorization: `Bearer ${r.body.token.token}` },
  });
  const errors = [];
  const chat = new Chat({ id: threadId, transport, onError: (e) => errors.push(e) });
  return { chat, threadId, errors };
}

const textOf = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

async function stored(threadId) {
  const r = await client.request('GET', `/api/threads/${threadId}/messages?limit=50`);
  assert.equal(r.status, 200);
  return r.body.messages;
}

test('a message streams back as the assistant text part, stored the same', async () => {
  const { chat, threadId, errors } = await chatFor();
  model.push({ text: 'Hello from edgent, streamed through the AI SDK.' });
  await chat.sendMessage({ text: 'Hi there' });
  assert.equal(chat.status, 'ready', String(errors[0]));
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
  const answer = chat.messages[1];
  assert.equal(textOf(answer), 'Hello from edgent, streamed through the AI SDK.');
  const messages = await stored(threadId);
  const assistant = messages.find((m) => m.role === 'assistant');
  assert.equal(assistant.content, textOf(answer));
  assert.equal(messages.find((m) => m.role === 'user').content, 'Hi there');
  // Only the newest user message of the request was taken: a second turn stores one more.
  model.push({ text: 'Second answer.' });
  await chat.sendMessage({ text: 'Again' });
  assert.equal(textOf(chat.messages.at(-1)), 'Second answer.');
  assert.equal((await stored(threadId)).filter((m) => m.role === 'user').length, 2);
});

test('a tool round trip shows as a tool part with its input and output', async () => {
  const { chat } = await chatFor();
  model.push(
    { toolCalls: [{ id: 'call_time', name: 'get_current_time', arguments: {} }] },
    { text: 'It is now.' },
  );
  await chat.sendMessage({ text: 'What time is it?' });
  assert.equal(chat.status, 'ready');
  const parts = chat.messages.at(-1).parts;
  const tool = parts.find((p) => p.type === 'dynamic-tool');
  assert.ok(tool, JSON.stringify(parts));
  assert.equal(tool.toolName, 'get_current_time');
  assert.equal(tool.state, 'output-available');
  assert.match(String(tool.output), /^\d{4}-\d{2}-\d{2}T/);
  assert.equal(textOf(chat.messages.at(-1)), 'It is now.');
  // Each state change of the call arrived as a transient data part the UI may show (not kept).
  assert.ok(!parts.some((p) => p.type === 'data-tool-status'));
});

test('a provider failure is the chat\'s error; the thread stays usable', async () => {
  const { chat, errors } = await chatFor();
  model.push({ error: { status: 400, message: 'messages: roles must alternate' } });
  await chat.sendMessage({ text: 'This one fails' });
  assert.equal(chat.status, 'error');
  assert.ok(errors.length >= 1);
  model.push({ text: 'Recovered.' });
  await chat.sendMessage({ text: 'Try again' });
  assert.equal(chat.status, 'ready');
  assert.equal(textOf(chat.messages.at(-1)), 'Recovered.');
});

test('regenerate answers the last message again; the old answer stays stored, failed', async () => {
  const { chat, threadId } = await chatFor();
  model.push({ text: 'First try.' });
  await chat.sendMessage({ text: 'Tell me something' });
  model.push({ text: 'Second try.' });
  await chat.regenerate();
  assert.equal(chat.status, 'ready');
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(textOf(chat.messages[1]), 'Second try.');
  const answers = (await stored(threadId)).filter((m) => m.role === 'assistant');
  assert.deepEqual(answers.map((m) => [m.content, m.status]), [['First try.', 'failed'], ['Second try.', 'completed']]);
  // The model saw the conversation without the first answer.
  const last = model.requests.at(-1).body.messages;
  assert.ok(!last.some((m) => m.content === 'First try.'), JSON.stringify(last));
});

test('an approval asked for appears as an approval part, and answering it decides the call', async () => {
  const { chat, threadId } = await chatFor('support', ['chat', 'approve']);
  model.push(
    { toolCalls: [{ id: 'call_refund', name: 'issue_refund', arguments: { order_id: 'ord_1001', amount_cents: 500, reason: 'late' } }] },
    { text: 'The refund was declined.' },
  );
  await chat.sendMessage({ text: 'Refund my order' });
  const tool = chat.messages.at(-1).parts.find((p) => p.type === 'dynamic-tool');
  assert.equal(tool?.state, 'approval-requested', JSON.stringify(chat.messages.at(-1).parts));
  await chat.addToolApprovalResponse({ id: tool.approval.id, approved: false, reason: 'not today' });
  // The SDK posts the decision (its message with the approval answered) and streams the rest.
  await chat.sendMessage();
  const calls = await client.request('GET', `/api/threads/${threadId}/tool-calls`);
  const refund = calls.body.tool_calls.find((c) => c.tool === 'issue_refund');
  assert.equal(refund?.status, 'error', JSON.stringify(calls.body));
  assert.match(refund.result, /not today/);
  assert.equal(textOf(chat.messages.at(-1)), 'The refund was declined.');
});

test('thread events arrive as data parts of the answer', async () => {
  const { chat } = await chatFor();
  const order = { customer_id: 'cus_1001', items: [{ sku: 'MUG', quantity: 1 }], shipping: { method: 'standard' }, confirmation_email: 'ada@example.com' };
  model.push({ toolCalls: [{ id: 'call_order', name: 'process_order', arguments: order }] }, { text: 'Ordered.' });
  await chat.sendMessage({ text: 'Order a mug' });
  assert.equal(chat.status, 'ready');
  const parts = chat.messages.at(-1).parts;
  const notification = parts.find((p) => p.type === 'data-notification');
  assert.ok(notification, JSON.stringify(parts.map((p) => p.type)));
  assert.equal(notification.data.to, 'ada@example.com');
  assert.equal(textOf(chat.messages.at(-1)), 'Ordered.');
});
