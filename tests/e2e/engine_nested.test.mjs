// End-to-end tests of what the engine runs beyond one prompt, and of its configuration: the
// real built Worker in Miniflare, local D1 definitions per test, real WebSockets and the
// scripted model server.
// Proves: sub-prompts as tools, the spending budget, agents called as tools (dual_ai child
// threads, ai_human handoffs), configuration read from D1 per turn (the 5 s cache bound, a change
// through the API at once) and clear errors for broken configuration.
// Does not prove: behaviour against real providers, or across Worker restarts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useEngineWorker,
  ISO_UTC,
  model,
  worker,
  client,
  fresh,
  modelRow,
  promptRow,
  agentRow,
  define,
  simpleAgent,
  thread,
  send,
  stopped,
  turn,
  summary,
  allMessages,
  logs,
  errors,
  toolFrames,
  finalMessages,
  noMoreRequests,
  systemOf,
  chat,
} from '../support/engine.mjs';

useEngineWorker();

// ---------------------------------------------------------------------------------------------
// 8. Sub-prompts
// ---------------------------------------------------------------------------------------------

async function subPromptAgent({ include_chat }) {
  const m = fresh('m');
  const ms = fresh('msub');
  const s = fresh('summariser');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m), modelRow(ms, { model: 'sub-model-id' })],
    prompts: [
      promptRow(s, ms, { system: 'You are the summariser.', description: 'Summarises any text it is given.', include_chat }),
      promptRow(p, m, { system: 'You are the main assistant.', tools: ['get_current_time', s] }),
    ],
    agents: [agentRow(a, { prompt: p })],
  });
  return { agent: a, sub: s, main: m, subModel: ms };
}

test('sub-prompt: the sub-prompt runs with its own system text and the chat, and its answer is the tool result', async (t) => {
  const d = await subPromptAgent({ include_chat: 1 });
  const sock = await thread(t, d.agent);
  model.push({ text: 'Hello, how can I help?' });
  await turn(sock, 'Hi there.', 1);
  model.reset();
  model.push(
    { toolCalls: [{ id: 'call_sum', name: d.sub, arguments: { input: 'Summarise: the sky is blue because of Rayleigh scattering.' } }] },
    { text: 'Summary: scattering makes the sky blue.' },
    { text: 'Here is the summary: scattering makes the sky blue.' },
  );
  const frames = await turn(sock, 'Please summarise my notes.', 2);
  await noMoreRequests(3);
  const [main1, sub, main2] = model.requests;

  // The sub-prompt is offered as a tool with its description and an `input` parameter.
  const offered = main1.body.tools.find((x) => x.function.name === d.sub);
  assert.ok(offered, JSON.stringify(main1.body.tools.map((x) => x.function.name)));
  assert.equal(offered.function.description, 'Summarises any text it is given.');
  assert.deepEqual(offered.function.parameters.required, ['input']);

  // The sub-prompt's request: its model, its system text, the chat before the call, then the input.
  assert.equal(sub.body.model, 'sub-model-id');
  assert.equal(systemOf(sub), 'You are the summariser.');
  assert.deepEqual(chat(sub), [
    { role: 'user', content: 'Hi there.' },
    { role: 'assistant', content: 'Hello, how can I help?' },
    { role: 'user', content: 'Please summarise my notes.' },
    { role: 'user', content: 'Summarise: the sky is blue because of Rayleigh scattering.' },
  ]);
  assert.equal(sub.body.tools, undefined, 'the summariser has no tools');

  // Its answer is the result of the call in the main prompt's next request.
  assert.equal(systemOf(main2), 'You are the main assistant.');
  const result = chat(main2).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_sum');
  assert.equal(result.content, 'Summary: scattering makes the sky blue.');
  assert.deepEqual(toolFrames(frames), [
    ['call_sum', d.sub, 'queued'],
    ['call_sum', d.sub, 'running'],
    ['call_sum', d.sub, 'success'],
  ]);

  // Depth-0 clients never see the sub-prompt's own messages.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
  assert.ok(stored.every((m) => (m.depth ?? 0) === 0));
  assert.ok(!stored.some((m) => m.role === 'user' && m.content.startsWith('Summarise:')));
  assert.ok(!frames.some((f) => f.type === 'message' && f.message.role === 'user' && f.message.content.startsWith('Summarise:')), 'the sub-prompt\'s input is not broadcast');
  // They are kept at depth 1, linked to the call, and readable on request.
  const deep = await allMessages(sock.threadId, '&depth=1');
  assert.deepEqual(deep.map((m) => [m.role, m.content, m.parent_tool_call_id]), [
    ['user', 'Summarise: the sky is blue because of Rayleigh scattering.', 'call_sum'],
    ['assistant', 'Summary: scattering makes the sky blue.', 'call_sum'],
  ]);
  // The request log has the sub-prompt's call at depth 1, under its own model.
  const log = (await logs(sock.threadId)).logs;
  assert.deepEqual(log.map((l) => [l.depth, l.model, l.status]), [
    [0, d.main, 'ok'],
    [0, d.main, 'ok'],
    [1, d.subModel, 'ok'],
    [0, d.main, 'ok'],
  ]);
  const topIds = new Set(stored.map((m) => m.id));
  assert.ok(frames.filter((f) => f.type === 'message_chunk').every((c) => topIds.has(c.message_id)), 'only depth-0 messages stream to clients');
  assert.ok(frames.filter((f) => f.type === 'message').every((f) => topIds.has(f.message.id)), 'only depth-0 messages are broadcast');
});

test('sub-prompt: two calls in one reply run concurrently and each result answers its own call', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  const echo = (request) => ({ text: `Answer to ${chat(request).at(-1).content}`, chunkSize: 2, chunkDelayMs: 80 }); // ~1.5 s each
  model.push(
    { toolCalls: [{ id: 'call_x', name: d.sub, arguments: { input: 'question X' } }, { id: 'call_y', name: d.sub, arguments: { input: 'question Y' } }] },
    echo,
    echo,
    { text: 'Both answered.' },
  );
  const frames = await turn(sock, 'two questions', 1);
  await noMoreRequests(4);
  const subInputs = model.requests.slice(1, 3).map((r) => chat(r));
  assert.deepEqual(subInputs.map((m) => m.map((x) => x.content)).sort(), [['question X'], ['question Y']]);
  // Started together: both sub-prompt requests arrived before either answer finished.
  assert.ok(model.requests[2].at - model.requests[1].at < 500, `the two sub-prompts ran concurrently (${model.requests[2].at - model.requests[1].at} ms apart)`);
  const results = chat(model.requests[3]).filter((m) => m.role === 'tool');
  assert.deepEqual(results.map((m) => [m.tool_call_id, m.content]), [
    ['call_x', 'Answer to question X'],
    ['call_y', 'Answer to question Y'],
  ]);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st === 'success').map(([id]) => id), ['call_x', 'call_y']);
  const deep = await allMessages(sock.threadId, '&depth=1');
  for (const id of ['call_x', 'call_y']) {
    const mine = deep.filter((m) => m.parent_tool_call_id === id).map((m) => m.content);
    const q = id === 'call_x' ? 'question X' : 'question Y';
    assert.deepEqual(mine, [q, `Answer to ${q}`]);
  }
});

test('sub-prompt with include_chat off sees only its input', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_alone', name: d.sub, arguments: { input: 'Only this.' } }] },
    { text: 'Only that.' },
    { text: 'Done.' },
  );
  await turn(sock, 'Secret earlier chat.', 1);
  await noMoreRequests(3);
  const sub = model.requests[1];
  assert.equal(systemOf(sub), 'You are the summariser.');
  assert.deepEqual(chat(sub), [{ role: 'user', content: 'Only this.' }]);
  assert.ok(!sub.rawBody.includes('Secret earlier chat.'));
  assert.equal(chat(model.requests[2]).at(-1).content, 'Only that.');
});

test('sub-prompt: it may call its own registered tools; calls and results stay at depth 1', async (t) => {
  const m = fresh('m');
  const s = fresh('clock');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(s, m, { system: 'You read clocks.', tools: ['get_current_time'], include_chat: 0 }),
      promptRow(p, m, { system: 'You are the main assistant.', tools: [s] }),
    ],
    agents: [agentRow(a, { prompt: p })],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_clock', name: s, arguments: { input: 'What time is it?' } }] },
    { toolCalls: [{ id: 'call_inner', name: 'get_current_time', arguments: {} }] },
    (request) => ({ text: `The clock says ${chat(request).at(-1).content}.` }),
    { text: 'Done.' },
  );
  const frames = await turn(sock, 'time please', 1);
  await noMoreRequests(4);
  const [, sub1, sub2, main2] = model.requests;
  assert.equal(systemOf(sub1), 'You read clocks.');
  assert.deepEqual(sub1.body.tools.map((x) => x.function.name), ['get_current_time']);
  // The sub-prompt's call got an id of ours (its provider's may repeat or collide), paired
  // with its result.
  const inner = chat(sub2)[1].tool_calls?.[0]?.id;
  assert.match(inner, /^call_[0-9a-f]{32}$/);
  assert.deepEqual(chat(sub2).map((x) => [x.role, x.tool_call_id ?? x.tool_calls?.[0]?.id ?? null]), [
    ['user', null],
    ['assistant', inner],
    ['tool', inner],
  ]);
  const time = chat(sub2)[2].content;
  assert.match(time, ISO_UTC);
  assert.equal(chat(main2).at(-1).content, `The clock says ${time}.`);
  assert.ok(!frames.some((f) => f.type === 'tool' && (f.tool_call_id === 'call_inner' || f.tool_call_id === inner)), 'the inner call is not shown at depth 0');
  const top = await allMessages(sock.threadId);
  assert.deepEqual(top.map((x) => x.role), ['user', 'assistant', 'tool', 'assistant']);
  const deep = await allMessages(sock.threadId, '&depth=1');
  assert.deepEqual(deep.map((x) => [x.role, x.parent_tool_call_id]), [
    ['user', 'call_clock'], ['assistant', 'call_clock'], ['tool', 'call_clock'], ['assistant', 'call_clock'],
  ]);
});

test('sub-prompt: a failing sub-prompt becomes an error result the calling model reads', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push(
    { toolCalls: [{ id: 'call_broken', name: d.sub, arguments: { input: 'Try this.' } }] },
    { error: { status: 400, message: 'context too long' } },
    { text: 'The summariser is unavailable.' },
  );
  const frames = await turn(sock, 'summarise', 1);
  await noMoreRequests(3);
  assert.deepEqual(toolFrames(frames).filter(([, , s]) => s !== 'queued'), [['call_broken', d.sub, 'running'], ['call_broken', d.sub, 'error']]);
  const result = chat(model.requests[2]).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_broken');
  assert.ok(result.content.includes(d.sub) && /context too long/.test(result.content), result.content);
  assert.equal(finalMessages(frames).filter((m) => m.role === 'assistant').at(-1).content, 'The summariser is unavailable.');
  assert.deepEqual(errors(frames), [], 'the sub-prompt\'s failure is the model\'s to handle, not a turn error');
});

test('sub-prompt: a bad `input` argument is an error result naming the expected shape, and no sub-prompt request is made', async (t) => {
  const d = await subPromptAgent({ include_chat: 0 });
  const sock = await thread(t, d.agent);
  model.push({ toolCalls: [{ id: 'call_bad', name: d.sub, arguments: { text: 'wrong field' } }] }, { text: 'Sorry.' });
  await turn(sock, 'go', 1);
  await noMoreRequests(2);
  const result = chat(model.requests[1]).at(-1);
  assert.equal(result.tool_call_id, 'call_bad');
  assert.match(result.content, /input/);
  assert.equal(systemOf(model.requests[1]), 'You are the main assistant.');
});

test('budget: a thread that spent its agent\'s max_cost_usd stops before the next model call with stopped_by "budget"', async (t) => {
  // $2 per million input tokens: 500,000 tokens cost $1.00, the whole budget.
  const d = await simpleAgent({
    modelOpts: { input_price_per_mtok: 2, output_price_per_mtok: 0 },
    agentOpts: { max_cost_usd: 1 },
  });
  const sock = await thread(t, d.agent);
  model.push({ text: 'That was expensive.', usage: { prompt_tokens: 500000, completion_tokens: 5 } });
  await turn(sock, 'Spend.', 1);
  let s = await summary(sock.threadId);
  assert.equal(s.tokens_used, 500005);
  assert.ok(Math.abs(s.cost_usd - 1) < 1e-9, String(s.cost_usd));
  assert.equal(s.status, 'idle');

  const from = sock.frames.length;
  await send(sock, 'Once more?');
  await stopped(sock, from);
  await noMoreRequests(1);
  const budget = sock.frames.slice(from).find((f) => f.type === 'error' && f.code === 'budget');
  assert.ok(budget, 'an error frame names the budget');
  assert.match(budget.message, /spent \$1\.0000, its agent's budget is \$1\.0000 \(max_cost_usd\)/);
  s = await summary(sock.threadId);
  assert.equal(s.stopped_by, 'budget');
  const r = await client.request('POST', `/api/threads/${sock.threadId}/messages`, { body: { content: 'and now?' } });
  assert.equal(r.status, 409);
});

// ---------------------------------------------------------------------------------------------
// 9-10. Agents as tools: dual_ai child threads and ai_human handoff
// ---------------------------------------------------------------------------------------------

test('agent tool (dual_ai): the child conversation runs to its end and its final answer is the tool result', async (t) => {
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(ca, m, { system: 'You argue for tabs.' }),
      promptRow(cb, m, { system: 'You argue for spaces.' }),
      promptRow(p, m, { system: 'You are the moderator.', tools: [c] }),
    ],
    agents: [
      agentRow(c, { prompt: ca, label: 'Tabs' }, { kind: 'dual_ai', max_turns: 2, expose_as_tool: 1, tool_description: 'Runs a debate on a topic.', side_b: { prompt: cb, label: 'Spaces' } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_debate', name: c, arguments: { input: 'Debate: tabs or spaces?' } }] },
    { text: 'Tabs are one keystroke.' },
    { text: 'Spaces look the same everywhere.' },
    { text: 'The debate ended: spaces look the same everywhere.' },
  );
  const frames = await turn(sock, 'Settle tabs vs spaces.', 1);
  await noMoreRequests(4);
  const [main1, childA, childB, main2] = model.requests;
  const offered = main1.body.tools.map((x) => x.function);
  assert.deepEqual(offered.map((f) => f.name), [c]);
  assert.equal(offered[0].description, 'Runs a debate on a topic.');
  assert.deepEqual(offered[0].parameters.required, ['input']);

  assert.equal(systemOf(childA), 'You argue for tabs.');
  assert.deepEqual(chat(childA), [{ role: 'user', content: 'Debate: tabs or spaces?' }]);
  assert.equal(systemOf(childB), 'You argue for spaces.');
  assert.deepEqual(chat(childB), [
    { role: 'user', content: 'Debate: tabs or spaces?' },
    { role: 'user', content: 'Tabs are one keystroke.', name: 'Tabs' },
  ]);

  assert.equal(systemOf(main2), 'You are the moderator.');
  const result = chat(main2).at(-1);
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, 'call_debate');
  assert.ok(result.content.startsWith('Spaces look the same everywhere.'), result.content);
  assert.match(result.content, /max_turns/);
  assert.deepEqual(toolFrames(frames).map(([, , s]) => s), ['queued', 'running', 'success']);
  // The parent's own messages do not include the child's conversation.
  const stored = await allMessages(sock.threadId);
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  // The child is a thread of its own, linked to the parent, that ran to max_turns.
  const childId = result.content.match(/child thread ([0-9a-f-]{36})/)?.[1];
  assert.ok(childId, `the result names the child thread: ${result.content}`);
  const child = await summary(childId);
  assert.equal(child.agent_id, c);
  assert.equal(child.parent_thread_id, sock.threadId);
  assert.equal(child.status, 'stopped');
  assert.equal(child.stopped_by, 'max_turns');
  assert.equal(child.turn_count, 2);
  assert.equal(child.result, 'Spaces look the same everywhere.');
  assert.deepEqual((await allMessages(childId)).map((m) => [m.role, m.side ?? null, m.content]), [
    ['user', null, 'Debate: tabs or spaces?'],
    ['assistant', 'a', 'Tabs are one keystroke.'],
    ['assistant', 'b', 'Spaces look the same everywhere.'],
  ]);
});

test('agent tool (dual_ai): a child conversation that fails is an error result for the parent', async (t) => {
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [promptRow(ca, m), promptRow(cb, m), promptRow(p, m, { system: 'You are the moderator.', tools: [c] })],
    agents: [
      agentRow(c, { prompt: ca }, { kind: 'dual_ai', max_turns: 2, expose_as_tool: 1, side_b: { prompt: cb } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_child', name: c, arguments: { input: 'Argue.' } }] },
    { error: { status: 400, message: 'child request rejected' } },
    { text: 'The debate could not happen.' },
  );
  const frames = await turn(sock, 'go', 1);
  await noMoreRequests(3);
  assert.deepEqual(toolFrames(frames).filter(([, , st]) => st !== 'queued'), [['call_child', c, 'running'], ['call_child', c, 'error']]);
  const result = chat(model.requests[2]).at(-1);
  assert.equal(result.tool_call_id, 'call_child');
  assert.match(result.content, /child request rejected/);
});

test('agent tool (dual_ai): an agent that calls itself ends at the nesting limit (4 child threads deep) with an error result, and every level answers', async (t) => {
  const m = fresh('m');
  const loopPrompt = fresh('loop-p');
  const p = fresh('main');
  const c = fresh('looper');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(loopPrompt, m, { system: 'You delegate to yourself.', tools: [c] }),
      promptRow(p, m, { system: 'You are the moderator.', tools: [c] }),
    ],
    agents: [
      agentRow(c, { prompt: loopPrompt }, { kind: 'dual_ai', max_turns: 1, expose_as_tool: 1, side_b: { prompt: loopPrompt } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  const again = (n) => ({ toolCalls: [{ id: `call_${n}`, name: c, arguments: { input: `level ${n}` } }] });
  model.push(
    again(0), again(1), again(2), again(3), again(4), // the main thread, then children 1-4 each call it again
    { text: 'answer 4' }, { text: 'answer 3' }, { text: 'answer 2' }, { text: 'answer 1' },
    { text: 'All levels answered.' },
  );
  const frames = await turn(sock, 'Recurse.', 1);
  await noMoreRequests(10);
  // The fourth child's call was refused: a fifth level is past the limit.
  const refused = chat(model.requests[5]).at(-1);
  assert.equal(refused.tool_call_id, 'call_4');
  assert.match(refused.content, /more than 4 child threads deep/);
  // Every other level got its child's answer.
  for (const [i, answer] of [[6, 'answer 4'], [7, 'answer 3'], [8, 'answer 2'], [9, 'answer 1']]) {
    const result = chat(model.requests[i]).at(-1);
    assert.equal(result.role, 'tool');
    assert.ok(result.content.startsWith(answer), `${i}: ${result.content}`);
  }
  assert.equal(finalMessages(frames).filter((x) => x.role === 'assistant').at(-1).content, 'All levels answered.');
});

test('agent tool (dual_ai): stopping the parent does not stop the child; its result is still stored, and the parent stays stopped', async (t) => {
  // Documented in docs/agents.md ("Stopping the calling thread does not stop the child").
  const m = fresh('m');
  const ca = fresh('child-a');
  const cb = fresh('child-b');
  const c = fresh('debate');
  const p = fresh('main');
  const a = fresh('a');
  await define({
    models: [modelRow(m)],
    prompts: [promptRow(ca, m, { system: 'Child A.' }), promptRow(cb, m, { system: 'Child B.' }), promptRow(p, m, { system: 'Parent.', tools: [c] })],
    agents: [
      agentRow(c, { prompt: ca }, { kind: 'dual_ai', max_turns: 4, expose_as_tool: 1, side_b: { prompt: cb } }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  const slow = (text) => ({ text, chunkSize: 4, chunkDelayMs: 30 });
  model.push(
    { toolCalls: [{ id: 'call_long', name: c, arguments: { input: 'Debate.' } }] },
    slow('Child A, turn one.'), slow('Child B, turn two.'), slow('Child A, turn three.'), slow('Child B, last word.'),
    { text: 'the stopped parent must not be asked again' },
  );
  const from = sock.frames.length;
  await send(sock, 'go');
  await model.waitForRequests(3, 10000);
  const r = await client.request('POST', `/api/threads/${sock.threadId}/stop`);
  assert.equal(r.status, 200);
  await stopped(sock, from);
  // The child goes on to its end; then the call's result is stored in the stopped parent.
  const result = await sock.waitFor((f) => f.type === 'message' && f.message.role === 'tool' && f.message.tool_call_id === 'call_long', { from, timeout: 15000 });
  assert.ok(result.message.content.startsWith('Child B, last word.'), result.message.content);
  await noMoreRequests(5, 800);
  assert.deepEqual(model.requests.map(systemOf), ['Parent.', 'Child A.', 'Child B.', 'Child A.', 'Child B.']);
  const s = await summary(sock.threadId);
  assert.equal(s.status, 'stopped');
  assert.equal(s.stopped_by, 'user');
  const childId = result.message.content.match(/child thread ([0-9a-f-]{36})/)?.[1];
  const child = await summary(childId);
  assert.equal(child.stopped_by, 'max_turns');
  assert.equal(child.parent_thread_id, sock.threadId);
});

test('agent tool (ai_human): calling it hands the thread over; the next request uses the new agent\'s prompt', async (t) => {
  const m = fresh('m');
  const hp = fresh('billing');
  const h = fresh('billing-agent');
  const p = fresh('front');
  const a = fresh('front-agent');
  const hidden = fresh('not-exposed');
  await define({
    models: [modelRow(m)],
    prompts: [
      promptRow(hp, m, { system: 'You are the billing specialist.', tools: ['lookup_customer'] }),
      promptRow(p, m, { system: 'You are the front desk.', tools: ['get_current_time', h, hidden] }),
    ],
    agents: [
      agentRow(hidden, { prompt: hp }),
      agentRow(h, { prompt: hp }, { expose_as_tool: 1, description: 'Billing questions.' }),
      agentRow(a, { prompt: p }),
    ],
  });
  const sock = await thread(t, a);
  model.push(
    { toolCalls: [{ id: 'call_handoff', name: h, arguments: { input: 'Customer wants a refund.' } }] },
    { text: 'Billing here: your refund is on its way.' },
  );
  await turn(sock, 'I want a refund.', 1);
  await noMoreRequests(2);
  const [front, billing] = model.requests;
  assert.equal(systemOf(front), 'You are the front desk.');
  assert.equal(front.body.tools.find((x) => x.function.name === h)?.function.description, 'Billing questions.');
  assert.deepEqual(front.body.tools.map((x) => x.function.name).sort(), ['get_current_time', h].sort(), 'an agent not exposed as a tool is not offered');
  assert.equal(systemOf(billing), 'You are the billing specialist.');
  assert.deepEqual(billing.body.tools.map((x) => x.function.name), ['lookup_customer']);
  const sent = chat(billing);
  assert.deepEqual(sent.map((m) => m.role), ['user', 'assistant', 'tool']);
  assert.match(sent[2].content, /Customer wants a refund\./);
  const s = await summary(sock.threadId);
  assert.equal(s.agent_id, h);

  // It stays with the new agent.
  model.push({ text: 'Still billing.' });
  await turn(sock, 'Thanks!', 2);
  assert.equal(systemOf(model.requests[2]), 'You are the billing specialist.');
});

// ---------------------------------------------------------------------------------------------
// 11-12. Configuration from D1
// ---------------------------------------------------------------------------------------------

test('a prompt changed in D1 by hand reaches the thread within the cache bound (5 s); a change through the API at once', async (t) => {
  const d = await simpleAgent({ promptOpts: { system: 'Version one.' } });
  const sock = await thread(t, d.agent);
  model.push({ text: 'v1' });
  await turn(sock, 'one', 1);
  // By hand (as `wrangler d1 execute` would): the cached configuration is still used...
  await define({ prompts: [promptRow(d.prompt, d.model, { system: 'Version two.', tools: ['get_current_time'] })] });
  model.push({ text: 'v1 again' });
  await turn(sock, 'two', 2);
  // ...until the cache's 5 s are over and the version stamp says it moved: the request that
  // went out with the old copy while the version was checked is cancelled unread, and sent again.
  await new Promise((r) => setTimeout(r, 5_100));
  model.push({ text: 'never read' }, { text: 'v2' });
  const third = await turn(sock, 'three', 3);
  assert.ok(JSON.stringify(third).includes('"v2"') && !JSON.stringify(third).includes('never read'));
  // Through the API: this isolate forgets its cache, so the next turn sees it.
  const put = await worker.client.request('PUT', `/api/prompts/${d.prompt}`, {
    body: { model: d.model, system: 'Version three.' },
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  model.push({ text: 'v3' });
  await turn(sock, 'four', 4);
  await noMoreRequests(5);
  assert.deepEqual(model.requests.map(systemOf), ['Version one.', 'Version one.', 'Version one.', 'Version two.', 'Version three.']);
  assert.equal(model.requests[2].body.tools, undefined);
  assert.deepEqual(model.requests[3].body.tools.map((x) => x.function.name), ['get_current_time']);
});

test('a missing prompt fails the turn with model_config and the thread works once it is defined', async (t) => {
  // D1 enforces the prompts → models foreign key, so a prompt cannot name a missing model; an
  // agent's side names its prompt inside JSON, which D1 cannot check.
  const m = fresh('m');
  const p = fresh('later');
  const a = fresh('a');
  await define({ models: [modelRow(m)], agents: [agentRow(a, { prompt: p })] });
  const sock = await thread(t, a);
  const frames = await turn(sock, 'hello?', 0);
  await noMoreRequests(0, 200);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_config']);
  assert.ok(errs[0].message.includes(p), errs[0].message);
  let s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
  assert.ok(s.last_error.includes(p));

  await define({ prompts: [promptRow(p, m, { system: 'Now I exist.' })] });
  model.push({ text: 'Hello!' });
  await turn(sock, 'hello again', 1);
  assert.equal(systemOf(model.requests[0]), 'Now I exist.');
  assert.deepEqual(chat(model.requests[0]), [{ role: 'user', content: 'hello?' }, { role: 'user', content: 'hello again' }]);
  s = await summary(sock.threadId);
  assert.equal(s.status, 'idle');
});

test('a workers_ai model without an AI binding fails the turn with a model_config error naming the binding', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'workers_ai', model: '@cf/meta/llama-3.1-8b-instruct', base_url: '', api_key_secret: null } });
  const sock = await thread(t, d.agent);
  const frames = await turn(sock, 'hello', 0);
  await noMoreRequests(0, 200);
  assert.deepEqual(errors(frames).map((e) => e.code), ['model_config']);
  assert.match(errors(frames)[0].message, /AI binding/);
});

test('a model row with an unknown provider fails the turn with a clear model_config error', async (t) => {
  const d = await simpleAgent({ modelOpts: { provider: 'gemini' } });
  const sock = await thread(t, d.agent);
  const frames = await turn(sock, 'hello', 0);
  await noMoreRequests(0, 200);
  const errs = errors(frames);
  assert.deepEqual(errs.map((e) => e.code), ['model_config']);
  assert.match(errs[0].message, /gemini/);
  assert.equal((await summary(sock.threadId)).status, 'idle');

  await define({ models: [modelRow(d.model, { provider: 'openai' })] });
  model.push({ text: 'Fixed.' });
  const next = await turn(sock, 'again', 1);
  assert.equal(finalMessages(next).find((m) => m.role === 'assistant').content, 'Fixed.');
});
