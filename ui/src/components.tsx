// Small pieces every view uses. Kept plain: native elements, labels on every control, focus
// that stays visible, and no colour that carries meaning alone (badges say their state).
import { useId, useRef, type KeyboardEvent, type ReactNode } from 'react';

/** A state in words, coloured by its class (`badge-<state>`). */
export function Badge({ state, children }: { state: string; children?: ReactNode }) {
  return <span className={`badge badge-${state.replace(/[^a-z_]/gi, '')}`}>{children ?? state.replace(/_/g, ' ')}</span>;
}

/** A time in ms since the epoch: local clock time, the full date in the tooltip. */
export function Time({ ms }: { ms: number | null | undefined }) {
  if (ms === null || ms === undefined) return <span className="muted">—</span>;
  const d = new Date(ms);
  return (
    <time dateTime={d.toISOString()} title={d.toLocaleString()}>
      {d.toLocaleTimeString()}
    </time>
  );
}

/** A duration in ms, in the unit that reads best. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** JSON (or text that may be JSON) shown pretty-printed. */
export function Json({ value, label }: { value: unknown; label?: string }) {
  let shown: string;
  if (typeof value === 'string') {
    try {
      shown = JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      shown = value;
    }
  } else {
    shown = JSON.stringify(value, null, 2) ?? 'null';
  }
  return (
    <pre className="json" aria-label={label} tabIndex={0}>
      {shown}
    </pre>
  );
}

/** A failure, announced to screen readers. */
export function ErrorNote({ children }: { children: ReactNode }) {
  if (!children) return null;
  return (
    <p className="error-note" role="alert">
      {children}
    </p>
  );
}

export interface TabSpec {
  id: string;
  label: ReactNode;
}

/**
 * Tabs as the ARIA pattern has them: arrow keys, Home and End move between tabs; the panel is
 * labelled by its tab. `selected` is controlled (the route holds it).
 */
export function Tabs({
  tabs,
  selected,
  onSelect,
  children,
  label,
}: {
  tabs: TabSpec[];
  selected: string;
  onSelect: (id: string) => void;
  children: ReactNode;
  label: string;
}) {
  const base = useId();
  const list = useRef<HTMLDivElement>(null);
  const onKey = (e: KeyboardEvent) => {
    const i = tabs.findIndex((t) => t.id === selected);
    let next = -1;
    if (e.key === 'ArrowRight') next = (i + 1) % tabs.length;
    else if (e.key === 'ArrowLeft') next = (i - 1 + tabs.length) % tabs.length;
    else if (e.key === 'Home') next = 0;
    else if (e.key === 'End') next = tabs.length - 1;
    if (next < 0) return;
    e.preventDefault();
    const tab = tabs[next];
    if (!tab) return;
    onSelect(tab.id);
    list.current?.querySelector<HTMLButtonElement>(`#${CSS.escape(`${base}-tab-${tab.id}`)}`)?.focus();
  };
  return (
    <div className="tabs">
      <div role="tablist" aria-label={label} ref={list} onKeyDown={onKey}>
        {tabs.map((t) => (
          <button
            key={t.id}
            type="button"
            role="tab"
            id={`${base}-tab-${t.id}`}
            aria-selected={t.id === selected}
            aria-controls={`${base}-panel`}
            tabIndex={t.id === selected ? 0 : -1}
            className={t.id === selected ? 'tab active' : 'tab'}
            onClick={() => onSelect(t.id)}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${base}-panel`} aria-labelledby={`${base}-tab-${selected}`} className="tabpanel">
        {children}
      </div>
    </div>
  );
}
