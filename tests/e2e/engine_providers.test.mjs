// End-to-end tests of the engine against its providers: the real built Worker in Miniflare
// (workerd), local D1 holding definitions each test writes for itself, real WebSockets, and the
// scripted model server standing in for OpenAI and Anthropic.
// Proves: what the engine sends to each provider (streamed replies with split frames, parallel
// tool calls, Anthropic tool_use round trips), the retry/fallback/fail-fast/timeout policy, and
// the model request log (rows per attempt, paging, the key redacted everywhere).
// Does not prove: behaviour against real providers, or across Worker restarts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useEngineWorker,
  OPENAI_KEY,
  ANTHROPIC_KEY,
  LOG_KEY,
  ISO_UTC,
  model,
  client,
  fresh,
  modelRow,
  define,
  simpleAgent,
  thread,
  send,
  stopped,
  turn,
  summary,
  allMessages,
  logs,
  errors,
  toolFrames,
  finalMessages,
  noMoreRequests,
  chat,
} from '../support/engine.mjs';

useEngineWorker();

// ---------------------------------------------------------------------------------------------
// 1. OpenAI: streaming, split frames, parallel tool calls
// ---------------------------------------------------------------------------------------------

test('openai: split text and tool-call frames, two parallel calls run together and pair with their results', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'], parallel_tool_calls: 1 } });
  const sock = await thread(t, d.agent);
  const intro = 'Let me check both of those for you.';
  const finalText = 'Ada Lovelace is on the enterprise plan.';
  model.push(
    {
      text: intro,
      chunkSize: 3,
      // Further apart than the Worker's chunk window (20 ms): each piece is a frame of its own.
      chunkDelayMs: 30,
      argsChunkSize: 2,
      toolCalls: [
        { id: 'call_lookup', name: 'lookup_customer', arguments: { email: 'ada@example.com' } },
        { id: 'call_time', name: 'get_current_time', arguments: {} },
      ],
    },
    { text: finalText, chunkSize: 2 },
  );
  const frames = await turn(sock, 'Who is ada@example.com, and what time is it?', 1);

  // Both calls were started before either finished (one batch); each result is stored as its
  // call finishes (get_current_time, with no I/O, usually first).
  const tools = toolFrames(frames);
  assert.deepEqual(tools.slice(0, 4), [
    ['call_lookup', 'lookup_customer', 'queued'],
    ['call_time', 'get_current_time', 'queued'],
    ['call_lookup', 'lookup_customer', 'running'],
    ['call_time', 'get_current_time', 'running'],
  ]);
  assert.deepEqual(tools.slice(4).sort(), [
    ['call_lookup', 'lookup_customer', 'success'],
    ['call_time', 'get_current_time', 'success'],
  ]);

  // The first reply streamed in many small chunks that add up to its text; its calls arrived whole.
  const [callMsg, finalMsg] = finalMessages(frames).filter((m) => m.role === 'assistant');
  const chunksOf = (id) => frames.filter((f) => f.type === 'message_chunk' && f.message_id === id);
  assert.ok(chunksOf(callMsg.id).length >= 10, `expected many chunks, got ${chunksOf(callMsg.id).length}`);
  assert.equal(chunksOf(callMsg.id).map((c) => c.delta).join(''), intro);
  assert.equal(callMsg.content, intro);
  assert.deepEqual(callMsg.tool_calls, [
    { id: 'call_lookup', name: 'lookup_customer', arguments: '{"email":"ada@example.com"}' },
    { id: 'call_time', name: 'get_current_time', arguments: '{}' },
  ]);
  assert.equal(finalMsg.content, finalText);
  assert.equal(chunksOf(finalMsg.id).map((c) => c.delta).join(''), finalText);

  // Stored: the results after the message holding the calls, in the order they finished.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'tool', 'assistant']);
  const result = (id) => stored.find((m) => m.tool_call_id === id);
  assert.match(result('call_lookup').content, /Ada Lovelace/);
  assert.match(result('call_time').content, ISO_UTC);

  // What the model was sent.
  await noMoreRequests(2);
  const [first, second] = model.requests;
  assert.equal(first.format, 'openai');
  assert.equal(first.path, '/v1/chat/completions');
  assert.equal(first.headers.authorization, `Bearer ${OPENAI_KEY}`);
  assert.equal(first.body.model, d.modelId);
  assert.equal(first.body.stream, true);
  assert.deepEqual(first.body.stream_options, { include_usage: true });
  assert.deepEqual(first.body.tools.map((x) => x.function.name).sort(), ['get_current_time', 'lookup_customer']);
  assert.ok(first.body.tools.every((x) => x.type === 'function' && x.function.parameters?.type === 'object'));
  assert.equal(first.body.tool_choice, 'auto');
  assert.equal(first.body.parallel_tool_calls, true);
  assert.deepEqual(first.body.messages, [
    { role: 'system', content: d.system },
    { role: 'user', content: 'Who is ada@example.com, and what time is it?' },
  ]);
  // The second request pairs each call with its result, in call order.
  const sent = chat(second);
  assert.deepEqual(sent.map((m) => m.role), ['user', 'assistant', 'tool', 'tool']);
  assert.deepEqual(sent[1], {
    role: 'assistant',
    content: intro,
    tool_calls: [
      { id: 'call_lookup', type: 'function', function: { name: 'lookup_customer', arguments: '{"email":"ada@example.com"}' } },
      { id: 'call_time', type: 'function', function: { name: 'get_current_time', arguments: '{}' } },
    ],
  });
  assert.equal(sent[2].tool_call_id, 'call_lookup');
  assert.equal(sent[2].content, result('call_lookup').content);
  assert.equal(sent[3].tool_call_id, 'call_time');
  assert.equal(sent[3].content, result('call_time').content);
});

test('openai: the prompt\'s tool_choice and parallel_tool_calls are sent as set; without parallel calls they run one by one', async (t) => {
  const d = await simpleAgent({
    promptOpts: { tools: ['get_current_time'], tool_choice: 'required', parallel_tool_calls: 0 },
    modelOpts: { max_output_tokens: 321 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_1', name: 'get_current_time', arguments: {} }, { id: 'call_2', name: 'get_current_time', arguments: {} }] },
    { text: 'Done.' },
  );
  const frames = await turn(sock, 'time twice', 1);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s !== 'queued'), [
    ['call_1', 'get_current_time', 'running'],
    ['call_1', 'get_current_time', 'success'],
    ['call_2', 'get_current_time', 'running'],
    ['call_2', 'get_current_time', 'success'],
  ]);
  await noMoreRequests(2);
  for (const r of model.requests) {
    assert.equal(r.body.tool_choice, 'required');
    assert.equal(r.body.parallel_tool_calls, false);
    assert.equal(r.body.max_tokens, 321);
  }
  assert.deepEqual(chat(model.requests[1]).map((m) => [m.role, m.tool_call_id ?? null]), [
    ['user', null],
    ['assistant', null],
    ['tool', 'call_1'],
    ['tool', 'call_2'],
  ]);
});

// ---------------------------------------------------------------------------------------------
// 2. Anthropic
// ---------------------------------------------------------------------------------------------

test('anthropic: streamed text and a tool_use round trip, with x-api-key, anthropic-version and a top-level system', async (t) => {
  const d = await simpleAgent({
    modelOpts: { provider: 'anthropic', model: 'claude-scripted', base_url: `${model.url}/v1`, api_key_secret: 'ANTHROPIC_API_KEY' },
    promptOpts: { system: 'You are a careful Claude.', tools: ['get_current_time'] },
  });
  const sock = await thread(t, d.agent);
  const finalText = 'It is exactly the time the tool said.';
  model.push(
    { text: 'Let me look.', chunkSize: 4, argsChunkSize: 1, toolCalls: [{ id: 'toolu_time1', name: 'get_current_time', arguments: {} }] },
    // Further apart than the Worker's chunk window (20 ms): each piece is a frame of its own.
    { text: finalText, chunkSize: 3, chunkDelayMs: 30 },
  );
  const frames = await turn(sock, 'What time is it?', 1);

  const assistants = finalMessages(frames).filter((m) => m.role === 'assistant');
  assert.equal(assistants.length, 2);
  assert.equal(assistants[0].content, 'Let me look.');
  assert.deepEqual(assistants[0].tool_calls, [{ id: 'toolu_time1', name: 'get_current_time', arguments: '{}' }]);
  assert.equal(assistants[1].content, finalText);
  assert.equal(assistants[1].status, 'completed');
  const chunks = frames.filter((f) => f.type === 'message_chunk' && f.message_id === assistants[1].id);
  assert.ok(chunks.length >= 5, `several chunks: ${chunks.length}`);
  assert.equal(chunks.map((c) => c.delta).join(''), finalText);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);

  await noMoreRequests(2);
  const [first, second] = model.requests;
  for (const r of [first, second]) {
    assert.equal(r.format, 'anthropic');
    assert.equal(r.path, '/v1/messages');
    assert.equal(r.headers['x-api-key'], ANTHROPIC_KEY);
    assert.equal(r.headers['anthropic-version'], '2023-06-01');
    assert.equal(r.headers.authorization, undefined, 'no OpenAI-style bearer header');
    assert.ok(!r.rawBody.includes(OPENAI_KEY));
    assert.equal(r.body.model, 'claude-scripted');
    assert.equal(r.body.stream, true);
    assert.equal(r.body.system, 'You are a careful Claude.');
    assert.equal(typeof r.body.max_tokens, 'number');
    assert.ok(r.body.messages.every((m) => m.role !== 'system'), 'no system message in messages');
    assert.deepEqual(r.body.tools.map((x) => x.name), ['get_current_time']);
    assert.equal(r.body.tools[0].input_schema.type, 'object');
    assert.deepEqual(r.body.tool_choice, { type: 'auto' });
  }
  assert.deepEqual(first.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'What time is it?' }] }]);
  const m = second.body.messages;
  assert.deepEqual(m.map((x) => x.role), ['user', 'assistant', 'user']);
  assert.deepEqual(m[1].content, [
    { type: 'text', text: 'Let me look.' },
    { type: 'tool_use', id: 'toolu_time1', name: 'get_current_time', input: {} },
  ]);
  assert.equal(m[2].content.length, 1);
  const result = m[2].content[0];
  assert.equal(result.type, 'tool_result');
  assert.equal(result.tool_use_id, 'toolu_time1');
  const resultText = typeof result.content === 'string' ? result.content : result.content.map((b) => b.text).join('');
  assert.match(resultText, ISO_UTC);
  assert.notEqual(result.is_error, true);
});

test('anthropic: an error event mid-stream is retried without doubling the text; usage reaches the log', async (t) => {
  const d = await simpleAgent({
    modelOpts: { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY', input_price_per_mtok: 3, output_price_per_mtok: 15 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'This first attempt breaks off', chunkSize: 5, midStreamError: { message: 'Overloaded right now' } },
    { text: 'Second attempt, whole.', usage: { input_tokens: 77, output_tokens: 11 } },
  );
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  assert.match(errors(frames)[0].message, /Overloaded right now/);
  const fin = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(fin.content, 'Second attempt, whole.');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.content]), [['user', 'completed', 'hi'], ['assistant', 'completed', 'Second attempt, whole.']]);
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.provider, l.status, l.attempt]), [['anthropic', 'error', 1], ['anthropic', 'ok', 2]]);
  assert.match(log[0].error, /Overloaded right now/);
  assert.equal(log[1].input_tokens, 77);
  assert.equal(log[1].output_tokens, 11);
  assert.ok(Math.abs(log[1].cost - (77 * 3 + 11 * 15) / 1e6) < 1e-9, `cost ${log[1].cost}`);
});

test('anthropic: an HTTP error body is read in Anthropic\'s format', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'anthropic', model: 'claude-scripted', api_key_secret: 'ANTHROPIC_API_KEY' } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 400, message: 'messages: roles must alternate' } });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(1);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_http_error']);
  assert.match(errors(frames)[0].message, /400: messages: roles must alternate$/);
});

// ---------------------------------------------------------------------------------------------
// 3. Retries, fallbacks, fail-fast and timeouts
// ---------------------------------------------------------------------------------------------

test('retry: a 429 with retry-after 1 is retried after about a second, within the same turn', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'Slow down', headers: { 'retry-after': '1' } } }, { text: 'Second time lucky.' });
  const frames = await turn(sock, 'hello', 1);
  await noMoreRequests(2);
  const [a, b] = model.requests;
  assert.ok(b.at - a.at >= 950, `the retry waited ${b.at - a.at} ms; retry-after asked for 1000`);
  assert.deepEqual(b.body, a.body, 'the retry sends the same request');

  const errs = errors(frames);
  assert.equal(errs.length, 1, JSON.stringify(errs));
  assert.equal(errs[0].code, 'model_retry');
  assert.match(errs[0].message, /429/);
  const retryAt = frames.indexOf(errs[0]);
  const done = frames.findIndex((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed');
  assert.ok(retryAt >= 0 && retryAt < done, 'the retry is reported before the completed reply');
  assert.equal(frames[done].message.content, 'Second time lucky.');

  const s = await summary(sock.threadId);
  assert.equal(s.turn_count, 1);
  assert.equal(s.status, 'idle');
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.status, m.content]), [
    ['user', 'completed', 'hello'],
    ['assistant', 'completed', 'Second time lucky.'],
  ]);
});

test('retry: tool calls of a stream cut short are forgotten; only the retried reply\'s calls run', async (t) => {
  const d = await simpleAgent({ promptOpts: { tools: ['get_current_time', 'lookup_customer'] } });
  const sock = await thread(t, d.agent);
  model.push(
    { text: 'Looking', toolCalls: [{ id: 'call_lost', name: 'lookup_customer', arguments: { customer_id: 'cus_1001' } }], truncate: true },
    { text: 'No tools needed after all.' },
  );
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  assert.deepEqual(toolFrames(frames), []);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => [m.role, m.content, m.tool_calls ?? []]), [
    ['user', 'hi', []],
    ['assistant', 'No tools needed after all.', []],
  ]);
});

test('fallback: a model failing twice with 503 falls back to its fallback model and the reply completes', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'fallback-model-id' })] });
  const d = await simpleAgent({ modelOpts: { model: 'primary-model-id', fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 503, message: 'Overloaded' } }, { error: { status: 503, message: 'Still overloaded' } }, { text: 'From the fallback.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.body.model), ['primary-model-id', 'primary-model-id', 'fallback-model-id']);
  assert.deepEqual(chat(model.requests[2]), [{ role: 'user', content: 'hi' }]);
  const retries = errors(frames);
  assert.deepEqual(retries.map((e) => e.code), ['model_retry', 'model_retry']);
  assert.match(retries[0].message, /retrying/);
  assert.match(retries[1].message, new RegExp(`falling back to model "${f}"`));
  const fin = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(fin.status, 'completed');
  assert.equal(fin.content, 'From the fallback.');
});

test('fallback: an OpenAI model can fall back to an Anthropic one; the request is rebuilt in its format', async (t) => {
  const f = fresh('claude-fb');
  await define({ models: [modelRow(f, { provider: 'anthropic', model: 'claude-fallback', api_key_secret: 'ANTHROPIC_API_KEY' })] });
  const d = await simpleAgent({ modelOpts: { fallbacks: [f] }, promptOpts: { system: 'Either provider.' } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 500 } }, { error: { status: 500 } }, { text: 'Claude took over.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(3);
  assert.deepEqual(model.requests.map((r) => r.format), ['openai', 'openai', 'anthropic']);
  const last = model.requests[2];
  assert.equal(last.headers['x-api-key'], ANTHROPIC_KEY);
  assert.equal(last.body.model, 'claude-fallback');
  assert.equal(last.body.system, 'Either provider.');
  assert.deepEqual(last.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
  assert.equal(finalMessages(frames).find((m) => m.role === 'assistant').content, 'Claude took over.');
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.model, l.provider, l.attempt, l.status]), [
    [d.model, 'openai', 1, 'error'],
    [d.model, 'openai', 2, 'error'],
    [f, 'anthropic', 1, 'ok'],
  ]);
});

test('stop during a retry wait: no further attempt is made', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'wait', headers: { 'retry-after': '2' } } }, { text: 'must not be asked for' });
  const from = sock.frames.length;
  await send(sock, 'hi');
  await sock.waitFor((f) => f.type === 'error' && f.code === 'model_retry', { from });
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200);
  await stopped(sock, from);
  await noMoreRequests(1, 2500);
  assert.equal((await summary(sock.threadId)).stopped_by, 'user');
});

test('fallback: a Retry-After beyond 30 s is not waited for; the fallback is called at once', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'patient-fallback-id' })] });
  const d = await simpleAgent({ modelOpts: { fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 429, message: 'quota', headers: { 'retry-after': '120' } } }, { text: 'Fallback answered.' });
  await turn(sock, 'hi', 1);
  await noMoreRequests(2);
  const [a, b] = model.requests;
  assert.equal(b.body.model, 'patient-fallback-id');
  assert.ok(b.at - a.at < 1000, `the fallback was called ${b.at - a.at} ms later`);
});

test('fallback: a model whose secret is not set is skipped for its fallback; without one the turn fails with model_config', async (t) => {
  const f = fresh('fb');
  await define({ models: [modelRow(f, { model: 'keyed-fallback-id' })] });
  const d = await simpleAgent({ modelOpts: { api_key_secret: 'NOT_A_SET_SECRET', fallbacks: [f] } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Fallback with a key.' });
  const frames = await turn(sock, 'hi', 1);
  await noMoreRequests(1);
  assert.equal(model.requests[0].body.model, 'keyed-fallback-id');
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry']);
  assert.match(errors(frames)[0].message, /NOT_A_SET_SECRET/);

  const lone = await simpleAgent({ modelOpts: { api_key_secret: 'NOT_A_SET_SECRET' } });
  const other = await thread(t, lone.agent);
  const failed = await turn(other, 'hi', 0);
  await noMoreRequests(1);
  assert.deepEqual(errors(failed).map((e) => e.code), ['model_config']);
  assert.match(errors(failed)[0].message, /secret NOT_A_SET_SECRET is empty: set it in .dev.vars, or use the demo model/);
});

test('fallback: only the first model\'s fallbacks are tried, not a fallback\'s own fallbacks', async (t) => {
  const f1 = fresh('fb1');
  const f2 = fresh('fb2');
  await define({ models: [modelRow(f2, { model: 'second-level-id' }), modelRow(f1, { model: 'first-level-id', fallbacks: [f2] })] });
  const d = await simpleAgent({ modelOpts: { model: 'primary-id', fallbacks: [f1] } });
  const sock = await thread(t, d.agent);
  for (let i = 0; i < 4; i++) model.push({ error: { status: 503, message: `down ${i}` } });
  model.push({ text: 'the second-level fallback must not be asked' });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(4);
  assert.deepEqual(model.requests.map((r) => r.body.model), ['primary-id', 'primary-id', 'first-level-id', 'first-level-id']);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_retry', 'model_retry', 'model_http_error']);
});

test('fallback: a fallback missing from D1 is skipped; the call fails once the primary gives up', async (t) => {
  const d = await simpleAgent({ modelOpts: { fallbacks: ['no-such-model'] } });
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 503, message: 'down' } }, { error: { status: 503, message: 'still down' } });
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_http_error']);
  assert.match(errors(frames)[1].message, /still down/);
  assert.equal((await summary(sock.threadId)).status, 'idle');
});

test('fail fast: a 400 is not retried, reported as model_http_error, and the thread stays usable', async (t) => {
  const d = await simpleAgent();
  const sock = await thread(t, d.agent);
  model.push({ error: { status: 400, message: 'Invalid schema for tools' } });
  let frames = await turn(sock, 'first', 0); // a failed turn is not counted
  await noMoreRequests(1);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_http_error'], JSON.stringify(errs));
  assert.match(errs[0].message, /400/);
  assert.match(errs[0].message, /Invalid schema for tools/);
  const failed = finalMessages(frames).find((m) => m.role === 'assistant');
  assert.equal(failed.status, 'failed');
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error ?? '', /Invalid schema for tools/);

  model.push({ text: 'Working again.' });
  frames = await turn(sock, 'second', 1);
  assert.equal(finalMessages(frames).find((m) => m.role === 'assistant').content, 'Working again.');
  // The failed reply is not sent back to the model.
  assert.deepEqual(chat(model.requests[1]), [{ role: 'user', content: 'first' }, { role: 'user', content: 'second' }]);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
});

test('stall timeout: a stream that goes silent fails after stall_timeout_ms, is retried once, then model_timeout', async (t) => {
  const d = await simpleAgent({ modelOpts: { stall_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'I will stop talking soon', stallAfter: 2 }, { text: 'I will stop talking soon', stallAfter: 2 });
  const started = Date.now();
  const frames = await turn(sock, 'talk', 0);
  const took = Date.now() - started;
  await noMoreRequests(2);
  assert.ok(took < 5000, `the stall timer is 300 ms, the turn took ${took} ms`);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  assert.match(errors(frames)[1].message, /stall/);
  // The partial text of the failed attempt is withdrawn before the retry.
  const reset = frames.find((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'pending' && f.message.content === '' && frames.indexOf(f) > frames.indexOf(errors(frames)[0]));
  assert.ok(reset, 'the pending message is emptied before the retry');
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.match(s.last_error, /stall/);
});

test('first-chunk timeout: a model that never answers fails after first_chunk_timeout_ms with model_timeout', async (t) => {
  const d = await simpleAgent({ modelOpts: { first_chunk_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  model.push({ hang: true }, { stallAfter: 0 });
  const started = Date.now();
  const frames = await turn(sock, 'anyone there?', 0);
  assert.ok(Date.now() - started < 5000);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  // Usable afterwards.
  model.push({ text: 'Here now.' });
  const next = await turn(sock, 'again', 1);
  assert.equal(finalMessages(next).find((m) => m.role === 'assistant').content, 'Here now.');
});

test('first-chunk timeout after the headers: a reply whose body never starts fails with "no first chunk"', async (t) => {
  const d = await simpleAgent({ modelOpts: { first_chunk_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'never sent', stallAfter: 0 }, { text: 'never sent', stallAfter: 0 });
  const frames = await turn(sock, 'hello?', 0);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  assert.match(errors(frames)[1].message, /no first chunk within 300 ms/);
});

test('a first chunk slower than stall_timeout_ms is waited for under first_chunk_timeout_ms, and a stall counts from the last chunk', async (t) => {
  const d = await simpleAgent({ modelOpts: { first_chunk_timeout_ms: 5000, stall_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  // 800 ms before the first chunk (past the stall limit, within the first-chunk limit), then
  // chunks 150 ms apart for about 1.2 s (longer than the stall limit in all, never quiet for it,
  // and ending well before the first-chunk deadline would).
  model.push({ text: 'Worth the wait, one piece at a time.', firstChunkDelayMs: 800, chunkSize: 4, chunkDelayMs: 150 });
  const frames = await turn(sock, 'take your time', 1);
  await noMoreRequests(1);
  assert.deepEqual(errors(frames), []);
  assert.equal(finalMessages(frames).find((m) => m.role === 'assistant').content, 'Worth the wait, one piece at a time.');
  assert.ok(frames.filter((f) => f.type === 'message_chunk').length >= 5, 'the pieces were streamed as they came');
});

test('a stall right after a slow first chunk is seen one stall limit later, not at the first-chunk deadline', async (t) => {
  const d = await simpleAgent({ modelOpts: { first_chunk_timeout_ms: 5000, stall_timeout_ms: 300 } });
  const sock = await thread(t, d.agent);
  // The first chunk comes after 800 ms (within the first-chunk limit), then nothing: each
  // attempt should fail about 300 ms after its chunk, not at 5 s.
  const stalling = { text: 'Slow to start, then silent.', firstChunkDelayMs: 800, stallAfter: 2 };
  model.push(stalling, { ...stalling });
  const started = Date.now();
  const frames = await turn(sock, 'and then?', 0);
  const took = Date.now() - started;
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_timeout']);
  assert.match(errors(frames)[1].message, /the stream stalled for 300 ms/);
  assert.ok(took < 5000, `two attempts of about 1.1 s each (and the retry's wait), the turn took ${took} ms`);
});

// ---------------------------------------------------------------------------------------------
// 4. The request log
// ---------------------------------------------------------------------------------------------

test('request log: one row per attempt with status, http status, latency, tokens and cost; paged; the key is redacted', async (t) => {
  const d = await simpleAgent({
    modelOpts: { api_key_secret: 'LOG_API_KEY', input_price_per_mtok: 1.5, output_price_per_mtok: 4 },
  });
  const sock = await thread(t, d.agent);
  model.push(
    { error: { status: 500, message: `upstream rejected credentials ${LOG_KEY} (internal)` } },
    { text: 'Logged answer.', usage: { prompt_tokens: 1000, completion_tokens: 250 }, chunkDelayMs: 20 },
  );
  await turn(sock, 'log me', 1);
  await noMoreRequests(2);
  assert.equal(model.requests[0].headers.authorization, `Bearer ${LOG_KEY}`, 'the key was read from the named secret');

  const page = await logs(sock.threadId);
  assert.equal(page.total, 2);
  assert.equal(page.has_more, false);
  const [fail, ok] = page.logs;
  assert.equal(fail.model, d.model);
  assert.equal(fail.provider, 'openai');
  assert.equal(fail.attempt, 1);
  assert.equal(fail.status, 'error');
  assert.equal(fail.http_status, 500);
  assert.match(fail.error, /upstream rejected credentials/);
  assert.match(fail.error, /\[redacted\]/);
  assert.equal(fail.cost, 0);
  assert.equal(ok.model, d.model);
  assert.equal(ok.attempt, 2);
  assert.equal(ok.status, 'ok');
  assert.equal(ok.http_status, 200);
  assert.equal(ok.error ?? null, null);
  assert.equal(ok.input_tokens, 1000);
  assert.equal(ok.output_tokens, 250);
  assert.ok(Math.abs(ok.cost - (1000 * 1.5 + 250 * 4) / 1e6) < 1e-9, `cost ${ok.cost}`);
  assert.ok(ok.cost > 0);
  assert.equal(typeof ok.ttft_ms, 'number');
  assert.ok(ok.ttft_ms >= 0 && ok.latency_ms >= ok.ttft_ms, `ttft ${ok.ttft_ms} ≤ latency ${ok.latency_ms}`);
  assert.ok(ok.latency_ms >= 20, `latency ${ok.latency_ms} covers the streamed reply`);
  assert.ok(ok.seq > fail.seq);
  assert.ok(ok.created_at >= fail.created_at);
  const stored = await allMessages(sock.threadId);
  assert.equal(fail.message_id, stored[1].id, 'rows point at the assistant message');
  assert.equal(ok.message_id, stored[1].id);

  // Paging like messages.
  const second = await logs(sock.threadId, '?limit=1&offset=1');
  assert.deepEqual(second.logs.map((l) => l.seq), [ok.seq]);
  assert.equal(second.total, 2);
  const firstOnly = await logs(sock.threadId, '?limit=1');
  assert.deepEqual(firstOnly.logs.map((l) => l.seq), [fail.seq]);
  assert.equal(firstOnly.has_more, true);
  const desc = await logs(sock.threadId, '?order=desc');
  assert.deepEqual(desc.logs.map((l) => l.seq), [ok.seq, fail.seq]);
  const bad = await client.request('GET', `/api/threads/${sock.threadId}/logs?limit=0`);
  assert.equal(bad.status, 400);

  assert.ok(!JSON.stringify(page).includes(LOG_KEY), 'the key leaked into the log');
});

test('a provider error that echoes the API key never shows it to clients (frames, summary, messages, log)', async (t) => {
  const d = await simpleAgent({ modelOpts: { api_key_secret: 'LOG_API_KEY' } });
  const sock = await thread(t, d.agent);
  model.push(
    { error: { status: 503, message: `temporarily unavailable for key ${LOG_KEY}` } },
    { error: { status: 401, message: `Incorrect API key provided: ${LOG_KEY}` } },
  );
  const frames = await turn(sock, 'hi', 0);
  await noMoreRequests(2);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_retry', 'model_http_error']);
  assert.match(errors(frames)[1].message, /Incorrect API key provided/);
  const places = {
    frames: sock.frames.filter((f) => JSON.stringify(f).includes(LOG_KEY)),
    summary: await summary(sock.threadId),
    messages: await allMessages(sock.threadId),
    log: await logs(sock.threadId),
  };
  const leaks = Object.entries(places).filter(([, v]) => JSON.stringify(v).includes(LOG_KEY));
  assert.deepEqual(leaks, [], 'the key reached a client');
});
