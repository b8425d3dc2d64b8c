// The same thread through the AI SDK's `useChat` (@ai-sdk/react) and its stock
// `DefaultChatTransport`, posting to `POST /api/threads/:id/chat`: no adapter code. Text parts,
// tool parts with their state, approvals answered with `addToolApprovalResponse`, data parts
// (`data-notification`…), and `resume: true` for a reload mid-answer.
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type DynamicToolUIPart,
  type UIMessage,
} from 'ai';
import { EdgentClient } from '@edgent/client';
import { EDGENT_URL, type Credentials } from './credentials';
import { loadHistory } from './history';
import { Badge, Json } from './ui';

export function ChatPage({ threadId, token }: Credentials) {
  const client = useMemo(() => new EdgentClient({ url: EDGENT_URL, token }), [token]);
  const [initial, setInitial] = useState<UIMessage[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    loadHistory(client, threadId).then(
      (messages) => live && setInitial(messages),
      (e: unknown) => live && setLoadError(e instanceof Error ? e.message : String(e)),
    );
    return () => {
      live = false;
    };
  }, [client, threadId]);
  if (loadError) return <p className="error">Could not load the thread: {loadError}</p>;
  if (!initial) return <p className="muted">Loading the conversation…</p>;
  // Mounted once the history is there: useChat reads `messages` and resumes when it mounts.
  return <ChatView threadId={threadId} token={token} client={client} initial={initial} />;
}

interface ToolStatus {
  status: string;
  attempt?: number;
  wake_at?: number;
}

function ChatView({ threadId, token, client, initial }: Credentials & { client: EdgentClient; initial: UIMessage[] }) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: `${EDGENT_URL}/api/threads/${encodeURIComponent(threadId)}/chat`,
        headers: { authorization: `Bearer ${token}` },
      }),
    [threadId, token],
  );
  // Each status change of a call arrives as a transient `data-tool-status` part: not kept in
  // `messages`, seen in onData. The newest per call is shown beside its tool part.
  const [toolStatus, setToolStatus] = useState<Record<string, ToolStatus>>({});
  const [actionError, setActionError] = useState<string | null>(null);
  const { messages, sendMessage, status, error, stop, regenerate, addToolApprovalResponse } = useChat({
    id: threadId,
    messages: initial,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onData: (part) => {
      if (part.type === 'data-tool-status' && typeof part.id === 'string') {
        const id = part.id;
        setToolStatus((s) => ({ ...s, [id]: part.data as ToolStatus }));
      }
    },
  });
  const busy = status === 'submitted' || status === 'streaming';

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const input = e.currentTarget.elements.namedItem('text') as HTMLInputElement;
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    void sendMessage({ text });
  };

  const stopThread = async () => {
    setActionError(null);
    await stop(); // the SDK stops reading the stream…
    try {
      await client.stop(threadId); // …and the thread stops for good (useChat's stop alone would not)
    } catch (e) {
      setActionError(e instanceof Error ? e.message : String(e));
    }
  };

  const renderTool = (part: DynamicToolUIPart) => {
    const live = toolStatus[part.toolCallId];
    return (
      <div className="tool" key={part.toolCallId}>
        <div className="tool-head">
          <code>{part.toolName}</code>
          <Badge status={part.state} />
          {live && live.status !== 'success' && live.status !== 'error' && part.state === 'input-available' && (
            <Badge status={live.status} />
          )}
          {live?.attempt !== undefined && live.attempt > 1 && <span className="muted">attempt {live.attempt}</span>}
        </div>
        <Json label="input" text={JSON.stringify(part.input)} />
        {part.state === 'output-available' && <Json label="output" text={JSON.stringify(part.output)} />}
        {part.state === 'output-error' && <p className="error">{part.errorText}</p>}
        {part.state === 'approval-requested' && (
          <div className="approval">
            <span>Waiting for your approval</span>
            <button onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}>Approve</button>
            <button
              className="secondary"
              onClick={() =>
                void addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'denied in the example page' })
              }
            >
              Deny
            </button>
          </div>
        )}
        {part.state === 'approval-responded' && (
          <p className="muted">{part.approval.approved ? 'approved' : 'denied'}: sending the decision…</p>
        )}
      </div>
    );
  };

  return (
    <section className="page">
      <div className="bar">
        <span className={`dot ${busy ? 'open' : status === 'error' ? 'closed' : 'idle'}`} />
        <span>useChat: {status}</span>
      </div>

      <div className="messages">
        {messages.length === 0 && <p className="muted">No messages yet. Say hello.</p>}
        {messages.map((m) => (
          <article key={m.id} className={`msg ${m.role}`}>
            <header>{m.role}</header>
            {m.parts.map((part, i) => {
              if (part.type === 'text') return <p key={i} className="text">{part.text}</p>;
              if (part.type === 'dynamic-tool') return renderTool(part);
              if (part.type.startsWith('data-')) {
                const data = (part as { data?: unknown }).data;
                return (
                  <div key={i} className="data">
                    <code>{part.type}</code>
                    <Json label="data" text={JSON.stringify(data)} />
                  </div>
                );
              }
              return null; // step-start and the rest
            })}
          </article>
        ))}
      </div>

      {(error || actionError) && (
        <p role="alert" className="error">
          {actionError ?? error?.message}
        </p>
      )}

      <form onSubmit={onSubmit} className="composer">
        <input name="text" placeholder="Ask the support agent…" autoComplete="off" />
        <button type="submit" disabled={busy}>
          Send
        </button>
        {busy && (
          <button type="button" className="secondary" title="ends the thread for good" onClick={() => void stopThread()}>
            Stop
          </button>
        )}
        {!busy && messages.at(-1)?.role === 'assistant' && (
          <button type="button" className="secondary" onClick={() => void regenerate()}>
            Regenerate
          </button>
        )}
      </form>
    </section>
  );
}
