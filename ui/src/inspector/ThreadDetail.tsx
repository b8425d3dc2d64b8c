// The inspector on one thread: its summary, then tabs (the tab is in the route's query) for the
// timeline, the tool calls, the model requests, the events, the schedules and the MCP servers.
// The thread's socket stays open while the page is: a change re-reads the summary and the open
// tab.
import type { ConnectionState } from '@edgent/client';
import { useApi, useLoad } from '../api';
import { Badge, ErrorNote, Tabs, type TabSpec } from '../components';
import { href, navigate } from '../route';
import { Events } from './Events';
import { useLiveThread } from './live';
import { McpServers } from './McpServers';
import { Requests } from './Requests';
import { Schedules } from './Schedules';
import { Summary } from './Summary';
import { Timeline } from './Timeline';
import { ToolCalls } from './ToolCalls';
import './inspector.css';

const TABS: TabSpec[] = [
  { id: 'timeline', label: 'Timeline' },
  { id: 'tools', label: 'Tool calls' },
  { id: 'requests', label: 'Requests' },
  { id: 'events', label: 'Events' },
  { id: 'schedules', label: 'Schedules' },
  { id: 'mcp', label: 'MCP' },
];

export function ThreadDetail({ threadId, query }: { threadId: string; query: URLSearchParams }) {
  const { client } = useApi();
  const requested = query.get('tab') ?? '';
  const tab = TABS.some((t) => t.id === requested) ? requested : 'timeline';
  const { thread, tick } = useLiveThread(threadId);
  const summary = useLoad(() => client.getThread(threadId), [client, threadId, tick]);

  const select = (id: string) => navigate({ page: 'thread', threadId, query: new URLSearchParams({ tab: id }) }, true);

  return (
    <section aria-labelledby="thread-heading" className="stack">
      <nav aria-label="Thread" className="row">
        <a href={href({ page: 'threads', query: new URLSearchParams() })}>← Back to threads</a>
        <span className="spacer" />
        <a href={href({ page: 'playground', threadId })}>Open in playground</a>
      </nav>
      <div className="row">
        <h1 id="thread-heading">
          Thread <code className="break">{threadId}</code>
        </h1>
        <span className="spacer" />
        <LiveIndicator state={thread.connection} />
        <button type="button" className="secondary" onClick={summary.reload} disabled={summary.loading}>
          Refresh summary
        </button>
      </div>
      <ErrorNote>{summary.error}</ErrorNote>
      {thread.connection === 'closed' && thread.error && <ErrorNote>Live updates stopped: {thread.error.message}</ErrorNote>}
      {summary.data && <Summary summary={summary.data} />}
      <Tabs tabs={TABS} selected={tab} onSelect={select} label="Thread views">
        {tab === 'timeline' && <Timeline threadId={threadId} tick={tick} />}
        {tab === 'tools' && <ToolCalls threadId={threadId} tick={tick} />}
        {tab === 'requests' && <Requests threadId={threadId} tick={tick} summary={summary.data} />}
        {tab === 'events' && <Events events={thread.events} />}
        {tab === 'schedules' && <Schedules threadId={threadId} tick={tick} />}
        {tab === 'mcp' && <McpServers threadId={threadId} tick={tick} />}
      </Tabs>
    </section>
  );
}

const CONNECTION_TEXT: Record<ConnectionState, string> = {
  connecting: 'connecting…',
  open: 'live',
  reconnecting: 'reconnecting…',
  closed: 'offline',
};

/** The socket's state, announced when it changes. */
function LiveIndicator({ state }: { state: ConnectionState }) {
  return (
    <span role="status" className="live" title="Live updates over the thread's socket">
      <span className={`live-dot live-${state}`} aria-hidden="true" />
      <span className="sr-only">Updates: </span>
      <Badge state={state === 'open' ? 'running' : state === 'closed' ? 'stopped' : 'retrying'}>{CONNECTION_TEXT[state]}</Badge>
    </span>
  );
}
