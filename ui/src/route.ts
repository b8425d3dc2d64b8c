// Hash routes: the app is one index.html, and the fragment never reaches the server.
//   #/                          playground (pick an agent, start a thread)
//   #/threads/<id>/chat         playground on one thread
//   #/threads?agent=&status=&tag=   the thread index
//   #/threads/<id>?tab=…        the inspector on one thread
//   #/config/<kind>/<name>      the configuration editor
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'playground'; threadId?: string }
  | { page: 'threads'; query: URLSearchParams }
  | { page: 'thread'; threadId: string; query: URLSearchParams }
  | { page: 'config'; kind?: string; name?: string };

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?', 2);
  const query = new URLSearchParams(search);
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const [first, second, third] = parts;
  if (first === 'threads' && second && third === 'chat') return { page: 'playground', threadId: second };
  if (first === 'threads' && second) return { page: 'thread', threadId: second, query };
  if (first === 'threads') return { page: 'threads', query };
  if (first === 'config') return { page: 'config', kind: second, name: third };
  return { page: 'playground' };
}

/** The hash of a route, for links: `href(…)`. */
export function href(route: Route): string {
  const q = (query: URLSearchParams) => (query.toString() ? `?${query.toString()}` : '');
  const id = (s: string) => encodeURIComponent(s);
  switch (route.page) {
    case 'playground':
      return route.threadId ? `#/threads/${id(route.threadId)}/chat` : '#/';
    case 'threads':
      return `#/threads${q(route.query)}`;
    case 'thread':
      return `#/threads/${id(route.threadId)}${q(route.query)}`;
    case 'config':
      return `#/config${route.kind ? `/${id(route.kind)}` : ''}${route.kind && route.name ? `/${id(route.name)}` : ''}`;
  }
}

export function navigate(route: Route, replace = false): void {
  const target = href(route);
  if (replace) {
    window.history.replaceState(null, '', target);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = target;
  }
}

let leaveGuard: (() => boolean) | null = null;
/** The hash of the route on screen: where a refused leave goes back to (replaceState fires no hashchange). */
let shownHash = window.location.hash;

/**
 * A view with something to lose (unsaved changes) sets `fn`, which answers whether the route may
 * change (true: leave), and sets `null` when there is nothing to lose any more. It is asked for
 * every route change: links (the header's too), `navigate`, the browser's Back and Forward.
 */
export function setLeaveGuard(fn: (() => boolean) | null): void {
  leaveGuard = fn;
}

/** The current route; one caller (the App), so the guard is asked once per change. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    shownHash = window.location.hash;
    const update = () => {
      const target = window.location.hash;
      if (target !== shownHash && leaveGuard && !leaveGuard()) {
        // Refused: the address goes back to what is on screen, and the route stays.
        window.history.replaceState(null, '', shownHash || `${window.location.pathname}${window.location.search}`);
        return;
      }
      shownHash = target;
      setRoute(parseRoute(target));
    };
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return route;
}
