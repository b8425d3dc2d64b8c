// model-server.mjs — a scripted, OpenAI-compatible model server for tests.
//
// It listens on 127.0.0.1 inside the test process and answers each chat-completions request with
// the next step of a FIFO script, in the real wire format (a JSON body, or SSE with text and
// tool-call deltas), so an agent under test talks to it exactly as it would to a provider. Every
// request is recorded so tests can assert on what the agent sent. Node built-ins only.
// User guide: docs/testing-model-server.md.

import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

const EXHAUSTED = { error: { status: 500, message: 'model-server: script exhausted' } };
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

const randomId = () => randomBytes(12).toString('hex');
const estimateTokens = (s) => Math.max(1, Math.ceil(s.length / 4));
const sse = (data) => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

function pieces(str, size) {
  const n = Math.max(1, Math.floor(size) || 1);
  const out = [];
  for (let i = 0; i < str.length; i += n) out.push(str.slice(i, i + n));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Wire formats. The core below resolves a step into a format-neutral `reply` and lets a format
// encode it; adding a provider (e.g. Anthropic Messages on POST /v1/messages) means adding one
// object with the same members to `formats`, without touching the core.
//
//   path                    the POST route that consumes script steps
//   wantsStream(body)       whether the request asked for SSE
//   error(status, message, type?, code?)  the provider's JSON error body
//   completion(reply)       the non-streaming JSON body
//   stream(reply, body)     { frames, end }: content frames, then the frames that finish a good stream
//   errorFrame(message)     an SSE frame reporting a failure mid-stream
// ---------------------------------------------------------------------------------------------

const ERROR_TYPES = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
  404: 'not_found', 429: 'rate_limit_error' };

const openai = {
  path: '/v1/chat/completions',

  wantsStream: (body) => body.stream === true,

  error: (status, message, type, code = null) => ({
    error: { message, type: type ?? ERROR_TYPES[status] ?? (status >= 500 ? 'server_error' : 'api_error'), code },
  }),

  models: () => ({
    object: 'list',
    data: [{ id: 'model-server', object: 'model', created: 0, owned_by: 'model-server' }],
  }),

  completion(reply) {
    const message = { role: 'assistant', content: reply.text || (reply.toolCalls.length ? null : '') };
    if (reply.toolCalls.length) {
      message.tool_calls = reply.toolCalls.map(({ id, name, arguments: args }) =>
        ({ id, type: 'function', function: { name, arguments: args } }));
    }
    return {
      id: `chatcmpl-${randomId()}`, object: 'chat.completion', created: nowSeconds(), model: reply.model,
      choices: [{ index: 0, message, finish_reason: finishReason(reply) }],
      usage: usageOf(reply),
    };
  },

  stream(reply, body) {
    const includeUsage = body.stream_options?.include_usage === true;
    const base = { id: `chatcmpl-${randomId()}`, object: 'chat.completion.chunk', created: nowSeconds(), model: reply.model };
    // OpenAI sends `usage: null` on every chunk once the client asked for usage.
    const chunk = (choices, usage) => ({ ...base, choices, ...(includeUsage && { usage: usage ?? null }) });
    const choice = (delta, finish_reason = null) => chunk([{ index: 0, delta, finish_reason }]);

    const deltas = pieces(reply.text, reply.chunkSize).map((content) => ({ content }));
    reply.toolCalls.forEach(({ id, name, arguments: args }, index) => {
      deltas.push({ tool_calls: [{ index, id, type: 'function', function: { name, arguments: '' } }] });
      for (const piece of pieces(args, reply.argsChunkSize)) {
        deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
      }
    });
    if (!deltas.length) deltas.push({ content: '' });
    deltas[0] = { role: 'assistant', ...deltas[0] };

    const end = [sse(choice({}, finishReason(reply)))];
    if (includeUsage) end.push(sse(chunk([], usageOf(reply))));
    end.push(sse('[DONE]'));
    return { frames: deltas.map((d) => sse(choice(d))), end };
  },

  errorFrame: (message) => sse({ error: { message, type: 'server_error', code: null } }),
};

function nowSeconds() { return Math.floor(Date.now() / 1000); }
function finishReason(reply) { return reply.finishReason ?? (reply.toolCalls.length ? 'tool_calls' : 'stop'); }
function usageOf({ usage }) { return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }; }

const formats = { openai };

// ---------------------------------------------------------------------------------------------
// Core: routing, recording, the script, and playing a step onto a response.
// ---------------------------------------------------------------------------------------------

const REPLY_KEYS = ['text', 'toolCalls', 'truncate', 'midStreamError'];

/** Turns a text/toolCalls/truncate/midStreamError step into the format-neutral reply. */
function toReply(step, request) {
  const toolCalls = (step.toolCalls ?? []).map((call) => ({
    id: call.id ?? `call_${randomId()}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
  }));
  const text = step.text ?? (step.truncate || step.midStreamError ? 'This answer stops part way' : '');
  const spoken = text + toolCalls.map((c) => c.name + c.arguments).join('');
  return {
    text, toolCalls,
    model: step.model ?? request.body.model ?? 'model-server',
    finishReason: step.finishReason,
    chunkSize: step.chunkSize ?? 8,
    argsChunkSize: step.argsChunkSize ?? 6,
    usage: {
      prompt_tokens: step.usage?.prompt_tokens ?? estimateTokens(request.rawBody),
      completion_tokens: step.usage?.completion_tokens ?? estimateTokens(spoken),
    },
  };
}

function sendJson(res, status, body, headers = {}) {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

// Each frame is its own write, and the next waits for it to be flushed, so clients observe real
// incremental delivery and a truncation really cuts after the frames sent so far.
async function writeFrames(res, frames, gapMs, signal) {
  for (const [i, frame] of frames.entries()) {
    if (i > 0 && gapMs) await sleep(gapMs, undefined, { signal });
    if (res.destroyed) return;
    await new Promise((resolve) => res.write(frame, resolve));
  }
}

async function readBody(req) {
  const parts = [];
  for await (const part of req) parts.push(part);
  return Buffer.concat(parts).toString('utf8');
}

async function play(format, step, request, res, signal) {
  if (step.delayMs) await sleep(step.delayMs, undefined, { signal });
  if (step.hang) return; // never answered; close() or the client ends the socket

  if (step.error) {
    const { status = 500, message = `model-server: scripted ${status} error`, type, code, headers } = step.error;
    return sendJson(res, status, format.error(status, message, type, code), headers);
  }

  if (step.raw) {
    res.writeHead(step.status ?? 200, { ...SSE_HEADERS, ...step.headers });
    res.flushHeaders();
    await writeFrames(res, step.raw, step.chunkDelayMs, signal);
    return res.end();
  }

  if (!REPLY_KEYS.some((key) => key in step)) {
    throw new Error(`model-server: unrecognised step ${JSON.stringify(step)}`);
  }
  const reply = toReply(step, request);
  const failure = step.midStreamError && (step.midStreamError.message ?? 'model-server: scripted mid-stream error');

  if (!format.wantsStream(request.body)) {
    if (failure) return sendJson(res, 500, format.error(500, failure));
    const json = JSON.stringify(format.completion(reply));
    if (!step.truncate) return sendJson(res, 200, json);
    res.writeHead(200, { 'content-type': 'application/json' });
    await writeFrames(res, [json.slice(0, Math.floor(json.length / 2))], 0, signal);
    return res.destroy();
  }

  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  const { frames, end } = format.stream(reply, request.body);
  const tail = step.truncate ? [] : failure ? [format.errorFrame(failure)] : end;
  await writeFrames(res, [...frames, ...tail], step.chunkDelayMs, signal);
  if (step.truncate) res.destroy();
  else res.end();
}

/**
 * Starts a scripted model server on 127.0.0.1.
 * @param {{ port?: number, script?: Array<object|Function>, fallback?: object|Function }} [options]
 */
export async function startModelServer({ port = 0, script = [], fallback = EXHAUSTED } = {}) {
  const queue = [...script];
  const requests = [];
  const waiters = new Set();
  const sockets = new Set();
  const closing = new AbortController();

  function record(request) {
    requests.push(request);
    for (const w of waiters) {
      if (requests.length >= w.n) { waiters.delete(w); clearTimeout(w.timer); w.resolve(requests); }
    }
  }

  async function handle(req, res) {
    res.on('error', () => {}); // a client that went away is not the test's failure
    const rawBody = await readBody(req);
    let body = null;
    try { body = rawBody ? JSON.parse(rawBody) : null; } catch { /* recorded as null */ }
    const path = req.url.split('?')[0];
    const request = { method: req.method, path, headers: { ...req.headers }, body, rawBody, at: Date.now() };
    record(request);

    if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, openai.models());
    const format = Object.values(formats).find((f) => f.path === path);
    if (!format || req.method !== 'POST') {
      return sendJson(res, 404, openai.error(404, `model-server: no route for ${req.method} ${path}`, 'not_found'));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return sendJson(res, 400, format.error(400, 'model-server: request body is not a JSON object'));
    }

    try {
      let step = queue.length ? queue.shift() : fallback;
      if (typeof step === 'function') step = await step(request);
      if (!step || typeof step !== 'object') throw new Error(`model-server: step is ${step}, expected an object`);
      await play(format, step, request, res, closing.signal);
    } catch (err) {
      if (closing.signal.aborted) return res.destroy();
      if (!res.headersSent) return sendJson(res, 500, format.error(500, err.message));
      res.destroy();
    }
  }

  const server = http.createServer((req, res) => { handle(req, res).catch(() => res.destroy()); });
  server.on('connection', (socket) => {
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve(); });
  });

  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    get pending() { return queue.length; },
    push(...steps) { queue.push(...steps); },
    reset() { queue.length = 0; requests.length = 0; },

    waitForRequests(n, timeoutMs = 5000) {
      if (requests.length >= n) return Promise.resolve(requests);
      return new Promise((resolve, reject) => {
        const w = { n, resolve, reject };
        w.timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`model-server: waited ${timeoutMs} ms for ${n} request(s) but received ${requests.length}`));
        }, timeoutMs);
        waiters.add(w);
      });
    },

    async close() {
      closing.abort();
      for (const w of waiters) { clearTimeout(w.timer); w.reject(new Error('model-server: closed while waiting for requests')); }
      waiters.clear();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
