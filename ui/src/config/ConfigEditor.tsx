// The configuration editor (#/config/<kind>/<name>): a tab per kind, the definitions of that kind
// as a list of links, and the selected one's form (DefinitionForm). `#/config/<kind>/+new` is a
// new definition: `+` is never part of a name, so it cannot collide with one. Leaving a form with
// unsaved changes asks first (the form's leave guard, route.ts).
import { useCallback, useState } from 'react';
import type { ConfigDefinition, ConfigKind } from '@edgent/client';
import { useApi, useLoad } from '../api';
import { ErrorNote, Tabs } from '../components';
import { href, navigate } from '../route';
import { DefinitionForm, type Known } from './DefinitionForm';
import { KINDS, isKind, nameKey, singular } from './fields';
import './config.css';

const NEW = '+new';

const NOTHING_KNOWN: Known = { models: [], prompts: [], agents: [], tools: [] };

const TITLES: Record<ConfigKind, string> = { models: 'Models', prompts: 'Prompts', agents: 'Agents' };

/** A line about a definition for the list: never a secret's name or anything near one. */
function summary(kind: ConfigKind, d: ConfigDefinition): string {
  if (kind === 'models') return `${String(d.provider)} · ${String(d.model)}`;
  if (kind === 'prompts') return `model ${String(d.model)}`;
  return `${String(d.kind)}${d.expose_as_tool === true ? ' · tool' : ''}`;
}

export function ConfigEditor({ kind: routeKind, name }: { kind?: string; name?: string }) {
  const { client } = useApi();
  const kind: ConfigKind = isKind(routeKind) ? routeKind : 'models';
  const lists = useLoad(async () => {
    const [models, prompts, agents] = await Promise.all([client.listConfig('models'), client.listConfig('prompts'), client.listConfig('agents')]);
    return { models, prompts, agents };
  }, [client]);
  // Only suggestions (a prompt's tools): the editor works without them, so they do not hold up the lists.
  const tools = useLoad(() => client.tools().then((t) => t.tools.map((x) => String(x.name)), () => []), [client]);
  const known: Known | undefined = lists.data && { ...lists.data, tools: tools.data ?? [] };
  const [notice, setNotice] = useState<string | null>(null);

  const clearNotice = () => setNotice(null);
  const { reload } = lists;
  const onChanged = useCallback(
    (text?: string) => {
      setNotice(text ?? null);
      reload();
    },
    [reload],
  );

  const definitions = lists.data?.[kind] ?? [];
  const key = nameKey(kind);
  const creating = name === NEW;
  const selected = creating ? undefined : name;

  // A fresh form for every definition shown, so no control's state (a half-typed name) carries
  // over; except that a new definition's form stays itself when the route moves to the name it
  // was just saved under, keeping its "Saved" and the focus. (State adjusted while rendering, as
  // React documents for props that change.)
  const routeKey = `${kind}/${selected ?? NEW}`;
  const [form, setForm] = useState({ routeKey, key: routeKey, count: 0, created: '' });
  if (form.routeKey !== routeKey) {
    const count = form.count + 1;
    setForm({ routeKey, key: form.created === routeKey ? form.key : `${routeKey}#${count}`, count, created: '' });
  }
  const onCreated = useCallback((created: string) => setForm((f) => ({ ...f, created: `${kind}/${created}` })), [kind]);

  return (
    <div className="config">
      <h1>Configuration</h1>
      <Tabs
        label="Kinds of definition"
        tabs={KINDS.map((k) => ({ id: k, label: TITLES[k] }))}
        selected={kind}
        onSelect={(k) => {
          if (k === kind) return;
          setNotice(null);
          navigate({ page: 'config', kind: k });
        }}
      >
        <div className="config-layout">
          <nav className="config-list panel" aria-label={TITLES[kind]}>
            <a className="button-link" href={href({ page: 'config', kind, name: NEW })} onClick={clearNotice} aria-current={creating ? 'page' : undefined}>
              New {singular(kind)}
            </a>
            <ErrorNote>{lists.error}</ErrorNote>
            {lists.data && definitions.length === 0 && <p className="muted">No {kind} yet.</p>}
            {!lists.data && lists.loading && <p className="muted">Loading…</p>}
            <ul>
              {definitions.map((d) => {
                const n = String(d[key]);
                return (
                  <li key={n}>
                    <a href={href({ page: 'config', kind, name: n })} onClick={clearNotice} aria-current={n === selected ? 'page' : undefined}>
                      {n}
                    </a>
                    <span className="muted">{summary(kind, d)}</span>
                  </li>
                );
              })}
            </ul>
          </nav>
          <section className="config-main" aria-label={`${singular(kind)} editor`}>
            <p role="status" className="config-notice">
              {notice}
            </p>
            {creating || selected !== undefined ? (
              <DefinitionForm
                key={form.key}
                kind={kind}
                name={selected}
                known={known ?? NOTHING_KNOWN}
                onChanged={onChanged}
                onCreated={onCreated}
              />
            ) : (
              <p className="muted">Choose a {singular(kind)} in the list, or create a new one.</p>
            )}
          </section>
        </div>
      </Tabs>
    </div>
  );
}
