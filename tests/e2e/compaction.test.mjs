// End-to-end tests of compaction against the real built Worker in Miniflare (workerd) and the
// scripted model: a prompt with a `compaction_prompt`, a model with a small
// `max_history_tokens`, and a 500-message thread.
// Proves: the summary request reaches the model first (the compaction prompt's system text,
// the transcript of the older messages), then the main call sees the summary and the newest
// messages only, within the budget; the originals stay readable by clients; the summary is
// kept (a `compaction` event) and reused: the next turn compacts nothing; a failed summary
// leaves the turn working with the budget-cut history and a `compaction_failed` event; a call is never separated from its result. Prints the tokens sent
// before and after.
// Does not prove: summary quality (the scripted model writes it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';

const BUDGET = 2000;
const SUMMARIZER = 'Summarise the conversation below in a few lines; keep names, numbers and decisions.';

let model;
let client;

withWorker({ setup: async (env) => {
  ({ model, client } = env);
  const put = async (path, body) => {
    const r = await client.request('PUT', path, { body });
    assert.ok([200, 201].includes(r.status), `${path}: ${JSON.stringify(r.body)}`);
  };
  await put('/api/models/small_window', {
    provider: 'openai', model: 'scripted', base_url: `${model.url}/v1`, api_key_secret: 'OPENAI_API_KEY', max_history_tokens: BUDGET,
  });
  await put('/api/prompts/summarizer', { model: 'small_window', system: SUMMARIZER });
  await put('/api/prompts/long_chat', { model: 'small_window', system: 'You are helpful.', tools: ['get_current_time'], compaction_prompt: 'summarizer' });
  await put('/api/agents/long_chat', { side_a: { prompt: 'long_chat' }, max_turns: 100 });
} });

// The engine's estimate: a quarter of the text's bytes, plus 4 per message.
const tokens = (messages) => messages.reduce((n, m) => n + Math.ceil(Buffer.byteLength(m.content ?? '') / 4) + 4, 0);

async function open(id) {
  const sock = await client.connect(id);
  await sock.waitFor((f) => f.type === 'status');
  return sock;
}

async function thread(messages) {
  const id = await client.createThread('long_chat');
  const sock = await open(id);
  const injected = [];
  for (let i = 0; i < messages; i++) {
    const role = i % 2 === 0 ? 'user' : 'assistant';
    const content = `${role === 'user' ? 'Question' : 'Answer'} ${i}: ${'about order ' + i + ' and its delivery, '.repeat(3)}`;
    const r = await sock.rpc('inject_message', { role, content });
    assert.equal(r.ok, true, JSON.stringify(r));
    injected.push({ role, content });
  }
  return { id, sock, injected };
}

async function turn(sock, id, content) {
  const from = sock.frames.length;
  const r = await client.request('POST', `/api/threads/${id}/messages`, { body: { content } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout: 20000, from });
  return sock.frames.slice(from);
}

test('a 500-message thread is summarised once, and the model sees the summary and the newest messages', async () => {
  const { id, sock, injected } = await thread(500);
  model.push({ text: 'SUMMARY: 250 questions about orders and deliveries, all answered.' }, { text: 'Here is the answer.' });
  const frames = await turn(sock, id, 'What did we talk about?');
  const [summaryRequest, mainRequest] = model.requests;

  // 1. The summary request: the compaction prompt's system text, one user message holding
  //    the transcript of the older messages.
  assert.equal(summaryRequest.body.messages[0].role, 'system');
  assert.equal(summaryRequest.body.messages[0].content, SUMMARIZER);
  const transcript = summaryRequest.body.messages[1].content;
  assert.match(transcript, /^User: Question 0: /);
  assert.ok(!('tools' in summaryRequest.body) || summaryRequest.body.tools.length === 0, 'the summariser gets no tools');

  // 2. The main call: the summary, then the newest messages, within the budget.
  const sent = mainRequest.body.messages.filter((m) => m.role !== 'system');
  assert.match(sent[0].content, /^\[Summary of the earlier conversation\]\nSUMMARY: 250 questions/);
  assert.equal(sent.at(-1).content, 'What did we talk about?');
  assert.ok(!sent.some((m) => /Question 0: /.test(m.content)), 'the oldest are in the summary only');
  const all = (await client.request('GET', `/api/threads/${id}/messages?limit=1`)).body;
  assert.equal(all.total, 502, 'the originals stay for clients (500 + question + answer)');
  const event = frames.find((f) => f.type === 'event' && f.event === 'compaction');
  assert.ok(event, 'a compaction event');
  assert.equal(event.data.messages + (sent.length - 2), 500, 'every older message is summarised or sent');
  const before = tokens(injected);
  const afterTokens = tokens(sent);
  assert.ok(afterTokens <= BUDGET, `the main call fits the budget: ${afterTokens}`);
  console.log(`compaction, 500-message thread: about ${before} tokens of history; sent ${afterTokens} (the summary and ${sent.length - 1} messages); the summary replaced ${event.data.tokens_replaced}`);

  // 3. The next turn reuses the summary: one model request, no new summary.
  model.reset();
  model.push({ text: 'Still here.' });
  const next = await turn(sock, id, 'And now?');
  assert.equal(model.requests.length, 1, 'no compaction');
  assert.match(model.requests[0].body.messages.find((m) => m.role !== 'system').content, /^\[Summary of the earlier conversation\]/);
  assert.ok(!next.some((f) => f.type === 'event' && f.event === 'compaction'));
  sock.close();
});

test('a failed summary is not the turn: the model is called with the budget-cut history', async () => {
  const { id, sock } = await thread(120);
  model.push({ error: { status: 400, message: 'summarizer: bad request' } }, { text: 'Answered anyway.' });
  const frames = await turn(sock, id, 'Hello?');
  const failed = frames.find((f) => f.type === 'event' && f.event === 'compaction_failed');
  assert.ok(failed, JSON.stringify(frames.filter((f) => f.type === 'event' || f.type === 'error')));
  assert.match(failed.data.message, /could not summarise/);
  assert.ok(!frames.some((f) => f.type === 'error' && f.code !== 'model_retry'), 'not an error: the turn goes on');
  const answer = frames.find((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed');
  assert.equal(answer.message.content, 'Answered anyway.');
  const main = model.requests.at(-1).body.messages.filter((m) => m.role !== 'system');
  assert.ok(!main[0].content.startsWith('[Summary'), 'no summary');
  assert.ok(tokens(main) <= BUDGET);
  sock.close();
});

test("a provider's context-overflow error compacts the history once and asks again", async () => {
  const { id, sock } = await thread(40);
  const overflow = { error: { status: 400, message: "This model's maximum context length is 1024 tokens. (context_length_exceeded)", code: 'context_length_exceeded' } };
  model.push(overflow, { text: 'SUMMARY of 40 messages' }, { text: 'Fits now.' });
  const frames = await turn(sock, id, 'Go on');
  const [refused, summary, retried] = model.requests;
  assert.ok(tokens(refused.body.messages.filter((m) => m.role !== 'system')) <= BUDGET, 'it fitted our budget, not the model');
  assert.equal(summary.body.messages[0].content, SUMMARIZER);
  const sent = retried.body.messages.filter((m) => m.role !== 'system');
  assert.match(sent[0].content, /^\[Summary of the earlier conversation\]\nSUMMARY of 40 messages/);
  assert.ok(tokens(sent) < tokens(refused.body.messages.filter((m) => m.role !== 'system')), 'a smaller history');
  const warned = frames.find((f) => f.type === 'event' && f.event === 'context_overflow');
  assert.ok(warned, 'the overflow is said');
  assert.ok(warned.data.budget < warned.data.sent, JSON.stringify(warned.data));
  const answer = frames.findLast((f) => f.type === 'message' && f.message.role === 'assistant');
  assert.equal(answer.message.content, 'Fits now.');
  assert.equal(answer.message.status, 'completed');

  // A second overflow in the same turn fails the turn: one retry, no loop. (Whether the
  // retry compacts first depends on the budget learnt above: either way every request
  // overflows here.)
  model.reset();
  model.push(overflow, overflow, overflow, overflow);
  const failing = await turn(sock, id, `Again ${'long '.repeat(400)}`);
  const failed = failing.find((f) => f.type === 'error' && f.code !== 'model_retry');
  assert.ok(failed, JSON.stringify(failing.filter((f) => f.type === 'error')));
  assert.ok(model.requests.length <= 3, `no loop: ${model.requests.length} requests`);
  sock.close();
});

test('the boundary never separates a call from its result', async () => {
  const { id, sock } = await thread(60);
  // A tool round trip, then more messages: the cut falls somewhere around it.
  model.push({ toolCalls: [{ id: 'call_t', name: 'get_current_time', arguments: {} }] }, { text: 'It is now.' });
  await turn(sock, id, 'Time?');
  for (let i = 0; i < 3; i++) {
    model.push({ text: 'ok' });
    await turn(sock, id, `more ${i} ${'padding '.repeat(60)}`);
  }
  model.reset();
  model.push({ text: 'SUMMARY' }, { text: 'fine' });
  await turn(sock, id, `final ${'padding '.repeat(200)}`);
  const main = model.requests.at(-1).body.messages;
  const calls = main.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id));
  const results = main.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
  assert.deepEqual(results, calls, 'every call sent has its result, and no result lacks its call');
  sock.close();
});

test('a compaction prompt must exist, and cannot be deleted while a prompt names it', async () => {
  const bad = await client.request('PUT', '/api/prompts/typo_chat', { body: { model: 'small_window', compaction_prompt: 'sumarizer' } });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /"compaction_prompt" is "sumarizer", which is not a prompt/);
  const inUse = await client.request('DELETE', '/api/prompts/summarizer');
  assert.equal(inUse.status, 409);
  assert.match(inUse.body.error.message, /long_chat.*compaction_prompt/);
});
