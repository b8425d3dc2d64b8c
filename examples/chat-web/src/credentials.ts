// Where the page gets its thread and client token: the URL's fragment
// (`#thread=…&token=…&view=…`). Browsers never send the fragment to a server, so the token
// stays out of request lines, access logs and Referer headers. The page never sees the API
// key: a server mints the token (scripts/open.mjs here; your own backend in production).

export type View = 'thread' | 'chat';

/**
 * The Worker's origin: this page's own (wrangler serves both), or `VITE_EDGENT_URL` set at build
 * time when the page is hosted elsewhere (then list the page's origin in the Worker's
 * `EDGENT_ALLOWED_ORIGINS`).
 */
export const EDGENT_URL: string = import.meta.env.VITE_EDGENT_URL?.replace(/\/+$/, '') || window.location.origin;

export interface Credentials {
  threadId: string;
  token: string;
}

export interface Fragment {
  credentials: Credentials | null;
  view: View;
}

/** Reads the fragment (`location.hash`). */
export function readFragment(hash: string = window.location.hash): Fragment {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const threadId = params.get('thread');
  const token = params.get('token');
  const view: View = params.get('view') === 'chat' ? 'chat' : 'thread';
  return { credentials: threadId && token ? { threadId, token } : null, view };
}

/** Switches the page in the fragment, keeping the credentials (no navigation, no request). */
export function writeView(view: View): void {
  const params = new URLSearchParams(window.location.hash.replace(/^#/, ''));
  params.set('view', view);
  window.history.replaceState(null, '', `#${params.toString()}`);
}

/** What a client token says about itself (its payload is readable; only its signature is secret-keyed). */
export interface TokenInfo {
  scopes: string[];
  /** Seconds since the epoch. */
  expiresAt: number;
}

/** Decodes an `et1.<payload>.<signature>` token's payload; `null` when it is not one. */
export function tokenInfo(token: string): TokenInfo | null {
  const [version, payload] = token.split('.');
  if (version !== 'et1' || !payload) return null;
  try {
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
    const p = JSON.parse(json) as { s?: unknown; e?: unknown };
    const scopes = Array.isArray(p.s) ? p.s.filter((x): x is string => typeof x === 'string') : [];
    return typeof p.e === 'number' ? { scopes, expiresAt: p.e } : null;
  } catch {
    return null;
  }
}
