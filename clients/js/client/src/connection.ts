import { Emitter } from './emitter.js';
import { EdgentError, EdgentTimeoutError } from './errors.js';
import type {
  Frame,
  FrameOf,
  FrameType,
  InjectMessageParams,
  Message,
  MessagePage,
  MessageQuery,
  RpcMethod,
  RpcMethods,
  Schedule,
  ScheduleList,
  ScheduleSpec,
  Side,
  ToolCallPage,
} from './frames.js';

/** Where the connection is: `connecting` (first attempt), `open` (hello received), `reconnecting` (lost; retrying with backoff), `closed` (by `close()` or a refusal that retrying cannot fix). */
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** The part of the WHATWG `WebSocket` the connection uses (browsers' own, or the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** A `WebSocket` class: `new WebSocket(url, ["edgent", token])`. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** Backoff between reconnection attempts: `min(maxDelayMs, initialDelayMs * factor^n)`, less up to `jitter` of it at random. */
export interface ReconnectOptions {
  /** Default 500. */
  initialDelayMs?: number;
  /** Default 15000. */
  maxDelayMs?: number;
  /** Default 2. */
  factor?: number;
  /** 0 to 1: the share of the delay taken off at random (default 0.5). */
  jitter?: number;
  /** Attempts in a row without reaching `hello` before giving up (default: never give up). */
  maxAttempts?: number;
}

/** Options of {@link ThreadConnection}. */
export interface ThreadConnectionOptions {
  /** The Worker's base URL (`https://…`; `http`/`ws` schemes work too). */
  url: string;
  threadId: string;
  /** A client token for this thread, or (servers only) the server key. */
  token: string;
  /** The `WebSocket` class; default `globalThis.WebSocket`. In Node < 22 pass the `ws` package's. */
  WebSocket?: WebSocketConstructor;
  /** How the token travels: `protocol` (default: `Sec-WebSocket-Protocol: edgent, <token>`) or `query` (`?token=`). */
  tokenIn?: 'protocol' | 'query';
  /** Default timeout of an rpc, in ms (default 15000). */
  rpcTimeoutMs?: number;
  /** Send `ping` this often, in ms (default 20000; 0 turns the heartbeat off). */
  heartbeatIntervalMs?: number;
  /** Reconnect when no frame (`pong` or any other) arrived this long after a `ping` (default 10000). */
  heartbeatTimeoutMs?: number;
  /** Backoff settings, or `false` to never reconnect. */
  reconnect?: ReconnectOptions | false;
  /** Resume from this seq on the first connection (a seq saved earlier). */
  after?: number;
  /** Randomness for the jitter (tests); default `Math.random`. */
  random?: () => number;
  /** Connect at once (default true); otherwise call `connect()`. */
  autoConnect?: boolean;
}

/** What `open` reports. */
export interface OpenEvent {
  hello: FrameOf<'hello'>;
  /** The socket was opened with `?after=` and the server resumes from there (no refetch needed). */
  resumed: boolean;
  /** Not the first connection. */
  reconnected: boolean;
}

/** Every event of a {@link ThreadConnection}: each frame type by its name, plus the connection's own. */
export type ConnectionEvents = { [T in FrameType]: FrameOf<T> } & {
  /** Every frame delivered (duplicates by seq are dropped before this). */
  frame: Frame;
  /** The connection's state changed. */
  state: ConnectionState;
  /** `hello` arrived on a new socket. When `resumed` is false, state held from before is stale: refetch. */
  open: OpenEvent;
  /** A socket failed or was refused (each failed attempt), or the connection gave up. */
  failure: EdgentError;
};

interface Pending {
  method: string;
  frame: string;
  sent: boolean;
  resolve: (value: unknown) => void;
  reject: (error: EdgentError) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** Close codes and upgrade statuses that retrying cannot fix. */
const PERMANENT_CLOSE: Record<number, [number, string]> = {
  1008: [403, 'forbidden'],
  4401: [401, 'unauthorized'],
  4403: [403, 'forbidden'],
  4404: [404, 'not_found'],
};
const PERMANENT_STATUS: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  426: 'upgrade_required',
};

/**
 * One thread's WebSocket, kept open: rpc calls as promises with a timeout, a heartbeat,
 * reconnection with exponential backoff and jitter, and resume: the highest `seq` seen is
 * sent back as `?after=` so the server replays what was missed; a frame whose seq was already
 * delivered is dropped. `reset` (the server's log no longer reaches back) and a reconnection
 * that could not resume are reported so the state layer refetches.
 */
export class ThreadConnection extends Emitter<ConnectionEvents> {
  readonly threadId: string;
  private readonly options: ThreadConnectionOptions;
  private readonly WS: WebSocketConstructor;
  private ws: WebSocketLike | null = null;
  private _state: ConnectionState = 'connecting';
  private _lastSeq: number | undefined;
  private userClosed = false;
  private opened = false;
  private everOpened = false;
  private attempts = 0;
  private sentAfter = false;
  private lastError: EdgentError | null = null;
  private nextId = 0;
  private readonly pending = new Map<string, Pending>();
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private pongTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(options: ThreadConnectionOptions) {
    super();
    this.options = options;
    this.threadId = options.threadId;
    this._lastSeq = options.after;
    const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) throw new TypeError('no WebSocket class: pass options.WebSocket (e.g. the `ws` package)');
    this.WS = WS;
    if (options.autoConnect !== false) this.connect();
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this._state;
  }

  /** The highest seq delivered (or the one resumed from); `undefined` before `hello`. */
  get lastSeq(): number | undefined {
    return this._lastSeq;
  }

  /** Opens the socket (done by the constructor unless `autoConnect: false`). */
  connect(): void {
    if (this.userClosed || this.ws) return;
    const { url, threadId, token } = this.options;
    const base = url.replace(/\/+$/, '').replace(/^http(s?):/i, 'ws$1:');
    const query = new URLSearchParams();
    this.sentAfter = this._lastSeq !== undefined;
    if (this._lastSeq !== undefined) query.set('after', String(this._lastSeq));
    const viaQuery = this.options.tokenIn === 'query';
    if (viaQuery) query.set('token', token);
    const qs = query.toString();
    const target = `${base}/api/threads/${encodeURIComponent(threadId)}/stream${qs ? `?${qs}` : ''}`;
    this.lastError = null;
    let ws: WebSocketLike;
    try {
      ws = viaQuery ? new this.WS(target) : new this.WS(target, ['edgent', token]);
    } catch (e) {
      this.lastError = new EdgentError(0, 'network', `cannot open the socket: ${(e as Error)?.message ?? e}`);
      this.onLost(null);
      return;
    }
    this.ws = ws;
    ws.onmessage = (event) => this.onData(event.data);
    ws.onerror = (event) => {
      this.lastError = socketError(event);
    };
    ws.onclose = (event) => {
      if (this.ws === ws) this.onLost(event);
    };
  }

  /** Closes the socket for good: no reconnection; pending rpcs fail with `closed`. */
  close(): void {
    if (this.userClosed) return;
    this.userClosed = true;
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      detach(ws);
      try {
        ws.close(1000, 'client closed');
      } catch {
        // already closed
      }
    }
    this.failPending(() => true, 'closed', 'the connection was closed');
    this.setState('closed');
  }

  /**
   * Calls an rpc method. Resolves with its result; rejects with an {@link EdgentError} (the
   * server's code), an {@link EdgentTimeoutError} when no result came within `timeoutMs`, or
   * `disconnected` when the socket dropped after sending it (it may or may not have run). A
   * call made while reconnecting is sent once the socket is back (its timeout runs meanwhile).
   */
  call<M extends RpcMethod>(
    method: M,
    params?: RpcMethods[M]['params'],
    options: { timeoutMs?: number } = {},
  ): Promise<RpcMethods[M]['result']> {
    if (this.userClosed) return Promise.reject(new EdgentError(0, 'closed', 'the connection was closed'));
    const id = `c${++this.nextId}`;
    const timeoutMs = options.timeoutMs ?? this.options.rpcTimeoutMs ?? 15000;
    const frame = JSON.stringify({ type: 'rpc', id, method, params: params ?? {} });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new EdgentTimeoutError(method, timeoutMs));
      }, timeoutMs);
      const entry: Pending = { method, frame, sent: false, resolve: resolve as (v: unknown) => void, reject, timer };
      this.pending.set(id, entry);
      if (this.opened) this.transmit(entry);
    });
  }

  /** `send_message`: stores a user message and starts a turn. */
  sendMessage(content: string): Promise<{ message_id: string }> {
    return this.call('send_message', { content });
  }

  /** `get_messages`: a page of messages (`{order: 'desc'}` for the newest). */
  getMessages(query: MessageQuery = {}): Promise<MessagePage> {
    return this.call('get_messages', query);
  }

  /** `get_tool_calls`: a page of the execution history, oldest first. */
  getToolCalls(query: { limit?: number; offset?: number } = {}): Promise<ToolCallPage> {
    return this.call('get_tool_calls', query);
  }

  /** `approve_tool`: approves or rejects a call waiting for approval (`approve` scope). */
  approveTool(toolCallId: string, approved: boolean, reason?: string): Promise<{ approved: boolean; tool_call_id: string }> {
    const params: RpcMethods['approve_tool']['params'] = { tool_call_id: toolCallId, approved };
    if (reason !== undefined) params.reason = reason;
    return this.call('approve_tool', params);
  }

  /** `stop`: stops the thread for good. */
  stop(): Promise<{ ok: true }> {
    return this.call('stop', {});
  }

  /** `regenerate`: answers the last user message again. */
  regenerate(): Promise<{ ok: true }> {
    return this.call('regenerate', {});
  }

  /** `inject_message` (server key). */
  injectMessage(params: InjectMessageParams): Promise<{ message: Message }> {
    return this.call('inject_message', params);
  }

  /** `queue_tool` (server key, or a `client_callable` tool without bindings). */
  queueTool(name: string, args?: Record<string, unknown>, bindings?: Record<string, unknown>): Promise<{ tool_call_id: string }> {
    const params: RpcMethods['queue_tool']['params'] = { name };
    if (args !== undefined) params.args = args;
    if (bindings !== undefined) params.bindings = bindings;
    return this.call('queue_tool', params);
  }

  /** `force_turn` (server key). */
  forceTurn(side?: Side): Promise<{ side: Side }> {
    return this.call('force_turn', side === undefined ? {} : { side });
  }

  /** `list_schedules`: the active schedules, oldest first (`{ended: true}`: the done and cancelled ones too). */
  listSchedules(query: { ended?: boolean } = {}): Promise<ScheduleList> {
    return this.call('list_schedules', query.ended ? { ended: true } : {});
  }

  /** `create_schedule` (server key). */
  createSchedule(spec: ScheduleSpec): Promise<{ schedule: Schedule }> {
    return this.call('create_schedule', spec);
  }

  /** `cancel_schedule` (server key): cancels an active schedule. */
  cancelSchedule(scheduleId: string): Promise<{ schedule: Schedule }> {
    return this.call('cancel_schedule', { schedule_id: scheduleId });
  }

  // ---- internals ----

  private setState(state: ConnectionState): void {
    if (this._state === state) return;
    this._state = state;
    this.emit('state', state);
  }

  private transmit(entry: Pending): void {
    try {
      this.ws?.send(entry.frame);
      entry.sent = true;
    } catch {
      // the socket is going away: onclose follows, and the call is sent again after it
    }
  }

  private onData(data: unknown): void {
    let frame: Frame;
    try {
      frame = JSON.parse(typeof data === 'string' ? data : String(data)) as Frame;
    } catch {
      return;
    }
    if (!frame || typeof frame !== 'object' || typeof frame.type !== 'string') return;
    // Any frame proves the connection alive.
    if (this.pongTimer) {
      clearTimeout(this.pongTimer);
      this.pongTimer = null;
    }
    switch (frame.type) {
      case 'hello':
        this.onHello(frame);
        return;
      case 'reset':
        // The log no longer reaches back to our seq: continue from the server's, and refetch.
        this._lastSeq = frame.seq;
        this.deliver(frame);
        return;
      case 'result':
        this.settle(frame);
        break;
      case 'error':
        if (frame.id !== undefined && frame.id !== null) this.settleError(frame);
        break;
    }
    const seq = (frame as { seq?: unknown }).seq;
    if (typeof seq === 'number') {
      if (this._lastSeq !== undefined && seq <= this._lastSeq) return; // already delivered
      this._lastSeq = seq;
    }
    this.deliver(frame);
  }

  private onHello(hello: FrameOf<'hello'>): void {
    const seq = (hello as { seq?: unknown }).seq;
    const resumed = this.sentAfter && typeof seq === 'number';
    if (this._lastSeq === undefined && typeof seq === 'number') this._lastSeq = seq;
    const reconnected = this.everOpened;
    this.opened = true;
    this.everOpened = true;
    this.attempts = 0;
    this.setState('open');
    this.startHeartbeat();
    this.deliver(hello);
    this.emit('open', { hello, resumed, reconnected });
    for (const entry of this.pending.values()) if (!entry.sent) this.transmit(entry);
  }

  private deliver(frame: Frame): void {
    this.emit('frame', frame);
    this.emit(frame.type, frame as never);
  }

  private settle(frame: FrameOf<'result'>): void {
    const id = String(frame.id);
    const entry = this.pending.get(id);
    if (!entry) return; // timed out already, or not ours
    this.pending.delete(id);
    clearTimeout(entry.timer);
    if (frame.ok) entry.resolve(frame.result);
    else entry.reject(new EdgentError(0, frame.error?.code ?? 'internal', frame.error?.message ?? 'rpc failed'));
  }

  private settleError(frame: FrameOf<'error'>): void {
    const id = String(frame.id);
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    clearTimeout(entry.timer);
    entry.reject(new EdgentError(0, frame.code, frame.message));
  }

  private startHeartbeat(): void {
    this.stopHeartbeat();
    const every = this.options.heartbeatIntervalMs ?? 20000;
    if (every <= 0) return;
    const timeout = this.options.heartbeatTimeoutMs ?? 10000;
    this.pingTimer = setInterval(() => {
      if (!this.ws || this.pongTimer) return;
      try {
        this.ws.send('{"type":"ping"}');
      } catch {
        return;
      }
      this.pongTimer = setTimeout(() => {
        this.pongTimer = null;
        this.lastError = new EdgentError(0, 'heartbeat_timeout', `no pong within ${timeout} ms`);
        this.drop();
      }, timeout);
    }, every);
  }

  private stopHeartbeat(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (this.pongTimer) clearTimeout(this.pongTimer);
    this.pingTimer = null;
    this.pongTimer = null;
  }

  private clearTimers(): void {
    this.stopHeartbeat();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
  }

  /** Abandons the current socket (it may be half-dead) and reconnects. */
  private drop(): void {
    const ws = this.ws;
    if (!ws) return;
    detach(ws);
    try {
      ws.close(4000, 'heartbeat timeout');
    } catch {
      // ignore
    }
    this.onLost(null);
  }

  private onLost(event: { code: number; reason: string } | null): void {
    const ws = this.ws;
    if (ws) detach(ws);
    this.ws = null;
    this.opened = false;
    this.stopHeartbeat();
    if (this.userClosed) return;
    this.failPending((p) => p.sent, 'disconnected', 'the socket dropped before the result arrived');

    let failure = this.lastError;
    let permanent = false;
    if (event && PERMANENT_CLOSE[event.code]) {
      const [status, code] = PERMANENT_CLOSE[event.code]!;
      failure = new EdgentError(status, code, event.reason || `the server closed the socket (${event.code})`);
      permanent = true;
    } else if (failure && PERMANENT_STATUS[failure.status]) {
      permanent = true;
    } else if (!failure) {
      failure = new EdgentError(0, 'disconnected', `the socket closed${event ? ` (${event.code})` : ''}`);
    }
    const policy = this.options.reconnect;
    this.attempts += 1;
    if (permanent || policy === false || this.attempts > (policy?.maxAttempts ?? Infinity)) {
      // Give up: the state says so before `failure` is reported.
      this.userClosed = true;
      this.clearTimers();
      this.setState('closed');
      this.emit('failure', failure);
      this.failPending(() => true, failure.code, failure.message);
      return;
    }
    this.emit('failure', failure);
    this.setState('reconnecting');
    const initial = policy?.initialDelayMs ?? 500;
    const max = policy?.maxDelayMs ?? 15000;
    const factor = policy?.factor ?? 2;
    const jitter = Math.min(1, Math.max(0, policy?.jitter ?? 0.5));
    const exp = Math.min(max, initial * factor ** (this.attempts - 1));
    const delay = exp * (1 - jitter * (this.options.random ?? Math.random)());
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect();
    }, delay);
  }

  private failPending(which: (p: Pending) => boolean, code: string, message: string): void {
    for (const [id, entry] of this.pending) {
      if (!which(entry)) continue;
      this.pending.delete(id);
      clearTimeout(entry.timer);
      entry.reject(new EdgentError(0, code, message));
    }
  }
}

const ignore = (): void => {};

/** Stops listening to a socket we abandon. No-ops, not `null`: the `ws` package throws an `error` nobody listens to. */
function detach(ws: WebSocketLike): void {
  ws.onopen = ignore;
  ws.onmessage = ignore;
  ws.onerror = ignore;
  ws.onclose = ignore;
}

/**
 * What a socket's `error` event says. Browsers say nothing (a refused upgrade looks like a
 * network failure); the `ws` package names the HTTP status of a refused upgrade.
 */
function socketError(event: unknown): EdgentError {
  const raw = (event as { message?: unknown; error?: { message?: unknown } } | null) ?? {};
  const message = String(raw.message ?? raw.error?.message ?? 'the socket failed');
  const m = /Unexpected server response: (\d{3})/.exec(message);
  if (m) {
    const status = Number(m[1]);
    return new EdgentError(status, PERMANENT_STATUS[status] ?? 'upgrade_refused', `the server refused the socket: HTTP ${status}`);
  }
  return new EdgentError(0, 'network', message);
}
