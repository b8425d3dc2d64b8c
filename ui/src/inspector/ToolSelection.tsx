// A request-log row's `tool_selection` (docs/agents.md, "Tool selection"): the tools the attempt
// offered and, when the prompt's `max_offered_tools` left some out, every candidate's score.
// Shown collapsed ("3 of 9 offered"); opened, the offered tools in the order sent, then the
// ones left out, best score first. A row logged before the field existed shows nothing.
import { Badge } from '../components';

/** The logged choice, read defensively (the log field is free-form JSON). */
export interface Selection {
  offered: string[];
  max: number | null;
  /** Every candidate's score, when a selection ran. */
  scores: Map<string, number>;
  /** The pinned tools that were offered. */
  pinned: Set<string>;
}

/** Reads a row's `tool_selection`; `null` when absent or not of the logged shape. */
export function readSelection(value: unknown): Selection | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  if (!Array.isArray(v.offered) || !v.offered.every((n) => typeof n === 'string')) return null;
  const offered = v.offered as string[];
  const scores = new Map<string, number>();
  if (typeof v.scores === 'object' && v.scores !== null && !Array.isArray(v.scores)) {
    for (const [name, score] of Object.entries(v.scores)) {
      if (typeof score === 'number' && Number.isFinite(score)) scores.set(name, score);
    }
  }
  const max = typeof v.max === 'number' ? v.max : null;
  return { offered, max, scores, pinned: pinnedOf(v.pinned, offered, scores) };
}

/**
 * The pinned tools among the offered: the log's `pinned` when it names them; else those the
 * scores prove pinned, an offered tool scoring below one left out (the ranking offers the best
 * first, so only a pin keeps a lower one). A pinned tool that also ranked in is not told apart.
 */
function pinnedOf(logged: unknown, offered: string[], scores: Map<string, number>): Set<string> {
  if (Array.isArray(logged)) return new Set(logged.filter((n): n is string => typeof n === 'string' && offered.includes(n)));
  const left = [...scores].filter(([name]) => !offered.includes(name)).map(([, s]) => s);
  if (left.length === 0) return new Set();
  const bestLeft = Math.max(...left);
  return new Set(offered.filter((name) => (scores.get(name) ?? Infinity) < bestLeft));
}

const score = (s: number | undefined) => (s === undefined ? '' : s.toFixed(3).replace(/\.?0+$/, ''));

/** The collapsed summary and, opened, the lists. */
export function ToolSelection({ value }: { value: unknown }) {
  const selection = readSelection(value);
  if (!selection) return null;
  const { offered, max, scores, pinned } = selection;
  const candidates = scores.size > 0 ? scores.size : offered.length;
  const left = [...scores].filter(([name]) => !offered.includes(name)).sort((a, b) => b[1] - a[1]);
  const label = max === null ? `${offered.length} offered` : `${offered.length} of ${candidates} offered`;
  if (offered.length === 0) return <span className="muted small">no tools</span>;
  return (
    <details className="tool-selection">
      <summary>
        {label}
        {max !== null && <span className="muted"> (max {max})</span>}
      </summary>
      <ul className="tool-list" aria-label="Offered tools">
        {offered.map((name) => (
          <li key={name} data-tool={name}>
            <code>{name}</code>
            {scores.has(name) && <span className="muted small"> {score(scores.get(name))}</span>}
            {pinned.has(name) && (
              <>
                {' '}
                <Badge state="pinned">pinned</Badge>
              </>
            )}
          </li>
        ))}
      </ul>
      {left.length > 0 && (
        <>
          <p className="muted small tool-list-heading">Left out</p>
          <ul className="tool-list left-out" aria-label="Tools left out">
            {left.map(([name, s]) => (
              <li key={name} data-tool={name}>
                <code>{name}</code> <span className="muted small">{score(s)}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </details>
  );
}
