// The model request log (`GET /api/threads/:id/logs`): one row per attempt at a model call,
// retries and fallbacks included, with the totals of the rows shown beside the whole thread's
// (the summary's tokens and cost count every attempt, sub-prompts' included). Each row says
// which tools the attempt offered, and how tool selection chose them (ToolSelection.tsx).
import { threadPath, type ThreadSummary } from '@edgent/client';
import { useApi, useLoad } from '../api';
import { demoModelNames } from '../demo';
import { Badge, Time, duration } from '../components';
import { usePagedList } from './paging';
import { PageFooter, count, usd } from './parts';
import { ToolSelection } from './ToolSelection';

const PAGE = 50;

/** One row of the request log (docs/agents.md, "The request log"). */
interface RequestRow {
  seq: number;
  message_id: string;
  model: string;
  provider: string;
  attempt: number;
  status: 'ok' | 'error';
  http_status: number | null;
  latency_ms: number | null;
  ttft_ms: number | null;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  error: string | null;
  depth: number;
  created_at: number;
  /** The tools offered, and how they were chosen (absent or null on older rows). */
  tool_selection?: unknown;
}

interface RequestPage {
  logs: RequestRow[];
  total: number;
  has_more: boolean;
}

export function Requests({ threadId, tick, summary }: { threadId: string; tick: number; summary: ThreadSummary | undefined }) {
  const { client } = useApi();
  const log = usePagedList(
    (offset, limit) =>
      client
        .request<RequestPage>('GET', `${threadPath(threadId)}/logs?offset=${offset}&limit=${limit}`)
        .then((p) => ({ items: p.logs, total: p.total, hasMore: p.has_more })),
    threadId,
    PAGE,
    tick,
  );
  // The models the demo server answers for now, by name: a log row records the model's name,
  // not what served it, so the badge follows the model's current configuration.
  const models = useLoad(() => client.listConfig('models'), [client]);
  const demo = new Set(demoModelNames(models.data ?? []));

  const rows = log.items;
  const tokensIn = rows.reduce((n, r) => n + r.input_tokens, 0);
  const tokensOut = rows.reduce((n, r) => n + r.output_tokens, 0);
  const cost = rows.reduce((n, r) => n + r.cost, 0);
  const latencies = rows.map((r) => r.latency_ms).filter((l): l is number => l !== null);
  const meanLatency = latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null;
  const failed = rows.filter((r) => r.status === 'error').length;

  return (
    <div className="stack">
      <section aria-labelledby="totals-heading" className="panel">
        <h2 id="totals-heading" className="small-heading">
          Totals
        </h2>
        <dl className="summary">
          <div className="field">
            <dt>Requests (thread)</dt>
            <dd>{count(log.total)}</dd>
          </div>
          <div className="field">
            <dt>Tokens (thread)</dt>
            <dd>{count(summary?.tokens_used)}</dd>
          </div>
          <div className="field">
            <dt>Cost (thread)</dt>
            <dd>{usd(summary?.cost_usd)}</dd>
          </div>
          <div className="field">
            <dt>Rows shown</dt>
            <dd>
              {rows.length}
              {failed > 0 && ` (${failed} failed)`}
            </dd>
          </div>
          <div className="field">
            <dt>Tokens (rows shown)</dt>
            <dd>
              {count(tokensIn + tokensOut)} <span className="muted">({count(tokensIn)} in, {count(tokensOut)} out)</span>
            </dd>
          </div>
          <div className="field">
            <dt>Cost (rows shown)</dt>
            <dd>{usd(cost)}</dd>
          </div>
          <div className="field">
            <dt>Mean latency (rows shown)</dt>
            <dd>{duration(meanLatency)}</dd>
          </div>
        </dl>
      </section>
      {rows.length === 0 && !log.loading && !log.error && <p className="muted">No model requests yet.</p>}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table>
            <caption className="sr-only">Model requests, oldest first</caption>
            <thead>
              <tr>
                <th scope="col" className="num">
                  #
                </th>
                <th scope="col" className="hide-narrow">
                  Time
                </th>
                <th scope="col">Model</th>
                <th scope="col" className="hide-narrow">
                  Provider
                </th>
                <th scope="col" className="num">
                  Attempt
                </th>
                <th scope="col">Status</th>
                <th scope="col" className="num hide-narrow">
                  HTTP
                </th>
                <th scope="col" className="num">
                  Latency
                </th>
                <th scope="col" className="num hide-narrow">
                  First token
                </th>
                <th scope="col" className="num">
                  Tokens in
                </th>
                <th scope="col" className="num">
                  Tokens out
                </th>
                <th scope="col" className="num hide-narrow">
                  Cost
                </th>
                <th scope="col">Error</th>
                <th scope="col">Tools offered</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.seq}>
                  <td className="num">{r.seq}</td>
                  <td className="hide-narrow">
                    <Time ms={r.created_at} />
                  </td>
                  <td>
                    {r.model}{' '}
                    {demo.has(r.model) && <Badge state="demo">demo</Badge>}
                    {r.depth > 0 && <Badge state="sub">sub-prompt</Badge>}
                  </td>
                  <td className="hide-narrow">{r.provider}</td>
                  <td className="num">{r.attempt}</td>
                  <td>
                    <Badge state={r.status} />
                  </td>
                  <td className="num hide-narrow">{r.http_status ?? '—'}</td>
                  <td className="num">{duration(r.latency_ms)}</td>
                  <td className="num hide-narrow">{duration(r.ttft_ms)}</td>
                  <td className="num">{count(r.input_tokens)}</td>
                  <td className="num">{count(r.output_tokens)}</td>
                  <td className="num hide-narrow">{usd(r.cost)}</td>
                  <td className="clip">{r.error ?? <span className="muted">—</span>}</td>
                  <td className="tools-cell">
                    <ToolSelection value={r.tool_selection} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {rows.some((r) => demo.has(r.model)) && (
        <p className="muted small" role="note">
          <Badge state="demo">demo</Badge> the demo model answers this model now. The log records only a model's name, so
          the mark covers its earlier rows too.
        </p>
      )}
      <PageFooter list={log} noun="requests" />
    </div>
  );
}
