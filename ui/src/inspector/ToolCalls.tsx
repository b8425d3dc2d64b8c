// The thread's execution history (`GET /api/threads/:id/tool-calls`): each call with its
// arguments and result, every attempt and how it ended, a workflow's steps, the runs nested in
// it, and what a parked call waits for.
import type { ToolCallRecord } from '@edgent/client';
import { useApi } from '../api';
import { Badge, Json, Time, duration } from '../components';
import { usePagedList } from './paging';
import { Field, PageFooter, between, num, records, str, type Fields } from './parts';

const PAGE = 20;

export function ToolCalls({ threadId, tick }: { threadId: string; tick: number }) {
  const { client } = useApi();
  const calls = usePagedList(
    (offset, limit) =>
      client.getToolCalls(threadId, { offset, limit }).then((p) => ({ items: p.tool_calls, total: p.total, hasMore: p.has_more })),
    threadId,
    PAGE,
    tick,
  );
  return (
    <div className="stack">
      {calls.items.length === 0 && !calls.loading && !calls.error && <p className="muted">No tool calls yet.</p>}
      {calls.items.map((c) => (
        <ToolCall key={c.id} call={c} />
      ))}
      <PageFooter list={calls} noun="tool calls" />
    </div>
  );
}

function ToolCall({ call: c }: { call: ToolCallRecord }) {
  const headingId = `call-${c.id}`;
  const attempts = records(c.attempt_log);
  const steps = records(c.steps);
  const nested = records(c.nested);
  return (
    <article className="panel call" aria-labelledby={headingId}>
      <div className="row">
        <h2 id={headingId} className="call-name">
          {c.tool} <code className="muted">{c.id}</code>
        </h2>
        <Badge state={c.status} />
      </div>
      <dl className="summary">
        <Field term="Origin">{c.origin}</Field>
        <Field term="Attempts">{c.attempts}</Field>
        <Field term="Interruptions">{c.interruptions ? c.interruptions : null}</Field>
        <Field term="Created">
          <Time ms={c.created_at} />
        </Field>
        <Field term="Started">{c.started_at ? <Time ms={c.started_at} /> : null}</Field>
        <Field term="Finished">{c.finished_at ? <Time ms={c.finished_at} /> : null}</Field>
        <Field term="Duration">{c.duration_ms !== null && c.duration_ms !== undefined ? duration(c.duration_ms) : null}</Field>
        <Field term="Wakes at">{c.wake_at ? <Time ms={c.wake_at} /> : null}</Field>
      </dl>
      <WaitingFor value={c.waiting_for} />
      {c.last_error &&
        (c.status === 'success' ? (
          // A failed attempt before the one that succeeded: worth seeing, not an alarm.
          <p className="muted">
            <strong>Last failed attempt:</strong> {c.last_error}
          </p>
        ) : (
          <p className="error-note">
            <strong>Last error:</strong> {c.last_error}
          </p>
        ))}
      <h3>Arguments</h3>
      <Json value={c.arguments ?? null} label={`Arguments of ${c.tool} ${c.id}`} />
      {c.result !== null && c.result !== undefined && (
        <>
          <h3>Result</h3>
          <Json value={c.result} label={`Result of ${c.tool} ${c.id}`} />
        </>
      )}
      {attempts.length > 0 && <Attempts rows={attempts} caption={`Attempts of ${c.tool} ${c.id}`} />}
      {steps.length > 0 && <Steps rows={steps} caption={`Workflow steps of ${c.tool} ${c.id}`} />}
      {nested.length > 0 && <Nested rows={nested} caption={`Runs nested in ${c.tool} ${c.id}`} />}
    </article>
  );
}

/** What a parked call waits for; a webhook's URL (given to the server key only) in full. */
function WaitingFor({ value }: { value: unknown }) {
  if (value === null || value === undefined) return null;
  const url = str(records([value])[0]?.url);
  return (
    <div>
      <h3>Waiting for</h3>
      {url && (
        <p>
          Webhook URL: <code className="break">{url}</code>
        </p>
      )}
      <Json value={value} label="Waiting for" />
    </div>
  );
}

function Attempts({ rows, caption }: { rows: Fields[]; caption: string }) {
  return (
    <div className="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col" className="num">
              Attempt
            </th>
            <th scope="col">Started</th>
            <th scope="col" className="hide-narrow">
              Finished
            </th>
            <th scope="col" className="num">
              Duration
            </th>
            <th scope="col">Outcome</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((a, i) => {
            const outcome = str(a.outcome);
            return (
              <tr key={i}>
                <td className="num">{num(a.attempt) ?? i + 1}</td>
                <td>
                  <Time ms={num(a.started_at)} />
                </td>
                <td className="hide-narrow">
                  <Time ms={num(a.finished_at)} />
                </td>
                <td className="num">{duration(between(a.started_at, a.finished_at))}</td>
                <td>{outcome ? <Badge state={outcome} /> : <span className="muted">open</span>}</td>
                <td className="clip">{str(a.error) ?? <span className="muted">—</span>}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function Steps({ rows, caption }: { rows: Fields[]; caption: string }) {
  return (
    <div className="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Step</th>
            <th scope="col">Kind</th>
            <th scope="col">Status</th>
            <th scope="col" className="num">
              Duration
            </th>
            <th scope="col" className="hide-narrow">
              Started
            </th>
            <th scope="col" className="hide-narrow">
              Wakes at
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((s, i) => (
            <tr key={i}>
              <td>{str(s.name)}</td>
              <td>{str(s.kind)}</td>
              <td>
                <Badge state={str(s.status) ?? 'unknown'} />
              </td>
              <td className="num">{duration(num(s.duration_ms))}</td>
              <td className="hide-narrow">
                <Time ms={num(s.started_at)} />
              </td>
              <td className="hide-narrow">
                <Time ms={num(s.wake_at)} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Nested({ rows, caption }: { rows: Fields[]; caption: string }) {
  return (
    <div className="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Tool</th>
            <th scope="col" className="hide-narrow">
              Key
            </th>
            <th scope="col" className="num">
              Attempt
            </th>
            <th scope="col" className="num">
              Duration
            </th>
            <th scope="col">Outcome</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((n, i) => {
            const outcome = str(n.outcome);
            return (
              <tr key={i}>
                <td>{str(n.tool)}</td>
                <td className="hide-narrow">
                  <code>{str(n.key)}</code>
                </td>
                <td className="num">{num(n.attempt)}</td>
                <td className="num">{duration(between(n.started_at, n.finished_at))}</td>
                <td>{outcome ? <Badge state={outcome} /> : <span className="muted">open</span>}</td>
                <td className="clip">{str(n.error) ?? <span className="muted">—</span>}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
