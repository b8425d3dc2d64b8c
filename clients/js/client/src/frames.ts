// The wire types: the generated ones (from the Rust types), plus what the server adds while
// serialising (`seq`) and the client's own frames and rpc methods, which are written by hand.
import type {
  ErrorBody,
  Message,
  Schedule,
  ServerFrame as GeneratedFrame,
  Side,
} from './generated/protocol.js';

export type * from './generated/protocol.js';

/** `reset {seq}`: the `?after=` seq is older than the thread's frame log; refetch, then continue from `seq`. */
export interface ResetFrame {
  type: 'reset';
  seq: number;
}

/**
 * A frame the server sends. Broadcast frames carry `seq` (per thread, strictly increasing);
 * `hello` carries the newest seq when the socket opened. Frames for one socket carry none.
 */
export type Frame = (GeneratedFrame & { seq?: number }) | ResetFrame;

/** The frame types. */
export type FrameType = Frame['type'];

/** The frame of one type: `FrameOf<'message_chunk'>`. */
export type FrameOf<T extends FrameType> = Extract<Frame, { type: T }>;

/** The thread's state as `status` frames report it. */
export type StatusFrame = FrameOf<'status'>;
/** A tool call's state as `tool` frames report it. */
export type ToolFrame = FrameOf<'tool'>;
/** An application event (`emit_thread_event`). */
export type EventFrame = FrameOf<'event'>;
/** An `error` frame: a bad client frame (with `id`), or a failed turn (broadcast). */
export type ErrorFrame = FrameOf<'error'>;
/** A schedule as now stored: sent when one is made, fires or is cancelled. */
export type ScheduleFrame = FrameOf<'schedule'>;

/** An rpc id: a string or a number. */
export type RpcId = string | number;

/** A page of messages (`get_messages`, `GET /api/threads/:id/messages`). */
export interface MessagePage {
  messages: Message[];
  total: number;
  has_more: boolean;
}

/** One call of the execution history (`get_tool_calls`, `GET /api/threads/:id/tool-calls`). */
export interface ToolCallRecord {
  id: string;
  tool: string;
  status: import('./generated/protocol.js').CallStatus;
  origin?: string;
  arguments?: unknown;
  result?: string | null;
  attempts?: number;
  attempt_log?: unknown[];
  steps?: unknown[];
  created_at?: number;
  started_at?: number | null;
  finished_at?: number | null;
  duration_ms?: number | null;
  interruptions?: number;
  last_error?: string | null;
  wake_at?: number | null;
  waiting_for?: unknown;
  /** The version of the tool's code the call's runs are on (null before its first start). */
  version?: number | null;
  [key: string]: unknown;
}

/** A page of the execution history. */
export interface ToolCallPage {
  tool_calls: ToolCallRecord[];
  total: number;
  has_more: boolean;
}

/** `get_messages` and the HTTP listing: paging and filters. */
export interface MessageQuery {
  limit?: number;
  offset?: number;
  order?: 'asc' | 'desc';
  include_silent?: boolean;
  depth?: number;
}

/** `inject_message` params (server key only). */
export interface InjectMessageParams {
  content: string;
  role?: 'user' | 'assistant' | 'system' | 'tool';
  id?: string;
  before_message_id?: string;
  tool_call_id?: string;
  name?: string;
  silent?: boolean;
  force_top_level?: boolean;
}

/**
 * What to schedule (`POST /api/threads/:id/schedules`, rpc `create_schedule`; the server key
 * only). Exactly one of `at`, `delay_seconds`, `every_seconds`, `cron` says when; exactly one
 * of `message`, `tool` says what. The server checks the rest and answers 400 naming the field.
 * Written by hand to match the Rust `ScheduleSpec` (crates/edgent/src/values/schedule.rs),
 * which is not part of the generated wire types.
 */
export interface ScheduleSpec {
  /** Once, at this instant (RFC 3339, e.g. `2026-11-25T09:00:00Z`); a past instant fires at once. */
  at?: string;
  /** Once, this many seconds from now. */
  delay_seconds?: number;
  /** Repeatedly, every this many seconds (at least 1; the first time one interval from now). */
  every_seconds?: number;
  /**
   * Repeatedly, at the times a cron expression names, in UTC: five fields (`0 9 * * 1-5`), six
   * with seconds first, or a nickname (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`).
   */
  cron?: string;
  /** Post this text as a user message. */
  message?: string;
  /** Queue a call of this tool. */
  tool?: string;
  /** The tool's arguments (only with `tool`; `{}` when absent). */
  arguments?: Record<string, unknown>;
  /** A label for people reading the list (at most 200 bytes). */
  name?: string;
}

/**
 * The fields of {@link ScheduleSpec}, checked against the Rust struct's JSON Schema (in
 * client/schema/protocol.schema.json) by client/tests/generated.test.mjs, so the hand-written
 * interface cannot drift from the server.
 */
export const SCHEDULE_SPEC_FIELDS = [
  'at',
  'delay_seconds',
  'every_seconds',
  'cron',
  'message',
  'tool',
  'arguments',
  'name',
] as const satisfies readonly (keyof ScheduleSpec)[];

/** What a schedule does, as its `action` field holds it. */
export type ScheduleAction = { message: string } | { tool: string; arguments: Record<string, unknown> };

/** `list_schedules`, `GET /api/threads/:id/schedules`: the thread's schedules, oldest first. */
export interface ScheduleList {
  schedules: Schedule[];
}

/**
 * One MCP server of a thread as `GET /api/threads/:id/mcp` shows it (docs/api.md): what the
 * thread keeps of it, without its URL's path or its session id. Written by hand to match the
 * Rust `McpServerState` (crates/edgent/src/api/mcp/inspect.rs); the fields are checked against
 * its JSON Schema by client/tests/generated.test.mjs.
 */
export interface McpServerState {
  /** The server's name in the prompt: the prefix of its tools' names. */
  name: string;
  /** The host (and port) of its URL. */
  host: string;
  /** Whether the thread holds an initialised session with it. */
  session_open: boolean;
  /** The protocol version the server answered `initialize` with, while the session is open. */
  protocol_version?: string;
  /** When its tools were listed (ms since the epoch). */
  listed_at?: number;
  /** When the list goes stale and is listed again (absent with a list: the server said it changed). */
  expires_at?: number;
  /** A server whose first listing failed offers nothing, and is not asked again until then. */
  paused_until?: number;
  /** Its tools, as the model is offered them. */
  tools: McpToolState[];
}

/** One tool of an MCP server. */
export interface McpToolState {
  /** The name the model sees: `<server>__<tool>`. */
  name: string;
  /** The server's own name for it. */
  tool: string;
  /** Its description, as offered. */
  description: string;
}

/** `GET /api/threads/:id/mcp`: every MCP server the thread reached (or tried to), by name. */
export interface McpServerList {
  servers: McpServerState[];
}

/** The fields of {@link McpServerState} (checked against the Rust struct's schema). */
export const MCP_SERVER_STATE_FIELDS = [
  'name',
  'host',
  'session_open',
  'protocol_version',
  'listed_at',
  'expires_at',
  'paused_until',
  'tools',
] as const satisfies readonly (keyof McpServerState)[];

/** The fields of {@link McpToolState} (checked against the Rust struct's schema). */
export const MCP_TOOL_STATE_FIELDS = ['name', 'tool', 'description'] as const satisfies readonly (keyof McpToolState)[];

/** Every rpc method: its params and its result. */
export interface RpcMethods {
  send_message: { params: { content: string; role?: 'user' }; result: { message_id: string } };
  inject_message: { params: InjectMessageParams; result: { message: Message } };
  queue_tool: {
    params: { name: string; args?: Record<string, unknown>; bindings?: Record<string, unknown> };
    result: { tool_call_id: string };
  };
  get_messages: { params: MessageQuery; result: MessagePage };
  force_turn: { params: { side?: Side }; result: { side: Side } };
  stop: { params: Record<string, never>; result: { ok: true } };
  approve_tool: {
    params: { tool_call_id: string; approved: boolean; reason?: string };
    result: { approved: boolean; tool_call_id: string };
  };
  get_tool_calls: { params: { limit?: number; offset?: number }; result: ToolCallPage };
  /** Answers the last user message again: the last answer is kept for clients, as `failed`. */
  regenerate: { params: Record<string, never>; result: { ok: true } };
  resume: { params: { after: number }; result: unknown };
  /** The active schedules; with `ended`, the done and cancelled ones too. */
  list_schedules: { params: { ended?: boolean }; result: ScheduleList };
  /** Makes a schedule (server key). */
  create_schedule: { params: ScheduleSpec; result: { schedule: Schedule } };
  /** Cancels an active schedule (server key). */
  cancel_schedule: { params: { schedule_id: string }; result: { schedule: Schedule } };
}

/** An rpc method's name. */
export type RpcMethod = keyof RpcMethods;

/** What a client sends. */
export type ClientFrame =
  | { type: 'ping' }
  | { type: 'rpc'; id: RpcId; method: string; params?: Record<string, unknown> };

export type { ErrorBody, Message, Schedule };
