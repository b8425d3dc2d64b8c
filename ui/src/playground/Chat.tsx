// One thread's chat, live over its socket (useThread): the conversation, the composer, the
// thread's state, and the controls. A reload resumes the socket from the seq saved in this tab
// (resume.ts), so an answer being written is replayed from its start and then followed live.
import { useCallback, useId, useState, type FormEvent, type KeyboardEvent } from 'react';
import { useThread } from '@edgent/react';
import type { Message } from '@edgent/client';
import { describe, useApi } from '../api';
import { Badge, ErrorNote } from '../components';
import { href } from '../route';
import { EDGENT_URL, lastSeq } from '../session';
import { Conversation } from './Conversation';
import { Controls } from './Controls';
import { useResumePoint } from './resume';
import { useDualAi, useSummary, useWebhookUrls } from './threadInfo';

/** Error codes of a failed turn (the rest are a socket's or an rpc's). */
const isTurnFailure = (code: string) => (code.startsWith('model_') && code !== 'model_retry') || code === 'max_steps';

export function Chat({ threadId }: { threadId: string }) {
  const api = useApi();
  const { client, isServer, session } = api;
  // Read once per page load: where this tab's last socket to the thread was.
  const [after] = useState(() => lastSeq(threadId));
  const thread = useThread({ url: EDGENT_URL, threadId, token: session.credential, after });
  const { store, status, connection, error } = thread;
  useResumePoint(store, threadId);
  const summary = useSummary(client, threadId, status);
  const dualAi = useDualAi(client, isServer, summary?.agent_id);
  const webhookUrls = useWebhookUrls(client, threadId, isServer, thread.toolCalls);
  const [injected, setInjected] = useState<ReadonlySet<string>>(() => new Set());
  const onInjected = useCallback((m: Message) => setInjected((s) => new Set(s).add(m.id)), []);

  const mayApprove = isServer || (session.kind === 'token' && session.scopes.includes('approve'));
  const approve = thread.approve;
  const approval = mayApprove ? { approve } : null;
  const stopped = status?.state === 'stopped';
  const failure = error && isTurnFailure(error.code) ? error.message : (summary?.last_error ?? null);
  // A model attempt that failed and is retried is news, not an error: the turn goes on.
  const retryNote = error?.code === 'model_retry' && status?.state === 'running' ? error.message : null;
  const shownError = error && error.code !== 'model_retry' ? describe(error) : null;

  return (
    <div className="pg-chat">
      <div className="pg-main stack">
        <div className="row pg-title">
          <h1>
            Playground{summary ? <span className="muted">: {summary.agent_id}</span> : null}
          </h1>
          <span className="spacer" />
          {isServer && <a href={href({ page: 'thread', threadId, query: new URLSearchParams() })}>Inspect</a>}
        </div>
        <p className="row pg-status" role="status" aria-label="Thread status">
          <span>
            Thread {status ? <Badge state={status.state} /> : <span className="muted">…</span>}
          </span>
          {status && <span>turn {status.turn}</span>}
          {status && <span>side {status.side}</span>}
          <span>
            socket <Badge state={connection === 'open' ? 'ok' : connection === 'closed' ? 'error' : 'retrying'}>{connection}</Badge>
          </span>
        </p>
        <Conversation
          messages={thread.messages}
          streaming={thread.streaming}
          toolCalls={thread.toolCalls}
          loaded={thread.loaded}
          failure={failure}
          injected={injected}
          showSides={dualAi}
          webhookUrls={webhookUrls}
          approval={approval}
        />
        {retryNote && <p className="muted">{retryNote}</p>}
        <ErrorNote>{shownError}</ErrorNote>
        {stopped && <p className="muted">This thread is stopped: it takes no more messages.</p>}
        <Composer
          send={thread.send}
          blocked={stopped ? 'The thread is stopped.' : connection !== 'open' ? `Not connected (the socket is ${connection}).` : null}
        />
      </div>
      <aside className="pg-side" aria-label="Thread controls">
        <Controls store={store} isServer={isServer} dualAi={dualAi} stopped={stopped} onInjected={onInjected} />
      </aside>
    </div>
  );
}

/** `blocked` says why nothing can be sent now (null: it can). A failed send keeps the text; its error shows above (the store's). */
function Composer({ send, blocked }: { send: (content: string) => Promise<unknown>; blocked: string | null }) {
  const [text, setText] = useState('');
  const [sending, setSending] = useState(false);
  const id = useId();
  const disabled = blocked !== null;

  const submit = async (e?: FormEvent) => {
    e?.preventDefault();
    const content = text.trim();
    if (!content || disabled || sending) return;
    setSending(true);
    try {
      await send(content);
      setText('');
    } catch {
      // Kept for another try; the store holds the error, shown above the composer.
    } finally {
      setSending(false);
    }
  };

  // Enter sends; Shift+Enter is a new line; Enter that ends an IME composition is not a send.
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void submit();
    }
  };

  return (
    <form className="stack pg-composer" onSubmit={submit}>
      <label htmlFor={id}>Message</label>
      <textarea
        id={id}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
        disabled={disabled}
        aria-describedby={`${id}-hint`}
        rows={3}
      />
      <div className="row">
        <button type="submit" disabled={disabled || sending || !text.trim()}>
          {sending ? 'Sending…' : 'Send'}
        </button>
        <span id={`${id}-hint`} className="muted pg-hint">
          {blocked ?? 'Enter sends, Shift+Enter adds a line.'}
        </span>
      </div>
    </form>
  );
}
