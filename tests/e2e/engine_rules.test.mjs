// End-to-end tests of the engine's turn rules: the real built Worker in Miniflare, local D1
// definitions per test, real WebSockets and the scripted model server.
// Proves: the stop rules of ai_human agents (stop_on_response, stop tools, max_steps,
// max_turns), dual_ai conversations (alternating sides, what each side sees, stop tools, stop,
// force_turn) and history trimming within max_history_tokens.
// Does not prove: behaviour against real providers, or across Worker restarts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  useEngineWorker,
  ISO_UTC,
  model,
  client,
  fresh,
  modelRow,
  promptRow,
  agentRow,
  define,
  simpleAgent,
  thread,
  send,
  stopped,
  turn,
  summary,
  allMessages,
  rpcOk,
  rpcErr,
  errors,
  toolFrames,
  noMoreRequests,
  systemOf,
  chat,
  assertPaired,
} from '../support/engine.mjs';

useEngineWorker();

// ---------------------------------------------------------------------------------------------
// 5. ai_human stop rules
// ---------------------------------------------------------------------------------------------

test('ai_human: an answer without tool calls ends the turn (stop_on_response default)', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Just text.' });
  await turn(sock, 'hi', 1);
  await noMoreRequests(1);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.equal(s.turn_count, 1);
});

test('ai_human: calling the stop tool ends the turn after the tool runs, with no further model call', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_stop', name: 'get_current_time', arguments: {} }] }, { text: 'must not be asked for' });
  const frames = await turn(sock, 'what time is it', 1);
  await noMoreRequests(1);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.equal(s.turn_count, 1);
  assert.equal(s.result, stored[2].content, 'the stop tool\'s result is the answer');

  // A non-stop tool keeps the turn going.
  model.reset();
  model.push({ toolCalls: [{ name: 'lookup_customer', arguments: { customer_id: 'cus_1002' } }] }, { text: 'Grace is on pro.' });
  await turn(sock, 'and cus_1002?', 2);
  await noMoreRequests(2);
});

test('ai_human: the stop tool\'s reply may hold other calls; they all run and the model is not called again', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_stop', name: 'get_current_time', arguments: {} }, { id: 'call_other', name: 'lookup_customer', arguments: { customer_id: 'cus_1003' } }] },
    { text: 'must not be asked for' },
  );
  const frames = await turn(sock, 'both', 1);
  await noMoreRequests(1);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s === 'success').map(([id]) => id), ['call_stop', 'call_other']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.tool_call_id ?? null]), [['user', null], ['assistant', null], ['tool', 'call_stop'], ['tool', 'call_other']]);
  assert.match(stored[3].content, /Alan Turing/);
});

test('ai_human: a stop tool call that fails (bad arguments) does not end the turn; the model reads the error', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] }, side: { stop_tool: 'get_current_time' } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_bad', name: 'get_current_time', arguments: { timezone: 'Mars' } }] },
    { toolCalls: [{ id: 'call_good', name: 'get_current_time', arguments: {} }] },
    { text: 'must not be asked for' },
  );
  const frames = await turn(sock, 'time', 1);
  await noMoreRequests(2);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st !== 'queued' && st !== 'running'), [
    ['call_bad', 'get_current_time', 'error'],
    ['call_good', 'get_current_time', 'success'],
  ]);
  const sent = chat(model.requests[1]);
  assert.equal(sent.at(-1).tool_call_id, 'call_bad');
  assert.match(sent.at(-1).content, /timezone/);
  assert.match((await summary(sock.threadId)).result ?? '', ISO_UTC);
});

test('ai_human: with stop_on_response off the model keeps going until its stop tool', async (t) => {
  const d = await simpleAgent({
    promptOpts: { tools: ['get_current_time'] },
    side: { stop_on_response: false, stop_tool: 'get_current_time', max_steps: 5 },
  });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Thinking out loud.' }, { text: 'Now the tool.', toolCalls: [{ name: 'get_current_time', arguments: {} }] }, { text: 'never' });
  await turn(sock, 'go', 1);
  await noMoreRequests(2);
  assert.deepEqual(chat(model.requests[1]), [
    { role: 'user', content: 'go' },
    { role: 'assistant', content: 'Thinking out loud.' },
  ]);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.result ?? '', ISO_UTC);
});

test('ai_human: max_steps ends a turn whose model keeps calling tools, with a max_steps error', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time'] }, side: { max_steps: 2 } });
  const sock = await thread(t, d.agent);
  const call = { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  model.push(call, call, { text: 'never asked' });
  const frames = await turn(sock, 'loop', 1);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['max_steps']);
  assert.match(errors(frames)[0].message, /2 model calls/);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error ?? '', /2 model calls/);
  // Both calls ran: the history stays valid for the next turn.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'tool']);
  model.push({ text: 'Fresh turn.' });
  await turn(sock, 'next', 2);
  assertPaired(chat(model.requests[2]));
  assert.equal(model.requests.length, 3);
});

test('ai_human: max_turns stops the thread after that many turns and refuses new messages', async (t) => {
  const d = await simpleAgent({ agentOpts: { max_turns: 2 } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'One.' }, { text: 'Two.' });
  await turn(sock, 'first', 1);
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  const from = sock.frames.length;
  await send(sock, 'second');
  const st = await stopped(sock, from);
  assert.equal(st.turn, 2);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.turn_count, 2);
  assert.equal(s.result, 'Two.');
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'third' } });
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'thread_stopped');
  await noMoreRequests(2);
});

// ---------------------------------------------------------------------------------------------
// 6. dual_ai
// ---------------------------------------------------------------------------------------------

/** A dual_ai agent with prompts A ("You are Alice...") and B ("You are Bob..."). */
async function dualAgent({ max_turns = 4, sideA = {}, sideB = {}, promptA = {}, promptB = {}, agentOpts = {} } = {}) {
  const m = fresh('m');
  const pa = fresh('alice');
  const pb = fresh('bob');
  const id = fresh('dual');
  const a = promptRow(pa, m, { system: `You are Alice (${pa}).`, ...promptA });
  const b = promptRow(pb, m, { system: `You are Bob (${pb}).`, ...promptB });
  await define({
    models: [modelRow(m)],
    prompts: [a, b],
    agents: [agentRow(id, { prompt: pa, label: 'Alice', ...sideA }, { kind: 'dual_ai', max_turns, side_b: { prompt: pb, label: 'Bob', ...sideB }, ...agentOpts })],
  });
  return { agent: id, systemA: a.system, systemB: b.system, model: m };
}

test('dual_ai: sides alternate, each sees the other as a named user, and max_turns ends it with the last answer', async (t) => {
  const d = await dualAgent({ max_turns: 4 });
  const sock = await thread(t, d.agent);
  const seen = [];
  const answer = (text) => async (request) => {
    // Read while the model "thinks": the summary shows whose turn it is.
    const s = await summary(sock.threadId);
    seen.push([s.status, s.current_side, s.turn_count]);
    return { text };
  };
  model.push(answer('A1: cats are independent.'), answer('B1: dogs are loyal.'), answer('A2: cats purr.'), answer('B2: dogs win.'));
  const from = sock.frames.length;
  await send(sock, 'Topic: cats or dogs?');
  await stopped(sock, from);
  await noMoreRequests(4);

  const systems = model.requests.map(systemOf);
  assert.deepEqual(systems, [d.systemA, d.systemB, d.systemA, d.systemB]);
  assert.deepEqual(seen, [['running', 'a', 0], ['running', 'b', 1], ['running', 'a', 2], ['running', 'b', 3]]);

  const topic = { role: 'user', content: 'Topic: cats or dogs?' };
  assert.deepEqual(chat(model.requests[0]), [topic]);
  assert.deepEqual(chat(model.requests[1]), [topic, { role: 'user', content: 'A1: cats are independent.', name: 'Alice' }]);
  assert.deepEqual(chat(model.requests[2]), [
    topic,
    { role: 'assistant', content: 'A1: cats are independent.' },
    { role: 'user', content: 'B1: dogs are loyal.', name: 'Bob' },
  ]);
  assert.deepEqual(chat(model.requests[3]), [
    topic,
    { role: 'user', content: 'A1: cats are independent.', name: 'Alice' },
    { role: 'assistant', content: 'B1: dogs are loyal.' },
    { role: 'user', content: 'A2: cats purr.', name: 'Alice' },
  ]);

  // Status frames walk the sides and turns.
  const statuses = sock.frames.slice(from).filter((f) => f.type === 'status').map((f) => [f.state, f.side, f.turn]);
  const running = statuses.filter(([state]) => state === 'running');
  for (const expected of [['running', 'a', 0], ['running', 'b', 1], ['running', 'a', 2], ['running', 'b', 3]]) {
    assert.ok(running.some((s) => JSON.stringify(s) === JSON.stringify(expected)), `status ${expected} in ${JSON.stringify(statuses)}`);
  }
  assert.deepEqual(statuses.at(-1).slice(0, 1), ['stopped']);
  assert.equal(statuses.at(-1)[2], 4);

  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.turn_count, 4);
  assert.equal(s.result, 'B2: dogs win.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.side ?? null]), [['user', null], ['assistant', 'a'], ['assistant', 'b'], ['assistant', 'a'], ['assistant', 'b']]);
});

test('dual_ai: a side\'s tool calls and results are its own; the other side sees only its words', async (t) => {
  const d = await dualAgent({ max_turns: 3, promptA: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_a_time', name: 'get_current_time', arguments: {} }] },
    { text: 'It is late, says Alice.' },
    { text: 'Then sleep, says Bob.' },
    { text: 'Good night.' },
  );
  const from = sock.frames.length;
  await send(sock, 'Chat.');
  await stopped(sock, from);
  await noMoreRequests(4);
  assert.deepEqual(model.requests.map(systemOf), [d.systemA, d.systemA, d.systemB, d.systemA]);
  assert.deepEqual(chat(model.requests[2]), [
    { role: 'user', content: 'Chat.' },
    { role: 'user', content: 'It is late, says Alice.', name: 'Alice' },
  ]);
  assert.equal(model.requests[2].body.tools, undefined, 'Bob has no tools');
  const own = chat(model.requests[3]);
  assert.deepEqual(own.map((m) => [m.role, m.tool_call_id ?? m.tool_calls?.[0]?.id ?? null]), [
    ['user', null],
    ['assistant', 'call_a_time'],
    ['tool', 'call_a_time'],
    ['assistant', null],
    ['user', null],
  ]);
  assert.equal(own[4].name, 'Bob');
  assert.equal((await summary(sock.threadId)).result, 'Good night.');
});

test('dual_ai on an Anthropic model: the other side\'s words join the user turn, and turns alternate', async (t) => {
  const m = fresh('claude');
  const pa = fresh('alice');
  const pb = fresh('bob');
  const id = fresh('dual');
  await define({
    models: [modelRow(m, { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY' })],
    prompts: [promptRow(pa, m, { system: 'Alice here.' }), promptRow(pb, m, { system: 'Bob here.' })],
    agents: [agentRow(id, { prompt: pa, label: 'Alice' }, { kind: 'dual_ai', max_turns: 3, side_b: { prompt: pb, label: 'Bob' } })],
  });
  const sock = await thread(t, id);
  model.push({ text: 'A1' }, { text: 'B1' }, { text: 'A2' });
  const from = sock.frames.length;
  await send(sock, 'Topic.');
  await stopped(sock, from);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.body.system), ['Alice here.', 'Bob here.', 'Alice here.']);
  const text = (v) => ({ type: 'text', text: v });
  assert.deepEqual(model.requests[1].body.messages, [{ role: 'user', content: [text('Topic.'), text('A1')] }]);
  assert.deepEqual(model.requests[2].body.messages, [
    { role: 'user', content: [text('Topic.')] },
    { role: 'assistant', content: [text('A1')] },
    { role: 'user', content: [text('B1')] },
  ]);
});

test('dual_ai: a side\'s stop_tool ends the conversation with the stop_tool_response_property as the result', async (t) => {
  const d = await dualAgent({
    max_turns: 10,
    sideB: { stop_tool: 'send_notification', stop_tool_response_property: 'message' },
    promptB: { tools: ['send_notification'] },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'I think we agree.' },
    { toolCalls: [{ id: 'call_verdict', name: 'send_notification', arguments: { channel: 'email', to: 'judge@example.com', message: 'Verdict: we agree.' } }] },
    { text: 'must not be asked for' },
  );
  const from = sock.frames.length;
  await send(sock, 'Debate, then send the verdict.');
  await stopped(sock, from);
  await noMoreRequests(2);
  assert.deepEqual(model.requests.map(systemOf), [d.systemA, d.systemB]);
  assert.deepEqual(model.requests[1].body.tools.map((x) => x.function.name), ['send_notification']);
  const frames = sock.frames.slice(from);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'stop_tool');
  assert.equal(s.result, 'Verdict: we agree.');
});

test('dual_ai: the stop tool\'s answer property is read from its result before its arguments', async (t) => {
  const d = await dualAgent({
    max_turns: 10,
    sideA: { stop_tool: 'update_context', stop_tool_response_property: 'verdict' },
    promptA: { tools: ['update_context'] },
  });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ name: 'update_context', arguments: { set: { verdict: 'tabs win' } } }] }, { text: 'must not be asked for' });
  const from = sock.frames.length;
  await send(sock, 'Decide.');
  await stopped(sock, from);
  await noMoreRequests(1);
  const s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'stop_tool');
  assert.equal(s.result, 'tabs win');
});

test('dual_ai: POST /stop mid-reply stops the conversation and no further model request is made', async (t) => {
  const d = await dualAgent({ max_turns: 10 });
  const sock = await thread(t, d.agent);
  const long = 'B speaks slowly and at great length about everything. '.repeat(4);
  model.push({ text: 'A opens.' }, { text: long, chunkSize: 2, chunkDelayMs: 40 }, { text: 'must not be asked for' }, { text: 'nor this' });
  const from = sock.frames.length;
  await send(sock, 'Begin.');
  await model.waitForRequests(2);
  // Wait until B is visibly streaming, then stop.
  const pendingB = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.side === 'b' && f.message.status === 'pending', { from });
  await sock.waitFor((f) => f.type === 'message_chunk' && f.message_id === pendingB.message.id, { from });
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await stopped(sock, from, 5000);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'user');
  await noMoreRequests(2, 800);
  // What B said before the stop is kept, cut short.
  await sleep(200);
  const stored = await allMessages(sock.threadId);
  const b = stored.find((m) => m.id === pendingB.message.id);
  assert.ok(b, 'B\'s message is stored');
  assert.notEqual(b.status, 'pending');
  assert.ok(b.content.length < long.length, `B was cut short (${b.content.length} of ${long.length} characters)`);
  const refused = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'more' } });
  assert.equal(refused.status, 409);
});

test('force_turn side b: refused on an ai_human agent, and on dual_ai it makes side b speak', async (t) => {
  const human = await simpleAgent();
  const hs = await thread(t, human.agent);
  const err = await rpcErr(hs, 'force_turn', { side: 'b' }, 'invalid_request');
  assert.match(err.message, /no side b/);
  await noMoreRequests(0, 200);

  const d = await dualAgent({ max_turns: 1 });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Bob starts, unasked.' });
  const from = sock.frames.length;
  assert.deepEqual(await rpcOk(sock, 'force_turn', { side: 'b' }), { side: 'b' });
  await stopped(sock, from);
  await noMoreRequests(1);
  assert.equal(systemOf(model.requests[0]), d.systemB);
  const s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'max_turns');
  assert.equal(s.result, 'Bob starts, unasked.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.side, m.content]), [['assistant', 'b', 'Bob starts, unasked.']]);
});

// ---------------------------------------------------------------------------------------------
// 7. History budget
// ---------------------------------------------------------------------------------------------

test('history budget: with a small max_history_tokens the oldest messages are dropped, never splitting a call from its result', async (t) => {
  // Estimated tokens (characters / 4 + 4 per message): a question ~61, a call ~9, its result
  // (a timestamp) ~10, an answer ~49. A budget of 140 makes some cuts land between a call and
  // its result: the result then pulls its call in, so the request starts at the call.
  const d = await simpleAgent({ modelOpts: { max_history_tokens: 140 }, promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  const long = (n) => `Message ${n}: ` + 'lorem ipsum dolor sit amet '.repeat(8);
  const answer = (n) => `Answer ${n}: ` + 'consectetur adipiscing elit '.repeat(6);
  // Each turn: a long question, a tool call, its result, a long answer.
  for (let i = 1; i <= 5; i++) {
    model.push({ toolCalls: [{ id: `call_t${i}`, name: 'get_current_time', arguments: {} }] }, { text: answer(i) });
    await turn(sock, long(i), i);
  }
  await noMoreRequests(10);
  const stored = await allMessages(sock.threadId);
  assert.equal(stored.length, 20, 'the stored thread keeps everything');
  let orphanDropped = 0;
  for (const [i, r] of model.requests.entries()) {
    const sent = chat(r);
    assertPaired(sent, `request ${i}:`);
    // What was sent is the newest part of the stored history, in order, minus orphaned results.
    const key = (m) => JSON.stringify([m.role, m.content || '', m.tool_call_id ?? null, (m.tool_calls ?? []).map((c) => c.id)]);
    const at = stored.findIndex((m) => key(m) === key(sent[0]));
    assert.ok(at >= 0, `request ${i}: its first message is stored`);
    const end = 4 * Math.floor(i / 2) + (i % 2 === 0 ? 1 : 3); // what was stored when request i was made
    assert.deepEqual(sent.map(key), stored.slice(at, end).map(key), `request ${i} sends a contiguous, newest part of the history`);
    const before = stored[at - 1];
    if (before?.role === 'tool') orphanDropped++;
    const tokens = sent.reduce((n, m) => n + Math.ceil(((m.content ?? '').length + JSON.stringify(m.tool_calls ?? []).length) / 4) + 4, 0);
    assert.ok(tokens < 140 + 80, `request ${i} stays near the budget: ~${tokens} tokens`);
  }
  // Later requests start well after the beginning of the conversation.
  const last = chat(model.requests.at(-1));
  assert.ok(!last.some((m) => m.content === long(1)), 'the first message was dropped');
  assert.ok(last.length <= 8, `${last.length} of 19 messages sent`);
  assert.equal(last.at(-1).role, 'tool');
  assert.equal(last.at(-1).tool_call_id, 'call_t5');
  assert.ok(last.some((m) => m.content === long(5)));
  assert.equal(orphanDropped, 0, 'a result is never sent without its call, nor left out while newer messages are sent');
  assert.ok(
    model.requests.some((r) => chat(r)[0]?.tool_calls?.length),
    'some request starts at a call that its result pulled in past the budget',
  );
});

test('history budget smaller than one exchange: the latest call is still sent with its result', async (t) => {
  const d = await simpleAgent({ modelOpts: { max_history_tokens: 15 }, promptOpts: { tools: ['get_current_time'] } });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_tiny', name: 'get_current_time', arguments: {} }] }, { text: 'Done.' });
  await turn(sock, 'What time is it? ' + 'Please answer precisely. '.repeat(4), 1);
  await noMoreRequests(2);
  assert.ok(chat(model.requests[0]).length >= 1, 'the first request holds the question');
  const sent = chat(model.requests[1]);
  assertPaired(sent);
  assert.ok(sent.length > 0, `the second request holds no message at all: ${JSON.stringify(model.requests[1].body.messages)}`);
  assert.equal(sent.at(-1).tool_call_id, 'call_tiny');
});
