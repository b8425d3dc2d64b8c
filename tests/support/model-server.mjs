// model-server.mjs — a scripted model server for tests, speaking OpenAI chat completions and
// Anthropic Messages, with OpenAI-compatible embeddings.
//
// It listens on 127.0.0.1 inside the test process and answers each model request with the next
// step of a FIFO script, in the real wire format (a JSON body, or SSE with text and tool-call
// deltas), so an agent under test talks to it exactly as it would to a provider. Every request is
// recorded so tests can assert on what the agent sent. Node built-ins only.
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
// encode it; adding a provider means adding one object with the same members to `formats`,
// without touching the core. Its key in `formats` is recorded as `request.format`.
//
//   path                    the POST route that consumes script steps
//   toolCallId()            a fresh tool call id in the provider's style, for calls scripted without one
//   wantsStream(body)       whether the request asked for SSE
//   error(status, message, type?, code?)  the provider's JSON error body
//   completion(reply)       the non-streaming JSON body
//   stream(reply, body)     { frames, end }: content frames, then the frames that finish a good stream
//   errorFrame(message, type?)  an SSE frame reporting a failure mid-stream
// ---------------------------------------------------------------------------------------------

const OPENAI_ERROR_TYPES = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
  404: 'not_found', 429: 'rate_limit_error' };

const openai = {
  path: '/v1/chat/completions',

  toolCallId: () => `call_${randomId()}`,

  wantsStream: (body) => body.stream === true,

  error: (status, message, type, code = null) => ({
    error: { message, type: type ?? OPENAI_ERROR_TYPES[status] ?? (status >= 500 ? 'server_error' : 'api_error'), code },
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

  errorFrame: (message, type = 'server_error') => sse({ error: { message, type, code: null } }),
};

function nowSeconds() { return Math.floor(Date.now() / 1000); }
function finishReason(reply) { return reply.finishReason ?? (reply.toolCalls.length ? 'tool_calls' : 'stop'); }
function usageOf({ usage }) { return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }; }

// Anthropic Messages: named SSE events, the answer as indexed content blocks (text first, then one
// tool_use block per call whose input streams as partial JSON), and the stop reason with the output
// token count in a closing message_delta.

const ANTHROPIC_ERROR_TYPES = { 400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error',
  403: 'permission_error', 404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error',
  500: 'api_error', 504: 'timeout_error', 529: 'overloaded_error' };

// Scripts name finish reasons the OpenAI way so one script can drive either format; these are the
// Anthropic equivalents. Any other value (e.g. 'stop_sequence', 'pause_turn') passes through as written.
const STOP_REASONS = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', function_call: 'tool_use',
  content_filter: 'refusal' };

const event = (data) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;

const anthropic = {
  path: '/v1/messages',

  toolCallId: () => `toolu_${randomId()}`,

  wantsStream: (body) => body.stream === true,

  error: (status, message, type) => ({
    type: 'error',
    error: { type: type ?? ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'),
      message },
  }),

  completion(reply) {
    const content = reply.toolCalls.map(({ id, name, arguments: args }) =>
      ({ type: 'tool_use', id, name, input: parseInput(args) }));
    if (reply.text) content.unshift({ type: 'text', text: reply.text });
    return {
      id: `msg_${randomId()}`, type: 'message', role: 'assistant', model: reply.model, content,
      stop_reason: stopReason(reply), stop_sequence: null,
      usage: { input_tokens: reply.usage.prompt_tokens, output_tokens: reply.usage.completion_tokens },
    };
  },

  stream(reply) {
    // The real message_start reports output_tokens: 1 before anything is generated.
    const message = {
      id: `msg_${randomId()}`, type: 'message', role: 'assistant', model: reply.model, content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: reply.usage.prompt_tokens, output_tokens: 1 },
    };
    const frames = [event({ type: 'message_start', message }), event({ type: 'ping' })];
    streamedBlocks(reply).forEach(({ block, deltas }, index) => {
      frames.push(event({ type: 'content_block_start', index, content_block: block }));
      for (const delta of deltas) frames.push(event({ type: 'content_block_delta', index, delta }));
      frames.push(event({ type: 'content_block_stop', index }));
    });
    const end = [
      event({ type: 'message_delta', delta: { stop_reason: stopReason(reply), stop_sequence: null },
        usage: { output_tokens: reply.usage.completion_tokens } }),
      event({ type: 'message_stop' }),
    ];
    return { frames, end };
  },

  errorFrame: (message, type = 'overloaded_error') => event({ type: 'error', error: { type, message } }),
};

function stopReason(reply) {
  if (reply.finishReason === undefined) return reply.toolCalls.length ? 'tool_use' : 'end_turn';
  return STOP_REASONS[reply.finishReason] ?? reply.finishReason;
}

/** Each content block as its opening `content_block` and the deltas that fill it in. */
function streamedBlocks(reply) {
  const blocks = reply.toolCalls.map(({ id, name, arguments: args }) => ({
    block: { type: 'tool_use', id, name, input: {} },
    deltas: pieces(args, reply.argsChunkSize).map((partial_json) => ({ type: 'input_json_delta', partial_json })),
  }));
  if (reply.text) {
    blocks.unshift({
      block: { type: 'text', text: '' },
      deltas: pieces(reply.text, reply.chunkSize).map((text) => ({ type: 'text_delta', text })),
    });
  }
  return blocks;
}

// The real API always returns an object. Arguments scripted as a string that is not JSON are sent
// as that string, so a test can still check how an agent copes with input it cannot use.
function parseInput(args) {
  try { return JSON.parse(args); } catch { return args; }
}

const formats = { openai, anthropic };

// ---------------------------------------------------------------------------------------------
// Embeddings: POST /v1/embeddings in OpenAI's wire format, answered deterministically: each text
// is a bag of its words (ASCII, lowercase, three letters or more, a plural `s` taken off, each
// word replaced by its entry in `synonyms` when it has one) hashed with 64-bit FNV-1a into
// `dimensions` buckets and normalised, so texts sharing words (or synonyms) are near. The same
// recipe as edgent::testing::ToyEmbedder. It has its own queue of steps (`pushEmbeddings`), so it
// never uses up a chat step; with none queued, every request gets its vectors.
// ---------------------------------------------------------------------------------------------

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = (1n << 64n) - 1n;

function fnv1a64(text) {
  let h = FNV_OFFSET;
  for (const byte of Buffer.from(text, 'utf8')) h = ((h ^ BigInt(byte)) * FNV_PRIME) & MASK64;
  return h;
}

/** The vector of `text`: see above. */
export function embeddingOf(text, dimensions = 64, synonyms = {}) {
  const v = new Array(dimensions).fill(0);
  for (let word of text.toLowerCase().split(/[^a-z0-9]+/)) {
    if (word.length <= 2) continue;
    if (word.endsWith('s')) word = word.slice(0, -1);
    word = Object.hasOwn(synonyms, word) ? synonyms[word] : word;
    v[Number(fnv1a64(word) % BigInt(dimensions))] += 1;
  }
  const norm = Math.hypot(...v);
  return norm > 0 ? v.map((x) => x / norm) : v;
}

const EMBEDDING_STEP_KEYS = ['error', 'delayMs', 'hang', 'dimensions', 'raw'];

// One embedding step: `{ delayMs }` waits first; `{ hang: true }` never answers; `{ error: { status,
// message } }` answers an OpenAI error; `{ raw: body, status }` answers that JSON; `{ dimensions: n }`
// answers vectors of n dimensions instead. Steps combine (`{ delayMs: 5000, error: … }`).
async function playEmbedding(step, request, res, signal, options) {
  const unknown = Object.keys(step).filter((k) => !EMBEDDING_STEP_KEYS.includes(k));
  if (unknown.length) throw new Error(`model-server: unrecognised embedding step ${JSON.stringify(step)}`);
  if (step.delayMs) await sleep(step.delayMs, undefined, { signal });
  if (step.hang) return;
  if (step.error) {
    const { status = 500, message = `model-server: scripted ${status} error`, type, code, headers } = step.error;
    return sendJson(res, status, openai.error(status, message, type, code), headers);
  }
  if (step.raw !== undefined) return sendJson(res, step.status ?? 200, step.raw);
  const { input, model } = request.body;
  const texts = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(texts) || !texts.length || !texts.every((t) => typeof t === 'string')) {
    return sendJson(res, 400, openai.error(400, "model-server: 'input' must be a string or a non-empty list of strings"));
  }
  const dimensions = step.dimensions ?? options.dimensions ?? 64;
  const tokens = texts.reduce((n, t) => n + estimateTokens(t), 0);
  return sendJson(res, 200, {
    object: 'list',
    data: texts.map((t, index) => ({ object: 'embedding', index, embedding: embeddingOf(t, dimensions, options.synonyms) })),
    model: model ?? 'model-server',
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}

// ---------------------------------------------------------------------------------------------
// Core: routing, recording, the script, and playing a step onto a response.
// ---------------------------------------------------------------------------------------------

const REPLY_KEYS = ['text', 'toolCalls', 'truncate', 'midStreamError', 'stallAfter'];

/** Turns a text/toolCalls/truncate/midStreamError/stallAfter step into the format-neutral reply. */
function toReply(step, request, format) {
  const toolCalls = (step.toolCalls ?? []).map((call) => ({
    id: call.id ?? format.toolCallId(),
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
  }));
  const stops = step.truncate || step.midStreamError || step.stallAfter !== undefined;
  const text = step.text ?? (stops ? 'This answer stops part way' : '');
  const spoken = text + toolCalls.map((c) => c.name + c.arguments).join('');
  return {
    text, toolCalls,
    model: step.model ?? request.body.model ?? 'model-server',
    finishReason: step.finishReason,
    chunkSize: step.chunkSize ?? 8,
    argsChunkSize: step.argsChunkSize ?? 6,
    // Either format's names for the counts, so a script reads naturally for the API it targets.
    usage: {
      prompt_tokens: step.usage?.prompt_tokens ?? step.usage?.input_tokens ?? estimateTokens(request.rawBody),
      completion_tokens: step.usage?.completion_tokens ?? step.usage?.output_tokens ?? estimateTokens(spoken),
    },
  };
}

// Named from the path alone, so a request with the wrong method still records which API it meant.
// GET /v1/models is OpenAI's model list and POST /v1/embeddings its embeddings (format
// 'embeddings'); unknown paths have no format.
function formatFor(path) {
  const found = Object.entries(formats).find(([, format]) => format.path === path);
  if (path === '/v1/embeddings') return ['embeddings', null];
  return found ?? [path === '/v1/models' ? 'openai' : null, null];
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

// `stallAfter: n` sends the first n frames and then nothing, leaving the connection open: a provider
// that stops part way through an answer, as a client's stall timer sees it (unlike `hang`, the headers
// have arrived). It takes the place of however the stream would have ended; the client hanging up or
// close() ends it. Otherwise a stream ends cleanly, or is cut for `truncate`.
async function writeStream(res, frames, step, signal) {
  // The headers are out; the first frame waits (a model slow to start answering).
  if (step.firstChunkDelayMs) await sleep(step.firstChunkDelayMs, undefined, { signal });
  const stalls = step.stallAfter !== undefined;
  await writeFrames(res, stalls ? frames.slice(0, step.stallAfter) : frames, step.chunkDelayMs, signal);
  if (stalls) return;
  if (step.truncate) res.destroy();
  else res.end();
}

// A non-streaming body has no frames, so it is cut (or stalls) half way, where a partial JSON body is
// certainly unparseable; `stallAfter: 0` stalls before any of it.
async function writePartialJson(res, json, step, signal) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.flushHeaders();
  const half = json.slice(0, Math.floor(json.length / 2));
  await writeFrames(res, step.stallAfter === 0 ? [] : [half], 0, signal);
  if (step.stallAfter === undefined) res.destroy();
}

function checkStallAfter(step) {
  if (step.stallAfter === undefined || (Number.isInteger(step.stallAfter) && step.stallAfter >= 0)) return;
  throw new Error(`model-server: stallAfter must be a whole number of frames, got ${JSON.stringify(step.stallAfter)}`);
}

// `drip: { data, everyMs = 1000, status = 200, headers }`: the response headers, then one character
// of `data` every `everyMs` ms, from its start again when it runs out, forever: until the client
// hangs up or close(). Bytes keep coming, so no stall timer ever fires; only an overall deadline
// ends it. Counts what it wrote in `request.bytesSent`.
async function writeDrip(res, { data, everyMs = 1000, status = 200, headers }, request, signal) {
  if (typeof data !== 'string' || !data.length) throw new Error('model-server: drip needs a non-empty `data` string');
  res.writeHead(status, { ...SSE_HEADERS, ...headers });
  res.flushHeaders();
  for (let i = 0; !res.destroyed; i = (i + 1) % data.length) {
    await new Promise((resolve) => res.write(data[i], resolve));
    request.bytesSent += Buffer.byteLength(data[i]);
    await sleep(everyMs, undefined, { signal });
  }
}

// `largeBody: { bytes, status = 200, prefix = '', fill = 'x', suffix = '', chunkSize = 65536, headers }`:
// a body of `bytes` bytes (`prefix`, `fill` repeated, `suffix`) sent without Content-Length, one
// chunk at a time as the client reads it, for bodies far larger than a client should read (a
// 50 MB error page, an SSE line that never ends). Nothing that size is held in memory; it stops
// as soon as the client hangs up. Counts what it wrote in `request.bytesSent`.
async function writeLargeBody(res, spec, request) {
  const { bytes, status = 200, prefix = '', fill = 'x', suffix = '', chunkSize = 65536, headers } = spec;
  if (!Number.isInteger(bytes) || bytes < 0 || !fill.length) {
    throw new Error(`model-server: largeBody needs a whole number of bytes and a non-empty fill, got ${JSON.stringify(spec)}`);
  }
  res.writeHead(status, { ...SSE_HEADERS, ...headers });
  res.flushHeaders();
  const chunk = Buffer.from(fill.repeat(Math.ceil(chunkSize / fill.length))).subarray(0, chunkSize);
  const write = (piece) => new Promise((resolve) => {
    if (res.destroyed) return resolve(false);
    res.write(piece, () => resolve(true));
  }).then((ok) => { if (ok) request.bytesSent += piece.length; return ok; });
  const head = Buffer.from(prefix);
  const tail = Buffer.from(suffix);
  let left = bytes - head.length - tail.length;
  if (!(await write(head))) return;
  while (left > 0) {
    if (!(await write(left >= chunk.length ? chunk : chunk.subarray(0, left)))) return;
    left -= chunk.length;
  }
  if (await write(tail)) res.end();
}

async function readBody(req) {
  const parts = [];
  for await (const part of req) parts.push(part);
  return Buffer.concat(parts).toString('utf8');
}

async function play(format, step, request, res, signal) {
  checkStallAfter(step);
  if (step.delayMs) await sleep(step.delayMs, undefined, { signal });
  if (step.hang) return; // never answered; close() or the client ends the socket

  if (step.error) {
    const { status = 500, message = `model-server: scripted ${status} error`, type, code, headers } = step.error;
    return sendJson(res, status, format.error(status, message, type, code), headers);
  }

  if (step.drip) return writeDrip(res, step.drip, request, signal);
  if (step.largeBody) return writeLargeBody(res, step.largeBody, request);

  if (step.raw) {
    res.writeHead(step.status ?? 200, { ...SSE_HEADERS, ...step.headers });
    res.flushHeaders();
    return writeStream(res, step.raw, step, signal);
  }

  if (!REPLY_KEYS.some((key) => key in step)) {
    throw new Error(`model-server: unrecognised step ${JSON.stringify(step)}`);
  }
  const reply = toReply(step, request, format);
  const failure = step.midStreamError && (step.midStreamError.message ?? 'model-server: scripted mid-stream error');

  if (!format.wantsStream(request.body)) {
    if (failure) return sendJson(res, 500, format.error(500, failure));
    const json = JSON.stringify(format.completion(reply));
    if (step.truncate || step.stallAfter !== undefined) return writePartialJson(res, json, step, signal);
    return sendJson(res, 200, json);
  }

  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  const { frames, end } = format.stream(reply, request.body);
  const tail = step.truncate ? [] : failure ? [format.errorFrame(failure, step.midStreamError.type)] : end;
  await writeStream(res, [...frames, ...tail], step, signal);
}

/**
 * Starts a scripted model server on 127.0.0.1.
 * @param {{ port?: number, script?: Array<object|Function>, fallback?: object|Function }} [options]
 */
export async function startModelServer({ port = 0, script = [], fallback = EXHAUSTED, embeddings = {} } = {}) {
  const queue = [...script];
  const embeddingQueue = [];
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

  let arrivals = 0;
  async function handle(req, res) {
    res.on('error', () => {}); // a client that went away is not the test's failure
    const rawBody = await readBody(req);
    let body = null;
    try { body = rawBody ? JSON.parse(rawBody) : null; } catch { /* recorded as null */ }
    const path = req.url.split('?')[0];
    const [name, format] = formatFor(path);
    // `at` is in milliseconds, which two requests can share; `arrival` orders them (1, 2, …).
    const request = { method: req.method, path, format: name, headers: { ...req.headers }, body, rawBody, at: Date.now(), arrival: ++arrivals };
    // When the response's connection closed, and whether the whole response had been written
    // by then (false: the client hung up part way).
    res.on('close', () => { request.closedAt = Date.now(); request.finished = res.writableFinished; });
    request.bytesSent = 0;
    record(request);

    if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, openai.models());
    if (name === 'embeddings' && req.method === 'POST') {
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return sendJson(res, 400, openai.error(400, 'model-server: request body is not a JSON object'));
      }
      try {
        await playEmbedding(embeddingQueue.shift() ?? {}, request, res, closing.signal, embeddings);
      } catch (err) {
        if (closing.signal.aborted) return res.destroy();
        if (!res.headersSent) return sendJson(res, 500, openai.error(500, err.message));
        res.destroy();
      }
      return;
    }
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
    /** Queues steps for the next embedding requests (see playEmbedding); unqueued ones get vectors. */
    pushEmbeddings(...steps) { embeddingQueue.push(...steps); },
    /** The recorded POST /v1/embeddings requests. */
    get embeddingRequests() { return requests.filter((r) => r.path === '/v1/embeddings'); },
    reset() { queue.length = 0; embeddingQueue.length = 0; requests.length = 0; },

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
