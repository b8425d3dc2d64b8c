#!/usr/bin/env node
// Loads agents/{models,prompts,agents}/*.toml into the local D1 (the one `wrangler dev` uses),
// idempotently, with parameterised statements. Usage: node scripts/seed.mjs [--persist-to DIR]
import { readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { loadDefinitions, seedLocal } from './lib/d1.mjs';

const args = process.argv.slice(2);
if (args.includes('--remote')) {
  console.error('seed: --remote is not supported yet; see docs/deploying.md for loading a remote D1.');
  process.exit(2);
}
const persistIdx = args.indexOf('--persist-to');
const persistTo = persistIdx >= 0 ? args[persistIdx + 1] : '.wrangler/state';

const config = parseToml(readFileSync('wrangler.toml', 'utf8'));
const d1 = (config.d1_databases ?? []).find((d) => d.binding === 'DB');
if (!d1) {
  console.error('seed: wrangler.toml has no D1 binding named DB');
  process.exit(1);
}
let defs;
try {
  defs = loadDefinitions('agents');
} catch (e) {
  console.error(`seed: ${e.message}`);
  process.exit(1);
}

const n = await seedLocal({
  persistTo,
  databaseId: d1.database_id,
  migrationsDir: d1.migrations_dir ?? 'migrations',
  defs,
});
if (n.applied.length) console.log(`seed: applied migrations ${n.applied.join(', ')}`);
console.log(`seed: ${n.models} models, ${n.prompts} prompts, ${n.agents} agents loaded into local D1`);
