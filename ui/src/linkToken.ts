// A client token handed over in a link (`https://<worker>/#token=et1…`): taken out of the address
// at once (session.ts), on load and on any later hash change (a link opened in a tab where the
// app already runs is a same-document navigation), then checked against the Worker like a typed
// one before it is kept. It never silently replaces a signed-in server key: the user is asked.
import { useEffect, useState } from 'react';
import { checkCredential } from './api';
import { sessionFor, takeFragmentToken, type Session } from './session';

export interface LinkToken {
  /** A token from the address is being checked. */
  checking: boolean;
  /** Why the last one was not used; `null` when none was refused. */
  refused: string | null;
}

export function useLinkToken(current: Session | null, adopt: (s: Session) => void): LinkToken {
  const [pending, setPending] = useState<string | null>(() => takeFragmentToken());
  const [refused, setRefused] = useState<string | null>(null);

  useEffect(() => {
    const onHash = () => {
      const token = takeFragmentToken();
      if (token) setPending(token);
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    if (!pending) return;
    let live = true;
    const session = sessionFor(pending);
    const done = (why: string | null) => {
      if (!live) return;
      setRefused(why);
      setPending(null);
    };
    if (session.kind !== 'token') {
      done('The link does not hold a client token.');
      return;
    }
    checkCredential(session).then(
      () => {
        if (!live) return;
        const replacing = current !== null && current.credential !== session.credential;
        if (
          !replacing ||
          window.confirm('This link opens one thread with a client token. Sign out of the current session and use it?')
        ) {
          adopt(session);
        }
        done(null);
      },
      (e: unknown) => done(e instanceof Error ? e.message : String(e)),
    );
    return () => {
      live = false;
    };
    // `current` and `adopt` are read when a token arrives, not reasons to check it again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [pending]);

  return { checking: pending !== null, refused };
}
