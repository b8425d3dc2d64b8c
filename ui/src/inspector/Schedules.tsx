// The thread's schedules (`GET /api/threads/:id/schedules?ended=true`), the ended ones too:
// when each acts and what it does, its state, when it is next due, how often it fired and who
// made it. Re-read when the thread changes (a `schedule` frame moves the tick, live.ts). With
// the server key: a form to make one, and Cancel on each active one (a second press confirms).
import { useEffect, useRef, useState } from 'react';
import type { Schedule } from '@edgent/client';
import { describe, useApi, useLoad } from '../api';
import { Badge, ErrorNote } from '../components';
import { ScheduleForm } from './ScheduleForm';
import { Instant } from './parts';
import { actionOf, interval, scheduleLabel, specMs } from './scheduleText';

export function Schedules({ threadId, tick }: { threadId: string; tick: number }) {
  const { client, isServer } = useApi();
  const list = useLoad(() => client.listSchedules(threadId, { ended: true }), [client, threadId, tick]);
  const [notice, setNotice] = useState<string | null>(null);
  const schedules = list.data?.schedules ?? [];
  const active = schedules.filter((s) => s.status === 'active').length;
  const changed = (text: string) => {
    setNotice(text);
    list.reload();
  };

  return (
    <div className="stack">
      {isServer && <ScheduleForm threadId={threadId} onCreated={(s) => changed(`Created schedule ${scheduleLabel(s)}.`)} />}
      <p role="status" className="schedule-notice">
        {notice}
      </p>
      <ErrorNote>{list.error}</ErrorNote>
      {!list.data && list.loading && <p className="muted">Loading…</p>}
      {list.data && schedules.length === 0 && <p className="muted">No schedules yet.</p>}
      {schedules.length > 0 && (
        <div className="table-wrap">
          <table>
            <caption>
              Schedules, in the order made ({active} active of {schedules.length})
            </caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">When</th>
                <th scope="col">Action</th>
                <th scope="col">Status</th>
                <th scope="col">Next due</th>
                <th scope="col" className="num">
                  Fired
                </th>
                <th scope="col">Last fired</th>
                <th scope="col" className="hide-narrow">
                  Created by
                </th>
                {isServer && (
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {schedules.map((s) => (
                <Row key={s.id} schedule={s} threadId={threadId} canCancel={isServer} onCancelled={changed} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function Row({
  schedule: s,
  threadId,
  canCancel,
  onCancelled,
}: {
  schedule: Schedule;
  threadId: string;
  canCancel: boolean;
  onCancelled: (notice: string) => void;
}) {
  return (
    <tr data-schedule={s.id}>
      <td>
        {s.name ?? <span className="muted">—</span>}
        <br />
        <code className="muted small">{s.id.slice(0, 8)}</code>
      </td>
      <td>
        <When schedule={s} />
      </td>
      <td className="clip">
        <Action value={s.action} />
      </td>
      <td>
        <Badge state={s.status} />
      </td>
      <td>
        <Instant ms={s.next_at} />
      </td>
      <td className="num">{s.fired_count}</td>
      <td>
        <Instant ms={s.last_fired_at} />
      </td>
      <td className="hide-narrow">
        {s.created_by}
        <br />
        <span className="muted small">
          <Instant ms={s.created_at} />
        </span>
      </td>
      {canCancel && <td>{s.status === 'active' && <CancelButton schedule={s} threadId={threadId} onCancelled={onCancelled} />}</td>}
    </tr>
  );
}

/** When a schedule acts, in words: "once at …", "every 10 min", "cron `0 9 * * *` (UTC)". */
function When({ schedule: s }: { schedule: Schedule }) {
  const ms = specMs(s);
  if (s.kind === 'once' && ms !== null) {
    return (
      <>
        once at <Instant ms={ms} />
      </>
    );
  }
  if (s.kind === 'every' && ms !== null) return <>every {interval(ms)}</>;
  if (s.kind === 'cron') {
    return (
      <>
        cron <code>{s.spec}</code> (UTC)
      </>
    );
  }
  return (
    <>
      {s.kind} <code>{s.spec}</code>
    </>
  );
}

/** What a schedule does: the message it posts, or the tool it queues with its arguments. */
function Action({ value }: { value: unknown }) {
  const action = actionOf(value);
  if (!action) return <code>{JSON.stringify(value)}</code>;
  if ('message' in action) {
    return (
      <>
        <span className="muted">message</span> <span className="content">{action.message}</span>
      </>
    );
  }
  const args = Object.keys(action.arguments).length > 0 ? JSON.stringify(action.arguments) : null;
  return (
    <>
      <span className="muted">tool</span> <code>{action.tool}</code>
      {args && (
        <>
          {' '}
          <code className="break">{args}</code>
        </>
      )}
    </>
  );
}

/** "Cancel…", then "Confirm cancel" or "Keep" (as Delete in the configuration editor). */
function CancelButton({ schedule, threadId, onCancelled }: { schedule: Schedule; threadId: string; onCancelled: (notice: string) => void }) {
  const { client } = useApi();
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const first = useRef<HTMLButtonElement>(null);
  const returnFocus = useRef(false);
  const label = scheduleLabel(schedule);

  useEffect(() => {
    if (confirming || !returnFocus.current) return;
    returnFocus.current = false;
    first.current?.focus();
  }, [confirming]);

  async function cancel() {
    setBusy(true);
    setError(null);
    try {
      await client.cancelSchedule(threadId, schedule.id);
      // Stays busy: the row leaves its active state when the list is read again.
      onCancelled(`Cancelled schedule ${label}.`);
    } catch (err) {
      // 400 when it is no longer active (it fired, or was cancelled elsewhere).
      setError(describe(err));
      setBusy(false);
      returnFocus.current = true;
      setConfirming(false);
    }
  }

  if (!confirming) {
    return (
      <div className="stack">
        <button ref={first} type="button" className="secondary" aria-label={`Cancel schedule ${label}`} onClick={() => setConfirming(true)}>
          Cancel…
        </button>
        <ErrorNote>{error}</ErrorNote>
      </div>
    );
  }
  return (
    <span className="row" role="group" aria-label={`Confirm cancelling schedule ${label}`}>
      <button type="button" className="danger" onClick={cancel} disabled={busy} autoFocus>
        Confirm cancel
      </button>
      <button
        type="button"
        className="secondary"
        onClick={() => {
          returnFocus.current = true;
          setConfirming(false);
        }}
      >
        Keep
      </button>
    </span>
  );
}
