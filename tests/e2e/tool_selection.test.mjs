// End-to-end tests of tool selection against the real built Worker in Miniflare (workerd): the
// support prompt, given max_offered_tools = 3 through the configuration API, sends the
// (scripted) model only the three tools its latest message is about; a tool it lists but left
// out still runs when the model calls it; the request-log row says what was offered and the
// scores; GET /api/tools/recommend ranks tools for a task and refuses bad input. With a
// tool_selection_model (an OpenAI-compatible models row on the scripted server, whose
// POST /v1/embeddings knows "forecast" means "weather"), the offered tools come from
// embeddings, a second model call sends only the query to the embedder, and an embedder that
// fails (500, or slower than the row's timeout) leaves that call to BM25, logged with why.
// Proves: the D1 columns (migrations 0008 and 0012), the thread's log column (schema v11), the
// route and the router, the bodies the model and the embedder receive, the isolate's vector
// cache, the Worker's embedding fetch with its key and deadline.
// Does not prove: the ranking's quality beyond the example tools (host tests:
// crates/edgent/src/tool/select.rs, tests/host/offer.rs, tests/host/embeddings.rs), a real
// provider's use of the tools, Workers AI's embeddings (no Workers AI here: its request and
// answer shapes are checked in tests/host/embeddings.rs only).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';

const env = withWorker({
  modelServer: { embeddings: { synonyms: { forecast: 'weather' } } },
  async setup({ client }) {
    const support = await client.request('GET', '/api/prompts/support');
    assert.equal(support.status, 200, JSON.stringify(support.body));
    const put = await client.request('PUT', '/api/prompts/support', { body: { ...support.body, max_offered_tools: 3 } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.max_offered_tools, 3);
  },
});

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
  const id = await env.client.createThread('support');
  const sock = await env.client.connect(id);
  t.after(() => sock.close());
  await sock.waitFor((f) => f.type === 'status');
  const sent = await env.client.request('POST', `/api/threads/${id}/messages`, { body: { content: text } });
  assert.ok(sent.status < 300, JSON.stringify(sent.body));
  await sock.finalAssistant(0, 10000);
  return { id, sock };
}

async function logs(id) {
  const r = await env.client.request('GET', `/api/threads/${id}/logs`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.logs;
}

for (const [task, offered, best] of SAMPLES) {
  test(`"${task}": the model is offered ${offered.join(', ')}; the log row says so, with scores`, async (t) => {
    env.model.push({ text: 'Done.' });
    const { id } = await ask(t, task);
    assert.equal(env.model.requests.length, 1);
    assert.deepEqual(namesOf(env.model.requests[0].body.tools), offered);
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
  env.model.push({ toolCalls: [{ name: 'conversation_stats', arguments: {} }] }, { text: 'Counted.' });
  const { id, sock } = await ask(t, "what's the weather in Lisbon");
  assert.ok(!namesOf(env.model.requests[0].body.tools).includes('conversation_stats'));
  const ran = await sock.waitFor((f) => f.type === 'tool' && f.name === 'conversation_stats' && ['success', 'error'].includes(f.status));
  assert.equal(ran.status, 'success', JSON.stringify(ran));
  assert.equal(env.model.requests.length, 2);
  // The follow-up call reads the latest messages: the call it made now counts.
  const second = (await logs(id))[1].tool_selection;
  assert.ok(second.scores.conversation_stats > 0, JSON.stringify(second));
  assert.deepEqual(namesOf(env.model.requests[1].body.tools), second.offered);
});

test('pins are always offered; a prompt without max_offered_tools offers every tool, logged without scores', async (t) => {
  const support = (await env.client.request('GET', '/api/prompts/support')).body;
  const pinned = await env.client.request('PUT', '/api/prompts/support', { body: { ...support, pinned_tools: ['review'] } });
  assert.equal(pinned.status, 200, JSON.stringify(pinned.body));
  t.after(() => env.client.request('PUT', '/api/prompts/support', { body: support }));
  env.model.push({ text: 'Done.' });
  const { id: pinnedThread } = await ask(t, 'what time is it');
  assert.deepEqual(namesOf(env.model.requests[0].body.tools), ['get_current_time', 'lookup_customer', 'review']);
  const [pinnedRow] = await logs(pinnedThread);
  assert.deepEqual(pinnedRow.tool_selection.pinned, ['review'], 'the log names the pins');

  const { max_offered_tools: _, ...everything } = support;
  assert.equal((await env.client.request('PUT', '/api/prompts/support', { body: everything })).status, 200);
  env.model.reset();
  env.model.push({ text: 'Done.' });
  const { id } = await ask(t, 'what time is it');
  assert.equal(namesOf(env.model.requests[0].body.tools).length, 9);
  const [row] = await logs(id);
  assert.deepEqual(Object.keys(row.tool_selection), ['offered']);
  assert.equal(row.tool_selection.offered.length, 9);
});

test('the selection fields are checked when a prompt is written', async () => {
  const support = (await env.client.request('GET', '/api/prompts/support')).body;
  for (const [change, says] of [
    [{ max_offered_tools: 0 }, 'prompt "support": max_offered_tools must be at least 1'],
    [{ pinned_tools: ['send_notification'] }, 'prompt "support": pinned_tools names "send_notification", which is not in this prompt\'s tools'],
    [{ max_offered_tools: 1, pinned_tools: ['review', 'summarize'] }, 'pinned_tools names 2 tools but max_offered_tools is 1'],
    [{ max_offered_tools: 'three' }, 'max_offered_tools'],
  ]) {
    const r = await env.client.request('PUT', '/api/prompts/support', { body: { ...support, ...change } });
    assert.equal(r.status, 400, JSON.stringify(change));
    assert.equal(r.body.error.code, 'invalid_definition');
    assert.ok(r.body.error.message.includes(says), `${JSON.stringify(change)}: ${r.body.error.message}`);
  }
  const kept = await env.client.request('GET', '/api/prompts/support');
  assert.deepEqual(kept.body, support, 'a refused write changes nothing');
});

const recommend = (query, opts) => env.client.request('GET', `/api/tools/recommend?${new URLSearchParams(query)}`, opts);

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
  assert.equal((await env.client.request('POST', '/api/tools/recommend?task=weather')).status, 404);
  const id = await env.client.createThread('support');
  const minted = await env.client.request('POST', `/api/threads/${id}/tokens`, { body: { scopes: ['chat'] } });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const asClient = await recommend({ task: 'weather' }, { key: minted.body.token });
  assert.equal(asClient.status, 403, JSON.stringify(asClient.body));
});

// Tool selection by embeddings: the support prompt offering one tool per call, ranked by an
// OpenAI-compatible embedding model on the scripted server. The task shares no word with any
// tool (BM25 scores every tool 0 and offers the first listed, get_current_time); the
// embedder knows "forecast" means "weather".
const FORECAST = 'any forecast for Porto tomorrow?';
const chats = () => env.model.requests.filter((r) => r.path === '/v1/chat/completions');

/** The embedder row (its own model id per test, so no vectors are cached for it yet) and the
 * support prompt ranking by it; both restored after the test. */
async function useEmbeddings(t, id) {
  const { client, model } = env;
  const embedder = { name: 'embedder', provider: 'openai', model: id, base_url: `${model.url}/v1`,
    api_key_secret: 'OPENAI_API_KEY', total_timeout_ms: 1500 };
  const put = await client.request('PUT', '/api/models/embedder', { body: embedder });
  assert.ok(put.status < 300, JSON.stringify(put.body));
  const support = (await client.request('GET', '/api/prompts/support')).body;
  const ranked = await client.request('PUT', '/api/prompts/support',
    { body: { ...support, max_offered_tools: 1, tool_selection_model: 'embedder' } });
  assert.equal(ranked.status, 200, JSON.stringify(ranked.body));
  t.after(async () => {
    assert.equal((await client.request('PUT', '/api/prompts/support', { body: support })).status, 200);
    assert.equal((await client.request('DELETE', '/api/models/embedder')).status, 200);
  });
}

test('with a tool_selection_model the offered tools come from embeddings; the next call embeds only the query', async (t) => {
  await useEmbeddings(t, 'toy-embed-warm');
  env.model.push({ toolCalls: [{ name: 'conversation_stats', arguments: {} }] }, { text: 'Sunny, probably.' });
  const { id } = await ask(t, FORECAST);

  const [first, second] = chats();
  assert.equal(chats().length, 2);
  assert.deepEqual(namesOf(first.body.tools), ['get_weather']);
  t.diagnostic(`${FORECAST} -> ${namesOf(first.body.tools)} (BM25: get_current_time)`);
  const embedded = env.model.embeddingRequests;
  assert.equal(embedded.length, 2, 'one embedding request per model call');
  assert.equal(embedded[0].body.model, 'toy-embed-warm');
  assert.equal(embedded[0].headers.authorization, 'Bearer sk-test-secret', 'the row\'s key, from its secret');
  assert.equal(embedded[0].body.input.length, 10, 'the query and the nine tools');
  assert.ok(embedded[0].body.input[0].startsWith(FORECAST), embedded[0].body.input[0]);
  assert.equal(embedded[1].body.input.length, 1, 'then the query alone: the tools\' vectors are cached');
  assert.ok(embedded[1].arrival < second.arrival, 'embedded before the call it ranks for');

  const rows = await logs(id);
  assert.equal(rows.length, 2);
  for (const row of rows) {
    assert.equal(row.tool_selection.method, 'embeddings', JSON.stringify(row.tool_selection));
    assert.equal(row.tool_selection.fallback, undefined);
    assert.equal(Object.keys(row.tool_selection.scores).length, 9);
  }
  const scores = rows[0].tool_selection.scores;
  const top = Object.entries(scores).reduce((a, b) => (b[1] > a[1] ? b : a));
  assert.equal(top[0], 'get_weather', JSON.stringify(scores));
  assert.ok(Object.values(scores).every((s) => s >= -1 && s <= 1), 'cosines');

  const recommended = await recommend({ task: FORECAST, prompt: 'support', limit: '3' });
  assert.equal(recommended.status, 200, JSON.stringify(recommended.body));
  assert.equal(recommended.body.method, 'embeddings');
  assert.equal(recommended.body.tools[0].name, 'get_weather');
  assert.deepEqual(recommended.body.offered, ['get_weather']);
  const lexical = await recommend({ task: FORECAST, limit: '3' });
  assert.equal(lexical.body.method, 'bm25');
  assert.ok(lexical.body.tools.every((x) => x.score === 0), JSON.stringify(lexical.body));
});

test('an embedder answering 500, or slower than its timeout, leaves the call to BM25 with the reason; the turn succeeds', async (t) => {
  await useEmbeddings(t, 'toy-embed-failing');
  for (const [fault, says] of [
    [{ error: { status: 500, message: 'embedder down' } }, 'embedding model "embedder": model server answered 500: embedder down'],
    [{ delayMs: 4000 }, 'embedding model "embedder": model timed out: no embeddings within 1500 ms'],
  ]) {
    env.model.reset();
    env.model.pushEmbeddings(fault);
    env.model.push({ text: 'Done.' });
    const started = Date.now();
    const { id } = await ask(t, FORECAST);
    assert.equal(env.model.embeddingRequests.length, 1);
    assert.deepEqual(namesOf(chats()[0].body.tools), ['get_current_time'], 'BM25\'s choice');
    const [row] = await logs(id);
    assert.equal(row.tool_selection.method, 'bm25');
    assert.equal(row.tool_selection.fallback, says);
    assert.ok(!JSON.stringify(row).includes('sk-test-secret'), 'no key in the log');
    t.diagnostic(`${JSON.stringify(fault)}: turn in ${Date.now() - started} ms, fallback ${says}`);
  }
  // recommend says so too.
  env.model.pushEmbeddings({ error: { status: 503, message: 'busy' } });
  const r = await recommend({ task: FORECAST, prompt: 'support' });
  assert.equal(r.body.method, 'bm25');
  assert.match(r.body.fallback, /answered 503: busy/);
});

test('tool_selection_model must name an embedding model, which cannot be deleted while named', async (t) => {
  await useEmbeddings(t, 'toy-embed-checks');
  const support = (await env.client.request('GET', '/api/prompts/support')).body;
  for (const [value, says] of [
    ['ghost', 'prompt "support": "tool_selection_model" is "ghost", which is not a model'],
    ['a b', 'tool selection model "a b" must be 1-64 characters'],
  ]) {
    const r = await env.client.request('PUT', '/api/prompts/support', { body: { ...support, tool_selection_model: value } });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.ok(r.body.error.message.includes(says), r.body.error.message);
  }
  const r = await env.client.request('DELETE', '/api/models/embedder');
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body.error.message,
    'model "embedder" is used by prompt "support" (its "tool_selection_model"); change or delete that first');
});
