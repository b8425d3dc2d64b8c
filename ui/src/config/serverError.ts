// Which control a server's `invalid_definition` message is about, so the message can stand beside
// it. The server's messages name fields in three ways (docs/api.md, "PUT"):
//   serde:      model "m": at `provider`: unknown variant …       (also `side_a.prompt`)
//   validation: prompt "p": "model" is "ghost", which is not a model  (also "side_a.stop_tool")
//   prose:      prompt "p": tool_bindings names "x", …; agent "a": a dual_ai agent needs [side_b] …
// A message about another definition (`agent "duo": … (after this change)`: the write would break
// a stored one) names that definition's fields, not this form's: it goes above the form.
import type { ConfigKind } from '@edgent/client';
import { singular } from './fields';

const PREFIX = /^(model|prompt|agent) "((?:[^"\\]|\\.)*)": /;

/** The control path a message names, or `null` when it names none of `paths` (the controls shown). */
export function fieldOfMessage(message: string, kind: ConfigKind, name: string, paths: readonly string[]): string | null {
  let rest = message;
  const prefix = PREFIX.exec(message);
  if (prefix) {
    if (prefix[1] !== singular(kind) || prefix[2] !== name) return null;
    rest = message.slice(prefix[0].length);
  }
  const resolve = (candidate: string, exact: boolean): string | null => {
    if (paths.includes(candidate)) return candidate;
    if (exact) return null;
    // `side_a` (a whole side) → its first control; `tool_bindings.get_weather` → tool_bindings.
    const inside = paths.find((p) => p.startsWith(`${candidate}.`));
    if (inside) return inside;
    const parent = candidate.replace(/(\.[^.]*|\[[^\]]*\])$/, '');
    return parent !== candidate ? resolve(parent, false) : null;
  };
  const at = /\bat `([^`]+)`/.exec(rest);
  // serde located the problem: at a field of this form, or at one it does not have.
  if (at?.[1]) return resolve(at[1], false);
  for (const quoted of rest.matchAll(/"([^"]+)"/g)) {
    const path = quoted[1] && resolve(quoted[1], true);
    if (path) return path;
  }
  // A bare field name in prose: only names with `_` or `.`, which ordinary words never are. A
  // side's field (`max_steps must be …`) is taken when only one shown side has it.
  for (const bare of rest.matchAll(/\b([a-z]+_[a-z_]*(?:\.[a-z_]+)?)\b/g)) {
    const name = bare[1];
    if (!name) continue;
    const path = resolve(name, false);
    if (path) return path;
    const inSides = paths.filter((p) => p.endsWith(`.${name}`));
    if (inSides.length === 1 && inSides[0]) return inSides[0];
  }
  return null;
}
