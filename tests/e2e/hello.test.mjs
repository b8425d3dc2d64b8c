// Smoke test of examples/hello, the minimal app built from the same crates as the example app:
// its own Worker (examples/hello/build), its own catalogue (one tool, one agent), a real
// WebSocket and the scripted model server.
// Proves: an app that depends on edgent (instead of being edgent) builds and serves threads,
// its tool is discovered from its own agents/ folder and runs in a turn, and it carries none of
// the example app's tools. Does not prove: anything the example app's suites cover.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startWorker, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

let model;
let worker;

before(async () => {
  model = await startModelServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1`, appDir: join(ROOT, 'examples', 'hello') });
});

after(async () => {
  await worker?.dispose();
  await model?.close();
});

test('the hello app lists only its own tool', async () => {
  const r = await worker.client.request('GET', '/api/tools');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.tools.map((t) => t.name), ['say_hello']);
  const [tool] = r.body.tools;
  assert.deepEqual(tool.parameters.required, ['name']);
});

test('a hello thread greets through its tool over a WebSocket', async (t) => {
  const { client } = worker;
  const id = await client.createThread('hello');
  const sock = await client.connect(id);
  t.after(() => sock.close());
  model.push(
    { toolCalls: [{ id: 'call_hi', name: 'say_hello', arguments: { name: 'Ada' } }] },
    { text: 'I said hello to Ada.' },
  );
  const from = sock.frames.length;
  const sent = await sock.rpc('send_message', { content: 'Please greet Ada.' });
  assert.equal(sent.ok, true, JSON.stringify(sent));
  const fin = await sock.finalAssistant(from);
  assert.equal(fin.message.content, 'I said hello to Ada.');

  const toolMsg = sock.frames.slice(from).find((f) => f.type === 'message' && f.message.role === 'tool');
  assert.equal(toolMsg.message.content, 'Hello, Ada!');
  // The model saw the hello prompt's system text and the tool's schema.
  const first = model.requests[0].body;
  assert.match(first.messages[0].content, /greet people/);
  assert.deepEqual(first.tools.map((x) => x.function.name), ['say_hello']);

  // A blank name is refused by the tool's refine rule, as an error result the model reads.
  model.push(
    { toolCalls: [{ id: 'call_blank', name: 'say_hello', arguments: { name: '  ' } }] },
    { text: 'That did not work.' },
  );
  const again = sock.frames.length;
  await sock.rpc('send_message', { content: 'Greet nobody.' });
  await sock.finalAssistant(again);
  const refused = sock.frames.slice(again).find((f) => f.type === 'message' && f.message.role === 'tool');
  assert.match(refused.message.content, /name must not be blank/);
});
