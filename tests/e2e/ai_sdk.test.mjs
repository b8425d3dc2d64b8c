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

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultChatTransport } from 'ai';
import { Chat } from '@ai-sdk/react';
import { withWorker } from '../support/setup.mjs';

let model;
let worker;
let client;

withWorker({ setup: async (env) => {
  ({ model, worker, client } = env);
} });

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
    { toolCalls: [{ id: 'call_refund', name: 'issue_refund', arguments: { customer_id: 'cus_1001', amount_cents: 500, reason: 'late' } }] },
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

test('a reloaded page resumes the answer in progress from its start (the SDK\'s resumeStream)', async () => {
  const { chat, threadId } = await chatFor();
  const text = 'A long answer, streamed slowly, that a page reload must not lose. '.repeat(3).trim();
  model.push({ text, chunkSize: 4, chunkDelayMs: 20 });
  const first = chat.sendMessage({ text: 'Tell me a story' });
  // Wait until part of the answer arrived, then "reload": a second Chat with the same id.
  const deadline = Date.now() + 5000;
  while (textOf(chat.messages.at(-1) ?? { parts: [] }).length < 20 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(chat.messages.at(-1).role === 'assistant', 'the answer had begun');
  const r = await client.request('POST', `/api/threads/${threadId}/tokens`, { body: {} });
  const reloaded = new Chat({
    id: threadId,
    transport: new DefaultChatTransport({
      api: `${worker.url}api/threads/${threadId}/chat`,
      headers: { authorization: `Bearer ${r.body.token}` },
    }),
  });
  await reloaded.resumeStream();
  await first;
  assert.equal(reloaded.status, 'ready');
  assert.equal(textOf(reloaded.messages.at(-1)), text, 'the resumed answer is whole');
  assert.equal(textOf(chat.messages.at(-1)), text);
  // Nothing in progress now: the resume answers 204 and the chat stays as it is.
  const idle = await fetch(`${worker.url}api/threads/${threadId}/chat/stream`, { headers: { authorization: `Bearer ${r.body.token}` } });
  assert.equal(idle.status, 204);
  // The SDK's default reconnect URL (…/chat/:chat_id/stream) works as well.
  const byId = await fetch(`${worker.url}api/threads/${threadId}/chat/${threadId}/stream`, { headers: { authorization: `Bearer ${r.body.token}` } });
  assert.equal(byId.status, 204);
});

test('the chat route refuses what it should: bad bodies, no token, another thread\'s token', async () => {
  const { threadId } = await chatFor();
  const other = await chatFor();
  const token = (await client.request('POST', `/api/threads/${threadId}/tokens`, { body: {} })).body.token;
  const post = (body, auth = token, id = threadId) =>
    fetch(`${worker.url}api/threads/${id}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const user = (text) => ({ id: 'chat', trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }] });
  assert.equal((await post('{nope')).status, 400);
  assert.equal((await post({ messages: [] })).status, 400);
  assert.equal((await post({ trigger: 'summon', messages: [] })).status, 400);
  assert.equal((await post(user('   '))).status, 400);
  assert.equal((await post(user('hi'), null)).status, 401);
  assert.equal((await post(user('hi'), token, other.threadId)).status, 403);
  // Approving through the chat route needs the approve scope.
  const decide = { messages: [{ id: 'a1', role: 'assistant', parts: [{ type: 'dynamic-tool', toolName: 'issue_refund', toolCallId: 'c1', state: 'approval-responded', input: {}, approval: { id: 'c1', approved: true } }] }] };
  const refused = await post(decide);
  assert.equal(refused.status, 403);
  assert.equal((await stored(threadId)).length, 0, 'nothing was stored by the refused requests');
});

test('a long conversation still posts (the SDK sends its whole history), and a send mid-answer is a 409', async () => {
  const { threadId } = await chatFor();
  const token = (await client.request('POST', `/api/threads/${threadId}/tokens`, { body: {} })).body.token;
  const history = Array.from({ length: 200 }, (_, i) => ({
    id: `m${i}`,
    role: i % 2 ? 'assistant' : 'user',
    parts: [{ type: 'text', text: `turn ${i} `.repeat(60) }],
  }));
  history.push({ id: 'last', role: 'user', parts: [{ type: 'text', text: 'Only this one counts.' }] });
  const body = JSON.stringify({ id: threadId, trigger: 'submit-message', messages: history });
  assert.ok(body.length > 64 * 1024, `${body.length} bytes`);
  model.push({ text: 'Slowly, slowly, the answer comes.', chunkSize: 3, chunkDelayMs: 30 });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const res = await fetch(`${worker.url}api/threads/${threadId}/chat`, { method: 'POST', headers, body });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  // While that answer streams, another send is refused: it would start mid-answer.
  const again = await fetch(`${worker.url}api/threads/${threadId}/chat`, {
    method: 'POST', headers, body: JSON.stringify({ trigger: 'submit-message', messages: [history.at(-1)] }),
  });
  assert.equal(again.status, 409);
  const text = await res.text();
  assert.match(text, /data: \[DONE\]/);
  const users = (await stored(threadId)).filter((m) => m.role === 'user');
  assert.deepEqual(users.map((m) => m.content), ['Only this one counts.']);
});
