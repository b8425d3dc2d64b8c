// @edgent/react: `useThread`, a thin useSyncExternalStore wrapper over @edgent/client's
// ThreadStore (all the state logic lives there, tested without React).
import { useCallback, useEffect, useState, useSyncExternalStore } from 'react';
import {
  EdgentError,
  emptyThread,
  openThread,
  type ThreadConnectionOptions,
  type ThreadSnapshot,
  type ThreadStore,
  type ThreadStoreOptions,
} from '@edgent/client';

/**
 * Options of {@link useThread}: where the thread is, the credential, and the connection's and
 * store's settings. `after` (a seq saved before a page reload) resumes the first socket from
 * there, so an answer in progress is replayed; like the other settings it is read when the
 * connection opens.
 */
export interface UseThreadOptions extends Omit<ThreadConnectionOptions, 'autoConnect'>, ThreadStoreOptions {}

/** What {@link useThread} returns: the thread's snapshot and its actions. */
export interface UseThreadResult {
  /** Messages in history order, merged by id. */
  messages: ThreadSnapshot['messages'];
  /** Streamed text of each pending assistant message, by message id. */
  streaming: ThreadSnapshot['streaming'];
  /** Tool calls by `tool_call_id`. */
  toolCalls: ThreadSnapshot['toolCalls'];
  /** Application events, oldest first. */
  events: ThreadSnapshot['events'];
  /** Schedules by id: the active ones (loaded at connect) and those that ended since. */
  schedules: ThreadSnapshot['schedules'];
  /** The thread's `{state, turn, side}`; `null` until known. */
  status: ThreadSnapshot['status'];
  /** The socket's state. */
  connection: ThreadSnapshot['connection'];
  /** The first page of messages has loaded. */
  loaded: boolean;
  /** The latest failure (a failed turn, rpc or socket). */
  error: EdgentError | null;
  /** Sends a user message (`send_message`). */
  send: (content: string) => Promise<{ message_id: string }>;
  /** Stops the thread (`stop`). */
  stop: () => Promise<void>;
  /** Answers the last user message again (`regenerate`). */
  regenerate: () => Promise<void>;
  /** Approves or rejects a call waiting for approval (`approve_tool`). */
  approve: (toolCallId: string, approved: boolean, reason?: string) => Promise<void>;
  /** The store itself (for rpc calls the hook does not wrap), once connected. */
  store: ThreadStore | null;
}

const noSubscribe = () => () => {};
const getEmpty = () => emptyThread;

function notConnected(): Promise<never> {
  return Promise.reject(new EdgentError(0, 'not_connected', 'the thread is not connected yet'));
}

/**
 * Connects to one thread and returns its live state. A new `url`, `threadId`, `token` or
 * `WebSocket` reconnects; the socket closes on unmount. The other options are read when the
 * connection opens.
 */
export function useThread(options: UseThreadOptions): UseThreadResult {
  const { url, threadId, token, WebSocket } = options;
  const [store, setStore] = useState<ThreadStore | null>(null);

  useEffect(() => {
    const s = openThread(options);
    setStore(s);
    return () => {
      s.close();
      setStore((current) => (current === s ? null : current));
    };
    // The connection's identity: other options apply at the next (re)connection.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [url, threadId, token, WebSocket]);

  const snapshot = useSyncExternalStore(
    store ? store.subscribe : noSubscribe,
    store ? store.getSnapshot : getEmpty,
    getEmpty,
  );

  const send = useCallback((content: string) => (store ? store.send(content) : notConnected()), [store]);
  const stop = useCallback(() => (store ? store.stop() : notConnected()), [store]);
  const regenerate = useCallback(() => (store ? store.regenerate() : notConnected()), [store]);
  const approve = useCallback(
    (toolCallId: string, approved: boolean, reason?: string) =>
      store ? store.approve(toolCallId, approved, reason) : notConnected(),
    [store],
  );

  return {
    messages: snapshot.messages,
    streaming: snapshot.streaming,
    toolCalls: snapshot.toolCalls,
    events: snapshot.events,
    schedules: snapshot.schedules,
    status: snapshot.status,
    connection: snapshot.connection,
    loaded: snapshot.loaded,
    error: snapshot.error,
    send,
    stop,
    regenerate,
    approve,
    store,
  };
}

export { messageText } from '@edgent/client';
export type { ThreadSnapshot, ThreadStore } from '@edgent/client';
