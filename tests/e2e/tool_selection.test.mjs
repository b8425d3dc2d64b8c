// End-to-end tests of tool selection against the real built Worker in Miniflare (workerd): the
// support prompt, given max_offered_tools = 3 through the configuration API, sends the
// (scripted) model only the three tools its latest message is about; a tool it lists but left
// out still runs when the model calls it; the request-log row says what was offered and the
// scores; GET /api/tools/recommend ranks tools for a task and refuses bad input.
// Proves: the D1 columns (migration 0008), the thread's log column (schema v11), the route and
// the router, the bodies the model receives.
// Does not prove: the ranking's quality beyond the example tools (host tests:
// crates/edgent/src/tool/select.rs, tests/host/offer.rs), a real provider's use of the tools.

import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';

let model;
let worker;
let client;

before(async () => {
  model = await startModelServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1` });
  client = worker.client;
  const support = await client.request('GET', '/api/prompts/support');
  assert.equal(support.status, 200, JSON.stringify(support.body));
  const put = await client.request('PUT', '/api/prompts/support', { body: { ...support.body, max_offered_tools: 3 } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.equal(put.body.max_offered_tools, 3);
});

after(async () => {
  await worker?.dispose();
  await model?.close();
});

beforeEach(() => model.reset());

// What the selection gives for each task (docs/decisions/2026-11-24-tool-selection.md): the
// best match, then, in the prompt's order, the best of the rest (zero scores keep that order).
// A task, what the support prompt offers for it (max 3), and the tool the whole registry must
// rank within the top `within` (a refund of an order is about both issue_refund and
// process_order: which comes first depends on every registered tool's words).
const SAMPLES = [
  ["what's the weather in Lisbon", ['get_current_time', 'lookup_customer', 'get_weather'], 'get_weather', 1],
  ['refund order 1234 for ada@example.com', ['get_current_time', 'process_order', 'issue_refund'], 'issue_refund', 2],
  ['what time is it', ['get_current_time', 'lookup_customer', 'get_weather'], 'get_current_time', 1],
];

const namesOf = (tools) => (tools ?? []).map((t) => t.function.name);

/** Sends `text` on a new support thread and waits for the final reply; the socket and id. */
async function ask(t, text) {
  const id = await client.createThread('support');
  const sock = await client.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  const sent = await client.request('POST', `/api/threads/${id}/messages`, { body: { content: text } });
  assert.ok(sent.status < 300, JSON.stringify(sent.body));
  await sock.finalAssistant(0, 10000);
  return { id, sock };
}

async function logs(id) {
  const r = await client.request('GET', `/api/threads/${id}/logs`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.logs;
}

for (const [task, offered, best] of SAMPLES) {
  test(`"${task}": the model is offered ${offered.join(', ')}; the log row says so, with scores`, async (t) => {
    model.push({ text: 'Done.' });
    const { id } = await ask(t, task);
    assert.equal(model.requests.length, 1);
    assert.deepEqual(namesOf(model.requests[0].body.tools), offered);
    t.diagnostic(`${task} -> ${offered.join(', ')}`);
    const [row] = await logs(id);
    assert.deepEqual(row.tool_selection.offered, offered);
    assert.equal(row.tool_selection.max, 3);
    const scores = Object.entries(row.tool_selection.scores);
    assert.equal(scores.length, 9, 'seven tools and two delegates are scored');
    const top = scores.reduce((a, b) => (b[1] > a[1] ? b : a));
    assert.equal(top[0], best, JSON.stringify(row.tool_selection.scores));
    assert.ok(top[1] > 0);
  });
}

test('a tool the prompt lists but the selection left out still runs when the model calls it', async (t) => {
  model.push({ toolCalls: [{ name: 'conversation_stats', arguments: {} }] }, { text: 'Counted.' });
  const { id, sock } = await ask(t, "what's the weather in Lisbon");
  assert.ok(!namesOf(model.requests[0].body.tools).includes('conversation_stats'));
  const ran = await sock.waitFor((f) => f.type === 'tool' && f.name === 'conversation_stats' && ['success', 'error'].includes(f.status));
  assert.equal(ran.status, 'success', JSON.stringify(ran));
  assert.equal(model.requests.length, 2);
  // The follow-up call reads the latest messages: the call it made now counts.
  const second = (await logs(id))[1].tool_selection;
  assert.ok(second.scores.conversation_stats > 0, JSON.stringify(second));
  assert.deepEqual(namesOf(model.requests[1].body.tools), second.offered);
});

test('pins are always offered; a prompt without max_offered_tools offers every tool, logged without scores', async (t) => {
  const support = (await client.request('GET', '/api/prompts/support')).body;
  const pinned = await client.request('PUT', '/api/prompts/support', { body: { ...support, pinned_tools: ['review'] } });
  assert.equal(pinned.status, 200, JSON.stringify(pinned.body));
  t.after(() => client.request('PUT', '/api/prompts/support', { body: support }));
  model.push({ text: 'Done.' });
  await ask(t, 'what time is it');
  assert.deepEqual(namesOf(model.requests[0].body.tools), ['get_current_time', 'lookup_customer', 'review']);

  const { max_offered_tools: _, ...everything } = support;
  assert.equal((await client.request('PUT', '/api/prompts/support', { body: everything })).status, 200);
  model.reset();
  model.push({ text: 'Done.' });
  const { id } = await ask(t, 'what time is it');
  assert.equal(namesOf(model.requests[0].body.tools).length, 9);
  const [row] = await logs(id);
  assert.deepEqual(Object.keys(row.tool_selection), ['offered']);
  assert.equal(row.tool_selection.offered.length, 9);
});

test('the selection fields are checked when a prompt is written', async () => {
  const support = (await client.request('GET', '/api/prompts/support')).body;
  for (const [change, says] of [
    [{ max_offered_tools: 0 }, 'prompt "support": max_offered_tools must be at least 1'],
    [{ pinned_tools: ['send_notification'] }, 'prompt "support": pinned_tools names "send_notification", which is not in this prompt\'s tools'],
    [{ max_offered_tools: 1, pinned_tools: ['review', 'summarize'] }, 'pinned_tools names 2 tools but max_offered_tools is 1'],
    [{ max_offered_tools: 'three' }, 'max_offered_tools'],
  ]) {
    const r = await client.request('PUT', '/api/prompts/support', { body: { ...support, ...change } });
    assert.equal(r.status, 400, JSON.stringify(change));
    assert.equal(r.body.error.code, 'invalid_definition');
    assert.ok(r.body.error.message.includes(says), `${JSON.stringify(change)}: ${r.body.error.message}`);
  }
  const kept = await client.request('GET', '/api/prompts/support');
  assert.deepEqual(kept.body, support, 'a refused write changes nothing');
});

const recommend = (query, opts) => client.request('GET', `/api/tools/recommend?${new URLSearchParams(query)}`, opts);

test('GET /api/tools/recommend ranks every registered tool, or a prompt\'s, for a task', async () => {
  for (const [task, , best, within] of SAMPLES) {
    const r = await recommend({ task, limit: '3' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.task, task);
    assert.equal(r.body.tools.length, 3);
    assert.ok(r.body.tools.slice(0, within).some((x) => x.name === best), JSON.stringify(r.body));
    assert.ok(r.body.tools[0].score > r.body.tools[2].score, JSON.stringify(r.body));
    assert.equal(r.body.offered, undefined);
  }
  const all = await recommend({ task: 'weather' });
  assert.equal(all.body.tools.length, 10, 'ten by default');
  // Registered tools the support prompt does not list are ranked too.
  assert.ok(all.body.tools.some((x) => x.name === 'compare_weather'), JSON.stringify(all.body));

  for (const [task, offered] of SAMPLES) {
    const r = await recommend({ task, prompt: 'support', limit: '20' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.prompt, 'support');
    assert.equal(r.body.tools.length, 9, 'its seven tools and two delegates');
    assert.deepEqual(r.body.offered, offered);
  }
  const delegate = await recommend({ task: 'summarize the conversation in bullet points', prompt: 'support' });
  assert.equal(delegate.body.tools[0].name, 'summarize', JSON.stringify(delegate.body));
});

test('GET /api/tools/recommend refuses bad input and callers without the server key', async () => {
  for (const [query, status, says] of [
    [{}, 400, '"task" is required'],
    [{ task: '   ' }, 400, '"task" is required'],
    [{ task: 'x'.repeat(2001) }, 400, '"task" is 2001 bytes; at most 2000'],
    [{ task: 'weather', limit: '0' }, 400, '"limit" must be an integer from 1 to 200'],
    [{ task: 'weather', limit: 'all' }, 400, '"limit" must be an integer'],
    [{ task: 'weather', prompt: 'no such' }, 400, '"prompt"'],
    [{ task: 'weather', prompt: 'ghost' }, 404, 'prompt "ghost" does not exist'],
  ]) {
    const r = await recommend(query);
    assert.equal(r.status, status, `${JSON.stringify(query)}: ${JSON.stringify(r.body)}`);
    assert.ok(r.body.error.message.includes(says), `${JSON.stringify(query)}: ${r.body.error.message}`);
  }
  assert.equal((await recommend({ task: 'x'.repeat(2000) })).status, 200);
  assert.equal((await recommend({ task: 'weather' }, { key: null })).status, 401);
  assert.equal((await client.request('POST', '/api/tools/recommend?task=weather')).status, 404);
  const id = await client.createThread('support');
  const minted = await client.request('POST', `/api/threads/${id}/tokens`, { body: { scopes: ['chat'] } });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const asClient = await recommend({ task: 'weather' }, { key: minted.body.token });
  assert.equal(asClient.status, 403, JSON.stringify(asClient.body));
});
