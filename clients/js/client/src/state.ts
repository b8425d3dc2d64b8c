// The state of one thread as a client shows it, built from frames and pages. `reduceThread`
// is a pure reducer (no I/O, no clock); `ThreadStore` feeds it from a ThreadConnection and is
// what `useThread` subscribes to (the `subscribe`/`getSnapshot` pair of useSyncExternalStore).
import { EdgentError } from './errors.js';
import type { ConnectionState, ThreadConnection, ThreadConnectionOptions } from './connection.js';
import { ThreadConnection as Connection } from './connection.js';
import type { ErrorFrame, Frame, Message, MessagePage, Schedule, StatusFrame, ToolCallRecord, ToolFrame } from './frames.js';

/** A tool call as the latest `tool` frame (or the execution history) describes it. */
export interface ToolCallView {
  tool_call_id: string;
  name: string;
  status: ToolFrame['status'];
  wake_at?: number;
  waiting_for?: unknown;
  attempt?: number;
  error?: string;
}

/** An application event (`event` frame). */
export interface ThreadEvent {
  event: string;
  data: unknown;
  timestamp: number;
}

/** The thread's state, as `status` frames report it. */
export type ThreadStatusView = Pick<StatusFrame, 'state' | 'turn' | 'side'>;

/** One immutable snapshot of a thread's state. */
export interface ThreadSnapshot {
  /** Messages in history order, merged by id (a later `message` frame replaces). */
  readonly messages: readonly Message[];
  /** The text streamed so far for each pending assistant message, by message id. */
  readonly streaming: Readonly<Record<string, string>>;
  /** Tool calls by `tool_call_id`. */
  readonly toolCalls: Readonly<Record<string, ToolCallView>>;
  /** Application events, oldest first (the newest `maxEvents`). */
  readonly events: readonly ThreadEvent[];
  /**
   * Schedules by id, as the latest `schedule` frame (or the list loaded at connect) describes
   * them: the active ones, and those that ended while the store watched.
   */
  readonly schedules: Readonly<Record<string, Schedule>>;
  /** The thread's state; `null` before the first `status` frame. */
  readonly status: ThreadStatusView | null;
  /** The socket's state. */
  readonly connection: ConnectionState;
  /** The latest failure: a failed turn (`error` frame), a failed rpc or socket. */
  readonly error: EdgentError | null;
  /** The first page of messages has loaded. */
  readonly loaded: boolean;
}

/** What changes a snapshot. */
export type ThreadAction =
  | { type: 'frame'; frame: Frame }
  | { type: 'page'; page: MessagePage; order: 'asc' | 'desc' }
  | { type: 'tool_calls'; calls: readonly ToolCallRecord[] }
  /**
   * A list of schedules (`list_schedules`): every active one, and with `ended` every one. The
   * list is the truth for what it covers: a held active schedule it lacks has ended.
   */
  | { type: 'schedules'; schedules: readonly Schedule[]; ended: boolean }
  | { type: 'connection'; state: ConnectionState }
  | { type: 'error'; error: EdgentError | null };

/** An empty snapshot. */
export const emptyThread: ThreadSnapshot = Object.freeze({
  messages: Object.freeze([]) as readonly Message[],
  streaming: Object.freeze({}),
  toolCalls: Object.freeze({}),
  events: Object.freeze([]) as readonly ThreadEvent[],
  schedules: Object.freeze({}),
  status: null,
  connection: 'connecting' as ConnectionState,
  error: null,
  loaded: false,
});

/** Options of the reducer. */
export interface ReduceOptions {
  /** How many events to keep (default 200). */
  maxEvents?: number;
}

/** The pure reducer: the next snapshot (the same object when nothing changed). */
export function reduceThread(s: ThreadSnapshot, action: ThreadAction, options: ReduceOptions = {}): ThreadSnapshot {
  switch (action.type) {
    case 'connection':
      return s.connection === action.state ? s : { ...s, connection: action.state };
    case 'error':
      return s.error === action.error ? s : { ...s, error: action.error };
    case 'page':
      return applyPage(s, action.order === 'desc' ? [...action.page.messages].reverse() : action.page.messages);
    case 'tool_calls': {
      const toolCalls = { ...s.toolCalls };
      for (const c of action.calls) {
        const view: ToolCallView = { tool_call_id: c.id, name: c.tool, status: c.status };
        if (typeof c.wake_at === 'number') view.wake_at = c.wake_at;
        if (c.waiting_for !== undefined && c.waiting_for !== null) view.waiting_for = c.waiting_for;
        if (typeof c.attempts === 'number') view.attempt = c.attempts;
        // As the `retrying` frame carries it: why the attempt failed.
        if (c.status === 'retrying' && typeof c.last_error === 'string') view.error = c.last_error;
        toolCalls[c.id] = view;
      }
      return { ...s, toolCalls };
    }
    case 'schedules': {
      const schedules: Record<string, Schedule> = {};
      if (!action.ended) {
        // The list has only the active ones: keep those held that ended (it cannot say how).
        for (const [id, held] of Object.entries(s.schedules)) if (held.status !== 'active') schedules[id] = held;
      }
      for (const schedule of action.schedules) schedules[schedule.id] = schedule;
      return { ...s, schedules };
    }
    case 'frame':
      return applyFrame(s, action.frame, options);
  }
}

function applyFrame(s: ThreadSnapshot, f: Frame, options: ReduceOptions): ThreadSnapshot {
  switch (f.type) {
    case 'message': {
      const m = f.message;
      const messages = upsert(s.messages, m);
      let streaming = s.streaming;
      if (m.status === 'pending') {
        // A new pending reply, or a retry of it (its assembled text is dropped): start over.
        // A repeat of the pending frame that only re-announces it keeps the text.
        if (!(m.id in streaming) || m.content === '') streaming = { ...streaming, [m.id]: m.content };
      } else if (m.id in streaming) {
        streaming = without(streaming, m.id);
      }
      return { ...s, messages, streaming };
    }
    case 'message_chunk':
      return {
        ...s,
        streaming: { ...s.streaming, [f.message_id]: (s.streaming[f.message_id] ?? '') + f.delta },
      };
    case 'tool': {
      const view: ToolCallView = { tool_call_id: f.tool_call_id, name: f.name, status: f.status };
      if (f.wake_at !== undefined) view.wake_at = f.wake_at;
      if (f.waiting_for !== undefined) view.waiting_for = f.waiting_for;
      if (f.attempt !== undefined) view.attempt = f.attempt;
      if (f.error !== undefined) view.error = f.error;
      return { ...s, toolCalls: { ...s.toolCalls, [f.tool_call_id]: view } };
    }
    case 'schedule':
      return { ...s, schedules: { ...s.schedules, [f.schedule.id]: f.schedule } };
    case 'event': {
      const max = options.maxEvents ?? 200;
      const events = [...s.events, { event: f.event, data: f.data, timestamp: f.timestamp }];
      return { ...s, events: events.length > max ? events.slice(events.length - max) : events };
    }
    case 'status':
      return { ...s, status: { state: f.state, turn: f.turn, side: f.side } };
    case 'error':
      // Errors about one of our own frames settle that rpc; broadcast ones are turn failures.
      if (f.id !== undefined && f.id !== null) return s;
      return { ...s, error: errorOf(f) };
    default:
      return s;
  }
}

function without(record: Readonly<Record<string, string>>, key: string): Record<string, string> {
  const next = { ...record };
  delete next[key];
  return next;
}

function errorOf(f: ErrorFrame): EdgentError {
  return new EdgentError(0, f.code, f.message);
}

function upsert(messages: readonly Message[], m: Message): readonly Message[] {
  const i = messages.findIndex((x) => x.id === m.id);
  if (i < 0) return [...messages, m];
  const next = messages.slice();
  next[i] = m;
  return next;
}

/**
 * Merges a page (in history order) into the messages held: the page is the truth for the
 * messages it holds; held messages it does not hold stay, those older than the page before
 * it and the newer ones (stored since the page was read) after it.
 */
function applyPage(s: ThreadSnapshot, page: readonly Message[]): ThreadSnapshot {
  const ids = new Set(page.map((m) => m.id));
  const first = page[0]?.created_at ?? Infinity;
  const before: Message[] = [];
  const after: Message[] = [];
  for (const m of s.messages) {
    if (ids.has(m.id)) continue;
    (m.created_at < first ? before : after).push(m);
  }
  const messages = [...before, ...page, ...after];
  // Streamed text of messages that are no longer pending is done.
  let streaming = s.streaming;
  for (const m of page) {
    if (m.status !== 'pending' && m.id in streaming) {
      if (streaming === s.streaming) streaming = { ...streaming };
      delete (streaming as Record<string, string>)[m.id];
    }
  }
  return { ...s, messages, streaming, loaded: true };
}

/** The text to show for a message: its streamed text while it is pending. */
export function messageText(snapshot: ThreadSnapshot, message: Message): string {
  if (message.status === 'pending') return snapshot.streaming[message.id] ?? message.content;
  return message.content;
}

/** Options of {@link ThreadStore}. */
export interface ThreadStoreOptions extends ReduceOptions {
  /** Messages loaded at connect and after a reset (1 to 200, default 50): the newest page. */
  pageSize?: number;
  /** Also load the execution history at connect (for calls waiting for approval; default true). */
  loadToolCalls?: boolean;
  /** Also load the active schedules at connect (`list_schedules`; default true). */
  loadSchedules?: boolean;
}

/**
 * A thread's state fed from a {@link ThreadConnection}: loads the newest page at connect,
 * applies every frame, and refetches when the connection could not resume (a `reset` frame,
 * or a reconnection without `seq`). Framework-free: `subscribe` + `getSnapshot` for
 * `useSyncExternalStore`, or any other view layer.
 */
export class ThreadStore {
  readonly connection: ThreadConnection;
  private snapshot: ThreadSnapshot = emptyThread;
  private readonly listeners = new Set<() => void>();
  private readonly options: ThreadStoreOptions;
  private readonly offs: Array<() => void> = [];
  private loading = 0;

  constructor(connection: ThreadConnection, options: ThreadStoreOptions = {}) {
    this.connection = connection;
    this.options = options;
    this.dispatch({ type: 'connection', state: connection.state });
    this.offs.push(
      connection.on('frame', (frame) => this.dispatch({ type: 'frame', frame })),
      connection.on('state', (state) => this.dispatch({ type: 'connection', state })),
      connection.on('open', ({ resumed }) => {
        if (!resumed || !this.snapshot.loaded) void this.load();
      }),
      connection.on('reset', () => void this.load()),
      connection.on('failure', (error) => {
        if (connection.state === 'closed' || error.status !== 0) this.dispatch({ type: 'error', error });
      }),
    );
    if (connection.state === 'open') void this.load();
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  };

  /** The current snapshot (a new object after every change). */
  getSnapshot = (): ThreadSnapshot => this.snapshot;

  /** Applies an action and notifies subscribers when the snapshot changed. */
  dispatch(action: ThreadAction): void {
    const next = reduceThread(this.snapshot, action, this.options);
    if (next === this.snapshot) return;
    this.snapshot = next;
    for (const fn of [...this.listeners]) fn();
  }

  /**
   * Loads the newest page of messages (and the execution history and the active schedules);
   * runs at connect and after a reset.
   */
  async load(): Promise<void> {
    const run = ++this.loading;
    const limit = this.options.pageSize ?? 50;
    try {
      const page = await this.connection.getMessages({ limit, order: 'desc' });
      if (run !== this.loading) return; // a newer load superseded this one
      this.dispatch({ type: 'page', page, order: 'desc' });
    } catch (e) {
      this.dispatch({ type: 'error', error: asError(e) });
      return;
    }
    const loads: Promise<void>[] = [];
    if (this.options.loadToolCalls !== false) loads.push(this.loadToolCalls(run));
    if (this.options.loadSchedules !== false) loads.push(this.loadSchedules(run));
    await Promise.all(loads);
  }

  private async loadToolCalls(run: number): Promise<void> {
    try {
      let calls = await this.connection.getToolCalls({ limit: 200 });
      if (calls.has_more) calls = await this.connection.getToolCalls({ limit: 200, offset: Math.max(0, calls.total - 200) });
      if (run !== this.loading) return;
      this.dispatch({ type: 'tool_calls', calls: calls.tool_calls });
    } catch {
      // The history is a convenience; frames keep the calls current.
    }
  }

  private async loadSchedules(run: number): Promise<void> {
    try {
      const list = await this.connection.listSchedules();
      if (run !== this.loading) return;
      this.dispatch({ type: 'schedules', schedules: list.schedules, ended: false });
    } catch {
      // A convenience too (a Worker before schedules answers unknown_method); frames keep them current.
    }
  }

  /** Sends a user message (`send_message`); clears the last error. */
  async send(content: string): Promise<{ message_id: string }> {
    this.dispatch({ type: 'error', error: null });
    try {
      return await this.connection.sendMessage(content);
    } catch (e) {
      this.dispatch({ type: 'error', error: asError(e) });
      throw e;
    }
  }

  /** Stops the thread (`stop`). */
  async stop(): Promise<void> {
    await this.connection.stop();
  }

  /** Answers the last user message again (`regenerate`). */
  async regenerate(): Promise<void> {
    await this.connection.regenerate();
  }

  /** Approves or rejects a call waiting for approval (`approve_tool`; `approve` scope). */
  async approve(toolCallId: string, approved: boolean, reason?: string): Promise<void> {
    await this.connection.approveTool(toolCallId, approved, reason);
  }

  /** Stops listening and closes the connection. */
  close(): void {
    for (const off of this.offs.splice(0)) off();
    this.connection.close();
  }
}

/** A connection and a store over it in one call (what `useThread` uses). */
export function openThread(options: ThreadConnectionOptions & ThreadStoreOptions): ThreadStore {
  return new ThreadStore(new Connection(options), options);
}

function asError(e: unknown): EdgentError {
  return e instanceof EdgentError ? e : new EdgentError(0, 'internal', String((e as Error)?.message ?? e));
}
