// The scripted model server (tests/support/model-server.mjs), tested over real HTTP with fetch.
// Proves: each step type produces the OpenAI and Anthropic wire formats that agents and their tests
// rely on (and POST /v1/embeddings its vectors and faults), stallAfter goes quiet with the
// connection open, requests are recorded with the format they hit, and close() never hangs. Does
// not prove an edgent agent parses it: the agent's own end-to-end tests do that against this server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startModelServer } from '../support/model-server.mjs';

/** Starts a server that the test closes when it ends, whatever happens. */
async function serve(t, options) {
  const server = await startModelServer(options);
  t.after(() => server.close());
  return server;
}

function chat(server, body, headers = {}, signal = undefined) {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
}

const streamRequest = (extra = {}) =>
  ({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });

/**
 * A tiny SSE reader: collects the `data:` payloads, counts the network reads they arrived in,
 * and captures (rather than throws) a connection cut so truncation can be asserted.
 */
async function readSse(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const data = [];
  let buffer = '';
  let reads = 0;
  let error = null;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      reads += 1;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of frame.split('\n')) if (line.startsWith('data: ')) data.push(line.slice(6));
      }
    }
  } catch (err) {
    error = err;
  }
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
  return { data, chunks, reads, error, sawDone: data.includes('[DONE]'), rest: buffer };
}

const textOf = (chunks) => chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');

/** Reassembles tool calls from deltas the way an OpenAI client does: by index. */
function toolCallsOf(chunks) {
  const calls = [];
  for (const c of chunks) {
    for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
      const call = (calls[d.index] ??= { id: undefined, name: '', arguments: '', deltas: 0 });
      if (d.id) call.id = d.id;
      if (d.function?.name) call.name += d.function.name;
      call.arguments += d.function?.arguments ?? '';
      call.deltas += 1;
    }
  }
  return calls;
}

test('text streams as several incremental chunks and reassembles', async (t) => {
  const server = await serve(t, { script: [{ text: 'Hello world, from a scripted model.', chunkSize: 5, chunkDelayMs: 15 }] });
  const res = await chat(server, streamRequest());
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  assert.equal(res.headers.get('cache-control'), 'no-cache');

  const { chunks, reads, sawDone, data } = await readSse(res);
  assert.ok(reads >= 5, `expected incremental delivery, got ${reads} read(s)`);
  assert.equal(textOf(chunks), 'Hello world, from a scripted model.');
  assert.equal(data.at(-1), '[DONE]');
  assert.ok(sawDone);

  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, chunks[0].id);
    assert.equal(c.model, 'test-model');
    assert.equal(typeof c.created, 'number');
    assert.equal(c.usage, undefined);
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
});

test('tool-call deltas reassemble into names, arguments and ids', async (t) => {
  const server = await serve(t, {
    script: [{
      text: 'Let me check.',
      toolCalls: [
        { id: 'call_fixed', name: 'get_current_time', arguments: { timezone: 'Europe/Paris', format: 'iso' } },
        { name: 'lookup', arguments: '{"q":"raw json"}' },
      ],
      argsChunkSize: 4,
    }],
  });
  const { chunks, sawDone } = await readSse(await chat(server, streamRequest()));
  assert.ok(sawDone);
  assert.equal(textOf(chunks), 'Let me check.');

  const calls = toolCallsOf(chunks);
  assert.equal(calls.length, 2);
  assert.equal(calls[0].id, 'call_fixed');
  assert.equal(calls[0].name, 'get_current_time');
  assert.deepEqual(JSON.parse(calls[0].arguments), { timezone: 'Europe/Paris', format: 'iso' });
  assert.match(calls[1].id, /^call_\w+$/);
  assert.equal(calls[1].name, 'lookup');
  assert.equal(calls[1].arguments, '{"q":"raw json"}');
  assert.ok(calls.every((c) => c.deltas > 2), 'arguments should arrive in several pieces');

  const opening = chunks.find((c) => c.choices[0].delta.tool_calls)?.choices[0].delta.tool_calls[0];
  assert.deepEqual(opening, { index: 0, id: 'call_fixed', type: 'function', function: { name: 'get_current_time', arguments: '' } });
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
});

test('a usage chunk is sent only when stream_options.include_usage is set', async (t) => {
  const server = await serve(t, {
    script: [{ text: 'one' }, { text: 'two', usage: { prompt_tokens: 11, completion_tokens: 3 } }],
  });
  const plain = await readSse(await chat(server, streamRequest()));
  assert.ok(plain.chunks.every((c) => !('usage' in c) && c.choices.length === 1));

  const withUsage = await readSse(await chat(server, streamRequest({ stream_options: { include_usage: true } })));
  const last = withUsage.chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
  assert.ok(withUsage.chunks.slice(0, -1).every((c) => c.usage === null));
  assert.equal(withUsage.chunks.at(-2).choices[0].finish_reason, 'stop');
  assert.ok(withUsage.sawDone);
});

test('an error step returns its status, headers and an OpenAI-shaped body', async (t) => {
  const server = await serve(t, {
    script: [
      { error: { status: 429, message: 'slow down', headers: { 'retry-after': '1' } } },
      { error: { status: 400, message: 'bad tools', type: 'invalid_request_error', code: 'invalid_tools' } },
    ],
  });
  const limited = await chat(server, streamRequest());
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get('retry-after'), '1');
  assert.deepEqual(await limited.json(), { error: { message: 'slow down', type: 'rate_limit_error', code: null } });

  const bad = await chat(server, streamRequest());
  assert.equal(bad.status, 400);
  assert.deepEqual(await bad.json(), { error: { message: 'bad tools', type: 'invalid_request_error', code: 'invalid_tools' } });
});

test('a truncated stream stops without finish_reason or [DONE]', async (t) => {
  const server = await serve(t, { script: [{ truncate: true, text: 'This is cut', chunkSize: 4 }] });
  const res = await chat(server, streamRequest());
  assert.equal(res.status, 200);
  const { chunks, sawDone, error } = await readSse(res);
  assert.equal(textOf(chunks), 'This is cut');
  assert.ok(chunks.every((c) => c.choices[0].finish_reason === null));
  assert.equal(sawDone, false);
  assert.ok(error, 'the connection should be cut, not ended cleanly');
});

test('a raw step writes exactly the given body', async (t) => {
  const frames = ['data: {"not":"a chunk"\n\n', ': comment\n\n', 'data: [DONE]\n\n'];
  const server = await serve(t, { script: [{ raw: frames, headers: { 'x-scenario': 'malformed' } }] });
  const res = await chat(server, streamRequest());
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-scenario'), 'malformed');
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  assert.equal(await res.text(), frames.join(''));
});

test('a largeBody step streams exactly its bytes, records them, and stops when the client hangs up', async (t) => {
  const server = await serve(t, { script: [
    { largeBody: { status: 502, bytes: 200_000, prefix: '{"error":"', suffix: '"}', headers: { 'content-type': 'application/json' } } },
    { largeBody: { bytes: 500 * 1024 * 1024 } },
  ] });
  const res = await chat(server, streamRequest());
  assert.equal(res.status, 502);
  assert.equal(res.headers.get('content-length'), null);
  const body = await res.text();
  assert.equal(body.length, 200_000);
  assert.ok(body.startsWith('{"error":"xxx') && body.endsWith('xx"}'));
  await sleep(50);
  assert.equal(server.requests[0].bytesSent, 200_000);
  assert.equal(server.requests[0].finished, true);

  // 500 MB, of which the client reads one chunk and hangs up: the server stops writing.
  const abort = new AbortController();
  const big = await chat(server, streamRequest(), {}, abort.signal);
  await big.body.getReader().read();
  abort.abort();
  await sleep(200);
  const [, second] = server.requests;
  assert.equal(second.finished, false);
  assert.ok(second.closedAt >= second.at);
  const sent = second.bytesSent;
  assert.ok(sent < 64 * 1024 * 1024, `${sent} bytes written`);
  await sleep(100);
  assert.equal(server.requests[1].bytesSent, sent, 'nothing written after the hang-up');
});

test('a drip step sends one character at a time, forever, until the client hangs up', async (t) => {
  const server = await serve(t, { script: [{ drip: { data: 'ab', everyMs: 20 } }] });
  const abort = new AbortController();
  const res = await chat(server, streamRequest(), {}, abort.signal);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const reader = res.body.getReader();
  let text = '';
  while (text.length < 5) text += new TextDecoder().decode((await reader.read()).value);
  abort.abort();
  assert.ok(text.startsWith('ababa'), text);
  await sleep(100);
  const [request] = server.requests;
  assert.equal(request.finished, false);
  const sent = request.bytesSent;
  assert.ok(sent >= 5);
  await sleep(100);
  assert.equal(request.bytesSent, sent, 'nothing written after the hang-up');
});

test('a midStreamError step sends text then an error frame and ends', async (t) => {
  const server = await serve(t, { script: [{ text: 'Partial', midStreamError: { message: 'overloaded' } }] });
  const { data, chunks, sawDone, error } = await readSse(await chat(server, streamRequest()));
  assert.equal(error, null);
  assert.equal(sawDone, false);
  assert.deepEqual(JSON.parse(data.at(-1)), { error: { message: 'overloaded', type: 'server_error', code: null } });
  assert.equal(textOf(chunks.slice(0, -1)), 'Partial');
});

test('a function step decides from the recorded request', async (t) => {
  const seen = [];
  const answer = (request) => {
    seen.push(request);
    const last = request.body.messages.at(-1);
    return last.role === 'tool' ? { text: `The time is ${last.content}.` } : { toolCalls: [{ name: 'get_current_time', arguments: {} }] };
  };
  const server = await serve(t, { script: [answer, answer] });

  const first = await readSse(await chat(server, streamRequest()));
  const [call] = toolCallsOf(first.chunks);
  assert.equal(call.name, 'get_current_time');
  assert.equal(call.arguments, '{}');

  const second = await readSse(await chat(server, streamRequest({
    messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: call.id, content: '12:00' }],
  })));
  assert.equal(textOf(second.chunks), 'The time is 12:00.');
  assert.equal(seen.length, 2);
  assert.equal(seen[1], server.requests[1]);
});

test('without stream: true the reply is a chat.completion JSON object', async (t) => {
  const server = await serve(t, {
    script: [
      { text: 'Plain answer', usage: { prompt_tokens: 5, completion_tokens: 2 }, model: 'scripted-1' },
      { toolCalls: [{ id: 'call_1', name: 'get_current_time', arguments: { tz: 'UTC' } }] },
    ],
  });
  const text = await chat(server, { model: 'gpt-test', messages: [] });
  assert.equal(text.headers.get('content-type'), 'application/json');
  const body = await text.json();
  assert.equal(body.object, 'chat.completion');
  assert.equal(body.model, 'scripted-1');
  assert.deepEqual(body.choices, [{ index: 0, message: { role: 'assistant', content: 'Plain answer' }, finish_reason: 'stop' }]);
  assert.deepEqual(body.usage, { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 });

  const tools = await (await chat(server, { model: 'gpt-test', messages: [], stream: false })).json();
  assert.equal(tools.model, 'gpt-test');
  assert.deepEqual(tools.choices[0], {
    index: 0,
    message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_current_time', arguments: '{"tz":"UTC"}' } }] },
    finish_reason: 'tool_calls',
  });
  assert.ok(tools.usage.prompt_tokens > 0 && tools.usage.completion_tokens > 0);
});

test('requests are recorded with method, path, headers and parsed body', async (t) => {
  const server = await serve(t, { script: [{ text: 'a' }] });
  server.push({ text: 'b' });
  assert.equal(server.pending, 2);
  const before = Date.now();

  const payload = streamRequest({ tools: [{ type: 'function', function: { name: 'get_current_time' } }] });
  await readSse(await chat(server, payload, { authorization: 'Bearer sk-test', 'X-Trace': 'abc' }));
  const [request] = await server.waitForRequests(1);

  assert.equal(request.method, 'POST');
  assert.equal(request.path, '/v1/chat/completions');
  assert.equal(request.headers.authorization, 'Bearer sk-test');
  assert.equal(request.headers['x-trace'], 'abc');
  assert.deepEqual(request.body, payload);
  assert.equal(request.rawBody, JSON.stringify(payload));
  assert.ok(request.at >= before && request.at <= Date.now());
  assert.equal(server.pending, 1);

  server.reset();
  assert.equal(server.pending, 0);
  assert.equal(server.requests.length, 0);
});

test('waitForRequests resolves on arrival and rejects clearly on timeout', async (t) => {
  const server = await serve(t, { script: [{ text: 'late', delayMs: 30 }] });
  const waiting = server.waitForRequests(1, 2000);
  const res = chat(server, streamRequest());
  assert.equal((await waiting).length, 1);
  await readSse(await res);
  await assert.rejects(server.waitForRequests(2, 50), /waited 50 ms for 2 request\(s\) but received 1/);
});

test('an exhausted script answers with the fallback step', async (t) => {
  const defaults = await serve(t, { script: [] });
  const res = await chat(defaults, streamRequest());
  assert.equal(res.status, 500);
  assert.equal((await res.json()).error.message, 'model-server: script exhausted');

  const custom = await serve(t, { script: [{ text: 'scripted' }], fallback: { text: 'fallback' } });
  const answers = [];
  for (let i = 0; i < 3; i += 1) answers.push(textOf((await readSse(await chat(custom, streamRequest()))).chunks));
  assert.deepEqual(answers, ['scripted', 'fallback', 'fallback']);
});

test('an invalid JSON body gets a 400 and does not consume a step', async (t) => {
  const server = await serve(t, { script: [{ text: 'kept' }] });
  const res = await chat(server, '{"model": ');
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.type, 'invalid_request_error');
  assert.equal(server.pending, 1);
  assert.equal(server.requests[0].body, null);
  assert.equal(server.requests[0].rawBody, '{"model": ');
});

test('unknown paths are 404 and /v1/models lists a model; both are recorded', async (t) => {
  const server = await serve(t);
  const missing = await fetch(`${server.url}/v1/responses`, { method: 'POST', body: '{}' });
  assert.equal(missing.status, 404);
  const { error } = await missing.json();
  assert.equal(error.type, 'not_found');
  assert.match(error.message, /POST \/v1\/responses/);

  const models = await (await fetch(`${server.url}/v1/models`)).json();
  assert.equal(models.object, 'list');
  assert.ok(models.data.length >= 1);
  assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`), ['POST /v1/responses', 'GET /v1/models']);
});

test('delayMs holds back the response headers', async (t) => {
  const server = await serve(t, { script: [{ text: 'slow', delayMs: 120 }] });
  const started = Date.now();
  const res = await chat(server, streamRequest());
  assert.ok(Date.now() - started >= 100, 'headers arrived before the delay');
  await readSse(res);
});

test('close() does not hang with a hung request or a stream in flight', async (t) => {
  const server = await startModelServer({ script: [{ hang: true }, { text: 'x'.repeat(50), chunkSize: 1, chunkDelayMs: 1000 }] });
  const hung = chat(server, streamRequest()).catch((err) => err);
  const streaming = chat(server, streamRequest()).then(readSse, (err) => ({ error: err }));
  await server.waitForRequests(2);

  const started = Date.now();
  await Promise.race([
    server.close(),
    new Promise((_, reject) => setTimeout(() => reject(new Error('close() hung')), 2000).unref()),
  ]);
  assert.ok(Date.now() - started < 1000);
  assert.ok((await hung) instanceof Error);
  const stream = await streaming;
  assert.ok(stream.error);
  assert.equal(stream.sawDone ?? false, false);
});

// ---------------------------------------------------------------------------------------------
// Anthropic Messages (POST /v1/messages). The events are read from the raw bytes by the reader
// below, not by anything the server exports, so a server bug cannot hide behind a shared parser.
// ---------------------------------------------------------------------------------------------

const ANTHROPIC_HEADERS = { 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' };

function messages(server, body, headers = {}, signal = undefined) {
  return fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', ...ANTHROPIC_HEADERS, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const messagesRequest = (extra = {}) =>
  ({ model: 'claude-test', max_tokens: 1024, stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });

const SILENT = Symbol('silent');

/**
 * Reads named SSE events one at a time: { event, data (parsed), frame (the exact text) }.
 * next(ms) resolves SILENT when no complete frame arrives within ms, so a test can prove a stream
 * has gone quiet; it resolves null at the end of the body and rejects if the connection is cut.
 */
function eventReader(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let pending = null; // a read outlives a SILENT answer and is picked up by the next call

  const parse = (frame) => {
    const event = frame.split('\n').find((l) => l.startsWith('event: '))?.slice(7);
    const data = frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    return { event, data: JSON.parse(data), frame };
  };

  async function next(ms) {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        return parse(frame);
      }
      pending ??= reader.read();
      let timer;
      const quiet = ms === undefined ? new Promise(() => {}) : new Promise((resolve) => { timer = setTimeout(resolve, ms, SILENT); });
      const result = await Promise.race([pending, quiet]).finally(() => clearTimeout(timer));
      if (result === SILENT) return SILENT;
      pending = null;
      if (result.done) return null;
      buffer += decoder.decode(result.value, { stream: true });
    }
  }
  return { next, cancel: () => reader.cancel().catch(() => {}) };
}

/** Reads every event to the end, capturing (rather than throwing) a connection cut. */
async function readEvents(res) {
  const reader = eventReader(res);
  const events = [];
  let error = null;
  try {
    for (let e = await reader.next(); e !== null; e = await reader.next()) events.push(e);
  } catch (err) {
    error = err;
  }
  return { events, types: events.map((e) => e.event), data: events.map((e) => e.data), error };
}

const deltasOf = (data, index) => data.filter((d) => d.type === 'content_block_delta' && d.index === index).map((d) => d.delta);
const anthropicText = (data) => deltasOf(data, 0).map((d) => d.text).join('');

test('anthropic: a streamed answer has the Messages event order, frame format and shapes', async (t) => {
  const server = await serve(t, { script: [{ text: 'Hello from a scripted Claude.', chunkSize: 5, chunkDelayMs: 5 }] });
  const res = await messages(server, messagesRequest());
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const { events, types, data, error } = await readEvents(res);
  assert.equal(error, null);

  assert.deepEqual(types, ['message_start', 'ping', 'content_block_start', ...Array(6).fill('content_block_delta'),
    'content_block_stop', 'message_delta', 'message_stop']);
  for (const e of events) assert.equal(e.frame, `event: ${e.data.type}\ndata: ${JSON.stringify(e.data)}`);

  const [start, ping, blockStart] = data;
  assert.match(start.message.id, /^msg_\w+$/);
  assert.ok(start.message.usage.input_tokens > 0, 'input tokens are estimated from the request');
  assert.deepEqual(start, {
    type: 'message_start',
    message: { id: start.message.id, type: 'message', role: 'assistant', model: 'claude-test', content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: start.message.usage.input_tokens, output_tokens: 1 } },
  });
  assert.deepEqual(ping, { type: 'ping' });
  assert.deepEqual(blockStart, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
  assert.deepEqual(data[3], { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } });
  assert.equal(anthropicText(data), 'Hello from a scripted Claude.');
  assert.deepEqual(data.at(-3), { type: 'content_block_stop', index: 0 });

  const messageDelta = data.at(-2);
  assert.ok(messageDelta.usage.output_tokens > 0, 'output tokens are estimated from the text');
  assert.deepEqual(messageDelta, { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null },
    usage: { output_tokens: messageDelta.usage.output_tokens } });
  assert.deepEqual(data.at(-1), { type: 'message_stop' });
});

test('anthropic: tool_use blocks follow the text and their partial_json reassembles to the arguments', async (t) => {
  const server = await serve(t, {
    script: [
      {
        text: 'Let me check.',
        toolCalls: [
          { id: 'toolu_fixed', name: 'get_current_time', arguments: { timezone: 'Europe/Paris', format: 'iso' } },
          { name: 'lookup', arguments: '{"q":"raw json"}' },
        ],
        argsChunkSize: 4,
        usage: { input_tokens: 21, output_tokens: 9 },
      },
      { toolCalls: [{ name: 'get_current_time', arguments: {} }] },
    ],
  });
  const { data } = await readEvents(await messages(server, messagesRequest()));
  assert.equal(data[0].message.usage.input_tokens, 21);
  const starts = data.filter((d) => d.type === 'content_block_start');
  assert.deepEqual(starts.map((s) => s.index), [0, 1, 2]);
  assert.equal(anthropicText(data), 'Let me check.');

  assert.deepEqual(starts[1].content_block, { type: 'tool_use', id: 'toolu_fixed', name: 'get_current_time', input: {} });
  assert.match(starts[2].content_block.id, /^toolu_\w+$/);
  assert.equal(starts[2].content_block.name, 'lookup');
  const argsOf = (index) => deltasOf(data, index);
  assert.ok(argsOf(1).length > 2 && argsOf(2).length > 2, 'input should arrive in several pieces');
  assert.ok([...argsOf(1), ...argsOf(2)].every((d) => d.type === 'input_json_delta'));
  assert.deepEqual(JSON.parse(argsOf(1).map((d) => d.partial_json).join('')), { timezone: 'Europe/Paris', format: 'iso' });
  assert.equal(argsOf(2).map((d) => d.partial_json).join(''), '{"q":"raw json"}');

  // Each block closes before the next opens.
  const opensAndCloses = data.filter((d) => d.type.startsWith('content_block_') && d.type !== 'content_block_delta')
    .map((d) => `${d.type.slice(14)} ${d.index}`);
  assert.deepEqual(opensAndCloses, ['start 0', 'stop 0', 'start 1', 'stop 1', 'start 2', 'stop 2']);
  assert.deepEqual(data.at(-2), { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null },
    usage: { output_tokens: 9 } });

  const toolOnly = await readEvents(await messages(server, messagesRequest()));
  const [only] = toolOnly.data.filter((d) => d.type === 'content_block_start');
  assert.equal(only.index, 0, 'without text the tool_use block is the first block');
  assert.equal(only.content_block.type, 'tool_use');
  assert.equal(deltasOf(toolOnly.data, 0).map((d) => d.partial_json).join(''), '{}');
});

test('anthropic: finishReason maps to stop_reason, length becoming max_tokens', async (t) => {
  const server = await serve(t, {
    script: [{ text: 'Cut short', finishReason: 'length' }, { text: 'Cut short', finishReason: 'length' },
      { text: 'Halt', finishReason: 'stop_sequence' }],
  });
  const streamed = await readEvents(await messages(server, messagesRequest()));
  assert.equal(streamed.data.at(-2).delta.stop_reason, 'max_tokens');
  const plain = await (await messages(server, messagesRequest({ stream: false }))).json();
  assert.equal(plain.stop_reason, 'max_tokens');
  const passed = await readEvents(await messages(server, messagesRequest()));
  assert.equal(passed.data.at(-2).delta.stop_reason, 'stop_sequence', 'an Anthropic value passes through');
});

test('anthropic: without stream: true the reply is a Message object with parsed tool input', async (t) => {
  const server = await serve(t, {
    script: [
      {
        text: 'Checking.', model: 'claude-scripted', usage: { input_tokens: 5, output_tokens: 2 },
        toolCalls: [{ id: 'toolu_1', name: 'get_current_time', arguments: { tz: 'UTC' } }],
      },
      { text: 'Plain answer' },
    ],
  });
  const res = await messages(server, messagesRequest({ stream: false }));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/json');
  const body = await res.json();
  assert.match(body.id, /^msg_\w+$/);
  assert.deepEqual(body, {
    id: body.id, type: 'message', role: 'assistant', model: 'claude-scripted',
    content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_current_time', input: { tz: 'UTC' } }],
    stop_reason: 'tool_use', stop_sequence: null, usage: { input_tokens: 5, output_tokens: 2 },
  });
  assert.deepEqual(Object.keys(body), ['id', 'type', 'role', 'model', 'content', 'stop_reason', 'stop_sequence', 'usage']);

  const text = await (await messages(server, { model: 'claude-test', max_tokens: 10, messages: [] })).json();
  assert.deepEqual(text.content, [{ type: 'text', text: 'Plain answer' }]);
  assert.equal(text.model, 'claude-test');
  assert.equal(text.stop_reason, 'end_turn');
  assert.ok(text.usage.input_tokens > 0 && text.usage.output_tokens > 0);
});

test('anthropic: error steps return the status, headers and an Anthropic-shaped body', async (t) => {
  const statuses = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
    404: 'not_found_error', 413: 'request_too_large', 500: 'api_error', 529: 'overloaded_error' };
  const server = await serve(t, {
    script: [
      { error: { status: 429, message: 'slow down', headers: { 'retry-after': '7' } } },
      ...Object.keys(statuses).map((status) => ({ error: { status: Number(status), message: `status ${status}` } })),
      { text: 'kept' },
    ],
  });
  const limited = await messages(server, messagesRequest());
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get('retry-after'), '7');
  assert.equal(limited.headers.get('content-type'), 'application/json');
  assert.deepEqual(await limited.json(), { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } });

  for (const [status, type] of Object.entries(statuses)) {
    const res = await messages(server, messagesRequest());
    assert.equal(res.status, Number(status));
    assert.deepEqual(await res.json(), { type: 'error', error: { type, message: `status ${status}` } });
  }

  const badJson = await messages(server, '{"model": ');
  assert.equal(badJson.status, 400);
  assert.equal((await badJson.json()).error.type, 'invalid_request_error');
  assert.equal(server.pending, 1, 'a body that is not JSON does not use up a step');
});

test('anthropic: a midStreamError step sends the content then an error event, without message_stop', async (t) => {
  const server = await serve(t, { script: [{ text: 'Partial', midStreamError: { message: 'Overloaded' } }] });
  const { events, types, data, error } = await readEvents(await messages(server, messagesRequest()));
  assert.equal(error, null, 'the stream ends normally after the error event');
  assert.deepEqual(types.slice(-2), ['content_block_stop', 'error']);
  assert.equal(events.at(-1).frame, 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}');
  assert.ok(!types.includes('message_delta') && !types.includes('message_stop'));
  assert.equal(anthropicText(data), 'Partial');
});

test('anthropic: a truncated stream is cut before message_delta and message_stop', async (t) => {
  const server = await serve(t, { script: [{ truncate: true, text: 'This is cut', chunkSize: 4 }] });
  const { types, data, error } = await readEvents(await messages(server, messagesRequest()));
  assert.ok(error, 'the connection should be cut, not ended cleanly');
  assert.equal(anthropicText(data), 'This is cut');
  assert.equal(types.at(-1), 'content_block_stop');
  assert.ok(!types.includes('message_delta') && !types.includes('message_stop'));
});

test('requests record the format they hit and the headers the client sent', async (t) => {
  const server = await serve(t, { script: [{ text: 'a' }, { text: 'b' }] });
  const payload = messagesRequest({ system: 'Be brief.', tools: [{ name: 'get_current_time', input_schema: { type: 'object' } }] });
  await readEvents(await messages(server, payload));
  await readSse(await chat(server, streamRequest()));
  await fetch(`${server.url}/v1/nowhere`, { method: 'POST', body: '{}' });
  const [anthropicRequest, openaiRequest, unknown] = await server.waitForRequests(3);

  assert.equal(anthropicRequest.format, 'anthropic');
  assert.equal(anthropicRequest.path, '/v1/messages');
  assert.equal(anthropicRequest.headers['x-api-key'], 'sk-ant-test');
  assert.equal(anthropicRequest.headers['anthropic-version'], '2023-06-01');
  assert.deepEqual(anthropicRequest.body, payload);
  assert.equal(openaiRequest.format, 'openai');
  assert.equal(unknown.format, null);
});

// ---------------------------------------------------------------------------------------------
// stallAfter: headers and the first n frames, then silence with the connection held open.
// ---------------------------------------------------------------------------------------------

test('stallAfter sends n frames, then nothing until close() ends the connection', async (t) => {
  const server = await startModelServer({ script: [{ text: 'Never finished', chunkSize: 2, stallAfter: 3 }] });
  t.after(() => server.close());
  const res = await messages(server, messagesRequest());
  assert.equal(res.status, 200);
  const reader = eventReader(res);
  const first = [await reader.next(1000), await reader.next(1000), await reader.next(1000)];
  assert.deepEqual(first.map((e) => e.event), ['message_start', 'ping', 'content_block_start']);
  assert.equal(await reader.next(300), SILENT, 'nothing should follow the stall point');

  const after = reader.next().then((e) => e, (err) => err);
  const started = Date.now();
  await server.close();
  const end = await after;
  assert.ok(end === null || end instanceof Error, `expected the stream to end, got ${JSON.stringify(end)}`);
  assert.ok(Date.now() - started < 1000);
});

test('stallAfter works for OpenAI streams and for 0 frames, and a client hang-up ends it', async (t) => {
  const server = await serve(t, { script: [{ text: 'abcdef', chunkSize: 2, stallAfter: 2 }, { stallAfter: 0 }, { text: 'next' }] });
  const openai = eventReader(await chat(server, streamRequest()));
  assert.equal((await openai.next(1000)).data.choices[0].delta.content, 'ab');
  assert.equal((await openai.next(1000)).data.choices[0].delta.content, 'cd');
  assert.equal(await openai.next(300), SILENT);
  await openai.cancel();

  const hangUp = new AbortController();
  const headersOnly = await messages(server, messagesRequest(), {}, hangUp.signal);
  assert.equal(headersOnly.status, 200, 'the headers arrive before the silence');
  const silent = eventReader(headersOnly);
  assert.equal(await silent.next(300), SILENT);
  hangUp.abort();
  await assert.rejects(silent.next(1000));

  // The stalled streams held nothing else up.
  assert.equal(textOf((await readSse(await chat(server, streamRequest()))).chunks), 'next');
});

test('stallAfter without stream: true sends the headers and half the body, or nothing for 0', async (t) => {
  const server = await serve(t, { script: [{ text: 'a whole answer', stallAfter: 1 }, { stallAfter: 0 }, { text: 'x', stallAfter: -1 }] });
  const half = await messages(server, messagesRequest({ stream: false }));
  assert.equal(half.status, 200);
  const reader = half.body.getReader();
  const { value } = await reader.read();
  const received = new TextDecoder().decode(value);
  assert.ok(received.startsWith('{"id":"msg_'), received);
  const more = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(resolve, 300, SILENT))]);
  assert.equal(more, SILENT);
  await reader.cancel().catch(() => {});

  const empty = await chat(server, { model: 'gpt-test', messages: [] });
  assert.equal(empty.status, 200);
  const emptyReader = empty.body.getReader();
  assert.equal(await Promise.race([emptyReader.read(), new Promise((resolve) => setTimeout(resolve, 300, SILENT))]), SILENT);
  await emptyReader.cancel().catch(() => {});

  const invalid = await chat(server, streamRequest());
  assert.equal(invalid.status, 500);
  assert.match((await invalid.json()).error.message, /stallAfter must be a whole number of frames, got -1/);
});

test('POST /v1/embeddings answers deterministic vectors in the OpenAI format, with its own queue of faults', async (t) => {
  const server = await serve(t, { script: [{ text: 'chat step' }], embeddings: { synonyms: { forecast: 'weather' } } });
  const embed = (body) => fetch(`${server.url}/v1/embeddings`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const res = await embed({ model: 'toy', input: ['Gets the weather', 'any forecast', 'issue a refund'] });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.object, 'list');
  assert.equal(body.model, 'toy');
  assert.deepEqual(body.data.map((d) => [d.object, d.index, d.embedding.length]),
    [['embedding', 0, 64], ['embedding', 1, 64], ['embedding', 2, 64]]);
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  const [weather, forecast, refund] = body.data.map((d) => d.embedding);
  assert.ok(Math.abs(dot(weather, weather) - 1) < 1e-9, 'normalised');
  assert.ok(dot(weather, forecast) > dot(weather, refund), 'a synonym is near');
  const again = await (await embed({ input: 'Gets the weather' })).json();
  assert.deepEqual(again.data[0].embedding, weather, 'deterministic; a string input is one text');

  server.pushEmbeddings({ error: { status: 503, message: 'busy' } }, { dimensions: 4 }, { delayMs: 150, raw: { data: [] } });
  const failed = await embed({ input: ['x'] });
  assert.equal(failed.status, 503);
  assert.equal((await failed.json()).error.message, 'busy');
  assert.equal((await (await embed({ input: ['x'] })).json()).data[0].embedding.length, 4);
  const started = Date.now();
  assert.deepEqual(await (await embed({ input: ['x'] })).json(), { data: [] });
  assert.ok(Date.now() - started >= 140);
  assert.equal((await embed({ input: [] })).status, 400);
  assert.equal(server.embeddingRequests.length, 6);
  assert.equal(server.embeddingRequests[0].format, 'embeddings');
  assert.equal(server.pending, 1, 'no chat step was used');
});
