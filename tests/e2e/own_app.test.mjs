// An app of its own, outside this repository, as docs/getting-started.md sets one up: a copy
// of examples/hello in a temporary folder, its own Cargo workspace (its Cargo.toml names the
// crates of this checkout by absolute path and sets no [profile.release]), built with this
// checkout's scripts/build.sh and `EDGENT_APP_DIR`.
// Proves: such an app builds and serves its tool; its Worker is built with the release profile
// edgent's are measured with (scripts/lib/profile.sh), so it weighs what examples/hello weighs
// inside the repository (cargo's default profile makes it about 47% larger gzipped), and the
// build says that it chose that profile. Does not prove: an app that depends on edgent by git.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { startWorker, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

const HELLO = join(ROOT, 'examples', 'hello');
let app;
let build;
let model;
let worker;

before(async () => {
  app = mkdtempSync(join(tmpdir(), 'edgent-own-app-'));
  for (const part of ['agents', 'src', 'build.rs', 'Cargo.toml']) cpSync(join(HELLO, part), join(app, part), { recursive: true });
  // The crates by absolute path, and no dev-dependencies (the host harness of hello's own tests).
  const manifest = readFileSync(join(app, 'Cargo.toml'), 'utf8')
    .replaceAll('"../../crates/', `"${join(ROOT, 'crates')}/`)
    .replace(/\n# The host harness[^\n]*\n\[dev-dependencies\][\s\S]*$/, '\n')
    // A name of its own: its schemas file in the shared target folder is not hello's.
    .replace('name = "hello-agent"', 'name = "own-app"');
  assert.doesNotMatch(manifest, /\.\.\/\.\.\/|\[profile|\[workspace|hello-agent/);
  writeFileSync(join(app, 'Cargo.toml'), manifest);
  // hello's doctest of docs/getting-started.md names the file by a path inside the repository.
  const lib = readFileSync(join(app, 'src', 'lib.rs'), 'utf8').replace('"../../../docs/', `"${join(ROOT, 'docs')}/`);
  writeFileSync(join(app, 'src', 'lib.rs'), lib);
  // The repository's lock file, so cargo picks the versions already compiled into the shared
  // target folder instead of resolving (and compiling) the newest ones.
  cpSync(join(ROOT, 'Cargo.lock'), join(app, 'Cargo.lock'));
  // Not the schema files `npm test` wrote for the repository's apps: this app writes its own.
  const { EDGENT_SCHEMAS_DIR: _, ...env } = process.env;
  build = spawnSync('bash', [join(ROOT, 'scripts', 'build.sh')], {
    env: {
      ...env,
      EDGENT_APP_DIR: app,
      // The repository's target folder: the crates are compiled once for both. The host profile
      // of the workspace root (its [profile.dev]), so the schema export reuses the host build.
      CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'),
      CARGO_PROFILE_DEV_DEBUG: 'line-tables-only',
      // Built as `npm test` builds examples/hello, without the wasm-opt pass, to compare the two.
      EDGENT_FAST_BUILD: '1',
    },
    encoding: 'utf8',
    timeout: 900_000,
  });
  model = await startModelServer();
});

after(async () => {
  await worker?.dispose();
  await model?.close();
  if (app) rmSync(app, { recursive: true, force: true });
});

test('an app outside the repository builds with edgent\'s release profile, and says so', (t) => {
  assert.equal(build.status, 0, `${build.stdout}\n${build.stderr}`);
  assert.match(build.stderr, /has no \[profile\.release\]: building with edgent's \(opt-level "z", LTO/);
  const helloWasm = join(HELLO, 'build', 'index_bg.wasm');
  assert.ok(existsSync(helloWasm), 'examples/hello is built before the end-to-end tests (npm test does it)');
  const helloBytes = readFileSync(helloWasm);
  // A build without the wasm-opt pass keeps wasm-bindgen's producers section (scripts/build.sh
  // strips it): hello built by `npm run build` instead of `npm test` cannot be compared.
  if (!helloBytes.includes('producers')) {
    t.skip('examples/hello/build was built with the wasm-opt pass (npm run build), not as npm test builds it');
    return;
  }
  const own = gzipSync(readFileSync(join(app, 'build', 'index_bg.wasm')), { level: 9 }).length;
  const hello = gzipSync(helloBytes, { level: 9 }).length;
  // The same code: only the paths in panic locations differ. Built with cargo's default release
  // profile instead, the same app is about 47% larger.
  assert.ok(Math.abs(own - hello) / hello < 0.01, `own app ${own} B gzipped, examples/hello ${hello} B`);
});

test('its Worker serves its tool and runs it in a turn', async (t) => {
  assert.equal(build.status, 0, 'the build failed (the test above shows why)');
  worker = await startWorker({ modelUrl: `${model.url}/v1`, appDir: app });
  const { client } = worker;
  const tools = await client.request('GET', '/api/tools');
  assert.equal(tools.status, 200, JSON.stringify(tools.body));
  assert.deepEqual(tools.body.tools.map((x) => x.name), ['say_hello']);
  const id = await client.createThread('hello');
  const sock = await client.connect(id);
  t.after(() => sock.close());
  model.push(
    { toolCalls: [{ id: 'call_hi', name: 'say_hello', arguments: { name: 'Ada' } }] },
    { text: 'Done.' },
  );
  const from = sock.frames.length;
  const sent = await sock.rpc('send_message', { content: 'Greet Ada.' });
  assert.equal(sent.ok, true, JSON.stringify(sent));
  await sock.finalAssistant(from);
  const toolMsg = sock.frames.slice(from).find((f) => f.type === 'message' && f.message.role === 'tool');
  assert.equal(toolMsg?.message.content, 'Hello, Ada!');
});
