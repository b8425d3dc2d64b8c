// Starts the real built Worker (build/index.js + wasm) in Miniflare (workerd), with a
// SQLite-backed Durable Object namespace, a local D1 with the project's migrations and agent
// definitions, and the default model pointed at a scripted model server.
import { Miniflare } from 'miniflare';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { againOnProxyDesync, applyMigrations, loadDefinitions, seed } from '../../scripts/lib/d1.mjs';
import { EdgentClient } from './client.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const API_KEY = 'test-key-0123456789abcdef';
export const TOKEN_SECRET = 'test-token-secret-0123456789abcdef';

/**
 * Starts an app's built Worker: the example app at the repository root, or the app in
 * `appDir` (examples/hello). Its D1 gets the app's migrations and `agents/` definitions. With
 * `objectsApart`, the Durable Objects run in a second copy of the Worker (see `startOnce`).
 */
export async function startWorker(options = {}) {
  // Its D1 is set up through Miniflare's binding proxy: once more on a fresh Miniflare if that
  // proxy desynchronises under load (scripts/lib/d1.mjs says how).
  return await againOnProxyDesync(() => startOnce(options));
}

/**
 * `objectsApart`: the Durable Objects run in a second copy of the Worker, so the router and the
 * objects have an isolate each (separate module state, such as the configuration cache), as
 * in production, where a request's isolate is rarely the one its object lives in.
 */
async function startOnce({ modelUrl, persistDir, bindings = {}, appDir = ROOT, inspectorPort, entry = 'index.js', objectsApart = false } = {}) {
  const script = join(appDir, 'build', entry);
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` (npm test does it)`);
  const persist = persistDir ?? false;
  const objects = (scriptName) => ({
    THREADS: { className: 'DurableThread', useSQLite: true, scriptName },
    RATE_LIMITER: { className: 'RateLimiter', useSQLite: true, scriptName },
  });
  const worker = (name, durableObjects) => ({
    // Named only when there are two (a name changes Miniflare's object ids and storage paths).
    ...(objectsApart ? { name } : {}),
    scriptPath: script,
    modules: true,
    modulesRoot: join(appDir, 'build'),
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2026-04-20',
    durableObjects,
    d1Databases: { DB: 'edgent-test-db' },
    // The model servers of the tests are plain http on loopback (allowed as in `npm run dev`);
    // the model secrets the tests name are the operator's allow-list.
    bindings: {
      EDGENT_API_KEY: API_KEY,
      EDGENT_TOKEN_SECRET: TOKEN_SECRET,
      OPENAI_API_KEY: 'sk-test-secret',
      EDGENT_ALLOW_HTTP_MODELS: '1',
      MODEL_SECRETS: 'OPENAI_API_KEY,ANTHROPIC_API_KEY,LOG_API_KEY,NOT_A_SET_SECRET',
      ...bindings,
    },
  });
  const workers = objectsApart
    ? [worker('edgent', objects('edgent-objects')), worker('edgent-objects', objects(undefined))]
    : [worker('edgent', objects(undefined))];
  const mf = new Miniflare({
    workers,
    durableObjectsPersist: persist,
    d1Persist: persist,
    port: 0,
    host: '127.0.0.1',
    ...(inspectorPort ? { inspectorPort } : {}),
  });
  let url;
  let db;
  try {
    url = (await mf.ready).toString();
    db = await mf.getD1Database('DB');
    await applyMigrations(db, join(ROOT, 'migrations'));
    const defs = loadDefinitions(join(appDir, 'agents'));
    if (modelUrl) {
      for (const m of defs.models) m.base_url = modelUrl;
    }
    await seed(db, defs);
  } catch (e) {
    // A workerd left running would keep the test file's process alive until CI's time limit.
    await mf.dispose().catch(() => {});
    throw e;
  }
  return {
    mf,
    db,
    url,
    client: new EdgentClient(url, API_KEY),
    async dispose() {
      await mf.dispose();
    },
  };
}
