// The demo model (issue 15, "Works out of the box"): tests/support/demo-model.mjs, the CLI that
// serves it (scripts/demo-model.mjs), seeding with --demo-model, and `npm run dev` starting it
// when the default model has no key.
// Proves: demoStep answers OpenAI and Anthropic bodies (a tool call with arguments that fit the
// tool's schema, an answer from a tool result, the demo text, and no throw on odd bodies); the
// real built Worker (Miniflare), with the default model seeded as the demo and no key at all,
// runs whole turns through get_current_time, lookup_customer and process_order; the CLI
// serves and stops on SIGTERM; seed --demo-model swaps exactly the keyless models and a plain
// seed puts the files' definitions back; scripts/dev.sh starts the demo, prints it in the
// banner, seeds it, and stops it with itself (on a signal and when wrangler exits, whose exit
// code it keeps), refuses to go on when the demo cannot start, and uses the real model when
// the key is set.
// Does not prove: dev.sh's install and build steps or real `wrangler dev` (the dev.sh tests
// run the real script in a copy of scripts/ where setup.sh, build.sh and wrangler are stubs:
// the build alone costs minutes); how a real model would answer.

import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { startWorker, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { demoStep } from '../support/demo-model.mjs';
import { freePort } from '../support/net.mjs';
import { exited, startDev, stubRoot, tempApp } from '../support/dev-script.mjs';
import { asDemoModel, seed, toDefinitions, toRows, withLocalD1 } from '../../scripts/lib/d1.mjs';

// ---------------------------------------------------------------------------------------------
// demoStep on hand-built bodies. The schemas are the example tools' own (GET /api/tools).
// ---------------------------------------------------------------------------------------------

const SCHEMAS = {
  get_current_time: { type: 'object', additionalProperties: false, properties: {} },
  get_weather: {
    type: 'object', additionalProperties: false, required: ['city'],
    properties: {
      city: { type: 'string', description: 'City name, optionally with a country code: "Lisbon" or "Paris,FR".' },
      units: { default: 'celsius', oneOf: [{ const: 'celsius', type: 'string' }, { const: 'fahrenheit', type: 'string' }] },
    },
  },
  lookup_customer: {
    type: 'object', additionalProperties: false,
    properties: {
      customer_id: { default: null, description: 'The customer id, e.g. `cus_1001`.', type: ['string', 'null'] },
      email: { default: null, type: ['string', 'null'] },
    },
  },
  process_order: {
    type: 'object', additionalProperties: false, required: ['customer_id', 'items', 'shipping'],
    properties: {
      confirmation_email: { default: null, type: ['string', 'null'] },
      customer_id: { description: 'The customer placing the order, e.g. `cus_1001`.', type: 'string' },
      gift_wrap: { default: false, type: 'boolean' },
      items: {
        type: 'array',
        items: {
          type: 'object', additionalProperties: false, required: ['sku', 'quantity'],
          properties: {
            options: { additionalProperties: { type: 'string' }, default: {}, type: 'object' },
            quantity: { format: 'uint32', minimum: 0, type: 'integer' },
            sku: { description: 'Product SKU, e.g. `TSHIRT-RED`.', type: 'string' },
          },
        },
      },
      shipping: {
        oneOf: [
          { type: 'object', additionalProperties: false, required: ['method'], properties: { method: { const: 'standard', type: 'string' } } },
          { type: 'object', additionalProperties: false, required: ['method', 'deliver_by'],
            properties: { deliver_by: { description: 'Latest delivery date, YYYY-MM-DD.', type: 'string' }, method: { const: 'express', type: 'string' } } },
          { type: 'object', additionalProperties: false, required: ['method', 'store_id'],
            properties: { method: { const: 'pickup', type: 'string' }, store_id: { type: 'string' } } },
        ],
      },
    },
  },
  issue_refund: {
    type: 'object', additionalProperties: false, required: ['customer_id', 'amount_cents', 'reason'],
    properties: {
      amount_cents: { description: 'Amount in cents (1 to 100000).', format: 'uint32', minimum: 0, type: 'integer' },
      customer_id: { description: 'The customer, e.g. `cus_1001`.', type: 'string' },
      reason: { description: 'Why.', type: 'string' },
    },
  },
};

const openaiTools = (names = Object.keys(SCHEMAS)) =>
  names.map((name) => ({ type: 'function', function: { name, description: name, parameters: SCHEMAS[name] } }));
const anthropicTools = (names = Object.keys(SCHEMAS)) =>
  names.map((name) => ({ name, description: name, input_schema: SCHEMAS[name] }));

const openai = (messages, tools = openaiTools()) =>
  ({ format: 'openai', body: { model: 'edgent-demo', stream: true, messages: [{ role: 'system', content: 'Be brief.' }, ...messages], tools } });
const anthropic = (messages, tools = anthropicTools()) =>
  ({ format: 'anthropic', body: { model: 'edgent-demo', stream: true, system: 'Be brief.', messages, tools } });

const callOf = (step) => {
  assert.equal(step.toolCalls?.length, 1, `expected one tool call, got ${JSON.stringify(step)}`);
  return step.toolCalls[0];
};

/** The demo's own marks: its model name and visible streaming. */
function assertDemo(step) {
  assert.equal(step.model, 'edgent-demo');
  assert.ok(step.chunkSize <= 8 && step.chunkDelayMs >= 10, `streams visibly: ${JSON.stringify(step)}`);
}

describe('demoStep', () => {
  test('"what time is it?" calls get_current_time (OpenAI and Anthropic)', () => {
    for (const step of [
      demoStep(openai([{ role: 'user', content: 'Hi, what time is it?' }])),
      demoStep(anthropic([{ role: 'user', content: [{ type: 'text', text: 'Hi, what time is it?' }] }])),
    ]) {
      assertDemo(step);
      assert.deepEqual(callOf(step), { name: 'get_current_time', arguments: {} });
      assert.match(step.text, /demo/i, 'the text before the call names the demo');
    }
  });

  test('weather in Paris calls get_weather with the city; units only when asked for', () => {
    assert.deepEqual(callOf(demoStep(openai([{ role: 'user', content: "What's the weather in Paris?" }]))),
      { name: 'get_weather', arguments: { city: 'Paris' } });
    assert.deepEqual(callOf(demoStep(anthropic([{ role: 'user', content: 'temperature in São Paulo in fahrenheit please' }]))),
      { name: 'get_weather', arguments: { city: 'São Paulo', units: 'fahrenheit' } });
    assert.deepEqual(callOf(demoStep(openai([{ role: 'user', content: 'is it going to rain?' }]))).arguments, { city: 'Lisbon' });
  });

  test('a customer, an order and a refund call their tools with arguments that fit the schemas', () => {
    assert.deepEqual(callOf(demoStep(openai([{ role: 'user', content: 'Can you look up ada@example.com?' }]))),
      { name: 'lookup_customer', arguments: { email: 'ada@example.com' } });
    assert.deepEqual(callOf(demoStep(anthropic([{ role: 'user', content: 'Which plan is customer cus_1002 on?' }]))),
      { name: 'lookup_customer', arguments: { customer_id: 'cus_1002' } });
    const order = callOf(demoStep(openai([{ role: 'user', content: 'Order 3 MUG-BLUE for cus_1003, express please' }])));
    assert.equal(order.name, 'process_order');
    assert.equal(order.arguments.customer_id, 'cus_1003');
    assert.deepEqual(order.arguments.items, [{ sku: 'MUG-BLUE', quantity: 3 }]);
    assert.equal(order.arguments.shipping.method, 'express');
    assert.match(order.arguments.shipping.deliver_by, /^\d{4}-\d{2}-\d{2}$/);
    assert.deepEqual(Object.keys(order.arguments).sort(), ['customer_id', 'items', 'shipping'], 'no optional field without a value');
    const plain = callOf(demoStep(openai([{ role: 'user', content: 'order 2 things please' }])));
    assert.deepEqual(plain.arguments, { customer_id: 'cus_1001', items: [{ sku: 'TSHIRT-RED', quantity: 2 }], shipping: { method: 'standard' } },
      'the schema\'s own examples fill what the text does not say');
    const refund = callOf(demoStep(anthropic([{ role: 'user', content: 'Please refund $25 to cus_1003, the parcel was lost' }])));
    assert.equal(refund.name, 'issue_refund');
    assert.equal(refund.arguments.amount_cents, 2500);
    assert.equal(refund.arguments.customer_id, 'cus_1003');
    assert.ok(refund.arguments.reason.length > 0);
  });

  test('a prompt offering approve_draft (the example reviewer) approves the draft it was given', () => {
    const approve = { name: 'approve_draft', input_schema: { type: 'object', required: ['final_text'],
      properties: { final_text: { type: 'string' }, notes: { type: ['string', 'null'], default: null } } } };
    assert.deepEqual(callOf(demoStep(anthropic([{ role: 'user', content: 'Dear Ada, thank you.' }], [approve]))),
      { name: 'approve_draft', arguments: { final_text: 'Dear Ada, thank you.' } });
  });

  test('only tools the request offers are called', () => {
    const step = demoStep(openai([{ role: 'user', content: 'what time is it?' }], openaiTools(['lookup_customer'])));
    assert.equal(step.toolCalls, undefined);
    assert.match(step.text, /demo model/);
    assert.doesNotMatch(step.text, /Try .*what time is it/, 'suggests only offered tools');
    assert.match(step.text, /look up ada@example.com/);
    // A tool the text names is called even without a rule for it (examples/hello's say_hello).
    const hello = { name: 'say_hello', parameters: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } };
    assert.deepEqual(callOf(demoStep(openai([{ role: 'user', content: 'say hello to Ada' }], [{ type: 'function', function: hello }]))),
      { name: 'say_hello', arguments: { name: 'Ada' } });
  });

  test('a tool result is answered in text from the result', () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'get_current_time', arguments: '{}' } };
    const time = demoStep(openai([
      { role: 'user', content: 'what time is it?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '2026-11-24T14:05:07.123Z' },
    ]));
    assertDemo(time);
    assert.equal(time.toolCalls, undefined);
    assert.match(time.text, /It is 14:05 UTC on Tuesday, 24 November 2026/);

    const customer = demoStep(anthropic([
      { role: 'user', content: 'look up ada@example.com' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup_customer', input: { email: 'ada@example.com' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1',
        content: '{"id":"cus_1001","name":"Ada Lovelace","email":"ada@example.com","plan":"enterprise"}' }] },
    ]));
    assert.equal(customer.toolCalls, undefined);
    assert.match(customer.text, /lookup_customer found Ada Lovelace: id cus_1001, email ada@example.com, plan enterprise/);

    // Every result since the user spoke: process_order queued send_notification.
    const queued = demoStep(openai([
      { role: 'user', content: 'order 2 TSHIRT-RED for cus_1001' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c2', type: 'function', function: { name: 'process_order', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c2', content: '{"order_id":"ord_1","units":2,"status":"confirmed","notification_call_id":null}' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'q1', type: 'function', function: { name: 'send_notification', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'q1', content: 'notification sent by email to ada@example.com' },
    ]));
    assert.equal(queued.text,
      'process_order returned order id ord_1, units 2, status confirmed. send_notification returned: notification sent by email to ada@example.com.');

    const failed = demoStep(anthropic([
      { role: 'user', content: 'weather in Lisbon' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Lisbon' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', is_error: true,
        content: [{ type: 'text', text: 'Error: the weather service is not configured' }] }] },
    ]));
    assert.match(failed.text, /^get_weather did not work: the weather service is not configured\.$/);
  });

  test('plain words get the demo text: what it is, what it read, what to try, how to switch', () => {
    for (const step of [
      demoStep(openai([{ role: 'user', content: 'Hello there!' }])),
      demoStep(anthropic([{ role: 'user', content: [{ type: 'text', text: 'Hello there!' }] }])),
    ]) {
      assertDemo(step);
      assert.equal(step.toolCalls, undefined);
      assert.match(step.text, /edgent's demo model \(no API key set\)/);
      assert.match(step.text, /You wrote "Hello there!"/);
      assert.match(step.text, /"what time is it\?", "weather in Lisbon" or "look up ada@example.com"/);
      assert.match(step.text, /set OPENAI_API_KEY in \.dev\.vars and restart `npm run dev`/);
    }
    assert.match(demoStep(openai([{ role: 'user', content: 'hi' }]), { secret: 'MY_KEY' }).text, /set MY_KEY in \.dev\.vars/);
  });

  test('odd bodies get the demo text, never a throw', () => {
    const odd = [
      undefined, {}, { format: 'openai', body: null }, { format: 'openai', body: 5 }, { format: 'anthropic', body: [] },
      { format: 'openai', body: { messages: 'hi' } },
      { format: 'openai', body: { messages: [null, 3, { role: 'user', content: 7 }], tools: 'x' } },
      { format: 'openai', body: { messages: [{ role: 'user', content: [{ type: 'image_url' }, 'what', null] }], tools: [null, {}] } },
      { format: 'anthropic', body: { messages: [{ role: 'user' }, { role: 'user', content: [{ type: 'tool_result' }] }] } },
      { format: 'openai', body: { messages: [{ role: 'tool', content: { weird: true } }] } },
      // A tool whose schema is not an object, or loops on itself.
      { format: 'openai', body: { messages: [{ role: 'user', content: 'weather?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { $ref: '#' } } }] } },
    ];
    for (const request of odd) {
      const step = demoStep(request);
      assertDemo(step);
      assert.equal(typeof step.text, 'string', JSON.stringify(request));
      assert.ok(step.text.length > 0);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Through the real Worker: the default model seeded as the demo (as `npm run dev` does), with
// no OPENAI_API_KEY at all.
// ---------------------------------------------------------------------------------------------

describe('the Worker with the demo model', () => {
  let model;
  let worker;

  before(async () => {
    model = await startModelServer({ fallback: demoStep });
    worker = await startWorker({ bindings: { OPENAI_API_KEY: '' } });
    // What seed.mjs --demo-model writes when no key is set: every model (both name a secret)
    // as the demo, over the rows startWorker seeded from the files.
    const defs = toDefinitions(join(ROOT, 'agents'));
    defs.models = defs.models.map((m) => asDemoModel(m, model.url));
    await seed(worker.db, toRows(defs));
  });

  after(async () => {
    await worker?.dispose();
    await model?.close();
  });

  /** Sends `content` on a new support thread; resolves with the frames once the turn ends. */
  async function ask(t, content) {
    const id = await worker.client.createThread('support');
    const sock = await worker.client.connect(id);
    t.after(() => sock.close());
    const sent = await sock.rpc('send_message', { content });
    assert.equal(sent.ok, true, JSON.stringify(sent));
    const final = await sock.finalAssistant(0, 20_000);
    const messages = (await worker.client.request('GET', `/api/threads/${id}/messages?order=asc&limit=50`)).body.messages;
    return { id, sock, final: final.message, messages };
  }

  test('"Hi, what time is it?" calls get_current_time and answers with the time it returned', async (t) => {
    const { final, messages, sock } = await ask(t, 'Hi, what time is it?');
    assert.equal(final.status, 'completed');
    const call = messages.find((m) => m.role === 'assistant' && m.tool_calls?.length)?.tool_calls[0];
    assert.equal(call?.name, 'get_current_time', JSON.stringify(messages));
    const result = messages.find((m) => m.role === 'tool' && m.tool_call_id === call.id);
    assert.ok(result, 'the tool message is stored');
    assert.match(result.content, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/);
    const at = new Date(result.content);
    const hhmm = `${String(at.getUTCHours()).padStart(2, '0')}:${String(at.getUTCMinutes()).padStart(2, '0')}`;
    assert.match(final.content, new RegExp(`^It is ${hhmm} UTC on `));
    assert.equal(messages.at(-1).id, final.id, 'the answer ends the turn');
    const chunks = sock.frames.filter((f) => f.type === 'message_chunk' && f.message_id === final.id);
    assert.ok(chunks.length >= 5, `the answer streamed in ${chunks.length} chunks`);
    const requests = model.requests.filter((r) => r.body?.messages?.some((m) => m.content === 'Hi, what time is it?'));
    assert.equal(requests.length, 2, 'one request for the call, one for the answer');
    assert.equal(requests[0].headers.authorization, undefined, 'no key is sent to the demo');
  });

  test('a customer question calls lookup_customer and answers from the row', async (t) => {
    const { final, messages } = await ask(t, 'Can you look up the customer ada@example.com?');
    const call = messages.find((m) => m.tool_calls?.length)?.tool_calls[0];
    assert.equal(call?.name, 'lookup_customer');
    assert.deepEqual(JSON.parse(call.arguments), { email: 'ada@example.com' });
    const result = messages.find((m) => m.role === 'tool' && m.tool_call_id === call.id);
    assert.match(result.content, /"name":"Ada Lovelace"/);
    assert.equal(final.status, 'completed');
    assert.match(final.content, /found Ada Lovelace: id cus_1001.*plan enterprise/);
  });

  test('an order calls process_order with arguments the tool accepts', async (t) => {
    const { final, messages } = await ask(t, 'Please order 2 TSHIRT-RED for cus_1001');
    const call = messages.find((m) => m.tool_calls?.length)?.tool_calls[0];
    assert.equal(call?.name, 'process_order');
    const result = messages.find((m) => m.role === 'tool' && m.tool_call_id === call.id);
    assert.doesNotMatch(result.content, /^Error/, `the tool ran: ${result.content}`);
    assert.match(result.content, /"status":"confirmed"/);
    const orderId = JSON.parse(result.content).order_id;
    assert.equal(final.status, 'completed');
    assert.ok(final.content.includes(orderId), final.content);
  });
});

// ---------------------------------------------------------------------------------------------
// scripts/demo-model.mjs
// ---------------------------------------------------------------------------------------------

/** Resolves with the child's first stdout line. */
function firstLine(child) {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const i = out.indexOf('\n');
      if (i >= 0) resolve(out.slice(0, i));
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before printing: ${out}${err}`)));
  });
}

async function refused(url) {
  try {
    await fetch(url);
    return false;
  } catch (e) {
    return e.cause?.code === 'ECONNREFUSED';
  }
}

test('demo-model.mjs serves the demo on the port asked for and stops on SIGTERM', async (t) => {
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'demo-model.mjs'), '--port', String(port), '--secret', 'MY_KEY'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  const line = await firstLine(child);
  const url = `http://127.0.0.1:${port}`;
  assert.match(line, new RegExp(`^demo model: ${url} `));
  assert.equal((await fetch(`${url}/v1/models`)).status, 200);
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'edgent-demo', messages: [{ role: 'user', content: 'hello' }] }),
  });
  const body = await res.json();
  assert.equal(body.model, 'edgent-demo');
  assert.match(body.choices[0].message.content, /demo model .*set MY_KEY in \.dev\.vars/);
  child.kill('SIGTERM');
  assert.equal(await exited(child), 0);
  assert.ok(await refused(`${url}/v1/models`), 'the port is free again');
});

test('demo-model.mjs refuses bad arguments and a port in use', async (t) => {
  const bad = spawnSync(process.execPath, [join(ROOT, 'scripts', 'demo-model.mjs'), '--port', 'x'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--port must be a port number/);
  const busy = createServer();
  await new Promise((r) => busy.listen(0, '127.0.0.1', r));
  t.after(() => busy.close());
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'demo-model.mjs'), '--port', String(busy.address().port)],
    { encoding: 'utf8', timeout: 10_000 });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\)/);
});

// ---------------------------------------------------------------------------------------------
// seed.mjs --demo-model and --key-status, in an app folder of its own
// ---------------------------------------------------------------------------------------------

const DB_ID = parseToml(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')).d1_databases.find((d) => d.binding === 'DB').database_id;

function runSeed(dir, ...args) {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'seed.mjs'), ...args], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  return r;
}

/** The model rows of the local D1 under `dir/state`, by name. */
async function modelRows(dir) {
  return await withLocalD1({ persistTo: join(dir, 'state'), databaseId: DB_ID }, async (db) => {
    const { results } = await db.prepare('SELECT name, provider, model, base_url, api_key_secret, fallbacks FROM models').all();
    return Object.fromEntries(results.map((r) => [r.name, r]));
  });
}

test('seed --demo-model writes the keyless models as the demo; a plain seed puts the files back', async (t) => {
  const dir = tempApp(t, '# comment\nEDGENT_API_KEY=abc\nOPENAI_API_KEY=\n');
  const demo = runSeed(dir, '--persist-to', 'state', '--demo-model', 'http://127.0.0.1:8797');
  assert.equal(demo.status, 0, demo.stderr);
  assert.match(demo.stdout, /model "default" is the demo model \(http:\/\/127\.0\.0\.1:8797\/v1\)/);
  let rows = await modelRows(dir);
  assert.deepEqual(rows.default, { name: 'default', provider: 'openai', model: 'edgent-demo',
    base_url: 'http://127.0.0.1:8797/v1', api_key_secret: null, fallbacks: '[]' });
  assert.equal(rows.claude.model, 'edgent-demo', 'ANTHROPIC_API_KEY is not set either');

  // The key set: the next seeds write the real model, with or without the flag.
  writeFileSync(join(dir, '.dev.vars'), 'EDGENT_API_KEY=abc\nOPENAI_API_KEY="sk-real"\n');
  const flagged = runSeed(dir, '--persist-to', 'state', '--demo-model', 'http://127.0.0.1:8797');
  assert.equal(flagged.status, 0, flagged.stderr);
  rows = await modelRows(dir);
  assert.deepEqual(rows.default, { name: 'default', provider: 'openai', model: 'gpt-4o-mini',
    base_url: 'https://api.openai.com/v1', api_key_secret: 'OPENAI_API_KEY', fallbacks: '[]' });
  assert.equal(rows.claude.model, 'edgent-demo');
  const plain = runSeed(dir, '--persist-to', 'state');
  assert.equal(plain.status, 0, plain.stderr);
  rows = await modelRows(dir);
  assert.equal(rows.claude.model, 'claude-sonnet-4-5');
  assert.equal(rows.claude.api_key_secret, 'ANTHROPIC_API_KEY');
});

test('seed --key-status reports the secret and whether .dev.vars sets it; --demo-model is local only', (t) => {
  const status = (dir, name = 'default') => runSeed(dir, '--key-status', name);
  const empty = tempApp(t, 'OPENAI_API_KEY=   # not yet\n');
  assert.equal(status(empty).stdout, 'OPENAI_API_KEY\tempty\tgpt-4o-mini\thttps://api.openai.com/v1\n');
  assert.equal(status(tempApp(t)).stdout.split('\t')[1], 'empty', 'no .dev.vars at all');
  assert.equal(status(tempApp(t, "export OPENAI_API_KEY='sk-x'\n")).stdout.split('\t')[1], 'set');
  assert.equal(status(empty, 'nope').status, 3);
  const remote = runSeed(empty, '--remote', '--demo-model', 'http://127.0.0.1:8797');
  assert.equal(remote.status, 2);
  assert.match(remote.stderr, /--demo-model is for the local D1 only/);
});

// ---------------------------------------------------------------------------------------------
// scripts/dev.sh: the real script in a copy of scripts/ whose setup, build and wrangler are
// stubs (tests/support/dev-script.mjs).
// ---------------------------------------------------------------------------------------------

test('dev.sh with no key starts the demo, seeds it, names it in the banner and stops it on SIGTERM', { timeout: 60_000 }, async (t) => {
  const root = stubRoot(t);
  const app = tempApp(t); // no .dev.vars: the first run writes it with OPENAI_API_KEY empty
  // An app with the weather tool and no WEATHER_API_KEY gets the weather stand-in as well.
  mkdirSync(join(app, 'agents', 'tools'), { recursive: true });
  cpSync(join(ROOT, 'agents', 'tools', 'get_weather.rs'), join(app, 'agents', 'tools', 'get_weather.rs'));
  const dev = await startDev(t, root, app);
  await dev.until(/stub wrangler dev/);
  const out = dev.output();
  const weatherUrl = `http://127.0.0.1:${Number(new URL(dev.demoUrl).port) + 1}`;
  assert.match(out, new RegExp(`--var WEATHER_API_KEY:demo --var WEATHER_API_URL:${weatherUrl.replace(/[.]/g, '\\.')} `));
  const weather = await (await fetch(`${weatherUrl}/weather?q=Lisbon&units=metric&appid=demo`)).json();
  assert.equal(weather.name, 'Lisbon');
  assert.match(out, /\n {2}Model: {4}demo \(no API key set: put OPENAI_API_KEY in \.dev\.vars and restart for gpt-4o-mini\)\n/);
  assert.match(out, /model "default" is the demo model/);
  assert.match(readFileSync(join(app, '.dev.vars'), 'utf8'), /^OPENAI_API_KEY=$/m);
  const models = await fetch(`${dev.demoUrl}/v1/models`);
  assert.equal(models.status, 200, 'the demo answers while wrangler runs');
  assert.equal((await modelRows(join(app, '.wrangler'))).default.base_url, `${dev.demoUrl}/v1`);

  dev.child.kill('SIGTERM');
  assert.equal(await exited(dev.child, 10_000), 143);
  assert.ok(await refused(`${dev.demoUrl}/v1/models`), 'the demo stopped with dev.sh');
  assert.ok(await refused(`${weatherUrl}/weather?q=Lisbon`), 'and so did the weather stand-in');
});

test('dev.sh stops the demo when wrangler exits, keeping wrangler\'s exit code; EDGENT_DEMO=0 runs without it', { timeout: 60_000 }, async (t) => {
  const root = stubRoot(t);
  const app = tempApp(t);
  const dev = await startDev(t, root, app, { STUB_WRANGLER_EXIT: '7' });
  assert.equal(await exited(dev.child, 30_000), 7, dev.output());
  assert.match(dev.output(), /Model: {4}demo/);
  assert.ok(await refused(`${dev.demoUrl}/v1/models`), 'the demo stopped with dev.sh');

  const off = await startDev(t, root, app, { EDGENT_DEMO: '0', STUB_WRANGLER_EXIT: '0' });
  assert.equal(await exited(off.child, 30_000), 0, off.output());
  assert.match(off.output(), /Model: {4}default \(gpt-4o-mini via https:\/\/api\.openai\.com\/v1\): OPENAI_API_KEY is empty in \.dev\.vars/);
  assert.doesNotMatch(off.output(), /demo model/);
  assert.equal((await modelRows(join(app, '.wrangler'))).default.model, 'gpt-4o-mini', 'the files\' model is seeded back');
});

test('dev.sh with the key set uses the real model and starts no demo', { timeout: 60_000 }, async (t) => {
  const root = stubRoot(t);
  const app = tempApp(t, 'EDGENT_API_KEY=abc\nOPENAI_API_KEY=sk-real\n');
  const dev = await startDev(t, root, app, { STUB_WRANGLER_EXIT: '0' });
  assert.equal(await exited(dev.child, 30_000), 0, dev.output());
  assert.match(dev.output(), /\n {2}Model: {4}default \(gpt-4o-mini via https:\/\/api\.openai\.com\/v1\)\n/);
  assert.doesNotMatch(dev.output(), /demo/);
  assert.equal((await modelRows(join(app, '.wrangler'))).default.api_key_secret, 'OPENAI_API_KEY');
});

test('dev.sh stops with a clear message when the demo\'s port is taken', { timeout: 60_000 }, async (t) => {
  const root = stubRoot(t);
  const app = tempApp(t);
  const busy = createServer();
  await new Promise((r) => busy.listen(0, '127.0.0.1', r));
  t.after(() => busy.close());
  const dev = await startDev(t, root, app, { EDGENT_DEMO_PORT: String(busy.address().port) });
  const started = Date.now();
  assert.equal(await exited(dev.child, 30_000), 1, dev.output());
  assert.match(dev.output(), /the demo model did not start on port \d+: the port is in use \(EDGENT_DEMO_PORT picks another; EDGENT_DEMO=0 runs without it\)/);
  assert.doesNotMatch(dev.output(), /stub wrangler dev/, 'wrangler never started');
  assert.ok(Date.now() - started < 10_000, `gave up after ${Date.now() - started} ms`);
});
