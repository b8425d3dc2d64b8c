// Picking an agent and starting a thread with it, and the newest threads to go back to
// (server key only: listing agents and threads needs it).
import { useEffect, useId, useState, type FormEvent } from 'react';
import type { ConfigDefinition, ThreadIndexRow } from '@edgent/client';
import { describe, useApi, useLoad } from '../api';
import { Badge, ErrorNote, Time } from '../components';
import { href } from '../route';

interface AgentChoice {
  id: string;
  kind: string;
  description: string;
}

function agentChoice(def: ConfigDefinition): AgentChoice {
  return {
    id: String(def.id ?? def.name ?? ''),
    kind: typeof def.kind === 'string' ? def.kind : 'ai_human',
    description: typeof def.description === 'string' ? def.description : '',
  };
}

/** How often the recent threads are listed again while one of them is running. */
const RECENT_REFRESH_MS = 2_000;

export function StartThread({ onThread }: { onThread: (id: string) => void }) {
  const { client } = useApi();
  const agents = useLoad(async () => (await client.listConfig('agents')).map(agentChoice).filter((a) => a.id), [client]);
  const recent = useLoad(async () => (await client.listThreads({ limit: 10 })).threads, [client]);
  // The list is the thread index, which lags a thread by up to about a second (docs/api.md):
  // while a listed thread shows as running, look again, so a turn that has ended shows idle.
  const running = recent.data?.some((t) => t.status === 'running') ?? false;
  const { data: recentRows, reload: reloadRecent } = recent;
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(reloadRecent, RECENT_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [running, recentRows, reloadRecent]);
  const [chosen, setChosen] = useState('');
  const [starting, setStarting] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const selectId = useId();
  const descriptionId = useId();

  const list = agents.data ?? [];
  // A person chatting wants an agent that answers them: the first ai_human one, unless chosen.
  const agent = list.find((a) => a.id === chosen) ?? list.find((a) => a.kind === 'ai_human') ?? list[0];

  const start = async (e: FormEvent) => {
    e.preventDefault();
    if (!agent) return;
    setStarting(true);
    setError(null);
    try {
      const created = await client.createThread({ agent_id: agent.id });
      onThread(created.thread_id);
    } catch (err) {
      setError(describe(err));
      setStarting(false);
    }
  };

  return (
    <div className="pg-start">
      <h1>Playground</h1>
      <section className="panel" aria-labelledby={`${selectId}-heading`}>
        <h2 id={`${selectId}-heading`}>Start a thread</h2>
        {agents.loading && !agents.data && <p className="muted">Loading the agents…</p>}
        <ErrorNote>{agents.error && `Could not list the agents: ${agents.error}`}</ErrorNote>
        {agents.data && list.length === 0 && (
          <p>
            No agent is configured yet. Add one under <a href={href({ page: 'config', kind: 'agents' })}>Configuration</a>.
          </p>
        )}
        {agent && (
          <form className="stack" onSubmit={start}>
            <label htmlFor={selectId}>Agent</label>
            <select
              id={selectId}
              value={agent.id}
              onChange={(e) => setChosen(e.target.value)}
              aria-describedby={descriptionId}
            >
              {list.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.id} ({a.kind.replace(/_/g, ' ')})
                </option>
              ))}
            </select>
            <p id={descriptionId} className="muted pg-agent-description">
              {agent.description || 'No description.'}
            </p>
            <div className="row">
              <button type="submit" disabled={starting}>
                {starting ? 'Starting…' : 'Start thread'}
              </button>
            </div>
            <ErrorNote>{error}</ErrorNote>
          </form>
        )}
      </section>
      <RecentThreads rows={recent.data} error={recent.error} loading={recent.loading} />
    </div>
  );
}

function RecentThreads({ rows, error, loading }: { rows: ThreadIndexRow[] | undefined; error: string | null; loading: boolean }) {
  return (
    <section className="panel" aria-labelledby="pg-recent-heading">
      <h2 id="pg-recent-heading">Recent threads</h2>
      <ErrorNote>{error && `Could not list the threads: ${error}`}</ErrorNote>
      {loading && !rows && <p className="muted">Loading…</p>}
      {rows && rows.length === 0 && <p className="muted">No threads yet.</p>}
      {rows && rows.length > 0 && (
        <ul className="pg-recent">
          {rows.map((t) => (
            <li key={t.thread_id}>
              <a href={href({ page: 'playground', threadId: t.thread_id })}>{t.title?.trim() || `Untitled thread ${t.thread_id.slice(0, 8)}`}</a>
              <span className="row pg-recent-meta">
                <span className="muted">{t.agent_id}</span>
                <Badge state={t.status} />
                <span className="muted">
                  updated <Time ms={t.updated_at} />
                </span>
              </span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
