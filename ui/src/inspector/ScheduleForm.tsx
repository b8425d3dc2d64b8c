// Making a schedule (server key): when (after a delay, every interval, on a cron expression in
// UTC, or once at a time) and the message it posts, with an optional name. Only empty or
// non-whole numbers are caught here; the server checks the rest, and its 400 stands beside the
// form, on the control it names (`cron: not a cron expression …`).
import { useId, useState, type FormEvent } from 'react';
import type { Schedule, ScheduleSpec } from '@edgent/client';
import { EdgentError } from '@edgent/client';
import { describe, useApi } from '../api';
import { fieldOfMessage, type SpecField } from './scheduleText';

type WhenKind = 'delay_seconds' | 'every_seconds' | 'cron' | 'at';

interface KindSpec {
  /** The radio button's label. */
  choice: string;
  /** The value control's label. */
  label: string;
  help: string;
}

const KINDS: Record<WhenKind, KindSpec> = {
  delay_seconds: { choice: 'Once, after a delay', label: 'Delay (seconds)', help: 'Fires once, this many seconds from now.' },
  every_seconds: { choice: 'Every interval', label: 'Interval (seconds)', help: 'At least 1; the first time one interval from now.' },
  cron: {
    choice: 'Cron expression (UTC)',
    label: 'Cron expression',
    help: 'In UTC: minute hour day-of-month month day-of-week (e.g. 0 9 * * 1-5), six fields with seconds first, or @hourly, @daily, @weekly…',
  },
  at: { choice: 'Once, at a time', label: 'Time (your local time)', help: 'A time already past fires at once.' },
};
const ORDER: readonly WhenKind[] = ['delay_seconds', 'every_seconds', 'cron', 'at'];

/** What each kind's control starts with. */
const DEFAULTS: Record<WhenKind, string> = { delay_seconds: '60', every_seconds: '600', cron: '0 9 * * *', at: '' };

/** The request the form holds, or the problem with it as the server would word it (`field: why`). */
function specOf(kind: WhenKind, value: string, message: string, name: string): ScheduleSpec | string {
  const spec: ScheduleSpec = { message };
  if (name.trim()) spec.name = name.trim();
  const raw = value.trim();
  if (kind === 'delay_seconds' || kind === 'every_seconds') {
    const n = Number(raw);
    if (raw === '' || !Number.isInteger(n) || n < 0) return `${kind}: give a whole number of seconds`;
    spec[kind] = n;
  } else if (kind === 'cron') {
    spec.cron = raw;
  } else {
    const at = new Date(raw);
    if (raw === '' || Number.isNaN(at.getTime())) return 'at: give a date and a time';
    spec.at = at.toISOString();
  }
  return spec;
}

export function ScheduleForm({ threadId, onCreated }: { threadId: string; onCreated: (schedule: Schedule) => void }) {
  const { client } = useApi();
  const base = useId();
  const [kind, setKind] = useState<WhenKind>('delay_seconds');
  const [values, setValues] = useState(DEFAULTS);
  const [message, setMessage] = useState('');
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const current = KINDS[kind];
  const errorId = `${base}-error`;
  const errorField: SpecField | null = error ? fieldOfMessage(error) : null;
  // A message naming no control of the form (`give exactly one of …`) is about the whole request.
  const invalid = (field: SpecField) => (errorField === field ? { 'aria-invalid': true, 'aria-describedby': errorId } : {});

  async function submit(e: FormEvent) {
    e.preventDefault();
    const spec = specOf(kind, values[kind], message, name);
    if (typeof spec === 'string') {
      setError(spec);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const { schedule } = await client.createSchedule(threadId, spec);
      setMessage('');
      setName('');
      onCreated(schedule);
    } catch (err) {
      setError(err instanceof EdgentError ? err.message : describe(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="panel stack schedule-form" onSubmit={submit} noValidate aria-labelledby={`${base}-title`}>
      <h2 id={`${base}-title`} className="small-heading">
        New schedule
      </h2>
      <fieldset className="schedule-kinds">
        <legend>When</legend>
        {ORDER.map((k) => (
          <label key={k} className="schedule-kind">
            <input type="radio" name={`${base}-kind`} value={k} checked={kind === k} onChange={() => setKind(k)} />
            {KINDS[k].choice}
          </label>
        ))}
      </fieldset>
      <div className="schedule-field">
        <label htmlFor={`${base}-when`}>{current.label}</label>
        <input
          id={`${base}-when`}
          key={kind}
          type={kind === 'cron' ? 'text' : kind === 'at' ? 'datetime-local' : 'number'}
          min={kind === 'cron' || kind === 'at' ? undefined : kind === 'every_seconds' ? 1 : 0}
          step={kind === 'at' ? 1 : undefined}
          className={kind === 'cron' ? 'mono' : undefined}
          spellCheck={false}
          autoComplete="off"
          value={values[kind]}
          onChange={(e) => setValues((v) => ({ ...v, [kind]: e.target.value }))}
          aria-invalid={errorField === kind || undefined}
          aria-describedby={[errorField === kind ? errorId : '', `${base}-help`].filter(Boolean).join(' ')}
        />
        <span id={`${base}-help`} className="muted small">
          {current.help}
        </span>
      </div>
      <div className="schedule-field">
        <label htmlFor={`${base}-message`}>Message</label>
        <textarea id={`${base}-message`} rows={2} value={message} onChange={(e) => setMessage(e.target.value)} {...invalid('message')} />
        <span className="muted small">Posted as a user message when due: it starts a turn, or joins the running one.</span>
      </div>
      <div className="schedule-field">
        <label htmlFor={`${base}-name`}>Name (optional)</label>
        <input id={`${base}-name`} type="text" autoComplete="off" value={name} onChange={(e) => setName(e.target.value)} {...invalid('name')} />
      </div>
      <div className="row">
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create schedule'}
        </button>
      </div>
      {error && (
        <p id={errorId} className="error-note" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}
