// End-to-end tests of the configuration API: the real built Worker in Miniflare (workerd) with a
// local D1, and the scripted model server standing in for OpenAI.
// Proves: GET/PUT/DELETE /api/{models,prompts,agents}[/:name] and PUT /api/config behave as
// documented in docs/api.md (status codes, error codes, validation against what D1 holds,
// atomic and idempotent bulk writes, delete protection), that a thread uses a changed prompt on
// its next turn, that no secret value is ever returned, and that `seed.mjs --remote` loads
// agents/*.toml through the API idempotently.
// Does not prove: `wrangler d1 migrations apply --remote` (skipped with --skip-migrations).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { API_KEY, ROOT } from '../support/worker.mjs';
import { withWorker } from '../support/setup.mjs';
import { seed, toDefinitions, toRows } from '../../scripts/lib/d1.mjs';

const MODEL_SECRET = 'sk-test-secret'; // OPENAI_API_KEY in worker.mjs's bindings

let model;
let worker;
let client;
let modelBase;

withWorker({ setup: async (env) => {
  ({ model, worker, client } = env);
  modelBase = `${model.url}/v1`;
} });

const api = (method, path, body, opts = {}) => client.request(method, path, { body, ...opts });

function assertApiError(r, status, code, ...needles) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${JSON.stringify(r.body)}`);
  assert.equal(typeof r.body?.error?.message, 'string', JSON.stringify(r.body));
  assert.equal(r.body.error.code, code, JSON.stringify(r.body));
  for (const n of needles) assert.ok(r.body.error.message.includes(n), `${JSON.stringify(n)} in ${r.body.error.message}`);
}

/** Deletes whatever the test created, referrers first, ignoring what is already gone. */
async function cleanup(t, ...paths) {
  t.after(async () => {
    for (const p of paths) await api('DELETE', p);
  });
}

const openaiModel = (name, extra = {}) => ({ name, provider: 'openai', model: 'gpt-test', base_url: modelBase, api_key_secret: 'OPENAI_API_KEY', ...extra });

// The stored form of a model with only the required fields: every default filled in.
const MODEL_DEFAULTS = {
  api_key_secret: null, fallbacks: [], input_price_per_mtok: 0, output_price_per_mtok: 0,
  first_chunk_timeout_ms: null, stall_timeout_ms: null, total_timeout_ms: null, max_history_tokens: null, max_output_tokens: null,
};
const PROMPT_DEFAULTS = { system: '', tools: [], tool_choice: 'auto', parallel_tool_calls: true, include_chat: true, description: '', hooks: [], tool_bindings: {},
  mcp_servers: [], compaction_prompt: null, response_format: null, max_offered_tools: null, pinned_tools: [], tool_selection_model: null };
const SIDE_DEFAULTS = { label: null, stop_on_response: true, stop_tool: null, stop_tool_response_property: null, max_steps: 10 };
const AGENT_DEFAULTS = { kind: 'ai_human', description: '', side_b: null, max_turns: 25, expose_as_tool: false, tool_description: '', hooks: [], max_tokens: null, max_cost_usd: null };

test('every config route needs the key', async () => {
  for (const [method, path] of [
    ['GET', '/api/models'], ['GET', '/api/prompts/support'], ['PUT', '/api/agents/x'],
    ['DELETE', '/api/models/default'], ['PUT', '/api/config'],
  ]) {
    for (const key of [null, 'wrong-key']) {
      const r = await api(method, path, method === 'PUT' ? {} : undefined, { key });
      assertApiError(r, 401, 'unauthorized');
    }
  }
  // Nothing was deleted by the unauthorised DELETE.
  assert.equal((await api('GET', '/api/models/default')).status, 200);
});

test('lists are ordered by name and GET one returns the seeded definitions', async (t) => {
  await cleanup(t, '/api/models/zz_last', '/api/models/aa_first');
  for (const name of ['zz_last', 'aa_first']) assert.equal((await api('PUT', `/api/models/${name}`, openaiModel(name))).status, 201);
  const models = await api('GET', '/api/models');
  assert.equal(models.status, 200);
  const names = models.body.models.map((m) => m.name);
  assert.deepEqual(names, [...names].sort());
  assert.deepEqual(names, ['aa_first', 'claude', 'default', 'zz_last']);

  const prompts = await api('GET', '/api/prompts');
  assert.deepEqual(prompts.body.prompts.map((p) => p.name), ['reviewer', 'summarize', 'support', 'writer']);
  const agents = await api('GET', '/api/agents');
  assert.deepEqual(agents.body.agents.map((a) => a.id), ['review', 'support']);
  assert.deepEqual(agents.body.agents[1], { ...AGENT_DEFAULTS, id: 'support', description: 'Customer support assistant.', side_a: { ...SIDE_DEFAULTS, prompt: 'support' } });

  const p = await api('GET', '/api/prompts/support');
  assert.equal(p.status, 200);
  assert.equal(p.body.model, 'default');
  assert.ok(p.body.tools.includes('get_weather'));
  assert.equal((await api('GET', '/api/agents/support')).body.side_a.prompt, 'support');
});

test('GET, PUT and DELETE of a missing name answer 404', async () => {
  for (const kind of ['models', 'prompts', 'agents']) {
    assertApiError(await api('GET', `/api/${kind}/nope`), 404, 'not_found', '"nope"');
    assertApiError(await api('DELETE', `/api/${kind}/nope`), 404, 'not_found', '"nope"');
  }
  // Unsupported methods and deeper paths are unknown routes.
  assertApiError(await api('POST', '/api/models'), 404, 'not_found');
  assertApiError(await api('PATCH', '/api/models/default', {}), 404, 'not_found');
  assertApiError(await api('GET', '/api/models/default/extra'), 404, 'not_found');
  assertApiError(await api('GET', '/api/config'), 404, 'not_found');
});

test('each kind is created (201), replaced (200), read back and deleted', async (t) => {
  await cleanup(t, '/api/agents/crud_agent', '/api/prompts/crud_prompt', '/api/models/crud_model');

  // Model: the name comes from the URL when the body leaves it out.
  const { name: _, ...body } = openaiModel('crud_model');
  let r = await api('PUT', '/api/models/crud_model', body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.deepEqual(r.body, { ...MODEL_DEFAULTS, ...openaiModel('crud_model') });
  r = await api('PUT', '/api/models/crud_model', openaiModel('crud_model', { max_output_tokens: 512, input_price_per_mtok: 0.15 }));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.max_output_tokens, 512);
  assert.deepEqual((await api('GET', '/api/models/crud_model')).body, r.body);

  // Prompt.
  r = await api('PUT', '/api/prompts/crud_prompt', { model: 'crud_model', system: 'v1', tools: ['get_current_time'] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.deepEqual(r.body, { ...PROMPT_DEFAULTS, name: 'crud_prompt', model: 'crud_model', system: 'v1', tools: ['get_current_time'] });
  r = await api('PUT', '/api/prompts/crud_prompt', { name: 'crud_prompt', model: 'default', system: 'v2', include_chat: false });
  assert.equal(r.status, 200);
  assert.deepEqual((await api('GET', '/api/prompts/crud_prompt')).body, { ...PROMPT_DEFAULTS, name: 'crud_prompt', model: 'default', system: 'v2', include_chat: false });

  // Agent.
  r = await api('PUT', '/api/agents/crud_agent', { side_a: { prompt: 'crud_prompt' } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.deepEqual(r.body, { ...AGENT_DEFAULTS, id: 'crud_agent', side_a: { ...SIDE_DEFAULTS, prompt: 'crud_prompt' } });
  r = await api('PUT', '/api/agents/crud_agent', { id: 'crud_agent', kind: 'dual_ai', side_a: { prompt: 'crud_prompt' }, side_b: { prompt: 'support', label: 'B' }, max_turns: 4 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal((await api('GET', '/api/agents/crud_agent')).body.side_b.label, 'B');
  // The new agent is usable at once.
  assert.equal((await api('POST', '/api/threads', { agent_id: 'crud_agent' })).status, 201);

  // Putting the same definition again changes nothing and answers 200.
  r = await api('PUT', '/api/agents/crud_agent', r.body);
  assert.equal(r.status, 200);

  // A spending budget: stored as given (dollars keep their cents), refused when not positive.
  r = await api('PUT', '/api/agents/crud_agent', { side_a: { prompt: 'crud_prompt' }, max_tokens: 100000, max_cost_usd: 2.5 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const stored = (await api('GET', '/api/agents/crud_agent')).body;
  assert.deepEqual([stored.max_tokens, stored.max_cost_usd], [100000, 2.5]);
  for (const bad of [{ max_tokens: 0 }, { max_cost_usd: -1 }, { max_cost_usd: 0 }]) {
    r = await api('PUT', '/api/agents/crud_agent', { side_a: { prompt: 'crud_prompt' }, ...bad });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(r.body.error.message, new RegExp(Object.keys(bad)[0]));
  }

  for (const [kind, name] of [['agents', 'crud_agent'], ['prompts', 'crud_prompt'], ['models', 'crud_model']]) {
    r = await api('DELETE', `/api/${kind}/${name}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { deleted: name });
    assertApiError(await api('GET', `/api/${kind}/${name}`), 404, 'not_found');
  }
});

test('DELETE refuses a definition something refers to (409 in_use naming the referrer)', async (t) => {
  assertApiError(await api('DELETE', '/api/models/default'), 409, 'in_use', 'prompt "');
  assertApiError(await api('DELETE', '/api/prompts/support'), 409, 'in_use', 'agent "support"');

  await cleanup(t, '/api/prompts/boss', '/api/agents/helper_agent', '/api/prompts/sub', '/api/models/backup', '/api/models/primary');
  assert.equal((await api('PUT', '/api/models/backup', openaiModel('backup'))).status, 201);
  assert.equal((await api('PUT', '/api/models/primary', openaiModel('primary', { fallbacks: ['backup'] }))).status, 201);
  assertApiError(await api('DELETE', '/api/models/backup'), 409, 'in_use', 'model "primary"', 'fallbacks');

  assert.equal((await api('PUT', '/api/prompts/sub', { model: 'primary' })).status, 201);
  assert.equal((await api('PUT', '/api/agents/helper_agent', { side_a: { prompt: 'support' }, expose_as_tool: true })).status, 201);
  assert.equal((await api('PUT', '/api/prompts/boss', { model: 'default', tools: ['sub', 'helper_agent', 'get_weather'] })).status, 201);
  assertApiError(await api('DELETE', '/api/prompts/sub'), 409, 'in_use', 'prompt "boss"', 'tools');
  assertApiError(await api('DELETE', '/api/agents/helper_agent'), 409, 'in_use', 'prompt "boss"');
  // Unexposing an agent a prompt lists would break that prompt.
  assertApiError(await api('PUT', '/api/agents/helper_agent', { side_a: { prompt: 'support' } }), 400, 'invalid_definition', 'prompt "boss"', 'expose_as_tool');

  // Once the referrer is gone, the delete goes through.
  assert.equal((await api('DELETE', '/api/prompts/boss')).status, 200);
  assert.equal((await api('DELETE', '/api/agents/helper_agent')).status, 200);
});

test('invalid definitions are refused with 400 naming the field and value, and nothing is written', async () => {
  const cases = [
    ['unknown field', '/api/models/bad', { ...openaiModel('bad'), api_key: 'x' }, 'invalid_definition', ['unknown field `api_key`']],
    ['unknown model', '/api/prompts/bad', { model: 'ghost' }, 'invalid_definition', ['"model"', '"ghost"']],
    ['unknown tool name', '/api/prompts/bad', { model: 'default', tools: ['get_current_time', 'no_such_tool'] }, 'invalid_definition', ['"tools"', '"no_such_tool"']],
    ['bad provider', '/api/models/bad', { ...openaiModel('bad'), provider: 'gemini' }, 'invalid_definition', ['provider', 'gemini']],
    ['wrong type', '/api/models/bad', { ...openaiModel('bad'), max_output_tokens: 'many' }, 'invalid_definition', ['max_output_tokens']],
    ['dual_ai without side_b', '/api/agents/bad', { kind: 'dual_ai', side_a: { prompt: 'support' } }, 'invalid_definition', ['side_b']],
    ['missing side prompt', '/api/agents/bad', { side_a: { prompt: 'ghost' } }, 'invalid_definition', ['"side_a.prompt"', '"ghost"']],
    ['stop tool not in the prompt', '/api/agents/bad', { side_a: { prompt: 'support', stop_tool: 'send_notification' } }, 'invalid_definition', ['stop_tool', '"send_notification"']],
    ['missing fallback', '/api/models/bad', openaiModel('bad', { fallbacks: ['ghost'] }), 'invalid_definition', ['"fallbacks"', '"ghost"']],
    ['name mismatch', '/api/models/bad', openaiModel('other'), 'invalid_definition', ['"other"', '"bad"']],
    ['id mismatch', '/api/agents/bad', { id: 'other', side_a: { prompt: 'support' } }, 'invalid_definition', ['"other"', '"bad"']],
    ['literal key in api_key_secret', '/api/models/bad', openaiModel('bad', { api_key_secret: MODEL_SECRET }), 'invalid_definition', ['api_key_secret', 'NAME']],
    ['bad name in URL', '/api/models/b%20d', { provider: 'workers_ai', model: '@cf/x' }, 'invalid_definition', ['model name']],
  ];
  for (const [what, path, body, code, needles] of cases) {
    const r = await api('PUT', path, body);
    await t_assert(what, () => assertApiError(r, 400, code, ...needles));
  }
  for (const raw of ['{"provider":', 'not json', '']) {
    const r = await api('PUT', '/api/models/bad', undefined, { raw, headers: { 'content-type': 'application/json' } });
    assertApiError(r, 400, 'bad_json', 'not valid JSON');
  }
  assertApiError(await api('PUT', '/api/models/bad', [openaiModel('bad')]), 400, 'bad_json', 'JSON object');
  for (const kind of ['models', 'prompts', 'agents']) assertApiError(await api('GET', `/api/${kind}/bad`), 404, 'not_found');
});

async function t_assert(what, fn) {
  try {
    fn();
  } catch (e) {
    e.message = `${what}: ${e.message}`;
    throw e;
  }
}

test('an oversized body answers 413', async () => {
  const big = openaiModel('big', { model: 'x'.repeat(70 * 1024) });
  assertApiError(await api('PUT', '/api/models/big', big), 413, 'payload_too_large');
  assertApiError(await api('PUT', '/api/config', { models: [big] }), 413, 'payload_too_large');
  assertApiError(await api('GET', '/api/models/big'), 404, 'not_found');
});

test('PUT /api/config validates the set as a whole: one bad definition and nothing is written', async () => {
  const body = {
    models: [openaiModel('bulk_model')],
    prompts: [{ name: 'bulk_prompt', model: 'bulk_model' }, { name: 'bulk_bad', model: 'bulk_model', tools: ['no_such_tool'] }],
    agents: [{ id: 'bulk_agent', side_a: { prompt: 'bulk_prompt' } }],
  };
  assertApiError(await api('PUT', '/api/config', body), 400, 'invalid_definition', 'prompt "bulk_bad"', '"no_such_tool"');
  assertApiError(await api('GET', '/api/models/bulk_model'), 404, 'not_found');
  assertApiError(await api('GET', '/api/prompts/bulk_prompt'), 404, 'not_found');
  assertApiError(await api('GET', '/api/agents/bulk_agent'), 404, 'not_found');

  // References are resolved against D1 plus the request; unknown keys are refused.
  assertApiError(await api('PUT', '/api/config', { agents: [{ id: 'bulk_agent', side_a: { prompt: 'ghost' } }] }), 400, 'invalid_definition', '"ghost"');
  assertApiError(await api('PUT', '/api/config', { tools: [] }), 400, 'invalid_definition', 'unknown field `tools`');
  assertApiError(await api('PUT', '/api/config', { models: [openaiModel('dup'), openaiModel('dup')] }), 400, 'invalid_definition', 'twice');
  assertApiError(await api('PUT', '/api/config', undefined, { raw: '{', headers: { 'content-type': 'application/json' } }), 400, 'bad_json');
});

test('PUT /api/config writes a valid set and is idempotent', async (t) => {
  await cleanup(t, '/api/agents/bulk_agent', '/api/prompts/bulk_prompt', '/api/models/bulk_model');
  // Agents first in the body: the server orders the writes, and the prompt may use a stored model.
  const body = {
    agents: [{ id: 'bulk_agent', side_a: { prompt: 'bulk_prompt' } }],
    prompts: [{ name: 'bulk_prompt', model: 'bulk_model', tools: ['support'] }],
    models: [openaiModel('bulk_model', { fallbacks: ['default'] })],
  };
  let r = await api('PUT', '/api/config', body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, {
    models: { created: ['bulk_model'], updated: [], unchanged: [] },
    prompts: { created: ['bulk_prompt'], updated: [], unchanged: [] },
    agents: { created: ['bulk_agent'], updated: [], unchanged: [] },
  });
  const snapshot = async () => Promise.all(['models', 'prompts', 'agents'].map(async (k) => (await api('GET', `/api/${k}`)).body));
  const first = await snapshot();

  r = await api('PUT', '/api/config', body);
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.models, { created: [], updated: [], unchanged: ['bulk_model'] });
  assert.deepEqual(r.body.agents, { created: [], updated: [], unchanged: ['bulk_agent'] });
  assert.deepEqual(await snapshot(), first);

  body.prompts[0].system = 'changed';
  r = await api('PUT', '/api/config', body);
  assert.deepEqual(r.body.prompts, { created: [], updated: ['bulk_prompt'], unchanged: [] });
  assert.equal((await api('GET', '/api/prompts/bulk_prompt')).body.system, 'changed');
  // An empty set is valid and writes nothing.
  assert.equal((await api('PUT', '/api/config', {})).status, 200);
});

test('a thread uses a changed prompt on its next turn', async (t) => {
  const original = (await api('GET', '/api/prompts/support')).body;
  t.after(() => api('PUT', '/api/prompts/support', original));

  const id = await client.createThread();
  const sock = await client.connect(id);
  t.after(() => sock.close());
  const idle = (turn, from) => sock.waitFor((f) => f.type === 'status' && f.state === 'idle' && f.turn === turn, { from, timeout: 10000 });
  const send = async (content, turn) => {
    model.push({ text: `answer ${turn}` });
    const from = sock.frames.length;
    const r = await api('POST', `/api/threads/${id}/messages`, { content });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await idle(turn, from);
  };

  await send('first', 1);
  assert.equal(model.requests.length, 1);
  assert.equal(model.requests[0].body.messages[0].role, 'system');
  assert.equal(model.requests[0].body.messages[0].content, original.system);

  const r = await api('PUT', '/api/prompts/support', { ...original, system: 'You now answer in haiku.' });
  assert.equal(r.status, 200, JSON.stringify(r.body));

  await send('second', 2);
  assert.equal(model.requests.length, 2);
  assert.deepEqual(model.requests[1].body.messages[0], { role: 'system', content: 'You now answer in haiku.' });
});

test('no route returns a secret value; a model stores only the secret name', async () => {
  for (const path of ['/api/models', '/api/models/default', '/api/prompts', '/api/agents']) {
    const r = await api('GET', path);
    assert.equal(r.status, 200);
    const text = JSON.stringify(r.body);
    assert.ok(!text.includes(MODEL_SECRET), `${path} leaks the secret`);
    assert.ok(!text.includes(API_KEY), `${path} leaks the API key`);
  }
  assert.equal((await api('GET', '/api/models/default')).body.api_key_secret, 'OPENAI_API_KEY');
  const row = await worker.db.prepare('SELECT * FROM models').all();
  assert.ok(!JSON.stringify(row.results).includes(MODEL_SECRET), 'D1 holds no secret value');
});

/** Runs scripts/seed.mjs with `args` and `env` added; resolves { code, stdout, stderr }. */
function runSeed(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'seed.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, EDGENT_URL: '', EDGENT_API_KEY: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('seed.mjs --remote loads agents/*.toml through PUT /api/config, idempotently', async (t) => {
  const before = (await api('GET', '/api/models/default')).body;
  // The seed points the default model back at OpenAI; the other tests need the model server.
  const claude = (await api('GET', '/api/models/claude')).body;
  t.after(async () => {
    await api('PUT', '/api/models/default', before);
    await api('PUT', '/api/models/claude', claude);
  });

  const args = ['--remote', '--url', worker.url, '--skip-migrations'];
  const first = await runSeed(args, { EDGENT_API_KEY: API_KEY });
  assert.equal(first.code, 0, first.stderr);
  // Both example models pointed at the model server by the test setup go back to their URLs.
  assert.match(first.stdout, /models: 0 created, 2 updated, 0 unchanged/);
  assert.match(first.stdout, /prompts: 0 created, 0 updated, 4 unchanged/);

  // What D1 holds is what the TOML files say, with the API's defaults.
  const defs = toDefinitions(join(ROOT, 'agents'));
  const named = (list, key, name) => list.find((d) => d[key] === name);
  assert.deepEqual((await api('GET', '/api/models/default')).body, { ...MODEL_DEFAULTS, ...named(defs.models, 'name', 'default') });
  assert.deepEqual((await api('GET', '/api/prompts/support')).body, { ...PROMPT_DEFAULTS, ...named(defs.prompts, 'name', 'support') });
  const agent = named(defs.agents, 'id', 'support');
  assert.deepEqual((await api('GET', '/api/agents/support')).body, { ...AGENT_DEFAULTS, ...agent, side_a: { ...SIDE_DEFAULTS, ...agent.side_a } });

  const second = await runSeed(args, { EDGENT_API_KEY: API_KEY });
  assert.equal(second.code, 0, second.stderr);
  const counts = { models: defs.models.length, prompts: defs.prompts.length, agents: defs.agents.length };
  for (const [kind, n] of Object.entries(counts)) assert.match(second.stdout, new RegExp(`${kind}: 0 created, 0 updated, ${n} unchanged`));

  // EDGENT_URL works in place of --url.
  const viaEnv = await runSeed(['--remote', '--skip-migrations'], { EDGENT_URL: worker.url, EDGENT_API_KEY: API_KEY });
  assert.equal(viaEnv.code, 0, viaEnv.stderr);
});

test('seed.mjs --remote explains a missing URL or key and prints the server\'s error', async () => {
  const noUrl = await runSeed(['--remote', '--skip-migrations'], { EDGENT_API_KEY: API_KEY });
  assert.notEqual(noUrl.code, 0);
  assert.match(noUrl.stderr, /EDGENT_URL/);
  const noKey = await runSeed(['--remote', '--url', worker.url, '--skip-migrations'], {});
  assert.notEqual(noKey.code, 0);
  assert.match(noKey.stderr, /EDGENT_API_KEY is not set/);
  const wrongKey = await runSeed(['--remote', '--url', worker.url, '--skip-migrations'], { EDGENT_API_KEY: 'wrong' });
  assert.notEqual(wrongKey.code, 0);
  assert.match(wrongKey.stderr, /401\) unauthorized: missing or invalid API key/);
});

test('no model may send a secret the operator has not allowed, or send it to a host it has not allowed', async (t) => {
  // MODEL_SECRETS in worker.mjs's bindings lists OPENAI_API_KEY, ANTHROPIC_API_KEY and two test
  // names; EDGENT_API_KEY is never allowed; plain http only to loopback (EDGENT_ALLOW_HTTP_MODELS).
  for (const [what, body, needle] of [
    ['the server key', openaiModel('leaky', { api_key_secret: 'EDGENT_API_KEY' }), 'never sent'],
    ['a secret not allowed for models', openaiModel('leaky', { api_key_secret: 'WEATHER_API_KEY' }), 'MODEL_SECRETS'],
    ['plain http to another host', openaiModel('leaky', { base_url: 'http://collector.example/v1' }), 'https'],
    ['credentials in the URL', openaiModel('leaky', { base_url: 'https://user:pw@collector.example/v1' }), 'base_url'],
  ]) {
    await t_assert(what, async () => assertApiError(await api('PUT', '/api/models/leaky', body), 400, 'invalid_definition', needle));
    const r = await api('PUT', '/api/config', { models: [body] });
    await t_assert(`${what} (bulk)`, () => assertApiError(r, 400, 'invalid_definition', needle));
  }
  assertApiError(await api('GET', '/api/models/leaky'), 404, 'not_found');

  // A row written into D1 without the API (a hand edit, an old seed) is refused at call time:
  // the turn fails before any request, so the model server never sees the key.
  await seed(worker.db, toRows({
    models: [openaiModel('leaky_row', { api_key_secret: 'EDGENT_API_KEY' })],
    prompts: [{ name: 'leaky_prompt', model: 'leaky_row' }],
    agents: [{ id: 'leaky_agent', side_a: { prompt: 'leaky_prompt' } }],
  }));
  t.after(async () => {
    await worker.db.prepare('DELETE FROM agents WHERE id = ?').bind('leaky_agent').run();
    await worker.db.prepare('DELETE FROM prompts WHERE name = ?').bind('leaky_prompt').run();
    await worker.db.prepare('DELETE FROM models WHERE name = ?').bind('leaky_row').run();
  });
  const id = await client.createThread('leaky_agent');
  const sock = await client.connect(id);
  t.after(() => sock.close());
  const from = sock.frames.length;
  model.push({ text: 'must not be asked' });
  assert.equal((await api('POST', `/api/threads/${id}/messages`, { content: 'hi' })).status, 202);
  const error = await sock.waitFor((f) => f.type === 'error' && f.code === 'model_config', { from, timeout: 10000 });
  assert.match(error.message, /never sent/);
  assert.equal(model.requests.length, 0, 'the model server was never called');
  assert.ok(!JSON.stringify(sock.frames).includes(API_KEY), 'the key itself appears in no frame');
});
