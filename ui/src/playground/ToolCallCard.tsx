// One tool call under the assistant message that made it: its live status (from `tool` frames),
// what a parked call waits for, its arguments and result, and the approval decision when it
// waits for one and this session may decide.
import { useId, useState, type FormEvent } from 'react';
import type { Message, ToolCallView } from '@edgent/client';
import { describe } from '../api';
import { Badge, ErrorNote, Json, Time } from '../components';

export interface CallShown {
  id: string;
  name: string;
  /** The JSON text the model wrote (absent for a call known only from its frames). */
  arguments?: string;
}

export interface ApprovalActions {
  approve: (toolCallId: string, approved: boolean, reason?: string) => Promise<void>;
}

type WaitingFor =
  | { approval: string }
  | { webhook: string; until?: number; url?: string }
  | { sleep: string; until?: number }
  | { rate_limit: { per_minute?: number; scope?: string } }
  | { retry: number; of: number }
  | Record<string, unknown>;

function waitingFor(view: ToolCallView | undefined): WaitingFor | null {
  const w = view?.waiting_for;
  return w && typeof w === 'object' ? (w as WaitingFor) : null;
}

export function isWaitingForApproval(view: ToolCallView | undefined): boolean {
  const w = waitingFor(view);
  return view?.status === 'waiting' && !!w && 'approval' in w && w.approval === 'pending';
}

export function isWaitingForWebhook(view: ToolCallView | undefined): boolean {
  const w = waitingFor(view);
  return view?.status === 'waiting' && !!w && 'webhook' in w;
}

export function ToolCallCard({
  call,
  view,
  result,
  webhookUrl,
  approval,
}: {
  call: CallShown;
  view: ToolCallView | undefined;
  /** The `tool` message holding its result, once stored. */
  result: Message | undefined;
  webhookUrl: string | undefined;
  /** Present when this session may approve (server key, or a token with `approve`). */
  approval: ApprovalActions | null;
}) {
  const headingId = useId();
  // Before any frame (an old call, loaded from history without a record) the result says it ended.
  const status = view?.status ?? (result ? (result.content.startsWith('Error: ') ? 'error' : 'success') : 'queued');
  return (
    <section className="pg-call" aria-labelledby={headingId}>
      <div className="row">
        <h4 id={headingId} className="pg-call-name">
          <span className="sr-only">Tool call </span>
          <code>{call.name}</code>
        </h4>
        <Badge state={status}>{status.replace(/_/g, ' ')}</Badge>
        <CallDetail view={view} webhookUrl={webhookUrl} />
      </div>
      {view?.status === 'retrying' && view.error && <p className="pg-call-error">Attempt failed: {view.error}</p>}
      {isWaitingForApproval(view) &&
        (approval ? (
          <ApprovalForm callId={call.id} name={call.name} approve={approval.approve} />
        ) : (
          <p className="muted">Waiting for approval by someone who may approve it.</p>
        ))}
      {call.arguments !== undefined && (
        <details>
          <summary>Arguments</summary>
          <Json value={call.arguments} label={`Arguments of ${call.name}`} />
        </details>
      )}
      {result && (
        <details>
          <summary>Result</summary>
          <Json value={result.content} label={`Result of ${call.name}`} />
        </details>
      )}
    </section>
  );
}

/** The words after the status badge: the attempt, and when a parked call runs again. */
function CallDetail({ view, webhookUrl }: { view: ToolCallView | undefined; webhookUrl: string | undefined }) {
  if (!view) return null;
  const w = waitingFor(view);
  const attempt = view.attempt !== undefined && view.attempt > 0 ? `attempt ${view.attempt}` : null;
  switch (view.status) {
    case 'running':
      return attempt ? <span className="muted">({attempt})</span> : null;
    case 'retrying':
      return (
        <span className="muted">
          ({attempt ? `${attempt} failed; ` : ''}next try at <Time ms={view.wake_at} />)
        </span>
      );
    case 'sleeping':
      return (
        <span className="muted">
          (until <Time ms={view.wake_at ?? (w && 'until' in w && typeof w.until === 'number' ? w.until : undefined)} />)
        </span>
      );
    case 'rate_limited':
      return (
        <span className="muted">
          (rate limited; runs again at <Time ms={view.wake_at} />)
        </span>
      );
    case 'waiting':
      if (w && 'approval' in w) return <span className="muted">(for approval)</span>;
      if (w && 'webhook' in w) {
        return (
          <span className="muted pg-webhook">
            (for webhook <code>{String(w.webhook)}</code>
            {view.wake_at !== undefined && (
              <>
                {' '}
                until <Time ms={view.wake_at} />
              </>
            )}
            ){webhookUrl && (
              <>
                {' '}
                at <code className="pg-url">{webhookUrl}</code>
              </>
            )}
          </span>
        );
      }
      return null;
    default:
      return null;
  }
}

function ApprovalForm({ callId, name, approve }: { callId: string; name: string; approve: ApprovalActions['approve'] }) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const reasonId = useId();
  const decide = async (approved: boolean) => {
    setBusy(true);
    setError(null);
    try {
      await approve(callId, approved, approved || !reason.trim() ? undefined : reason.trim());
    } catch (e) {
      setError(describe(e));
      setBusy(false);
    }
  };
  const reject = (e: FormEvent) => {
    e.preventDefault();
    void decide(false);
  };
  return (
    <form className="pg-approval" onSubmit={reject} aria-label={`Approve or reject ${name}`}>
      <p className="pg-approval-ask">
        <strong>Waiting for approval.</strong> Run <code>{name}</code> with these arguments?
      </p>
      <div className="row">
        <button type="button" disabled={busy} onClick={() => void decide(true)}>
          Approve
        </button>
        <label htmlFor={reasonId}>Reason (optional)</label>
        <input id={reasonId} value={reason} onChange={(e) => setReason(e.target.value)} disabled={busy} />
        <button type="submit" className="danger" disabled={busy}>
          Reject
        </button>
      </div>
      <ErrorNote>{error}</ErrorNote>
    </form>
  );
}
