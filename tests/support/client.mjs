// A small edgent client for tests and examples: JSON over HTTP, frames over a real WebSocket.
import WebSocket from 'ws';

export class EdgentClient {
  constructor(baseUrl, key) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.key = key;
  }

  /** Calls the API; returns { status, body } with the body parsed when it is JSON. */
  async request(method, path, { body, key = this.key, headers = {}, raw } = {}) {
    const h = { ...headers };
    if (key !== null) h.authorization = `Bearer ${key}`;
    let payload;
    if (raw !== undefined) payload = raw;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      h['content-type'] = 'application/json';
    }
    const res = await fetch(this.baseUrl + path, { method, headers: h, body: payload });
    const text = await res.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed, headers: res.headers };
  }

  /**
   * The webhook URL a call waits on, from its record (server key only: frames never carry it,
   * since every watcher of the thread gets frames).
   */
  async webhookUrl(threadId, callId) {
    const url = (await this.toolCall(threadId, callId)).waiting_for?.url;
    if (!url) throw new Error(`webhookUrl: ${callId} waits on no webhook`);
    return url;
  }

  /** One call's record in the thread's execution history (`GET …/tool-calls`). */
  async toolCall(threadId, callId) {
    const r = await this.request('GET', `/api/threads/${threadId}/tool-calls?limit=200`);
    if (r.status !== 200) throw new Error(`toolCall: ${r.status} ${JSON.stringify(r.body)}`);
    const record = r.body.tool_calls.find((c) => c.id === callId);
    if (!record) throw new Error(`toolCall: no call ${callId} in ${JSON.stringify(r.body)}`);
    return record;
  }

  /** Polls a call's record until `done(record)` holds (every 200 ms); throws with the last one. */
  async waitForToolCall(threadId, callId, done, timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      last = await this.toolCall(threadId, callId);
      if (done(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`call ${callId} did not get there within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
  }

  async createThread(agentId = 'support') {
    const r = await this.request('POST', '/api/threads', { body: { agent_id: agentId } });
    if (r.status !== 201) throw new Error(`createThread: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.thread_id;
  }

  /**
   * Creates a thread of `agentId` and opens its WebSocket in one request
   * (`GET /api/threads/new/stream`); resolves once `hello` (which names the thread) arrived,
   * with `sock.threadId` set.
   */
  async openNew(agentId = 'support', { tags = [], token = this.key, viaQuery = false } = {}) {
    const query = new URLSearchParams({ agent_id: agentId });
    for (const tag of tags) query.append('tag', tag);
    if (viaQuery) query.set('token', token);
    const wsUrl = this.baseUrl.replace(/^http/, 'ws') + `/api/threads/new/stream?${query}`;
    const ws = new WebSocket(wsUrl, viaQuery ? {} : { headers: { authorization: `Bearer ${token}` } });
    const sock = new FrameSocket(ws);
    await sock.opened;
    const hello = await sock.waitFor((f) => f.type === 'hello');
    sock.threadId = hello.thread_id;
    return sock;
  }

  /**
   * Opens the thread's WebSocket and resolves once `hello` arrived. The credential goes in the
   * `Authorization` header, or `viaQuery` as `?token=`, or `viaProtocol` as a browser sends
   * it (`Sec-WebSocket-Protocol: edgent, <token>`). `headers` adds request headers (Origin).
   * `compress: false` does not offer permessage-deflate (a browser does, and Miniflare's entry
   * Worker accepts it; production's runtime and the side-by-side harness's client do not).
   */
  async connect(threadId, { token = this.key, viaQuery = false, viaProtocol = false, headers = {}, compress = true } = {}) {
    const wsUrl = this.baseUrl.replace(/^http/, 'ws') + `/api/threads/${threadId}/stream` + (viaQuery ? `?token=${encodeURIComponent(token)}` : '');
    const auth = viaQuery || viaProtocol ? {} : { authorization: `Bearer ${token}` };
    const ws = viaProtocol
      ? new WebSocket(wsUrl, ['edgent', token], { headers, perMessageDeflate: compress })
      : new WebSocket(wsUrl, { headers: { ...auth, ...headers }, perMessageDeflate: compress });
    const sock = new FrameSocket(ws);
    await sock.opened;
    await sock.waitFor((f) => f.type === 'hello');
    return sock;
  }

  /**
   * One turn as a client sees it: opens the thread's socket, posts `content` over HTTP, and
   * resolves with the frames up to the turn's `idle` status (the socket is closed after).
   */
  async turn(threadId, content, { timeout = 20000 } = {}) {
    const sock = await this.connect(threadId);
    await sock.waitFor((f) => f.type === 'status');
    const from = sock.frames.length;
    const r = await this.request('POST', `/api/threads/${threadId}/messages`, { body: { content } });
    if (r.status !== 202) throw new Error(`POST messages answered ${r.status}: ${JSON.stringify(r.body)}`);
    await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { timeout, from });
    const frames = sock.frames.slice(from);
    sock.close();
    return frames;
  }
}

/** Collects frames and lets a test wait for the one it expects. */
export class FrameSocket {
  constructor(ws) {
    this.ws = ws;
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`WebSocket refused: ${res.statusCode}`), { status: res.statusCode })));
      ws.once('error', reject);
    });
    ws.on('message', (data) => {
      let frame;
      try {
        frame = JSON.parse(data.toString());
      } catch {
        frame = { type: '__unparseable__', raw: data.toString() };
      }
      this.frames.push(frame);
      this.waiters = this.waiters.filter((w) => !w.check());
    });
    ws.on('close', () => {
      this.closed = true;
    });
  }

  send(frame) {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Resolves with the first frame (from `from` on) matching `pred`. */
  waitFor(pred, { timeout = 5000, from = 0 } = {}) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const hit = this.frames.slice(from).find(pred);
        if (hit) {
          clearTimeout(timer);
          resolve(hit);
          return true;
        }
        return false;
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.check !== check);
        reject(new Error(`timed out waiting for a frame; got: ${JSON.stringify(this.frames.slice(from)).slice(0, 2000)}`));
      }, timeout);
      if (!check()) this.waiters.push({ check });
    });
  }

  /** Sends an rpc and resolves with its `result` frame. */
  async rpc(method, params, id = `r${Math.random().toString(36).slice(2)}`) {
    const from = this.frames.length;
    this.send({ type: 'rpc', id, method, params });
    return this.waitFor((f) => f.type === 'result' && f.id === id, { from });
  }

  /** Waits for the final (completed or failed) assistant message after index `from`. */
  finalAssistant(from = 0, timeout = 10000) {
    return this.waitFor(
      (f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status !== 'pending' && !(f.message.tool_calls?.length),
      { from, timeout },
    );
  }

  close() {
    this.ws.close();
  }
}
