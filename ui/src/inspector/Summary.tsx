// The thread's summary (`GET /api/threads/:id`) as the inspector's header: state, counters,
// the whole thread's tokens and cost, its last error or result, and where it came from.
import type { ThreadSummary } from '@edgent/client';
import { Badge, Time } from '../components';
import { href } from '../route';
import { Field, Instant, count, usd } from './parts';

export function Summary({ summary }: { summary: ThreadSummary }) {
  const parent = summary.parent_thread_id;
  return (
    <div className="panel">
      <dl className="summary">
        <Field term="Status">
          <Badge state={summary.status} />
          {summary.stopped_by && <span className="muted"> by {summary.stopped_by}</span>}
        </Field>
        <Field term="Agent">{summary.agent_id}</Field>
        <Field term="Turns">{count(summary.turn_count)}</Field>
        <Field term="Steps (last turn)">{count(summary.steps)}</Field>
        <Field term="Messages">{count(summary.message_count)}</Field>
        <Field term="Tokens used">{count(summary.tokens_used)}</Field>
        <Field term="Cost">{usd(summary.cost_usd)}</Field>
        <Field term="Side">{summary.current_side}</Field>
        <Field term="Created">
          <Time ms={summary.created_at} />
        </Field>
        <Field term="Updated">
          <Time ms={summary.updated_at} />
        </Field>
        <Field term="Next schedule">{summary.next_schedule_at ? <Instant ms={summary.next_schedule_at} /> : null}</Field>
        <Field term="Tags">{summary.tags.length > 0 ? summary.tags.join(', ') : null}</Field>
        <Field term="Parent thread">
          {parent ? (
            <a href={href({ page: 'thread', threadId: parent, query: new URLSearchParams() })} className="mono">
              {parent}
            </a>
          ) : null}
        </Field>
      </dl>
      {summary.last_error && (
        <p className="error-note">
          <strong>Last error:</strong> {summary.last_error}
        </p>
      )}
      {summary.result !== undefined && (
        <div>
          <h2 className="small-heading">Result</h2>
          <p className="content">{summary.result}</p>
        </div>
      )}
    </div>
  );
}
