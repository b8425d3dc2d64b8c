// Pieces the inspector's tabs share: the "Load more" line under a paged list, a time with its
// date, and readers for the loosely typed parts of API records (attempt logs, steps), which
// arrive as `unknown`.
import type { ReactNode } from 'react';
import { ErrorNote } from '../components';
import type { PagedList } from './paging';

/** "N of M shown", the list's error, and "Load more" while there is more. */
export function PageFooter<T>({ list, noun }: { list: PagedList<T>; noun: string }) {
  return (
    <div className="stack page-footer">
      <ErrorNote>{list.error}</ErrorNote>
      <div className="row">
        <span className="muted" role="status">
          {list.total === null ? 'Loading…' : `${list.items.length} of ${list.total} ${noun} shown`}
        </span>
        {list.hasMore && (
          <button type="button" className="secondary" onClick={list.loadMore} disabled={list.loading}>
            Load more {noun}
          </button>
        )}
      </div>
    </div>
  );
}

/** A time with its date (a schedule's is often days away), in the browser's zone; "—" when none. */
export function Instant({ ms }: { ms: number | null | undefined }) {
  if (ms === null || ms === undefined) return <span className="muted">—</span>;
  const d = new Date(ms);
  return <time dateTime={d.toISOString()}>{d.toLocaleString()}</time>;
}

/** A term and its value in a description list; nothing when the value is absent. */
export function Field({ term, children }: { term: string; children: ReactNode }) {
  if (children === null || children === undefined || children === '') return null;
  return (
    <div className="field">
      <dt>{term}</dt>
      <dd>{children}</dd>
    </div>
  );
}

export type Fields = Record<string, unknown>;

/** The objects of a list field (`attempt_log`, `steps`, `nested`); anything else is skipped. */
export function records(value: unknown): Fields[] {
  if (!Array.isArray(value)) return [];
  return value.filter((v): v is Fields => typeof v === 'object' && v !== null && !Array.isArray(v));
}

export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** Milliseconds between two times, when both are known. */
export function between(start: unknown, end: unknown): number | null {
  const a = num(start);
  const b = num(end);
  return a !== null && b !== null ? b - a : null;
}

/** US dollars, with the digits small costs need. */
export function usd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  if (value === 0) return '$0';
  return `$${value < 0.01 ? value.toFixed(6) : value.toFixed(4)}`;
}

/** An integer with thousands separators. */
export function count(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : value.toLocaleString();
}
