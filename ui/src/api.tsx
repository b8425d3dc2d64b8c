// The session's client, for every view: `useApi()`.
import { createContext, useCallback, useContext, useEffect, useState } from 'react';
import { EdgentClient, EdgentError } from '@edgent/client';
import { EDGENT_URL, fitsSubprotocol, type Session } from './session';

export interface Api {
  client: EdgentClient;
  session: Session;
  /** The server key: every view. A client token: its one thread's chat. */
  isServer: boolean;
  logout: () => void;
}

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside <ApiContext>');
  return api;
}

export function makeClient(session: Session): EdgentClient {
  return new EdgentClient({ url: EDGENT_URL, token: session.credential });
}

/**
 * Checks a credential against the Worker before it is kept, with a route each kind may read
 * (the key: the configuration; a token: its thread). Throws a message for people.
 */
export async function checkCredential(session: Session): Promise<void> {
  if (!fitsSubprotocol(session.credential)) {
    // HTTP would accept it, but no socket could carry it: every live view would hang.
    throw new Error(
      'This key has characters a WebSocket cannot carry (use letters, digits and - _ . ~ only; ' +
        '`openssl rand -hex 32` makes one): set a new EDGENT_API_KEY.',
    );
  }
  const client = makeClient(session);
  try {
    if (session.kind === 'key') await client.listConfig('agents');
    else await client.getThread(session.threadId);
  } catch (err) {
    if (err instanceof EdgentError && (err.status === 401 || err.status === 403)) {
      throw new Error(
        session.kind === 'key'
          ? 'The Worker did not accept this key or token.'
          : 'The Worker did not accept this client token: it may have expired or been revoked.',
      );
    }
    throw new Error(describe(err));
  }
}

/** An error as one line for people. */
export function describe(e: unknown): string {
  if (e instanceof EdgentError) return `${e.message} (${e.code})`;
  return e instanceof Error ? e.message : String(e);
}

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` when `deps` change (and on `reload()`), keeping the last good data while a reload
 * runs; a stale answer (deps changed meanwhile) is dropped.
 */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: string | null; loading: boolean }>({
    data: undefined,
    error: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (e: unknown) => live && setState((s) => ({ data: s.data, error: describe(e), loading: false })),
    );
    return () => {
      live = false;
    };
    // `load` is a fresh closure each render; `deps` say when it means something new.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}
