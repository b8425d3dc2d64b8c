// The sign-in screen: the server key or a client token, checked against the Worker before it is
// kept (in sessionStorage only; see session.ts).
import { useState, type FormEvent } from 'react';
import { checkCredential } from './api';
import { sessionFor, type Session } from './session';
import { ErrorNote } from './components';

export function Login({ onLogin, notice }: { onLogin: (s: Session) => void; notice?: string | null }) {
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
      await checkCredential(session);
      onLogin(session);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  }
  const shown = error ?? notice ?? null;

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
          aria-describedby={shown ? 'login-error' : undefined}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
      <div id="login-error">
        <ErrorNote>{shown}</ErrorNote>
      </div>
    </main>
  );
}
