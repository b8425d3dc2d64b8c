// The conversation, in history order: each message with its role and state, the text of a
// pending answer as it streams, and the tool calls an assistant message made (their results
// under them, not as messages of their own). Sub-prompt messages (depth ≥ 1) belong to the
// inspector, not the chat.
import { useEffect, useRef } from 'react';
import type { Message, ThreadSnapshot } from '@edgent/client';
import { Badge, Time } from '../components';
import { ToolCallCard, isWaitingForApproval, type ApprovalActions, type CallShown } from './ToolCallCard';

export interface ConversationProps {
  messages: ThreadSnapshot['messages'];
  streaming: ThreadSnapshot['streaming'];
  toolCalls: ThreadSnapshot['toolCalls'];
  loaded: boolean;
  /** Why the newest failed answer failed, when known (the turn's error). */
  failure: string | null;
  /** Ids of messages this page injected. */
  injected: ReadonlySet<string>;
  /** Name the side of each answer (a dual-AI agent, where both sides answer). */
  showSides: boolean;
  webhookUrls: Readonly<Record<string, string>>;
  approval: ApprovalActions | null;
}

const ROLE_NAMES: Record<Message['role'], string> = { user: 'User', assistant: 'Assistant', system: 'System', tool: 'Tool result' };

export function Conversation(props: ConversationProps) {
  const { messages, streaming, toolCalls, loaded, failure, injected, showSides, webhookUrls, approval } = props;
  const topLevel = messages.filter((m) => !m.depth);
  // Tool results are shown under the call they answer.
  const results = new Map<string, Message>();
  for (const m of topLevel) if (m.role === 'tool' && m.tool_call_id) results.set(m.tool_call_id, m);
  const callsShown = new Set(topLevel.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
  const shown = topLevel.filter((m) => m.role !== 'tool' || !m.tool_call_id || !callsShown.has(m.tool_call_id));
  const lastFailed = [...shown].reverse().find((m) => m.status === 'failed' && m.role === 'assistant');
  // Calls no message on the page made are still live here while they are open: those queued by
  // `queue_tool` or a tool (a reminder sleeping, a workflow waiting for its webhook), and those of
  // older history or a sub-prompt waiting for approval. A finished one shows as its tool result.
  const openElsewhere = Object.values(toolCalls).filter(
    (c) => !callsShown.has(c.tool_call_id) && (isWaitingForApproval(c) || (c.status !== 'success' && c.status !== 'error')),
  );

  useFollowNewest(shown.length + Object.values(streaming).reduce((n, text) => n + text.length, 0));

  const renderCall = (call: CallShown) => (
    <li key={call.id}>
      <ToolCallCard call={call} view={toolCalls[call.id]} result={results.get(call.id)} webhookUrl={webhookUrls[call.id]} approval={approval} />
    </li>
  );

  return (
    <div className="pg-conversation" role="log" aria-label="Conversation">
      {!loaded && <p className="muted">Loading the conversation…</p>}
      {loaded && shown.length === 0 && <p className="muted">No messages yet. Write the first one below.</p>}
      <ol className="pg-messages">
        {shown.map((m) => {
          const text = m.status === 'pending' ? (streaming[m.id] ?? m.content) : m.content;
          const marked = m.role === 'system' || injected.has(m.id);
          return (
            <li key={m.id} className={`pg-msg pg-role-${m.role}${marked ? ' pg-marked' : ''}${m.status === 'failed' ? ' pg-failed' : ''}`}>
              <div className="row pg-msg-head">
                <span className="pg-role">{m.role === 'tool' && m.name ? `Tool result (${m.name})` : ROLE_NAMES[m.role]}</span>
                {showSides && m.side && <span className="muted">side {m.side}</span>}
                {m.role === 'system' && <Badge state="system">system message</Badge>}
                {injected.has(m.id) && <Badge state="injected">injected</Badge>}
                {m.silent && <Badge state="silent">silent</Badge>}
                {m.status === 'pending' && <Badge state="running">writing…</Badge>}
                {m.status === 'failed' && <Badge state="failed">failed</Badge>}
                <span className="spacer" />
                <span className="muted pg-time">
                  <Time ms={m.created_at} />
                </span>
              </div>
              {text ? <div className="pg-text">{text}</div> : m.status === 'pending' && <div className="muted">…</div>}
              {m.status === 'failed' && m === lastFailed && failure && <p className="pg-call-error">Error: {failure}</p>}
              {m.tool_calls && m.tool_calls.length > 0 && (
                <ul className="pg-calls" aria-label="Tool calls">
                  {m.tool_calls.map((c) => renderCall({ id: c.id, name: c.name, arguments: c.arguments }))}
                </ul>
              )}
            </li>
          );
        })}
      </ol>
      {openElsewhere.length > 0 && (
        <section aria-label="Calls outside the conversation" className="pg-msg">
          <p className="muted">Calls still open that no message here made (queued, or of older history):</p>
          <ul className="pg-calls">{openElsewhere.map((c) => renderCall({ id: c.tool_call_id, name: c.name }))}</ul>
        </section>
      )}
    </div>
  );
}

/**
 * Keeps the newest message in view while it grows, as chats do, but only for a reader already
 * at the bottom: someone who scrolled up to read stays where they are.
 */
function useFollowNewest(size: number): void {
  const following = useRef(true);
  useEffect(() => {
    const update = () => {
      following.current = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
    };
    window.addEventListener('scroll', update, { passive: true });
    return () => window.removeEventListener('scroll', update);
  }, []);
  useEffect(() => {
    if (following.current) window.scrollTo({ top: document.documentElement.scrollHeight });
  }, [size]);
}
