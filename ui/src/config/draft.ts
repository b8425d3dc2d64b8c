// A definition as the form holds it (a draft) and back. The draft is flat: one value per control,
// keyed by the field's path (`model`, `side_a.prompt`); an optional side's own path (`side_b`)
// holds whether it is on. Numbers and JSON stay text while they are typed, so a half-typed value
// is never lost; they are parsed only when the draft becomes a definition.
import type { ConfigDefinition } from '@edgent/client';
import { SECRET_NAME, SIDE_FIELDS, type FieldSpec } from './fields';

/** The server's rule for a definition's name. */
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export type DraftValue = string | boolean | string[];
export type Draft = Record<string, DraftValue>;
/** Problems by field path, found before anything is sent. */
export type FieldErrors = Record<string, string>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function toDraftValue(spec: FieldSpec, value: unknown): DraftValue {
  switch (spec.type) {
    case 'checkbox':
      return value === undefined ? Boolean(spec.default) : Boolean(value);
    case 'list':
      return Array.isArray(value) ? value.map(String) : [];
    case 'json':
      return JSON.stringify(value ?? spec.default ?? {}, null, 2);
    case 'number':
    case 'integer':
      return value === null || value === undefined ? '' : String(value);
    default:
      return value === null || value === undefined ? '' : String(value);
  }
}

/** The draft of a stored definition, or of a new one (`undefined`: every default). */
export function toDraft(fields: readonly FieldSpec[], definition: ConfigDefinition | undefined): Draft {
  const draft: Draft = {};
  for (const spec of fields) {
    const value = definition ? definition[spec.key] : spec.default;
    if (spec.type !== 'side') {
      draft[spec.key] = toDraftValue(spec, value);
      continue;
    }
    const side = isObject(value) ? value : {};
    if (spec.optional) draft[spec.key] = isObject(value);
    for (const sub of SIDE_FIELDS) draft[`${spec.key}.${sub.key}`] = toDraftValue(sub, side[sub.key] ?? sub.default);
  }
  return draft;
}

function fromDraftValue(spec: FieldSpec, value: DraftValue | undefined, path: string, errors: FieldErrors): unknown {
  if (spec.type === 'checkbox') return value === true;
  if (spec.type === 'list') return Array.isArray(value) ? value : [];
  const text = typeof value === 'string' ? value : '';
  switch (spec.type) {
    case 'number':
    case 'integer': {
      if (text.trim() === '') return spec.nullable ? null : spec.default;
      const n = Number(text.trim());
      if (!Number.isFinite(n)) errors[path] = `${spec.label}: "${text}" is not a number.`;
      else if (spec.type === 'integer' && !Number.isInteger(n)) errors[path] = `${spec.label}: must be a whole number.`;
      return n;
    }
    case 'json': {
      if (text.trim() === '') return spec.default;
      try {
        const parsed: unknown = JSON.parse(text);
        // A field whose default is a list takes a JSON array; the others an object.
        if (Array.isArray(spec.default)) {
          if (!Array.isArray(parsed)) errors[path] = `${spec.label}: must be a JSON array, [...].`;
        } else if (!isObject(parsed)) errors[path] = `${spec.label}: must be a JSON object, {…}.`;
        return parsed;
      } catch (e) {
        errors[path] = `${spec.label}: not valid JSON (${e instanceof Error ? e.message : String(e)}).`;
        return undefined;
      }
    }
    case 'secret_name': {
      const name = text.trim();
      if (name === '') return null;
      // Checked here too so a pasted key is never sent anywhere; the message does not repeat it.
      if (!SECRET_NAME.test(name)) errors[path] = 'This is the NAME of a Worker secret (A-Z, a-z, 0-9, _), never the key itself.';
      return name;
    }
    case 'name':
      if (!NAME.test(text)) errors[path] = `${spec.label}: 1 to 64 characters of a-z A-Z 0-9 _ - . (no spaces).`;
      return text;
    default:
      return spec.nullable && text.trim() === '' ? null : text;
  }
}

/**
 * The definition a draft stands for, and the problems found in it. Fields of `stored` that the
 * table does not know (a newer server) are carried over: a PUT replaces the whole definition,
 * and leaving them out would reset them.
 */
export function fromDraft(
  fields: readonly FieldSpec[],
  draft: Draft,
  stored: ConfigDefinition | undefined,
): { definition: ConfigDefinition; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const known = new Set(fields.map((f) => f.key));
  const definition: ConfigDefinition = {};
  for (const [key, value] of Object.entries(stored ?? {})) if (!known.has(key)) definition[key] = value;
  for (const spec of fields) {
    if (spec.type !== 'side') {
      const value = fromDraftValue(spec, draft[spec.key], spec.key, errors);
      if (value !== undefined) definition[spec.key] = value;
      continue;
    }
    if (spec.optional && draft[spec.key] !== true) {
      definition[spec.key] = null;
      continue;
    }
    const side: Record<string, unknown> = {};
    for (const sub of SIDE_FIELDS) {
      const path = `${spec.key}.${sub.key}`;
      side[sub.key] = fromDraftValue(sub, draft[path], path, errors);
    }
    definition[spec.key] = side;
  }
  return { definition, errors };
}

function sameValue(a: DraftValue | undefined, b: DraftValue | undefined): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => x === b[i]);
  return a === b;
}

/** Whether the draft differs from another (the stored version's). */
export function draftsDiffer(a: Draft, b: Draft): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (!sameValue(a[k], b[k])) return true;
  return false;
}

/** The path of every control the form shows for a draft, in order (an optional side's fields only when it is on). */
export function fieldPaths(fields: readonly FieldSpec[], draft: Draft): string[] {
  return fields.flatMap((spec) => {
    if (spec.type !== 'side') return [spec.key];
    if (spec.optional && draft[spec.key] !== true) return [spec.key];
    const subs = SIDE_FIELDS.map((s) => `${spec.key}.${s.key}`);
    return spec.optional ? [spec.key, ...subs] : subs;
  });
}
