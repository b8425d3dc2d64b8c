// One labelled control per field, chosen by the field's type (fields.ts). Every control carries
// its help and its error through aria-describedby, and aria-invalid when it has an error.
import { useState, type KeyboardEvent } from 'react';
import { SIDE_FIELDS, type FieldSpec } from './fields';
import type { Draft, DraftValue } from './draft';

export interface FieldContext {
  draft: Draft;
  /** Errors by path: the server's, or found before saving. */
  errors: Record<string, string>;
  /** The DOM id of a path's control (for labels, errors and focus). */
  idOf: (path: string) => string;
  /** Names worth offering for a field (models, tools, prompts…). */
  suggestionsFor: (spec: FieldSpec, path: string) => string[];
  onChange: (path: string, value: DraftValue) => void;
  /** The definition is stored: its name is fixed (a new name is a new definition). */
  stored: boolean;
}

function describedBy(id: string, spec: FieldSpec, error: string | undefined): string | undefined {
  const ids = [error ? `${id}-error` : '', spec.help ? `${id}-help` : ''].filter(Boolean);
  return ids.length ? ids.join(' ') : undefined;
}

export function Field({ spec, path, ctx }: { spec: FieldSpec; path: string; ctx: FieldContext }) {
  if (spec.type === 'side') return <SideFieldset spec={spec} path={path} ctx={ctx} />;
  const id = ctx.idOf(path);
  const error = ctx.errors[path];
  const value = ctx.draft[path];
  const common = {
    id,
    'aria-invalid': error ? true : undefined,
    'aria-describedby': describedBy(id, spec, error),
  } as const;
  const text = typeof value === 'string' ? value : '';
  const setText = (v: string) => ctx.onChange(path, v);
  const options = spec.suggest ? ctx.suggestionsFor(spec, path) : [];
  const listId = options.length && spec.type !== 'select' ? `${id}-options` : undefined;

  let control;
  switch (spec.type) {
    case 'checkbox':
      control = <input {...common} type="checkbox" checked={value === true} onChange={(e) => ctx.onChange(path, e.target.checked)} />;
      break;
    case 'select': {
      // A stored value missing from the choices (a prompt since deleted) is still shown as it is.
      const choices = spec.options ?? options;
      const all = text && !choices.includes(text) ? [text, ...choices] : choices;
      control = (
        <select {...common} value={text} onChange={(e) => setText(e.target.value)}>
          {!spec.options && <option value="">— choose —</option>}
          {all.map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
      );
      break;
    }
    case 'longtext':
      control = <textarea {...common} className="config-system" rows={12} value={text} onChange={(e) => setText(e.target.value)} />;
      break;
    case 'json':
      control = <textarea {...common} className="mono" rows={5} spellCheck={false} value={text} onChange={(e) => setText(e.target.value)} />;
      break;
    case 'list':
      control = <ChipList {...common} label={spec.label} items={Array.isArray(value) ? value : []} listId={listId} onChange={(v) => ctx.onChange(path, v)} />;
      break;
    case 'name':
      control = (
        <input {...common} type="text" value={text} readOnly={ctx.stored} required autoComplete="off" spellCheck={false}
          onChange={(e) => setText(e.target.value)} />
      );
      break;
    default:
      control = (
        <input
          {...common}
          type="text"
          inputMode={spec.type === 'number' ? 'decimal' : spec.type === 'integer' ? 'numeric' : undefined}
          value={text}
          placeholder={spec.placeholder}
          list={listId}
          autoComplete="off"
          spellCheck={false}
          onChange={(e) => setText(e.target.value)}
        />
      );
  }

  return (
    <div className={spec.type === 'checkbox' ? 'config-field config-check' : 'config-field'}>
      {spec.type === 'checkbox' ? (
        <>
          {control}
          <label htmlFor={id}>{spec.label}</label>
        </>
      ) : (
        <>
          <label htmlFor={id}>{spec.label}</label>
          {control}
        </>
      )}
      {listId && (
        <datalist id={listId}>
          {options.map((o) => (
            <option key={o} value={o} />
          ))}
        </datalist>
      )}
      {spec.help && (
        <small id={`${id}-help`} className="muted config-help">
          {spec.help}
          {spec.type === 'name' && ctx.stored && ' Fixed once stored: a new name makes a new definition.'}
        </small>
      )}
      {spec.type === 'secret_name' && (
        <small className="muted config-help">
          Set the value with <code>wrangler secret put NAME</code> (or in <code>.dev.vars</code> locally). It is never shown here
          and no route returns it.
        </small>
      )}
      {error && (
        <p id={`${id}-error`} className="error-note config-error">
          {error}
        </p>
      )}
    </div>
  );
}

/** An agent's side: its own fieldset; an optional side has a checkbox that turns it on. */
function SideFieldset({ spec, path, ctx }: { spec: FieldSpec; path: string; ctx: FieldContext }) {
  const on = !spec.optional || ctx.draft[path] === true;
  const id = ctx.idOf(path);
  const error = ctx.errors[path];
  return (
    <fieldset className="config-side">
      <legend>{spec.label}</legend>
      {spec.optional && (
        <div className="config-field config-check">
          <input
            id={id}
            type="checkbox"
            checked={on}
            aria-invalid={error ? true : undefined}
            aria-describedby={describedBy(id, spec, error)}
            onChange={(e) => ctx.onChange(path, e.target.checked)}
          />
          <label htmlFor={id}>Use {spec.label}</label>
          {spec.help && (
            <small id={`${id}-help`} className="muted config-help">
              {spec.help}
            </small>
          )}
          {error && (
            <p id={`${id}-error`} className="error-note config-error">
              {error}
            </p>
          )}
        </div>
      )}
      {on && SIDE_FIELDS.map((sub) => <Field key={sub.key} spec={sub} path={`${path}.${sub.key}`} ctx={ctx} />)}
    </fieldset>
  );
}

/**
 * A list of names as chips: each has its own remove button, and the input adds what is typed
 * (Enter or "Add"; several names at once when separated by commas or spaces). Leaving the input
 * adds it too: whatever ends the typing (Save, Tab, a click elsewhere) moves the focus, and text
 * left in the box would otherwise be dropped without a word.
 */
function ChipList({
  id,
  label,
  items,
  listId,
  onChange,
  ...aria
}: {
  id: string;
  label: string;
  items: string[];
  listId: string | undefined;
  onChange: (items: string[]) => void;
  'aria-invalid'?: boolean;
  'aria-describedby'?: string;
}) {
  const [typed, setTyped] = useState('');
  const add = () => {
    const names = typed.split(/[\s,]+/).filter((n) => n && !items.includes(n));
    if (names.length) onChange([...items, ...new Set(names)]);
    setTyped('');
  };
  const onKey = (e: KeyboardEvent<HTMLInputElement>) => {
    // Enter adds rather than submitting the form, while there is something to add.
    if (e.key === 'Enter' && typed.trim()) {
      e.preventDefault();
      add();
    }
  };
  return (
    <div className="config-chips">
      {items.length > 0 && (
        <ul aria-label={`${label}: chosen`}>
          {items.map((item) => (
            <li key={item} className="chip">
              <span>{item}</span>
              <button type="button" className="link" aria-label={`Remove ${item} from ${label}`}
                onClick={() => {
                  onChange(items.filter((i) => i !== item));
                  // The button goes away with its chip: keep the keyboard in the list.
                  document.getElementById(id)?.focus();
                }}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="row">
        <input id={id} {...aria} type="text" value={typed} list={listId} autoComplete="off" spellCheck={false}
          placeholder={items.length ? 'add another' : 'add a name'} onChange={(e) => setTyped(e.target.value)} onKeyDown={onKey}
          onBlur={() => typed.trim() && add()} />
        {/* Never disabled: Tab from the box adds the text (on blur) and lands here, which must stay focusable. */}
        <button type="button" className="secondary" onClick={add} aria-label={`Add to ${label}`}>
          Add
        </button>
      </div>
    </div>
  );
}
