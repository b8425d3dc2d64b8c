import { EdgentError, errorFromBody } from './errors.js';
import type { McpServerList, Message, MessagePage, MessageQuery, Schedule, ScheduleList, ScheduleSpec, ToolCallPage } from './frames.js';
import { ThreadConnection, type ThreadConnectionOptions } from './connection.js';

/** A client token's scopes: `chat` (always implied) and `approve`. */
export type TokenScope = 'chat' | 'approve';

/** What to mint: `{scopes, ttl_seconds}` (TTL 60 s to 7 days, default 3600). */
export interface TokenRequest {
  scopes?: TokenScope[];
  ttl_seconds?: number;
}

/** A minted client token, bound to one thread. */
export interface ClientToken {
  /** `et1.<payload>.<signature>`: hand it to the browser. */
  token: string;
  /** When it expires, in seconds since the Unix epoch. */
  expires_at: number;
  scopes: TokenScope[];
  thread_id: string;
}

/** `POST /api/threads` body. */
export interface CreateThreadRequest {
  agent_id: string;
  tags?: string[];
  /** Also mint a client token for the new thread. */
  token?: TokenRequest;
}

/** `POST /api/threads` answer. */
export interface CreatedThread {
  thread_id: string;
  agent_id: string;
  created_at?: number;
  tags?: string[];
  /** Present when the request asked for a token. */
  token?: ClientToken;
}

/** `GET /api/threads/:id`: the thread's summary. */
export interface ThreadSummary {
  thread_id: string;
  agent_id: string;
  tags: string[];
  created_at: number;
  updated_at: number;
  status: 'idle' | 'running' | 'stopped';
  turn_count: number;
  steps: number;
  current_side: 'a' | 'b';
  stopped_by: string | null;
  last_error: string | null;
  message_count: number;
  tokens_used: number;
  cost_usd: number;
  result?: string;
  parent_thread_id?: string;
  /** The earliest due time of the thread's active schedules (ms since the epoch); absent when none. */
  next_schedule_at?: number;
  [key: string]: unknown;
}

/** `GET /api/threads` filters and paging (server key only). */
export interface ThreadListQuery {
  agent?: string;
  status?: 'idle' | 'running' | 'stopped';
  tag?: string;
  parent?: string;
  limit?: number;
  /** The previous page's `next_cursor` (opaque). */
  cursor?: string;
}

/** One row of the thread index. */
export interface ThreadIndexRow {
  thread_id: string;
  agent_id: string;
  status: string;
  title: string | null;
  tags: string[];
  parent: string | null;
  turn_count: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  [key: string]: unknown;
}

/** A page of the thread index, newest first; pass `next_cursor` as `cursor` for the next page (`null`: the last page). */
export interface ThreadList {
  threads: ThreadIndexRow[];
  next_cursor: string | null;
}

/** The configuration kinds. */
export type ConfigKind = 'models' | 'prompts' | 'agents';

/** A model, prompt or agent definition (see docs/api.md → Configuration). */
export type ConfigDefinition = Record<string, unknown>;

/** Options of {@link EdgentClient}. */
export interface EdgentClientOptions {
  /** The Worker's base URL, e.g. `https://edgent.you.workers.dev`. */
  url: string;
  /** The server key (servers only) or a client token (browsers). */
  token?: string;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

/**
 * The HTTP API. With the server key it can do everything (mint tokens, configuration, the
 * thread index); with a client token only what the token's scopes allow on its thread.
 */
export class EdgentClient {
  readonly url: string;
  readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(options: EdgentClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('no fetch: pass options.fetch');
    this.fetchImpl = f.bind(globalThis);
  }

  /**
   * Calls a route and returns its parsed JSON body; any status outside 2xx throws an
   * {@link EdgentError} built from the API's error body.
   */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    let res: Response;
    try {
      res = await this.fetchImpl(this.url + path, { method, headers, body: payload });
    } catch (e) {
      throw new EdgentError(0, 'network', `${method} ${path} failed: ${(e as Error)?.message ?? e}`);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    if (!res.ok) throw errorFromBody(res.status, parsed, text);
    if (text && parsed === undefined) throw errorFromBody(res.status, undefined, text);
    return parsed as T;
  }

  // ---- threads ----

  /** `GET /api/health` (no key needed). */
  health(): Promise<{ ok: boolean; version: string }> {
    return this.request('GET', '/api/health');
  }

  /** `GET /api/tools`: the registered tools and their JSON Schemas (server key). */
  tools(): Promise<{ tools: Array<Record<string, unknown>> }> {
    return this.request('GET', '/api/tools');
  }

  /** `POST /api/threads`: creates a thread, and mints a client token for it when asked. */
  createThread(request: CreateThreadRequest): Promise<CreatedThread> {
    return this.request('POST', '/api/threads', request);
  }

  /** `GET /api/threads/:id`: the thread's summary. */
  getThread(threadId: string): Promise<ThreadSummary> {
    return this.request('GET', threadPath(threadId));
  }

  /** `GET /api/threads`: a page of the thread index, newest first (server key). */
  listThreads(query: ThreadListQuery = {}): Promise<ThreadList> {
    return this.request('GET', `/api/threads${queryString(query)}`);
  }

  /** `DELETE /api/threads/:id`: erases the thread, its index row and so its tokens (server key). */
  deleteThread(threadId: string): Promise<{ deleted: string }> {
    return this.request('DELETE', threadPath(threadId));
  }

  // ---- messages ----

  /** `GET /api/threads/:id/messages`: one page of messages. */
  getMessages(threadId: string, query: MessageQuery = {}): Promise<MessagePage> {
    return this.request('GET', `${threadPath(threadId)}/messages${queryString(query)}`);
  }

  /** `POST /api/threads/:id/messages`: stores a user message and starts a turn. */
  sendMessage(threadId: string, content: string): Promise<{ message_id: string }> {
    return this.request('POST', `${threadPath(threadId)}/messages`, { content, role: 'user' });
  }

  // ---- tool calls ----

  /** `GET /api/threads/:id/tool-calls`: one page of the execution history. */
  getToolCalls(threadId: string, query: { limit?: number; offset?: number } = {}): Promise<ToolCallPage> {
    return this.request('GET', `${threadPath(threadId)}/tool-calls${queryString(query)}`);
  }

  /** Approves a call waiting for approval (`approve` scope). */
  approveToolCall(threadId: string, callId: string): Promise<{ approved: boolean; tool_call_id: string }> {
    return this.request('POST', `${threadPath(threadId)}/tool-calls/${encodeURIComponent(callId)}/approve`, {});
  }

  /** Rejects a call waiting for approval; the model reads `reason` (`approve` scope). */
  rejectToolCall(
    threadId: string,
    callId: string,
    reason?: string,
  ): Promise<{ approved: boolean; tool_call_id: string }> {
    const body = reason === undefined ? {} : { reason };
    return this.request('POST', `${threadPath(threadId)}/tool-calls/${encodeURIComponent(callId)}/reject`, body);
  }

  /** `POST /api/threads/:id/stop`: stops the thread for good. */
  stop(threadId: string): Promise<{ ok: boolean }> {
    return this.request('POST', `${threadPath(threadId)}/stop`);
  }

  // ---- schedules ----

  /**
   * `GET /api/threads/:id/schedules`: the thread's active schedules, oldest first; with
   * `ended: true` also the done and cancelled ones. A client token may list them.
   */
  listSchedules(threadId: string, query: { ended?: boolean } = {}): Promise<ScheduleList> {
    return this.request('GET', `${threadPath(threadId)}/schedules${query.ended ? '?ended=true' : ''}`);
  }

  /** `POST /api/threads/:id/schedules` (server key): makes a schedule; a bad spec is a 400 naming the field. */
  createSchedule(threadId: string, spec: ScheduleSpec): Promise<{ schedule: Schedule }> {
    return this.request('POST', `${threadPath(threadId)}/schedules`, spec);
  }

  /** `DELETE /api/threads/:id/schedules/:schedule_id` (server key): cancels an active schedule. */
  cancelSchedule(threadId: string, scheduleId: string): Promise<{ schedule: Schedule }> {
    return this.request('DELETE', `${threadPath(threadId)}/schedules/${encodeURIComponent(scheduleId)}`);
  }

  // ---- MCP servers ----

  /**
   * `GET /api/threads/:id/mcp`: what the thread keeps of its prompts' MCP servers (sessions,
   * tool lists and their times), by name. A client token may read its own thread's.
   */
  listMcpServers(threadId: string): Promise<McpServerList> {
    return this.request('GET', `${threadPath(threadId)}/mcp`);
  }

  // ---- tokens (server key) ----

  /** `POST /api/threads/:id/tokens`: mints a client token for one thread. */
  mintToken(threadId: string, request: TokenRequest = {}): Promise<ClientToken> {
    return this.request('POST', `${threadPath(threadId)}/tokens`, request);
  }

  /** `POST /api/threads/:id/tokens/revoke`: refuses every token minted so far for the thread. */
  revokeTokens(threadId: string): Promise<{ generation: number }> {
    return this.request('POST', `${threadPath(threadId)}/tokens/revoke`);
  }

  // ---- configuration (server key) ----

  /** `GET /api/{kind}`: every definition of that kind, ordered by name. */
  async listConfig(kind: ConfigKind): Promise<ConfigDefinition[]> {
    const body = await this.request<Record<string, ConfigDefinition[]>>('GET', `/api/${kind}`);
    return body[kind] ?? [];
  }

  /** `GET /api/{kind}/:name`. */
  getConfig(kind: ConfigKind, name: string): Promise<ConfigDefinition> {
    return this.request('GET', `/api/${kind}/${encodeURIComponent(name)}`);
  }

  /** `PUT /api/{kind}/:name`: creates or replaces the definition; answers the stored one. */
  putConfig(kind: ConfigKind, name: string, definition: ConfigDefinition): Promise<ConfigDefinition> {
    return this.request('PUT', `/api/${kind}/${encodeURIComponent(name)}`, definition);
  }

  /** `DELETE /api/{kind}/:name`. */
  deleteConfig(kind: ConfigKind, name: string): Promise<{ deleted: string }> {
    return this.request('DELETE', `/api/${kind}/${encodeURIComponent(name)}`);
  }

  /** `PUT /api/config`: writes many definitions as one validated set. */
  putConfigSet(set: { models?: ConfigDefinition[]; prompts?: ConfigDefinition[]; agents?: ConfigDefinition[] }): Promise<unknown> {
    return this.request('PUT', '/api/config', set);
  }

  // ---- the socket ----

  /** Opens a {@link ThreadConnection} to one thread with this client's URL and credential. */
  connect(threadId: string, options: Omit<ThreadConnectionOptions, 'url' | 'threadId' | 'token'> & { token?: string } = {}): ThreadConnection {
    const token = options.token ?? this.token;
    if (token === undefined) throw new TypeError('connect needs a token');
    return new ThreadConnection({ ...options, url: this.url, threadId, token });
  }
}

/** Shared by the HTTP client and the socket: `/api/threads/<id>`, the id URL-encoded. */
export function threadPath(threadId: string): string {
  return `/api/threads/${encodeURIComponent(threadId)}`;
}

function queryString(query: object): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null) params.set(k, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

export type { Message };
