// The sign-in screen: the server key or a client token, checked against the Worker before it is
// kept (in sessionStorage only; see session.ts).
import { useState, type FormEvent } from 'react';
import { EdgentError } from '@edgent/client';
import { describe, makeClient } from './api';
import { sessionFor, type Session } from './session';
import { ErrorNote } from './components';

export function Login({ onLogin }: { onLogin: (s: Session) => void }) {
  const [credential, setCredential] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    const session = sessionFor(credential);
    if (!session.credential) return setError('Enter the server key or a client token.');
    setBusy(true);
    setError(null);
    try {
      const client = makeClient(session);
      // A route each credential may read: the key reads the configuration, a token its thread.
      if (session.kind === 'key') await client.listConfig('agents');
      else await client.getThread(session.threadId);
      onLogin(session);
    } catch (err) {
      setError(
        err instanceof EdgentError && (err.status === 401 || err.status === 403)
          ? 'The Worker did not accept this key or token.'
          : describe(err),
      );
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="login" id="main">
      <h1>edgent</h1>
      <p className="muted">
        Sign in with the server key (<code>EDGENT_API_KEY</code>, printed by <code>npm run dev</code>) or a client token
        for one thread. It is kept for this tab only and never put in a URL.
      </p>
      <form onSubmit={submit}>
        <label htmlFor="credential">Server key or client token</label>
        <input
          id="credential"
          type="password"
          autoComplete="current-password"
          autoFocus
          value={credential}
          onChange={(e) => setCredential(e.target.value)}
          aria-describedby={error ? 'login-error' : undefined}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
      <div id="login-error">
        <ErrorNote>{error}</ErrorNote>
      </div>
    </main>
  );
}
