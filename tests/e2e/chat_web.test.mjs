// Layer: real `wrangler dev` with examples/chat-web/wrangler.toml: the built Worker with the
// example page's dist/ as static assets.
// Proves: the config is one wrangler accepts (dev, and `deploy --dry-run` with the page's files); `/` serves the page's index.html and its JS and CSS
// assets; a path the page does not have gets index.html (single-page application); `/api/*`
// reaches the Worker first (health answers, an unknown `/api/...` path is the Worker's 401 JSON,
// never the page); and the calls the page makes work with the client token `npm run open` would
// print: the socket with the subprotocol `["edgent", token]` (useThread) and `POST …/chat`
// streaming an answer from the scripted model (useChat's transport).
// Does not prove: the page in a browser (React rendering, clicks): no browser here yet; the
// TypeScript client and the AI SDK are tested against the Worker in js_client and ai_sdk.
// Skipped, with the reason, when the page is not built (`npm run build` in examples/chat-web).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { parse as parseToml } from 'smol-toml';
import { ROOT } from '../support/worker.mjs';
import { freePort } from '../support/net.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { loadDefinitions, seedLocal } from '../../scripts/lib/d1.mjs';

const EXAMPLE = join(ROOT, 'examples', 'chat-web');
const DIST = join(EXAMPLE, 'dist');
const WRANGLER = join(ROOT, 'node_modules', '.bin', 'wrangler');
const KEY = 'chat-web-key-0123456789abcdef';
const skip = existsSync(join(DIST, 'index.html'))
  ? false
  : 'examples/chat-web/dist is not built: run `npm install && npm run build` in examples/chat-web';

let dir, proc, model, base, output = '';

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'edgent-chat-web-'));
  const source = readFileSync(join(EXAMPLE, 'wrangler.toml'), 'utf8');
  const config = parseToml(source);
  assert.deepEqual(config.assets.run_worker_first, ['/api/*', '/webhooks/*', '/mcp', '/mcp/*']);
  const d1 = config.d1_databases.find((d) => d.binding === 'DB');
  model = await startModelServer();
  const defs = loadDefinitions(join(ROOT, 'agents'));
  for (const m of defs.models) m.base_url = `${model.url}/v1`;
  await seedLocal({ persistTo: join(dir, 'state'), databaseId: d1.database_id, migrationsDir: join(ROOT, 'migrations'), defs });
  // The example's config, its relative paths made absolute, in a folder of its own: a
  // developer's .dev.vars cannot leak into the test.
  const absolute = (rel) => JSON.stringify(join(EXAMPLE, rel));
  const toml = source
    .replace(/^main = "(.*)"$/m, (_, p) => `main = ${absolute(p)}`)
    .replace(/^migrations_dir = "(.*)"$/m, (_, p) => `migrations_dir = ${absolute(p)}`)
    .replace(/^directory = "(.*)"$/m, (_, p) => `directory = ${absolute(p)}`);
  writeFileSync(join(dir, 'wrangler.toml'), toml);
  const port = await freePort();
  proc = spawn(
    WRANGLER,
    ['dev', '--config', join(dir, 'wrangler.toml'), '--ip', '127.0.0.1', '--port', String(port),
      '--inspector-port', String(await freePort()), '--persist-to', join(dir, 'state'),
      '--var', `EDGENT_API_KEY:${KEY}`, '--var', 'EDGENT_TOKEN_SECRET:chat-web-token-secret-0123456789',
      '--var', 'OPENAI_API_KEY:sk-chat-web', '--var', 'EDGENT_ALLOW_HTTP_MODELS:1',
      '--show-interactive-dev-session=false'],
    { cwd: dir, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/api/health`)).ok) break;
    } catch {}
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`wrangler dev did not come up:\n${output.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
});

after(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill('SIGTERM');
    await new Promise((r) => { proc.once('exit', r); setTimeout(r, 5000); });
  }
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// What a browser sends when the address bar (or a link) loads a path: the asset router answers
// such navigations with index.html where no asset matches, unless the path is the Worker's
// (`run_worker_first`); without that rule a browser opening /api/... would get the page. Sent
// with node:http, since fetch sets its own `sec-fetch-mode`.
const NAVIGATE = { 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document', accept: 'text/html,*/*;q=0.8' };

/** GET `path` as a browser navigation: `{status, type, body}`. */
function navigate(path) {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${path}`, { headers: NAVIGATE }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'] ?? '', body }));
      })
      .on('error', reject);
  });
}

const api = (method, path, { token = KEY, body } = {}) =>
  fetch(`${base}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

test('/ serves the page, and its assets are served', { skip }, async () => {
  const page = await fetch(`${base}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /text\/html/);
  const html = await page.text();
  assert.equal(html, readFileSync(join(DIST, 'index.html'), 'utf8'), 'the built index.html');
  const script = /<script type="module"[^>]* src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
  const style = /<link rel="stylesheet"[^>]* href="(\/assets\/[^"]+\.css)"/.exec(html)?.[1];
  assert.ok(script && style, html);
  const js = await fetch(`${base}${script}`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /javascript/);
  assert.equal(await js.text(), readFileSync(join(DIST, script), 'utf8'));
  const css = await fetch(`${base}${style}`);
  assert.equal(css.status, 200);
  assert.match(css.headers.get('content-type'), /text\/css/);
  // A path the page does not have is the page (it reads its state from the fragment).
  const deep = await navigate('/chat/anything');
  assert.equal(deep.status, 200);
  assert.equal(deep.body, html);
});

test('/api/* reaches the Worker first: health, and an unknown path is its 401 JSON, not the page', { skip }, async () => {
  const health = await fetch(`${base}/api/health`);
  assert.equal(health.status, 200);
  assert.equal((await health.json()).ok, true);
  for (const path of ['/api/nope', '/api/index.html', '/api/assets/x.js']) {
    for (const r of [await fetch(`${base}${path}`), await navigate(path)]) {
      const [status, type, body] = r instanceof Response ? [r.status, r.headers.get('content-type'), await r.text()] : [r.status, r.type, r.body];
      assert.equal(status, 401, path);
      assert.match(type, /application\/json/, path);
      assert.equal(JSON.parse(body).error.code, 'unauthorized', path);
    }
  }
  const withKey = await api('GET', '/api/nope');
  assert.equal(withKey.status, 404);
  assert.match(withKey.headers.get('content-type'), /application\/json/);
  // Webhooks too: the Worker answers (a bad webhook token is refused as JSON), not the page.
  const hook = await navigate('/webhooks/nothread/badtoken');
  assert.notEqual(hook.status, 200);
  assert.match(hook.type, /application\/json/);
});

test('the page\'s calls work with the client token npm run open prints: socket and /chat', { skip }, async () => {
  const created = await api('POST', '/api/threads', {
    body: { agent_id: 'support', tags: ['chat-web'], token: { scopes: ['chat', 'approve'], ttl_seconds: 600 } },
  });
  assert.equal(created.status, 201);
  const { thread_id: threadId, token } = await created.json();
  assert.deepEqual(token.scopes, ['chat', 'approve']);

  // useThread: the token as a subprotocol, as a browser sends it; a turn streams over it.
  model.push({ text: 'Hello from the page\'s socket.' });
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/threads/${threadId}/stream`, ['edgent', token.token]);
  const frames = [];
  ws.on('message', (d) => frames.push(JSON.parse(String(d))));
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  assert.equal(ws.protocol, 'edgent');
  ws.send(JSON.stringify({ type: 'rpc', id: 1, method: 'send_message', params: { content: 'hi' } }));
  const until = async (pred, what) => {
    const deadline = Date.now() + 15_000;
    while (!frames.some(pred)) {
      if (Date.now() > deadline) throw new Error(`no ${what}: ${JSON.stringify(frames)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return frames.find(pred);
  };
  await until((f) => f.type === 'hello', 'hello');
  const done = await until((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed', 'answer');
  assert.equal(done.message.content, 'Hello from the page\'s socket.');
  assert.ok(frames.some((f) => f.type === 'message_chunk'), 'streamed in chunks');
  ws.close();

  // useChat: DefaultChatTransport's POST, with the token as a bearer header.
  model.push({ text: 'Hello from the chat route.' });
  const chat = await api('POST', `/api/threads/${threadId}/chat`, {
    token: token.token,
    body: { id: threadId, trigger: 'submit-message', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'again' }] }] },
  });
  assert.equal(chat.status, 200);
  assert.match(chat.headers.get('content-type'), /text\/event-stream/);
  const sse = await chat.text();
  const deltas = [...sse.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1])).filter((c) => c.type === 'text-delta');
  assert.equal(deltas.map((c) => c.delta).join(''), 'Hello from the chat route.');
  assert.match(sse, /data: \[DONE\]/);
  // Nothing in progress: the SDK's resume on page load answers 204.
  assert.equal((await api('GET', `/api/threads/${threadId}/chat/${threadId}/stream`, { token: token.token })).status, 204);
});

test('wrangler deploy --dry-run bundles the Worker with the page\'s files', { skip, timeout: 120_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'edgent-chat-web-deploy-'));
  try {
    const r = spawnSync(WRANGLER, ['deploy', '--dry-run', '--config', join(dir, 'wrangler.toml'), '--outdir', out], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
      timeout: 110_000,
    });
    assert.equal(r.status, 0, `wrangler deploy --dry-run failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout + r.stderr, /from the assets directory/);
    assert.ok(existsSync(join(out, 'index.js')), 'bundle written');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
