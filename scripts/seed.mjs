#!/usr/bin/env node
// Loads agents/{models,prompts,agents}/*.toml into D1, idempotently.
//
//   node scripts/seed.mjs [--persist-to DIR] [--demo-model URL]
//       The local D1 (the one `wrangler dev` uses), written directly with parameterised
//       statements after applying any pending migrations. With --demo-model, every model whose
//       key secret has no value in ./.dev.vars is written as edgent's demo model at URL
//       (scripts/demo-model.mjs; `npm run dev` does this when the default model has no key).
//       Without it, the files' definitions are written, so the next seed after setting a key
//       puts the real model back.
//   node scripts/seed.mjs --key-status NAME
//       For scripts/dev.sh: one tab-separated line about model NAME: its key secret (or -),
//       whether .dev.vars sets it (set, empty, or - without a secret), its model and base_url.
//       Exit 3 when there is no model NAME.
//   node scripts/seed.mjs --remote [--url URL] [--skip-migrations]
//       A deployed Worker: `wrangler d1 migrations apply DB --remote`, then the definitions go
//       to `PUT $URL/api/config`, which validates them as one set and writes them in one batch.
//       URL defaults to $EDGENT_URL; the key is $EDGENT_API_KEY.
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { parse as parseToml } from 'smol-toml';
import { asDemoModel, keylessModels, readDevVars, seedLocal, toDefinitions, toRows } from './lib/d1.mjs';

const args = process.argv.slice(2);

function fail(message, code = 1) {
  console.error(`seed: ${message}`);
  process.exit(code);
}

function flagValue(name) {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) fail(`${name} needs a value`, 2);
  return v;
}

let defs;
try {
  defs = toDefinitions('agents');
} catch (e) {
  fail(e.message);
}

const demoUrl = flagValue('--demo-model');
if (demoUrl !== undefined && !/^https?:\/\/[^/]/.test(demoUrl)) fail(`--demo-model needs the demo server's URL (got "${demoUrl}")`, 2);

if (args.includes('--key-status')) keyStatus(flagValue('--key-status'));
else if (args.includes('--remote')) {
  // The demo server runs on this machine: a deployed Worker cannot reach it.
  if (demoUrl !== undefined) fail('--demo-model is for the local D1 only; it cannot be used with --remote', 2);
  await seedRemote();
} else await seedLocalD1();

function keyStatus(name) {
  const model = defs.models.find((m) => m.name === name);
  if (!model) process.exit(3);
  const secret = model.api_key_secret;
  const state = !secret ? '-' : keylessModels([model], readDevVars('.dev.vars')).length ? 'empty' : 'set';
  console.log([secret || '-', state, model.model ?? '-', model.base_url ?? '-'].join('\t'));
}

async function seedRemote() {
  const url = (flagValue('--url') ?? process.env.EDGENT_URL ?? '').replace(/\/+$/, '');
  const key = process.env.EDGENT_API_KEY ?? '';
  if (!url) fail('no Worker URL: pass --url https://<your worker> or set EDGENT_URL', 2);
  if (!/^https?:\/\//.test(url)) fail(`the Worker URL must start with http:// or https:// (got "${url}")`, 2);
  if (!key) fail('EDGENT_API_KEY is not set: export the API key the Worker was deployed with', 2);

  if (!args.includes('--skip-migrations')) {
    console.log('seed: applying D1 migrations (npx wrangler d1 migrations apply DB --remote)');
    const r = spawnSync('npx', ['wrangler', 'd1', 'migrations', 'apply', 'DB', '--remote'], { stdio: 'inherit' });
    if (r.error) fail(`could not run wrangler: ${r.error.message}`);
    if (r.status !== 0) fail(`wrangler d1 migrations apply failed (exit ${r.status}); nothing was seeded`);
  }

  let res;
  try {
    res = await fetch(`${url}/api/config`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(defs),
    });
  } catch (e) {
    fail(`could not reach ${url}: ${e.cause?.message ?? e.message}`);
  }
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (!res.ok) {
    const why = body?.error ? `${body.error.code}: ${body.error.message}` : text.slice(0, 500);
    fail(`${url} refused the definitions (${res.status}) ${why}`);
  }
  for (const kind of ['models', 'prompts', 'agents']) {
    const r = body?.[kind] ?? {};
    const part = (k) => `${(r[k] ?? []).length} ${k}`;
    console.log(`seed: ${kind}: ${part('created')}, ${part('updated')}, ${part('unchanged')}`);
  }
}

async function seedLocalD1() {
  const persistTo = flagValue('--persist-to') ?? '.wrangler/state';
  const config = parseToml(readFileSync('wrangler.toml', 'utf8'));
  const d1 = (config.d1_databases ?? []).find((d) => d.binding === 'DB');
  if (!d1) fail('wrangler.toml has no D1 binding named DB');
  if (demoUrl !== undefined) {
    const swap = new Set(keylessModels(defs.models, readDevVars('.dev.vars')));
    defs.models = defs.models.map((m) => (swap.has(m.name) ? asDemoModel(m, demoUrl) : m));
    for (const m of defs.models.filter((d) => swap.has(d.name))) {
      console.log(`seed: model "${m.name}" is the demo model (${m.base_url}): no key in .dev.vars`);
    }
  }
  let rows;
  try {
    rows = toRows(defs);
  } catch (e) {
    fail(e.message);
  }
  const n = await seedLocal({
    persistTo,
    databaseId: d1.database_id,
    migrationsDir: d1.migrations_dir ?? 'migrations',
    defs: rows,
  });
  if (n.applied.length) console.log(`seed: applied migrations ${n.applied.join(', ')}`);
  console.log(`seed: ${n.models} models, ${n.prompts} prompts, ${n.agents} agents loaded into local D1`);
}
