// Layer: real `wrangler dev` (the command users run) and `wrangler deploy --dry-run`.
// Proves: the built Worker starts under wrangler with the project's bindings, answers the API
// with auth, and runs a turn over a real WebSocket against a scripted model; the UI (ui/dist,
// the config's [assets]) is served at / and at any path it routes, while /api/* always reaches
// the Worker; the deploy bundle builds. Does not prove: anything about Cloudflare's production
// network; the UI in a browser (tests/browser).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { ROOT } from '../support/worker.mjs';
import { freePort } from '../support/net.mjs';
import { EdgentClient } from '../support/client.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { loadDefinitions, seedLocal } from '../../scripts/lib/d1.mjs';

const KEY = 'wrangler-smoke-key-0123456789';
const WRANGLER = join(ROOT, 'node_modules', '.bin', 'wrangler');


/** Seeds the D1 that `wrangler dev --persist-to dir` will open, pointing models at `modelUrl`. */
async function seedState(dir, databaseId, modelUrl) {
  const defs = loadDefinitions(join(ROOT, 'agents'));
  for (const m of defs.models) m.base_url = modelUrl;
  await seedLocal({ persistTo: dir, databaseId, migrationsDir: join(ROOT, 'migrations'), defs });
}

let dir, proc, client, model, output = '';

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'edgent-wrangler-'));
  const config = parseToml(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'));
  const d1 = config.d1_databases.find((d) => d.binding === 'DB');
  model = await startModelServer();
  await seedState(join(dir, 'state'), d1.database_id, `${model.url}/v1`);
  // The project's config without [build] (the Worker is already built), in a folder of its own
  // so a developer's .dev.vars cannot leak into the test.
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace(/^\[build\][^\[]*/m, '')
    .replace(/^main = .*$/m, `main = ${JSON.stringify(join(ROOT, 'build', 'index.js'))}`)
    .replace(/^migrations_dir = .*$/m, `migrations_dir = ${JSON.stringify(join(ROOT, 'migrations'))}`)
    .replace(/^directory = "(.*)"$/m, (_, p) => `directory = ${JSON.stringify(join(ROOT, p))}`);
  writeFileSync(join(dir, 'wrangler.toml'), toml);
  const port = await freePort();
  proc = spawn(
    WRANGLER,
    // An inspector port of its own (the default 9229 may be another parallel test's).
    ['dev', '--config', join(dir, 'wrangler.toml'), '--ip', '127.0.0.1', '--port', String(port),
      '--inspector-port', String(await freePort()),
      '--persist-to', join(dir, 'state'), '--var', `EDGENT_API_KEY:${KEY}`, '--var', 'OPENAI_API_KEY:sk-wrangler',
      '--var', 'EDGENT_ALLOW_HTTP_MODELS:1',
      '--show-interactive-dev-session=false'],
    { cwd: dir, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(`${base}/api/health`);
      if (r.ok) break;
    } catch {}
    if (Date.now() > deadline || proc.exitCode !== null) {
      throw new Error(`wrangler dev did not come up:\n${output.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  client = new EdgentClient(base, KEY);
});

after(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill('SIGTERM');
    await new Promise((r) => { proc.once('exit', r); setTimeout(r, 5000); });
  }
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('wrangler dev answers /api/health without a key and the rest only with one', async () => {
  const health = await client.request('GET', '/api/health', { key: null });
  assert.equal(health.status, 200);
  assert.equal(health.body.ok, true);
  assert.equal((await client.request('GET', '/api/tools', { key: null })).status, 401);
  const tools = await client.request('GET', '/api/tools');
  assert.equal(tools.status, 200);
  assert.ok(tools.body.tools.some((t) => t.name === 'get_current_time'));
});

test('wrangler dev serves the UI at / and leaves /api/* to the Worker', async () => {
  const config = parseToml(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'));
  assert.deepEqual(config.assets.run_worker_first, ['/api/*', '/webhooks/*', '/mcp', '/mcp/*']);
  const base = client.baseUrl;
  for (const path of ['/', '/threads/anything']) {
    const page = await fetch(base + path);
    assert.equal(page.status, 200, path);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/, path);
    const html = await page.text();
    assert.match(html, /<title>edgent<\/title>/, path);
    const script = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
    assert.ok(script, 'index.html names its bundle');
    assert.equal((await fetch(base + script)).status, 200);
  }
  const unknown = await fetch(`${base}/api/no-such-route`);
  assert.equal(unknown.status, 401);
  assert.match(unknown.headers.get('content-type') ?? '', /application\/json/);
  // The MCP endpoint is the Worker's too, not the page's (a POST to an asset path is 405).
  for (const path of ['/mcp', '/mcp/support']) {
    const ping = await fetch(base + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${client.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(ping.status, 200, path);
    assert.deepEqual(await ping.json(), { jsonrpc: '2.0', id: 1, result: {} });
  }
});

test('wrangler dev runs a turn over a real WebSocket', async () => {
  model.push({ text: 'Hello from the scripted model.' });
  const id = await client.createThread('support');
  const sock = await client.connect(id, { viaQuery: true });
  try {
    const r = await sock.rpc('send_message', { content: 'hello?' });
    assert.equal(r.ok, true);
    const fin = await sock.finalAssistant(0, 15_000);
    assert.equal(fin.message.status, 'completed');
    assert.equal(fin.message.content, 'Hello from the scripted model.');
    assert.equal(model.requests.at(-1).headers.authorization, 'Bearer sk-wrangler');
  } finally {
    sock.close();
  }
});

// The config in `dir` (without [build]): the suite built the Worker before the e2e layer, and a
// rebuild here would rewrite build/ under the test files running beside this one.
test('wrangler deploy --dry-run bundles the Worker', { timeout: 300_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'edgent-deploy-'));
  try {
    const r = spawnSync(WRANGLER, ['deploy', '--dry-run', '--config', join(dir, 'wrangler.toml'), '--outdir', out], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
      timeout: 280_000,
    });
    assert.equal(r.status, 0, `wrangler deploy --dry-run failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout + r.stderr, /THREADS/);
    assert.ok(existsSync(join(out, 'index.js')), 'bundle written');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
