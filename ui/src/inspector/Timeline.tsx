// The thread's messages at every depth: the main conversation (silent messages included), each
// sub-prompt's messages (depth 1) under the call they answered, and the child threads the
// thread created.
import type { Message } from '@edgent/client';
import { useApi, useLoad } from '../api';
import { Badge, ErrorNote, Json, Time } from '../components';
import { href } from '../route';
import { usePagedList } from './paging';
import { PageFooter } from './parts';

const PAGE = 50;
/** Sub-prompt messages come in one large page per read: they are shown inside the main ones. */
const SUB_PAGE = 200;

export function Timeline({ threadId, tick }: { threadId: string; tick: number }) {
  const { client } = useApi();
  const main = usePagedList(
    (offset, limit) =>
      client
        .getMessages(threadId, { offset, limit, include_silent: true })
        .then((p) => ({ items: p.messages, total: p.total, hasMore: p.has_more })),
    threadId,
    PAGE,
    tick,
  );
  const sub = usePagedList(
    (offset, limit) =>
      client.getMessages(threadId, { offset, limit, depth: 1 }).then((p) => ({ items: p.messages, total: p.total, hasMore: p.has_more })),
    threadId,
    SUB_PAGE,
    tick,
  );
  const children = useLoad(() => client.listThreads({ parent: threadId, limit: 100 }), [client, threadId, tick]);

  const byCall = new Map<string, Message[]>();
  for (const m of sub.items) {
    const call = m.parent_tool_call_id ?? '';
    byCall.set(call, [...(byCall.get(call) ?? []), m]);
  }
  const shownCalls = new Set(main.items.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
  // Sub-prompt messages whose call is not on the pages shown (yet).
  const elsewhere = main.hasMore ? [] : sub.items.filter((m) => !shownCalls.has(m.parent_tool_call_id ?? ''));

  return (
    <div className="stack">
      {main.items.length === 0 && !main.loading && !main.error && <p className="muted">No messages yet.</p>}
      {main.items.length > 0 && (
        <ol className="timeline" aria-label="Messages">
          {main.items.map((m) => (
            <MessageItem key={m.id} message={m} subMessages={byCall} />
          ))}
        </ol>
      )}
      <PageFooter list={main} noun="messages" />
      {elsewhere.length > 0 && (
        <section aria-labelledby="other-sub-heading">
          <h2 id="other-sub-heading">Other sub-prompt messages</h2>
          <ol className="timeline">
            {elsewhere.map((m) => (
              <MessageItem key={m.id} message={m} subMessages={byCall} />
            ))}
          </ol>
        </section>
      )}
      {sub.hasMore && <PageFooter list={sub} noun="sub-prompt messages" />}
      <ErrorNote>{sub.error}</ErrorNote>
      <section aria-labelledby="children-heading">
        <h2 id="children-heading">Child threads</h2>
        <ErrorNote>{children.error}</ErrorNote>
        {children.data && children.data.threads.length === 0 && <p className="muted">None: this thread has not called a dual-AI agent.</p>}
        {children.data && children.data.threads.length > 0 && (
          <ul className="children">
            {children.data.threads.map((t) => (
              <li key={t.thread_id}>
                <a href={href({ page: 'thread', threadId: t.thread_id, query: new URLSearchParams() })}>
                  {t.title ?? t.thread_id}
                </a>{' '}
                <span className="muted">{t.agent_id}</span> <Badge state={t.status} /> <Time ms={t.created_at} />
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  );
}

function MessageItem({ message: m, subMessages }: { message: Message; subMessages: Map<string, Message[]> }) {
  const sub = m.depth > 0;
  return (
    <li className={`msg msg-${m.role}${sub ? ' msg-sub' : ''}`}>
      <div className="row msg-head">
        <strong>{m.role}</strong>
        {m.name && <span className="muted">{m.name}</span>}
        {m.side && <span className="muted">side {m.side}</span>}
        {m.status !== 'completed' && <Badge state={m.status} />}
        {m.silent && <Badge state="silent">silent</Badge>}
        {sub && <Badge state="sub">sub-prompt</Badge>}
        <span className="spacer" />
        <Time ms={m.created_at} />
      </div>
      {m.tool_call_id && (
        <p className="muted small">
          answers call <code>{m.tool_call_id}</code>
        </p>
      )}
      {m.content ? (
        <p className="content">{m.content}</p>
      ) : (
        !m.tool_calls?.length && <p className="muted small">{m.status === 'pending' ? '(being written)' : '(empty)'}</p>
      )}
      {m.tool_calls && m.tool_calls.length > 0 && (
        <ul className="calls" aria-label="Tool calls">
          {m.tool_calls.map((c) => {
            const answered = subMessages.get(c.id) ?? [];
            return (
              <li key={c.id}>
                <div className="row">
                  <span>
                    calls <strong>{c.name}</strong>
                  </span>
                  <code className="muted">{c.id}</code>
                </div>
                <Json value={c.arguments} label={`Arguments of ${c.name}`} />
                {answered.length > 0 && (
                  <ol className="timeline sub" aria-label={`Sub-prompt of ${c.name}`}>
                    {answered.map((s) => (
                      <MessageItem key={s.id} message={s} subMessages={subMessages} />
                    ))}
                  </ol>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </li>
  );
}
