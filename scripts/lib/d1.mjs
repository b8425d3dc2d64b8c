// Applying D1 migrations and seeding agent definitions through a D1 binding.
// Everything goes through prepared statements with bound values: the same code seeds the
// local dev database (via Miniflare on wrangler's state directory) and test databases.
import { readdirSync, readFileSync } from 'node:fs';
import { join, basename } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { Miniflare } from 'miniflare';

/** Splits a migration file into statements (comments dropped, `;` at line end separates). */
export function splitSql(text) {
  return text
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Applies every migrations/*.sql not yet recorded in `d1_migrations`, in name order. */
export async function applyMigrations(db, dir) {
  await db.prepare(
    'CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)',
  ).run();
  const done = new Set((await db.prepare('SELECT name FROM d1_migrations').all()).results.map((r) => r.name));
  const applied = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.sql')).sort()) {
    if (done.has(file)) continue;
    const statements = splitSql(readFileSync(join(dir, file), 'utf8')).map((s) => db.prepare(s));
    statements.push(db.prepare('INSERT INTO d1_migrations (name) VALUES (?)').bind(file));
    await db.batch(statements);
    applied.push(file);
  }
  return applied;
}

/** Parses every `*.toml` in `dir` (name order) into `{ file, data }`; a missing dir is empty. */
function readTomlDir(dir) {
  let files = [];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.toml')).sort();
  } catch {
    return [];
  }
  return files.map((f) => {
    const file = join(dir, f);
    try {
      return { file, data: parseToml(readFileSync(file, 'utf8')) };
    } catch (e) {
      throw new Error(`${file}: ${e.message}`);
    }
  });
}

/**
 * Reads agents/{models,prompts,agents}/*.toml into definitions exactly as the configuration API
 * takes them (`PUT /api/config`, see docs/api.md): each file's keys as written, with `name` (`id`
 * for agents) defaulting to the file's stem. Nothing else is added or dropped, so the server's
 * validation sees what the file says. Both seeding paths start here.
 */
export function toDefinitions(root) {
  const read = (kind, key) =>
    readTomlDir(join(root, kind)).map(({ file, data }) => ({ [key]: basename(file, '.toml'), ...data }));
  return { models: read('models', 'name'), prompts: read('prompts', 'name'), agents: read('agents', 'id') };
}

// The fields each kind accepts (the Rust definitions in src/core/config.rs refuse others too).
const MODEL_FIELDS = ['name', 'provider', 'model', 'base_url', 'api_key_secret', 'fallbacks', 'input_price_per_mtok',
  'output_price_per_mtok', 'first_chunk_timeout_ms', 'stall_timeout_ms', 'total_timeout_ms', 'max_history_tokens',
  'max_output_tokens'];
const PROMPT_FIELDS = ['name', 'system', 'model', 'tools', 'tool_choice', 'parallel_tool_calls', 'include_chat',
  'description', 'hooks', 'tool_bindings', 'mcp_servers', 'compaction_prompt', 'response_format', 'max_offered_tools',
  'pinned_tools', 'tool_selection_model'];
const AGENT_FIELDS = ['id', 'kind', 'description', 'side_a', 'side_b', 'max_turns', 'expose_as_tool',
  'tool_description', 'hooks', 'max_tokens', 'max_cost_usd'];

function onlyKnown(what, def, fields) {
  const unknown = Object.keys(def).filter((k) => !fields.includes(k));
  if (unknown.length) throw new Error(`${what}: unknown field "${unknown[0]}" (allowed: ${fields.join(', ')})`);
}

function required(what, def, key) {
  if (typeof def[key] !== 'string' || def[key] === '') {
    throw new Error(`${what}: "${key}" is required and must be a string`);
  }
  return def[key];
}

/**
 * Turns definitions (as `toDefinitions` gives them) into D1 rows for writing D1 directly (the
 * local path): the defaults the Rust definitions apply, lists and side objects as JSON text,
 * booleans as 0/1. The remote path sends the definitions to the API instead, which validates
 * everything; this checks only what the rows need and the references between files.
 */
export function toRows(defs) {
  const models = defs.models.map((d) => {
    const what = `model "${d.name}"`;
    onlyKnown(what, d, MODEL_FIELDS);
    return {
      name: d.name,
      provider: required(what, d, 'provider'),
      model: required(what, d, 'model'),
      base_url: d.base_url ?? '',
      api_key_secret: d.api_key_secret ?? null,
      fallbacks: JSON.stringify(d.fallbacks ?? []),
      input_price_per_mtok: d.input_price_per_mtok ?? 0,
      output_price_per_mtok: d.output_price_per_mtok ?? 0,
      first_chunk_timeout_ms: d.first_chunk_timeout_ms ?? null,
      stall_timeout_ms: d.stall_timeout_ms ?? null,
      total_timeout_ms: d.total_timeout_ms ?? null,
      max_history_tokens: d.max_history_tokens ?? null,
      max_output_tokens: d.max_output_tokens ?? null,
    };
  });
  const prompts = defs.prompts.map((d) => {
    const what = `prompt "${d.name}"`;
    onlyKnown(what, d, PROMPT_FIELDS);
    return {
      name: d.name,
      system: d.system ?? '',
      model: required(what, d, 'model'),
      tools: JSON.stringify(d.tools ?? []),
      tool_choice: d.tool_choice ?? 'auto',
      parallel_tool_calls: d.parallel_tool_calls === false ? 0 : 1,
      include_chat: d.include_chat === false ? 0 : 1,
      description: d.description ?? '',
      hooks: JSON.stringify(d.hooks ?? []),
      tool_bindings: JSON.stringify(d.tool_bindings ?? {}),
      mcp_servers: JSON.stringify(d.mcp_servers ?? []),
      compaction_prompt: d.compaction_prompt ?? null,
      response_format: d.response_format ? JSON.stringify(d.response_format) : null,
      max_offered_tools: d.max_offered_tools ?? null,
      pinned_tools: JSON.stringify(d.pinned_tools ?? []),
      tool_selection_model: d.tool_selection_model ?? null,
    };
  });
  const agents = defs.agents.map((d) => {
    const what = `agent "${d.id}"`;
    onlyKnown(what, d, AGENT_FIELDS);
    if (!d.side_a || typeof d.side_a.prompt !== 'string') {
      throw new Error(`${what}: [side_a] with a "prompt" is required`);
    }
    return {
      id: d.id,
      kind: d.kind ?? 'ai_human',
      description: d.description ?? '',
      side_a: JSON.stringify(d.side_a),
      side_b: d.side_b ? JSON.stringify(d.side_b) : null,
      max_turns: d.max_turns ?? 25,
      expose_as_tool: d.expose_as_tool ? 1 : 0,
      tool_description: d.tool_description ?? '',
      hooks: JSON.stringify(d.hooks ?? []),
      max_tokens: d.max_tokens ?? null,
      max_cost_usd: d.max_cost_usd ?? null,
    };
  });
  const modelNames = new Set(models.map((m) => m.name));
  for (const p of prompts) {
    if (!modelNames.has(p.model)) throw new Error(`prompt "${p.name}" uses unknown model "${p.model}"`);
  }
  const promptNames = new Set(prompts.map((p) => p.name));
  for (const a of defs.agents) {
    for (const s of [a.side_a, a.side_b].filter(Boolean)) {
      if (!promptNames.has(s.prompt)) throw new Error(`agent "${a.id}" uses unknown prompt "${s.prompt}"`);
    }
  }
  return { models, prompts, agents };
}

/** Reads agents/{models,prompts,agents}/*.toml into D1 rows (`toRows(toDefinitions(root))`). */
export function loadDefinitions(root) {
  return toRows(toDefinitions(root));
}

/**
 * Reads a `.dev.vars` file (dotenv: `NAME=value`, `#` comments, optional quotes and `export`)
 * into `{ NAME: value }`, as `wrangler dev` gives the Worker its secrets. A missing file is `{}`.
 */
export function readDevVars(file) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return {};
  }
  const vars = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim().replace(/^export\s+/, '');
    const m = line.match(/^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/);
    if (!m) continue;
    // As dotenv (which wrangler uses) reads it: a quoted value as written, otherwise up to a `#`.
    const quoted = m[2].match(/^(["'`])(.*?)\1\s*(?:#.*)?$/);
    vars[m[1]] = quoted ? quoted[2] : m[2].split('#')[0].trim();
  }
  return vars;
}

/**
 * The models whose key is not set: each names an `api_key_secret` whose value in `vars` is
 * missing or blank (the runtime treats a blank key as none: crates/edgent/src/runtime/chain.rs).
 */
export function keylessModels(models, vars) {
  return models.filter((m) => m.api_key_secret && !(vars[m.api_key_secret] ?? '').trim()).map((m) => m.name);
}

/**
 * A model definition rewritten to edgent's demo model at `url` (scripts/demo-model.mjs): an
 * OpenAI-compatible server needing no key. The name, fallbacks, timeouts and limits stay, so
 * prompts and budgets work as before; prices become 0, since the demo costs nothing.
 */
export function asDemoModel(def, url) {
  return {
    ...def,
    provider: 'openai',
    model: 'edgent-demo',
    base_url: `${url.replace(/\/+$/, '')}/v1`,
    api_key_secret: null,
    input_price_per_mtok: 0,
    output_price_per_mtok: 0,
  };
}

/** Upserts rows into a table (idempotent: running it twice changes nothing). */
function upsert(db, table, key, row) {
  const cols = Object.keys(row);
  const sql =
    `INSERT INTO ${table} (${cols.join(', ')}, updated_at) VALUES (${cols.map(() => '?').join(', ')}, ?) ` +
    `ON CONFLICT (${key}) DO UPDATE SET ${cols.filter((c) => c !== key).map((c) => `${c} = excluded.${c}`).join(', ')}, updated_at = excluded.updated_at`;
  return db.prepare(sql).bind(...cols.map((c) => row[c]), Date.now());
}

/** Writes definitions into D1 in one batch. */
export async function seed(db, defs) {
  const statements = [
    ...defs.models.map((r) => upsert(db, 'models', 'name', r)),
    ...defs.prompts.map((r) => upsert(db, 'prompts', 'name', r)),
    ...defs.agents.map((r) => upsert(db, 'agents', 'id', r)),
  ];
  if (statements.length) await db.batch(statements);
  return { models: defs.models.length, prompts: defs.prompts.length, agents: defs.agents.length };
}

/**
 * Migrates and seeds the local D1 that `wrangler dev --persist-to <persistTo>` opens (the same
 * file `wrangler d1 ... --local` uses). Returns the migrations applied and the rows written.
 */
export async function seedLocal({ persistTo, databaseId, migrationsDir, defs }) {
  return await withLocalD1({ persistTo, databaseId }, async (db) => {
    const applied = await applyMigrations(db, migrationsDir);
    return { applied, ...(await seed(db, defs)) };
  });
}

/**
 * Runs `use(db)` on the local D1 under `persistTo` (as `wrangler dev --persist-to` keeps it),
 * through a Miniflare of its own, disposed of afterwards; once more on a fresh one if the
 * binding proxy desynchronises (`againOnProxyDesync`), so `use` must be idempotent.
 */
export async function withLocalD1({ persistTo, databaseId }, use) {
  return await againOnProxyDesync(async () => {
    const mf = new Miniflare({
      modules: true,
      script: 'export default { fetch() { return new Response(null, { status: 404 }); } }',
      d1Databases: { DB: databaseId },
      d1Persist: join(persistTo, 'v3', 'd1'),
    });
    try {
      return await use(await mf.getD1Database('DB'));
    } finally {
      await mf.dispose();
    }
  });
}

/**
 * Runs `start` (which starts a Miniflare of its own and sets up its D1 through the binding
 * proxy), and once more if that proxy desynchronised on the way. The proxy makes synchronous
 * calls (`D1Database#prepare`, `bind`, ...) over a worker-thread channel; when its thread is
 * preempted between answering and waking the caller (a loaded machine: four test files, each
 * with its workerds, on two cores), the next call reads an empty port, its internal
 * `assert(message?.id === id)` throws, and from then on every call of that Miniflare's proxy
 * reads the answer to the one before (fixed upstream in workers-sdk#15552, after the
 * miniflare this project pins). It is the tooling's fault, not the database's: `start` must
 * dispose of what it started when it throws, and be idempotent on persisted state (migrations
 * and seeds are), so the second attempt begins on a fresh proxy.
 */
export async function againOnProxyDesync(start) {
  try {
    return await start();
  } catch (e) {
    if (!String(e?.stack ?? '').includes('SynchronousFetcher')) throw e;
    return await start();
  }
}
