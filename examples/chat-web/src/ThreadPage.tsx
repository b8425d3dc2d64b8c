// The thread through `useThread` (@edgent/react): the socket, with every frame the thread sends.
// Streaming text, tool calls with their live status, approvals, stop, the connection's state,
// and a reload mid-answer that picks the answer up from its start (the saved `after` seq).
import { useEffect, useState, type FormEvent } from 'react';
import { useThread, messageText, type ThreadStore } from '@edgent/react';
import type { Message, ToolCall } from '@edgent/client';
import { EDGENT_URL, type Credentials } from './credentials';
import { Badge, Json } from './ui';

const resumeKey = (threadId: string) => `edgent-chat-web:after:${threadId}`;

/** The seq saved while the thread was last idle (sessionStorage: this tab only). */
function savedAfter(threadId: string): number | undefined {
  const raw = window.sessionStorage.getItem(resumeKey(threadId));
  const seq = raw === null ? NaN : Number(raw);
  return Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined;
}

/**
 * Saves the newest seq seen while the thread is idle. During an answer the saved seq stays the
 * one from before it began, so a reload replays the whole answer in progress (`after`), not
 * only what follows the reload.
 */
function useResumePoint(store: ThreadStore | null, threadId: string): void {
  useEffect(() => {
    if (!store) return;
    const conn = store.connection;
    // Unknown until a status frame says (the store may hold one already).
    const known = store.getSnapshot().status;
    let running: boolean | null = known ? known.state === 'running' : null;
    return conn.on('frame', (frame) => {
      if (frame.type === 'status') running = frame.state === 'running';
      if (running === false && conn.lastSeq !== undefined) {
        window.sessionStorage.setItem(resumeKey(threadId), String(conn.lastSeq));
      }
    });
  }, [store, threadId]);
}

function isWaitingForApproval(waitingFor: unknown): boolean {
  return (waitingFor as { approval?: unknown } | undefined)?.approval === 'pending';
}

export function ThreadPage({ threadId, token }: Credentials) {
  // Read once per page load: the seq this tab saved before a reload, if any.
  const [after] = useState(() => savedAfter(threadId));
  const thread = useThread({ url: EDGENT_URL, threadId, token, after });
  const { messages, toolCalls, events, status, connection, loaded, error, store } = thread;
  useResumePoint(store, threadId);
  const [actionError, setActionError] = useState<string | null>(null);

  const run = (action: () => Promise<unknown>) => {
    setActionError(null);
    action().catch((e: unknown) => setActionError(e instanceof Error ? e.message : String(e)));
  };

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const input = e.currentTarget.elements.namedItem('text') as HTMLInputElement;
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    run(() => thread.send(text));
  };

  // Tool results are shown under the call they answer, not as messages of their own.
  const results = new Map<string, Message>();
  for (const m of messages) if (m.role === 'tool' && m.tool_call_id) results.set(m.tool_call_id, m);
  const shown = messages.filter((m) => m.depth === 0 && m.role !== 'tool');
  const inMessages = new Set(shown.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
  const otherCalls = Object.values(toolCalls).filter((c) => !inMessages.has(c.tool_call_id));
  const running = status?.state === 'running';

  const renderCall = (call: Pick<ToolCall, 'id' | 'name'> & { arguments?: string }) => {
    const view = toolCalls[call.id];
    const result = results.get(call.id);
    const waiting = view?.status === 'waiting' && isWaitingForApproval(view.waiting_for);
    return (
      <div className="tool" key={call.id}>
        <div className="tool-head">
          <code>{call.name}</code>
          <Badge status={view?.status ?? (result ? 'success' : 'queued')} />
          {view?.attempt !== undefined && view.attempt > 1 && <span className="muted">attempt {view.attempt}</span>}
          {view?.wake_at !== undefined && (
            <span className="muted">until {new Date(view.wake_at).toLocaleTimeString()}</span>
          )}
        </div>
        {call.arguments !== undefined && <Json label="arguments" text={call.arguments} />}
        {view?.error && <p className="error">{view.error}</p>}
        {result && <Json label="result" text={result.content} />}
        {waiting && (
          <div className="approval">
            <span>Waiting for your approval</span>
            <button onClick={() => run(() => thread.approve(call.id, true))}>Approve</button>
            <button
              className="secondary"
              onClick={() => run(() => thread.approve(call.id, false, 'rejected in the example page'))}
            >
              Reject
            </button>
          </div>
        )}
      </div>
    );
  };

  return (
    <section className="page">
      <div className="bar">
        <span className={`dot ${connection}`} title="the socket's state" />
        <span>{connection}</span>
        <span className="muted">thread {status?.state ?? '…'}</span>
        {after !== undefined && <span className="muted">resumed after seq {after}</span>}
      </div>

      <div className="messages">
        {!loaded && <p className="muted">Loading the conversation…</p>}
        {loaded && shown.length === 0 && <p className="muted">No messages yet. Say hello.</p>}
        {shown.map((m) => {
          const snapshot = store?.getSnapshot();
          const text = snapshot ? messageText(snapshot, m) : m.content;
          return (
            <article key={m.id} className={`msg ${m.role} ${m.status}`}>
              <header>
                {m.role}
                {m.status === 'pending' && <span className="muted"> writing…</span>}
                {m.status === 'failed' && <span className="error"> failed</span>}
              </header>
              {text && <p className="text">{text}</p>}
              {(m.tool_calls ?? []).map(renderCall)}
            </article>
          );
        })}
        {otherCalls.length > 0 && (
          <article className="msg tool-calls">
            <header>other tool calls</header>
            {otherCalls.map((c) => renderCall({ id: c.tool_call_id, name: c.name }))}
          </article>
        )}
      </div>

      {events.length > 0 && (
        <details className="events">
          <summary>{events.length} thread events</summary>
          {events.map((e, i) => (
            <Json key={i} label={e.event} text={JSON.stringify(e.data)} />
          ))}
        </details>
      )}

      {(error || actionError) && (
        <p role="alert" className="error">
          {actionError ?? `${error?.code}: ${error?.message}`}
        </p>
      )}

      {status?.state === 'stopped' && (
        <p className="muted">This thread is stopped. Run <code>npm run open</code> for a new one.</p>
      )}

      <form onSubmit={onSubmit} className="composer">
        <input name="text" placeholder="Ask the support agent…" autoComplete="off" disabled={status?.state === 'stopped'} />
        <button type="submit" disabled={connection === 'closed' || status?.state === 'stopped'}>
          Send
        </button>
        {running && (
          <button
            type="button"
            className="secondary"
            title="stop: ends the thread for good (no more turns)"
            onClick={() => run(() => thread.stop())}
          >
            Stop
          </button>
        )}
        {!running && shown.at(-1)?.role === 'assistant' && (
          <button type="button" className="secondary" onClick={() => run(() => thread.regenerate())}>
            Regenerate
          </button>
        )}
      </form>
    </section>
  );
}
