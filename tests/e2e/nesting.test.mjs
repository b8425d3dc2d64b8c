// End-to-end tests of nesting against the real built Worker in Miniflare (workerd), the real
// local D1 and the scripted model: sub-prompts that call prompts (one level deeper each, to
// the depth limit of 3) and the root of a chain of child threads.
// Proves: the configuration a turn loads brings the prompts a sub-prompt calls; each level's
// request has its own system text and the conversation above it; a level at the limit is not
// offered prompts and a call of one is an error result; each level's messages are stored at
// its depth (readable with `?depth=`); the request log says each attempt's depth; a child
// thread of a child thread knows its parent and the thread at the top of the chain.
// Does not prove: the engine's decisions one by one (tests/host/runtime/nested_prompts.rs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withWorker } from '../support/setup.mjs';

let model;
let client;

withWorker({ setup: async (env) => {
  ({ model, client } = env);
  const put = async (path, body) => {
    const r = await client.request('PUT', path, { body });
    assert.ok([200, 201].includes(r.status), `${path}: ${JSON.stringify(r.body)}`);
  };
  await put('/api/models/nest_model', {
    provider: 'openai', model: 'scripted', base_url: `${model.url}/v1`, api_key_secret: 'OPENAI_API_KEY',
  });
  // research → outline → detail → (fact: past the limit)
  await put('/api/prompts/nest_fact', { model: 'nest_model', system: 'You check one fact.' });
  await put('/api/prompts/nest_detail', { model: 'nest_model', system: 'You fill in details.', tools: ['nest_fact', 'get_current_time'], include_chat: true });
  await put('/api/prompts/nest_outline', { model: 'nest_model', system: 'You outline.', tools: ['nest_detail'], include_chat: true });
  await put('/api/prompts/nest_research', { model: 'nest_model', system: 'You research.', tools: ['nest_outline'], include_chat: false });
  await put('/api/prompts/nest_top', { model: 'nest_model', system: 'You are the desk.', tools: ['nest_research'] });
  await put('/api/agents/nest_desk', { side_a: { prompt: 'nest_top' } });
  // A dual_ai agent that calls itself: a chain of child threads (the prompt and the agent
  // refer to each other, so they are written as one set).
  await put('/api/config', {
    prompts: [
      { name: 'nest_loop', model: 'nest_model', system: 'You delegate to yourself.', tools: ['nest_looper'] },
      { name: 'nest_chain_top', model: 'nest_model', system: 'You start the chain.', tools: ['nest_looper'] },
    ],
    agents: [
      { id: 'nest_looper', kind: 'dual_ai', max_turns: 1, expose_as_tool: true, side_a: { prompt: 'nest_loop' }, side_b: { prompt: 'nest_loop' } },
      { id: 'nest_chain', side_a: { prompt: 'nest_chain_top' } },
    ],
  });
} });

const call = (id, name, args) => ({ toolCalls: [{ id, name, arguments: args }] });
const systemOf = (r) => r.body.messages.find((m) => m.role === 'system')?.content;
const offered = (r) => (r.body.tools ?? []).map((t) => t.function.name);
const said = (r) => r.body.messages.filter((m) => m.role === 'user').map((m) => m.content);

const turn = (id, content) => client.turn(id, content, { timeout: 30000 });

async function messages(id, query = '') {
  const r = await client.request('GET', `/api/threads/${id}/messages?limit=200${query}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.messages;
}

test('a sub-prompt calls a prompt, which calls a prompt; the third level may not go deeper', async () => {
  const id = await client.createThread('nest_desk');
  model.push(
    call('c_top', 'nest_research', { input: 'Find out about tides.' }), // depth 0
    call('c_r', 'nest_outline', { input: 'Outline tides.' }), // depth 1
    call('c_o', 'nest_detail', { input: 'Detail the moon.' }), // depth 2
    { toolCalls: [ // depth 3: a fourth level is refused, the tool runs
      { id: 'c_d', name: 'nest_fact', arguments: { input: 'Deeper still.' } },
      { id: 'c_t', name: 'get_current_time', arguments: {} },
    ] },
    { text: 'The moon pulls the sea.' }, // depth 3 answers
    { text: 'Outline: the moon pulls the sea.' }, // depth 2
    { text: 'Research: tides follow the moon.' }, // depth 1
    { text: 'Tides follow the moon.' }, // depth 0
  );
  const frames = await turn(id, 'Why are there tides?');
  assert.equal(model.requests.length, 8);
  const [top, research, outline, detail, detail2, , , final] = model.requests;
  assert.deepEqual([top, research, outline, detail].map(systemOf), ['You are the desk.', 'You research.', 'You outline.', 'You fill in details.']);
  assert.deepEqual(offered(top), ['nest_research']);
  assert.deepEqual(offered(research), ['nest_outline']);
  assert.deepEqual(offered(outline), ['nest_detail']);
  assert.deepEqual(offered(detail), ['get_current_time'], 'the deepest level is offered no prompt');
  // research has include_chat off: only its input; outline and detail see the conversation
  // above them (research's own), then their input.
  assert.deepEqual(said(research), ['Find out about tides.']);
  assert.deepEqual(said(outline), ['Find out about tides.', 'Outline tides.']);
  assert.deepEqual(said(detail), ['Find out about tides.', 'Outline tides.', 'Detail the moon.']);
  const results = detail2.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
  assert.match(results[0], /prompt "nest_fact" would run more than 3 sub-prompts deep/);
  assert.match(results[1], /^\d{4}-\d{2}-\d{2}T/);
  assert.equal(final.body.messages.at(-1).content, 'Research: tides follow the moon.');
  const answer = frames.filter((f) => f.type === 'message' && f.message.role === 'assistant' && f.message.status === 'completed').at(-1);
  assert.equal(answer.message.content, 'Tides follow the moon.');

  // Each level's messages at its depth, none of them among the top-level messages.
  assert.deepEqual((await messages(id)).map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  for (const [depth, last] of [[1, 'Research: tides follow the moon.'], [2, 'Outline: the moon pulls the sea.'], [3, 'The moon pulls the sea.']]) {
    const level = await messages(id, `&depth=${depth}`);
    assert.ok(level.every((m) => m.depth === depth), `depth ${depth}`);
    assert.equal(level.at(-1).content, last);
  }
  const log = await client.request('GET', `/api/threads/${id}/logs?limit=50&order=asc`);
  assert.equal(log.status, 200, JSON.stringify(log.body));
  assert.deepEqual(log.body.logs.map((r) => r.depth), [0, 1, 2, 3, 3, 2, 1, 0]);
});

test('a child thread of a child thread knows its parent and the thread at the top of the chain', async () => {
  const id = await client.createThread('nest_chain');
  model.push(
    call('c0', 'nest_looper', { input: 'level 1' }), // the top thread
    call('c1', 'nest_looper', { input: 'level 2' }), // child 1
    { text: 'answer 2' }, // child 2 answers
    { text: 'answer 1' }, // child 1 answers
    { text: 'Chain done.' },
  );
  await turn(id, 'Start the chain.');
  assert.equal(model.requests.length, 5);
  const childOf = (content) => content.match(/child thread ([0-9a-f-]{36})/)?.[1];
  const top = await messages(id);
  const child1 = childOf(top.find((m) => m.role === 'tool').content);
  assert.ok(child1, JSON.stringify(top));
  const child2 = childOf((await messages(child1)).find((m) => m.role === 'tool').content);
  assert.ok(child2);
  const summary = async (thread) => (await client.request('GET', `/api/threads/${thread}`)).body;
  const [s0, s1, s2] = await Promise.all([summary(id), summary(child1), summary(child2)]);
  assert.equal(s0.parent_thread_id, undefined);
  assert.equal(s0.root_thread_id, undefined, 'a thread a client created has no root but itself');
  assert.deepEqual([s1.parent_thread_id, s1.root_thread_id], [id, id]);
  assert.deepEqual([s2.parent_thread_id, s2.root_thread_id], [child1, id]);
});
