// The setup most end-to-end files share: a scripted model server and the built Worker in
// Miniflare pointed at it, started once per file, stopped after it, the model's script and
// request log cleared before each test (`objectsApart`: the thread objects in an isolate of
// their own, see `startWorker`). Returns an object whose fields are filled in before
// the first test: `model`, `worker`, `client` (the server key's EdgentClient). `setup(env)`
// runs once they are (in the same hook: node:test does not promise an order between a file's
// `before` hooks and this module's).
import { before, after, beforeEach } from 'node:test';
import { startWorker } from './worker.mjs';
import { startModelServer } from './model-server.mjs';

export function withWorker({ bindings = {}, modelServer = {}, objectsApart = false, setup } = {}) {
  const env = {};
  before(async () => {
    env.model = await startModelServer(modelServer);
    env.worker = await startWorker({ modelUrl: `${env.model.url}/v1`, bindings, objectsApart });
    env.client = env.worker.client;
    await setup?.(env);
  });
  after(async () => {
    await env.worker?.dispose();
    await env.model?.close();
  });
  beforeEach(() => env.model.reset());
  return env;
}
