// One definition's form: loads it (or starts from the defaults for a new one), saves it whole with
// PUT, deletes it after a second press, resets to the stored version, and says when there are
// unsaved changes (and asks before they are left behind). A refused save puts the server's
// message beside the field it names; a new definition never takes a name that exists (PUT would
// replace that definition).
import { useEffect, useId, useMemo, useState, type FormEvent } from 'react';
import { EdgentError, type ConfigDefinition, type ConfigKind } from '@edgent/client';
import { describe, useApi } from '../api';
import { ErrorNote, Json } from '../components';
import { navigate, setLeaveGuard } from '../route';
import { Field, type FieldContext } from './controls';
import { draftsDiffer, fieldPaths, fromDraft, toDraft, type Draft, type DraftValue, type FieldErrors } from './draft';
import { FIELDS, KNOWN_SECRET_NAMES, nameKey, singular, type FieldSpec } from './fields';
import { fieldOfMessage } from './serverError';

/** What the API already holds, for suggestions. */
export interface Known {
  models: ConfigDefinition[];
  prompts: ConfigDefinition[];
  agents: ConfigDefinition[];
  /** Registered tools' names (GET /api/tools). */
  tools: string[];
}

const names = (defs: ConfigDefinition[], key = 'name') => defs.map((d) => String(d[key]));

export function DefinitionForm({
  kind,
  name,
  known,
  onChanged,
  onCreated,
}: {
  kind: ConfigKind;
  /** `undefined`: a new definition. */
  name: string | undefined;
  known: Known;
  /** Something was written or deleted: the lists are stale. */
  onChanged: (notice?: string) => void;
  /** A new definition was stored under `name`: the route is about to name it. */
  onCreated: (name: string) => void;
}) {
  const { client } = useApi();
  const fields = FIELDS[kind];
  const base = useId();
  const idOf = (path: string) => `${base}-${path.replace(/\W/g, '-')}`;

  // Which definition the draft holds (`{name: undefined}`: a new one); `null` while loading.
  const [shown, setShown] = useState<{ name: string | undefined } | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [stored, setStored] = useState<ConfigDefinition | undefined>(undefined);
  const [draft, setDraft] = useState<Draft>(() => toDraft(fields, undefined));
  const [errors, setErrors] = useState<FieldErrors>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [saved, setSaved] = useState(0);
  const [busy, setBusy] = useState(false);
  const [confirmingDelete, setConfirmingDelete] = useState(false);
  const [focusRequest, setFocusRequest] = useState<{ path: string } | null>(null);

  useEffect(() => {
    // The route now names what the draft already holds: a definition this form just created.
    if (shown && shown.name === name) return;
    let live = true;
    setShown(null);
    setLoadError(null);
    setErrors({});
    setFormError(null);
    setSaved(0);
    setConfirmingDelete(false);
    if (name === undefined) {
      setStored(undefined);
      setDraft(toDraft(fields, undefined));
      setShown({ name });
      return;
    }
    client.getConfig(kind, name).then(
      (definition) => {
        if (!live) return;
        setStored(definition);
        setDraft(toDraft(fields, definition));
        setShown({ name });
      },
      (e: unknown) => live && setLoadError(describe(e)),
    );
    return () => {
      live = false;
    };
    // Runs when the route names another definition; `shown` is read, not watched.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, kind, name]);

  const baseline = useMemo(() => toDraft(fields, stored), [fields, stored]);
  const dirty = shown !== null && draftsDiffer(draft, baseline);
  useEffect(() => {
    if (!dirty) return;
    // Closing or reloading the tab would lose the changes: the browser asks first.
    const ask = (e: BeforeUnloadEvent) => e.preventDefault();
    window.addEventListener('beforeunload', ask);
    // Any other way out (a link, the tabs, Back) changes the route: it asks first.
    setLeaveGuard(() => window.confirm('Leave without saving your changes?'));
    return () => {
      window.removeEventListener('beforeunload', ask);
      setLeaveGuard(null);
    };
  }, [dirty]);

  useEffect(() => {
    if (focusRequest) document.getElementById(idOf(focusRequest.path))?.focus();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [focusRequest]);

  const change = (path: string, value: DraftValue) => {
    const next = { ...draft, [path]: value };
    // An agent's kind decides whether it has a side B: follow it, so the pair stays valid.
    if (kind === 'agents' && path === 'kind') next.side_b = value === 'dual_ai';
    setDraft(next);
    setSaved(0);
    setConfirmingDelete(false);
    // Typing fixes the old value's problem; a problem of the new value (bad JSON, not a number)
    // shows at once, before any save.
    const found = fromDraft(fields, next, stored).errors[path];
    setErrors((prev) => {
      const rest = { ...prev };
      delete rest[path];
      return found ? { ...rest, [path]: found } : rest;
    });
  };

  const suggestionsFor = (spec: FieldSpec, path: string): string[] => {
    const self = name ?? '';
    switch (spec.suggest) {
      case 'models':
        return names(known.models).filter((n) => !(kind === 'models' && n === self));
      case 'prompts':
        return names(known.prompts);
      case 'secret_names':
        return [...new Set([...KNOWN_SECRET_NAMES, ...known.models.map((m) => m.api_key_secret).filter((s): s is string => typeof s === 'string')])];
      case 'tool_names': {
        const exposed = known.agents.filter((a) => a.expose_as_tool === true);
        const all = [...known.tools, ...names(known.prompts), ...names(exposed, 'id')];
        return [...new Set(all)].filter((n) => !(kind === 'prompts' && n === self));
      }
      case 'stop_tools': {
        const promptName = draft[path.replace(/\.[^.]*$/, '.prompt')];
        const prompt = known.prompts.find((p) => p.name === promptName);
        return Array.isArray(prompt?.tools) ? prompt.tools.map(String) : [];
      }
      default:
        return [];
    }
  };

  async function save(e: FormEvent) {
    e.preventDefault();
    const { definition, errors: found } = fromDraft(fields, draft, stored);
    const key = nameKey(kind);
    const target = name ?? String(draft[key] ?? '');
    const paths = fieldPaths(fields, draft);
    const first = paths.find((p) => found[p]);
    if (first) {
      setErrors(found);
      setFocusRequest({ path: first });
      return;
    }
    if (name === undefined && names(known[kind], key).includes(target)) {
      // PUT stores whole definitions: this one would silently replace the one of that name.
      const article = /^[aeiou]/.test(singular(kind)) ? 'An' : 'A';
      setErrors({ [key]: `${article} ${singular(kind)} named "${target}" exists already: open it to change it, or pick another name` });
      setFocusRequest({ path: key });
      return;
    }
    definition[key] = target;
    setBusy(true);
    setErrors({});
    setFormError(null);
    setSaved(0);
    try {
      const answer = await client.putConfig(kind, target, definition);
      setStored(answer);
      setDraft(toDraft(fields, answer));
      setShown({ name: target });
      setSaved((n) => n + 1);
      onChanged();
      if (name === undefined) {
        // Nothing is unsaved now, whatever the last render said.
        setLeaveGuard(null);
        onCreated(target);
        navigate({ page: 'config', kind, name: target }, true);
      }
    } catch (err) {
      const path = err instanceof EdgentError && err.code === 'invalid_definition' ? fieldOfMessage(err.message, kind, target, paths) : null;
      if (path && err instanceof Error) {
        setErrors({ [path]: err.message });
        setFocusRequest({ path });
      } else {
        setFormError(err instanceof EdgentError ? err.message : describe(err));
      }
    } finally {
      setBusy(false);
    }
  }

  async function remove() {
    if (name === undefined) return;
    setBusy(true);
    setFormError(null);
    try {
      await client.deleteConfig(kind, name);
      onChanged(`Deleted ${singular(kind)} "${name}".`);
      // Unsaved edits of a deleted definition are gone with it: nothing to ask about.
      setLeaveGuard(null);
      navigate({ page: 'config', kind });
    } catch (err) {
      // 409 in_use names what still refers to it.
      setFormError(err instanceof EdgentError ? err.message : describe(err));
      setConfirmingDelete(false);
    } finally {
      setBusy(false);
    }
  }

  const reset = () => {
    setDraft(baseline);
    setErrors({});
    setFormError(null);
    setSaved(0);
  };

  if (loadError) return <ErrorNote>{loadError}</ErrorNote>;
  if (!shown || shown.name !== name) return <p className="muted">Loading…</p>;

  const ctx: FieldContext = { draft, errors, idOf, suggestionsFor, onChange: change, stored: stored !== undefined };
  const title = name === undefined ? `New ${singular(kind)}` : `${singular(kind)[0]?.toUpperCase()}${singular(kind).slice(1)} "${name}"`;
  return (
    <form className="config-form panel" onSubmit={save} noValidate aria-labelledby={`${base}-title`}>
      <div className="row">
        <h2 id={`${base}-title`}>{title}</h2>
        {dirty && <span className="badge badge-waiting">Unsaved changes</span>}
      </div>
      <ErrorNote>{formError}</ErrorNote>
      {fields.map((spec) => (
        <Field key={spec.key} spec={spec} path={spec.key} ctx={ctx} />
      ))}
      <div className="row config-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : 'Save'}
        </button>
        <button type="button" className="secondary" onClick={reset} disabled={!dirty}>
          Reset
        </button>
        <span className="spacer" />
        {stored !== undefined && !confirmingDelete && (
          <button type="button" className="secondary" onClick={() => setConfirmingDelete(true)} disabled={busy}>
            Delete…
          </button>
        )}
        {confirmingDelete && (
          <span className="row" role="group" aria-label="Confirm deletion">
            <span>Delete {singular(kind)} "{name}" for good?</span>
            <button type="button" className="danger" onClick={remove} disabled={busy} autoFocus>
              Confirm delete
            </button>
            <button type="button" className="secondary" onClick={() => setConfirmingDelete(false)}>
              Cancel
            </button>
          </span>
        )}
      </div>
      <p role="status" className="config-status">
        {saved > 0 ? 'Saved' : ''}
      </p>
      {stored !== undefined && (
        <details key={saved} open={saved > 0 || undefined}>
          <summary>Stored definition</summary>
          <Json value={stored} label="Stored definition" />
        </details>
      )}
    </form>
  );
}
