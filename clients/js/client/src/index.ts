// @edgent/client: the HTTP API, a thread's WebSocket (rpc, heartbeat, reconnect + resume)
// and a framework-free thread state store.
export { EdgentClient, threadPath } from './http.js';
export type {
  ClientToken,
  ConfigDefinition,
  ConfigKind,
  CreateThreadRequest,
  CreatedThread,
  EdgentClientOptions,
  ThreadIndexRow,
  ThreadList,
  ThreadListQuery,
  ThreadSummary,
  TokenRequest,
  TokenScope,
} from './http.js';
export { ThreadConnection } from './connection.js';
export type {
  ConnectionEvents,
  ConnectionState,
  OpenEvent,
  ReconnectOptions,
  ThreadConnectionOptions,
  WebSocketConstructor,
  WebSocketLike,
} from './connection.js';
export { EdgentError, EdgentTimeoutError } from './errors.js';
export { ThreadStore, emptyThread, messageText, openThread, reduceThread } from './state.js';
export type {
  ReduceOptions,
  ThreadAction,
  ThreadEvent,
  ThreadSnapshot,
  ThreadStatusView,
  ThreadStoreOptions,
  ToolCallView,
} from './state.js';
export type * from './frames.js';
export { MCP_SERVER_STATE_FIELDS, MCP_TOOL_STATE_FIELDS, SCHEDULE_SPEC_FIELDS } from './frames.js';
