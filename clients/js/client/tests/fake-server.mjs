// A fake edgent thread socket in the test process (the `ws` package's WebSocketServer):
// records each connection's URL and subprotocols, answers `hello`, and lets a test script
// frames, rpc results, refusals and drops.
import { WebSocketServer } from 'ws';

export class FakeServer {
  /**
   * @param {object} [opts]
   * @param {(req: import('node:http').IncomingMessage) => number | undefined} [opts.refuse] HTTP status to refuse an upgrade with
   * @param {(conn: FakeConn) => void} [opts.onConnection] runs for each new socket after `hello` (unless `hello: false`)
   * @param {boolean} [opts.pong] answer pings (default true)
   * @param {number} [opts.helloSeq] the `seq` in hello (default: the newest seq sent)
   */
  constructor(opts = {}) {
    this.opts = opts;
    this.connections = [];
    this.seq = 0;
    this.rpcs = [];
    this.handlers = {};
    this.wss = new WebSocketServer({
      port: 0,
      host: '127.0.0.1',
      handleProtocols: (protocols) => (protocols.has('edgent') ? 'edgent' : false),
      verifyClient: (info, cb) => {
        const status = opts.refuse?.(info.req);
        if (status) cb(false, status, 'refused');
        else cb(true);
      },
    });
    this.wss.on('connection', (ws, req) => this.accept(ws, req));
    this.ready = new Promise((resolve) => this.wss.on('listening', resolve));
  }

  get url() {
    return `http://127.0.0.1:${this.wss.address().port}`;
  }

  /** Answers rpc `method` with `fn(params, conn)` (a value, or `{error:{code,message}}`, or `undefined` for no answer). */
  handle(method, fn) {
    this.handlers[method] = fn;
  }

  accept(ws, req) {
    const url = new URL(req.url, 'http://x');
    const conn = new FakeConn(this, ws, {
      url,
      after: url.searchParams.has('after') ? Number(url.searchParams.get('after')) : undefined,
      protocols: req.headers['sec-websocket-protocol'],
      at: Date.now(),
    });
    this.connections.push(conn);
    const hello = { type: 'hello', thread_id: 't1', protocol: 1 };
    hello.seq = this.opts.helloSeq ?? this.seq;
    ws.send(JSON.stringify(hello));
    ws.send(JSON.stringify({ type: 'status', state: 'idle', turn: 0, side: 'a' }));
    this.opts.onConnection?.(conn);
    for (const w of this.waiters.splice(0)) w();
  }

  waiters = [];

  /** Resolves once `n` connections were made. */
  async connectionCount(n, timeout = 3000) {
    const deadline = Date.now() + timeout;
    while (this.connections.length < n) {
      if (Date.now() > deadline) throw new Error(`expected ${n} connections, got ${this.connections.length}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return this.connections[n - 1];
  }

  /** Broadcasts a frame with the next seq to every open socket (the frame log of a thread). */
  broadcast(frame) {
    const f = { ...frame, seq: ++this.seq };
    for (const c of this.connections) if (c.ws.readyState === 1) c.ws.send(JSON.stringify(f));
    return f;
  }

  close() {
    for (const c of this.connections) c.ws.terminate();
    return new Promise((resolve) => this.wss.close(resolve));
  }
}

export class FakeConn {
  constructor(server, ws, info) {
    Object.assign(this, info);
    this.server = server;
    this.ws = ws;
    this.received = [];
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString());
      this.received.push(frame);
      if (frame.type === 'ping' && server.opts.pong !== false) ws.send('{"type":"pong"}');
      if (frame.type === 'rpc') {
        server.rpcs.push({ ...frame, conn: this });
        const fn = server.handlers[frame.method];
        if (!fn) return;
        Promise.resolve(fn(frame.params, this)).then((out) => {
          if (out === undefined || ws.readyState !== 1) return;
          if (out && out.error) ws.send(JSON.stringify({ type: 'result', id: frame.id, ok: false, error: out.error }));
          else ws.send(JSON.stringify({ type: 'result', id: frame.id, ok: true, result: out }));
        });
      }
    });
  }

  send(frame) {
    this.ws.send(JSON.stringify(frame));
  }
}

/** Waits until `pred()` holds. */
export async function until(pred, timeout = 3000, what = 'condition') {
  const deadline = Date.now() + timeout;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
