// The scripted model server (tests/support/model-server.mjs), tested over real HTTP with fetch.
// Proves: each step type produces the OpenAI wire format that agents and their tests rely on,
// requests are recorded, and close() never hangs. Does not prove an edgent agent parses it: the
// agent's own end-to-end tests do that against this server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startModelServer } from '../support/model-server.mjs';

/** Starts a server that the test closes when it ends, whatever happens. */
async function serve(t, options) {
  const server = await startModelServer(options);
  t.after(() => server.close());
  return server;
}

function chat(server, body, headers = {}) {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
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
  const missing = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', body: '{}' });
  assert.equal(missing.status, 404);
  const { error } = await missing.json();
  assert.equal(error.type, 'not_found');
  assert.match(error.message, /POST \/v1\/embeddings/);

  const models = await (await fetch(`${server.url}/v1/models`)).json();
  assert.equal(models.object, 'list');
  assert.ok(models.data.length >= 1);
  assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`), ['POST /v1/embeddings', 'GET /v1/models']);
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
