// What the playground can do to a thread besides chatting: stop it (anyone), and with the
// server key force a turn (choosing the side of a dual-AI agent) or inject a message of any role.
import { useId, useState, type FormEvent } from 'react';
import type { InjectMessageParams, Message, Side, ThreadStore } from '@edgent/client';
import { describe } from '../api';
import { ErrorNote } from '../components';

type InjectRole = NonNullable<InjectMessageParams['role']>;
const INJECT_ROLES: InjectRole[] = ['system', 'user', 'assistant'];

export function Controls({
  store,
  isServer,
  dualAi,
  stopped,
  onInjected,
}: {
  store: ThreadStore | null;
  isServer: boolean;
  /** The thread's agent has two sides: forcing a turn picks one. */
  dualAi: boolean;
  stopped: boolean;
  onInjected: (message: Message) => void;
}) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [side, setSide] = useState<Side>('a');
  const sideId = useId();
  const connected = store !== null;

  const run = async (what: string, action: (s: ThreadStore) => Promise<unknown>) => {
    if (!store) return;
    setBusy(what);
    setError(null);
    try {
      await action(store);
    } catch (e) {
      setError(`${what} failed: ${describe(e)}`);
    } finally {
      setBusy(null);
    }
  };

  return (
    <section className="panel stack pg-controls" aria-labelledby={`${sideId}-heading`}>
      <h2 id={`${sideId}-heading`}>Controls</h2>
      <div className="row">
        <button
          type="button"
          className="danger"
          disabled={!connected || stopped || busy !== null}
          onClick={() => void run('Stop', (s) => s.stop())}
          aria-describedby={`${sideId}-stop-note`}
        >
          Stop
        </button>
        <span id={`${sideId}-stop-note`} className="muted">
          {stopped ? 'The thread is stopped.' : 'Ends the thread for good.'}
        </span>
      </div>
      {isServer && (
        <div className="row">
          {dualAi && (
            <>
              <label htmlFor={sideId}>Side</label>
              <select id={sideId} value={side} onChange={(e) => setSide(e.target.value === 'b' ? 'b' : 'a')}>
                <option value="a">a</option>
                <option value="b">b</option>
              </select>
            </>
          )}
          <button
            type="button"
            className="secondary"
            disabled={!connected || stopped || busy !== null}
            onClick={() => void run('Force turn', (s) => s.connection.forceTurn(dualAi ? side : undefined))}
          >
            Force turn
          </button>
        </div>
      )}
      <ErrorNote>{error}</ErrorNote>
      {isServer && <InjectForm store={store} onInjected={onInjected} />}
    </section>
  );
}

function InjectForm({ store, onInjected }: { store: ThreadStore | null; onInjected: (message: Message) => void }) {
  const [role, setRole] = useState<InjectRole>('system');
  const [content, setContent] = useState('');
  const [silent, setSilent] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const id = useId();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!store || !content.trim()) return;
    setBusy(true);
    setError(null);
    setNote(null);
    try {
      const params: InjectMessageParams = { role, content };
      if (silent) params.silent = true;
      const { message } = await store.connection.injectMessage(params);
      onInjected(message);
      setContent('');
      // A silent message is never broadcast, so the chat will not show it: say where it went.
      setNote(silent ? 'Stored silently: the model and the chat do not see it (the inspector lists it).' : 'Injected.');
    } catch (err) {
      setError(`Inject failed: ${describe(err)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="stack" onSubmit={submit} aria-labelledby={`${id}-heading`}>
      <h3 id={`${id}-heading`}>Inject message</h3>
      <p className="muted pg-hint">Stored as it is, without starting a turn: the model reads it at its next call.</p>
      <div className="row">
        <label htmlFor={`${id}-role`}>Role</label>
        <select id={`${id}-role`} value={role} onChange={(e) => setRole(e.target.value as InjectRole)}>
          {INJECT_ROLES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
        <label className="pg-check">
          <input type="checkbox" checked={silent} onChange={(e) => setSilent(e.target.checked)} /> Silent
        </label>
      </div>
      <label htmlFor={`${id}-content`}>Content</label>
      <textarea id={`${id}-content`} value={content} onChange={(e) => setContent(e.target.value)} />
      <div className="row">
        <button type="submit" className="secondary" disabled={!store || busy || !content.trim()}>
          Inject
        </button>
        {note && (
          <span className="muted" role="status">
            {note}
          </span>
        )}
      </div>
      <ErrorNote>{error}</ErrorNote>
    </form>
  );
}
