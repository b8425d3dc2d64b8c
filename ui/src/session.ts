// Who the app acts as: the server key (everything: every thread, the configuration) or a client
// token for one thread (its chat, and approvals with the `approve` scope). Kept in
// sessionStorage once the Worker accepted it: it lasts while the tab is open, is not shared with
// other tabs, and never appears in a URL. A token may arrive in the fragment (`#token=…`, which
// browsers never send to a server); the fragment is cleared at once, and the token is kept only
// after the same check (linkToken.ts).

const STORAGE_KEY = 'edgent.session';

/** The Worker's origin: this page's own (the Worker serves both), or `VITE_EDGENT_URL` at build time. */
export const EDGENT_URL: string = import.meta.env.VITE_EDGENT_URL?.replace(/\/+$/, '') || window.location.origin;

export type Session =
  | { kind: 'key'; credential: string }
  | { kind: 'token'; credential: string; threadId: string; scopes: string[]; expiresAt: number };

/** What a client token says about itself: its payload is readable, only its signature is keyed. */
export interface TokenInfo {
  threadId: string;
  scopes: string[];
  /** Seconds since the epoch. */
  expiresAt: number;
}

/** Decodes an `et1.<payload>.<signature>` token's payload; `null` when it is not one. */
export function tokenInfo(token: string): TokenInfo | null {
  const [version, payload, signature] = token.split('.');
  if (version !== 'et1' || !payload || !signature) return null;
  try {
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
    const p = JSON.parse(json) as { t?: unknown; s?: unknown; e?: unknown };
    if (typeof p.t !== 'string' || typeof p.e !== 'number') return null;
    const scopes = Array.isArray(p.s) ? p.s.filter((x): x is string => typeof x === 'string') : [];
    return { threadId: p.t, scopes, expiresAt: p.e };
  } catch {
    return null;
  }
}

/** A session for what was typed or pasted: a client token (`et1.…`) or else the server key. */
export function sessionFor(credential: string): Session {
  const trimmed = credential.trim();
  const info = tokenInfo(trimmed);
  if (info) return { kind: 'token', credential: trimmed, ...info };
  return { kind: 'key', credential: trimmed };
}

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const s = JSON.parse(raw) as Session;
    return typeof s?.credential === 'string' && s.credential ? sessionFor(s.credential) : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ credential: session.credential }));
}

export function clearSession(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  for (let i = sessionStorage.length - 1; i >= 0; i--) {
    const k = sessionStorage.key(i);
    if (k?.startsWith('edgent.')) sessionStorage.removeItem(k);
  }
}

/**
 * A token handed over in the fragment (`#token=et1…`, what a server gives a browser), taken out
 * of the address bar and history at once, before it is checked: `null` when there is none.
 * The address becomes the token's thread (or `#/` for something that is not a client token).
 */
export function takeFragmentToken(): string | null {
  const params = new URLSearchParams(window.location.hash.replace(/^#\/?/, ''));
  const token = params.get('token');
  if (!token) return null;
  const info = tokenInfo(token);
  window.history.replaceState(null, '', window.location.pathname + (info ? `#/threads/${encodeURIComponent(info.threadId)}/chat` : '#/'));
  return token;
}

/**
 * Characters a WebSocket subprotocol may hold (an HTTP token, RFC 7230): the socket carries the
 * credential there, and a browser refuses to open a socket with any other.
 */
export function fitsSubprotocol(credential: string): boolean {
  return /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(credential);
}

/** The last frame seq seen per thread, so a reload resumes the socket where it was. */
export function lastSeq(threadId: string): number | undefined {
  const v = Number(sessionStorage.getItem(`edgent.seq.${threadId}`));
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

export function rememberSeq(threadId: string, seq: number): void {
  sessionStorage.setItem(`edgent.seq.${threadId}`, String(seq));
}
