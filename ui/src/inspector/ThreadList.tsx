// The thread index (`GET /api/threads`): filters by agent, status and tag kept in the route's
// query (so a filtered view is a link), pages through the cursor with "Load more", newest first.
import { useCallback, useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { ThreadIndexRow, ThreadListQuery } from '@edgent/client';
import { describe, useApi, useLoad } from '../api';
import { Badge, ErrorNote, Time } from '../components';
import { href, navigate } from '../route';
import './inspector.css';

const STATUSES = ['idle', 'running', 'stopped'] as const;
type Status = (typeof STATUSES)[number];
const DEFAULT_LIMIT = 50;

interface Filters {
  agent: string;
  status: string;
  tag: string;
  /** Rows per page (1 to 200); the route may name any, the menu offers a few. */
  limit: number;
}

function filtersOf(query: URLSearchParams): Filters {
  const limit = Number(query.get('limit'));
  return {
    agent: query.get('agent') ?? '',
    status: query.get('status') ?? '',
    tag: query.get('tag') ?? '',
    limit: Number.isInteger(limit) && limit >= 1 && limit <= 200 ? limit : DEFAULT_LIMIT,
  };
}

function queryOf(f: Filters): URLSearchParams {
  const q = new URLSearchParams();
  if (f.agent) q.set('agent', f.agent);
  if (f.status) q.set('status', f.status);
  if (f.tag) q.set('tag', f.tag);
  if (f.limit !== DEFAULT_LIMIT) q.set('limit', String(f.limit));
  return q;
}

function isStatus(s: string): s is Status {
  return (STATUSES as readonly string[]).includes(s);
}

interface Listing {
  rows: ThreadIndexRow[];
  next: string | null;
  loading: boolean;
  error: string | null;
}

export function ThreadList({ query }: { query: URLSearchParams }) {
  const { client } = useApi();
  const filters = filtersOf(query);
  const key = queryOf(filters).toString();
  const agents = useLoad(() => client.listConfig('agents'), [client]);
  const agentIds = (agents.data ?? []).map((a) => String(a.id ?? a.name ?? '')).filter(Boolean);
  const [tag, setTag] = useState(filters.tag);
  const [listing, setListing] = useState<Listing>({ rows: [], next: null, loading: true, error: null });
  const [tick, setTick] = useState(0);
  // Bumped by every first-page load, so a "Load more" answer for a replaced list is dropped.
  const generation = useRef(0);
  const id = useId();

  const setFilters = useCallback((f: Filters) => navigate({ page: 'threads', query: queryOf(f) }, true), []);

  // The filters of the latest render: the tag's timer reads them when it fires, so an agent or
  // status chosen during the pause is kept.
  const latest = useRef(filters);
  useEffect(() => {
    latest.current = filters;
  });

  // The tag box follows the route (back/forward, "Clear filters"); typing applies after a pause.
  useEffect(() => setTag(filters.tag), [filters.tag]);
  useEffect(() => {
    if (tag === filters.tag) return;
    const timer = setTimeout(() => setFilters({ ...latest.current, tag: tag.trim() }), 500);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tag]);

  const listQuery = (cursor?: string): ThreadListQuery => ({
    agent: filters.agent || undefined,
    status: isStatus(filters.status) ? filters.status : undefined,
    tag: filters.tag || undefined,
    limit: filters.limit,
    cursor,
  });

  // The first page, whenever the filters change or Refresh is pressed.
  useEffect(() => {
    let live = true;
    generation.current += 1;
    setListing((l) => ({ ...l, loading: true }));
    client.listThreads(listQuery()).then(
      (page) => live && setListing({ rows: page.threads, next: page.next_cursor, loading: false, error: null }),
      (e: unknown) => live && setListing({ rows: [], next: null, loading: false, error: describe(e) }),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, key, tick]);

  const loadMore = () => {
    if (!listing.next) return;
    const gen = generation.current;
    setListing((l) => ({ ...l, loading: true }));
    client.listThreads(listQuery(listing.next)).then(
      (page) =>
        gen === generation.current &&
        setListing((l) => ({ rows: [...l.rows, ...page.threads], next: page.next_cursor, loading: false, error: null })),
      (e: unknown) => gen === generation.current && setListing((l) => ({ ...l, loading: false, error: describe(e) })),
    );
  };

  const filtered = Boolean(filters.agent || filters.status || filters.tag);
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    setFilters({ ...filters, tag: tag.trim() });
  };

  return (
    <section aria-labelledby="threads-heading" className="stack">
      <div className="row">
        <h1 id="threads-heading">Threads</h1>
        <span className="spacer" />
        <button type="button" className="secondary" onClick={() => setTick((t) => t + 1)} disabled={listing.loading}>
          Refresh
        </button>
      </div>
      <form role="search" aria-label="Filter threads" className="row filters" onSubmit={onSubmit}>
        <span>
          <label htmlFor={`${id}-agent`}>Agent</label>{' '}
          <select id={`${id}-agent`} value={filters.agent} onChange={(e) => setFilters({ ...filters, agent: e.target.value })}>
            <option value="">All agents</option>
            {filters.agent && !agentIds.includes(filters.agent) && <option value={filters.agent}>{filters.agent}</option>}
            {agentIds.map((id) => (
              <option key={id} value={id}>
                {id}
              </option>
            ))}
          </select>
        </span>
        <span>
          <label htmlFor={`${id}-status`}>Status</label>{' '}
          <select id={`${id}-status`} value={filters.status} onChange={(e) => setFilters({ ...filters, status: e.target.value })}>
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </span>
        <span>
          <label htmlFor={`${id}-tag`}>Tag</label> <input id={`${id}-tag`} type="search" value={tag} onChange={(e) => setTag(e.target.value)} maxLength={64} size={14} />
        </span>
        <span>
          <label htmlFor={`${id}-limit`}>Per page</label>{' '}
          <select id={`${id}-limit`} value={filters.limit} onChange={(e) => setFilters({ ...filters, limit: Number(e.target.value) })}>
            {[...new Set([20, 50, 100, 200, filters.limit])].sort((a, b) => a - b).map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </span>
        <button type="submit" className="secondary">
          Apply
        </button>
        {filtered && (
          <button type="button" className="link" onClick={() => setFilters({ ...filters, agent: '', status: '', tag: '' })}>
            Clear filters
          </button>
        )}
      </form>
      <ErrorNote>{agents.error && `Agents could not be loaded: ${agents.error}`}</ErrorNote>
      <ErrorNote>{listing.error}</ErrorNote>
      <p className="muted" role="status">
        {listing.loading ? 'Loading…' : `${listing.rows.length} thread${listing.rows.length === 1 ? '' : 's'} shown${listing.next ? ', more on the next page' : ''}.`}
      </p>
      {!listing.loading && !listing.error && listing.rows.length === 0 ? (
        <div className="panel empty">
          {filtered ? (
            <p>No threads match these filters.</p>
          ) : (
            <p>
              No threads yet. Start one in the <a href={href({ page: 'playground' })}>playground</a>.
            </p>
          )}
        </div>
      ) : (
        <ThreadTable rows={listing.rows} />
      )}
      {listing.next && (
        <div>
          <button type="button" className="secondary" onClick={loadMore} disabled={listing.loading}>
            Load more
          </button>
        </div>
      )}
    </section>
  );
}

function ThreadTable({ rows }: { rows: ThreadIndexRow[] }) {
  if (rows.length === 0) return null;
  return (
    <div className="table-wrap">
      <table>
        <caption className="sr-only">Threads, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Title</th>
            <th scope="col">Agent</th>
            <th scope="col">Status</th>
            <th scope="col" className="num">
              Turns
            </th>
            <th scope="col">Updated</th>
            <th scope="col" className="hide-narrow">
              Last error
            </th>
            <th scope="col" className="hide-narrow">
              Parent
            </th>
            <th scope="col" className="hide-narrow">
              Tags
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => (
            <tr key={t.thread_id}>
              <td className="title">
                <a href={href({ page: 'thread', threadId: t.thread_id, query: new URLSearchParams() })}>
                  {t.title ?? <span className="muted">(no message yet) {t.thread_id.slice(0, 8)}</span>}
                </a>
              </td>
              <td>{t.agent_id}</td>
              <td>
                <Badge state={t.status} />
              </td>
              <td className="num">{t.turn_count}</td>
              <td>
                <Time ms={t.updated_at} />
              </td>
              <td className="hide-narrow clip">{t.last_error ?? <span className="muted">—</span>}</td>
              <td className="hide-narrow">
                {t.parent ? (
                  <a
                    href={href({ page: 'thread', threadId: t.parent, query: new URLSearchParams() })}
                    className="mono"
                    aria-label={`Parent thread ${t.parent}`}
                  >
                    {t.parent.slice(0, 8)}
                  </a>
                ) : (
                  <span className="muted">—</span>
                )}
              </td>
              <td className="hide-narrow">{t.tags.length ? t.tags.join(', ') : <span className="muted">—</span>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
