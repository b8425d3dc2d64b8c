// Offset-paged lists (messages, tool calls, the request log): the first page on open, "Load
// more" for the next, and a refresh that re-reads what is shown (plus one page when everything
// was shown, so rows stored since appear at the end). Operations run one at a time, each from the
// state the previous one left, so a live refresh never drops a "Load more" in flight; a new
// `key` (another thread) starts over and discards what the old one still had running.
import { useCallback, useEffect, useRef, useState } from 'react';
import { describe } from '../api';

/** One page as the API answers it, in the hook's terms. */
export interface OffsetPage<T> {
  items: T[];
  total: number;
  hasMore: boolean;
}

export interface PagedList<T> {
  items: T[];
  /** Rows in the whole list (the API's `total`); `null` before the first page. */
  total: number | null;
  hasMore: boolean;
  loading: boolean;
  error: string | null;
  loadMore: () => void;
  refresh: () => void;
}

interface State<T> {
  items: T[];
  total: number | null;
  hasMore: boolean;
  loading: boolean;
  error: string | null;
}

/** The API's largest page. */
const MAX_LIMIT = 200;

function initial<T>(): State<T> {
  return { items: [], total: null, hasMore: false, loading: true, error: null };
}

/**
 * `fetchPage(offset, limit)` reads one page; `key` names the list (a new one starts over);
 * each change of `refreshTick` (after the first) re-reads the rows shown.
 */
export function usePagedList<T>(
  fetchPage: (offset: number, limit: number) => Promise<OffsetPage<T>>,
  key: string,
  pageSize: number,
  refreshTick: number,
): PagedList<T> {
  const [state, setState] = useState<State<T>>(initial);
  const latest = useRef<State<T>>(state);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;
  const generation = useRef(0);
  const chain = useRef<Promise<void>>(Promise.resolve());

  const apply = useCallback((next: State<T>) => {
    latest.current = next;
    setState(next);
  }, []);

  const run = useCallback(
    (op: (s: State<T>) => Promise<Omit<State<T>, 'loading' | 'error'>>) => {
      const gen = generation.current;
      chain.current = chain.current.then(async () => {
        if (gen !== generation.current) return;
        apply({ ...latest.current, loading: true });
        try {
          const next = await op(latest.current);
          if (gen === generation.current) apply({ ...next, loading: false, error: null });
        } catch (e) {
          if (gen === generation.current) apply({ ...latest.current, loading: false, error: describe(e) });
        }
      });
    },
    [apply],
  );

  const refresh = useCallback(() => {
    run(async (s) => {
      // Everything shown: also reach for rows stored since. Otherwise: the same rows again.
      const target = s.hasMore ? Math.max(s.items.length, pageSize) : s.items.length + pageSize;
      const items: T[] = [];
      let page: OffsetPage<T> = { items: [], total: 0, hasMore: true };
      while (items.length < target && page.hasMore) {
        page = await fetchRef.current(items.length, Math.min(MAX_LIMIT, target - items.length));
        items.push(...page.items);
        if (page.items.length === 0) break;
      }
      return { items, total: page.total, hasMore: page.hasMore };
    });
  }, [run, pageSize]);

  const loadMore = useCallback(() => {
    run(async (s) => {
      const page = await fetchRef.current(s.items.length, pageSize);
      return { items: [...s.items, ...page.items], total: page.total, hasMore: page.hasMore };
    });
  }, [run, pageSize]);

  // A new list: forget the old one (and whatever it still has running), read the first page.
  useEffect(() => {
    generation.current += 1;
    chain.current = Promise.resolve();
    apply(initial());
    refresh();
  }, [key, apply, refresh]);

  // Live updates: re-read (the first run is the load above).
  const seenTick = useRef(refreshTick);
  useEffect(() => {
    if (seenTick.current === refreshTick) return;
    seenTick.current = refreshTick;
    refresh();
  }, [refreshTick, refresh]);

  return { ...state, loadMore, refresh };
}
