// End-to-end tests of the thread index (`GET /api/threads`) and thread deletion
// (`DELETE /api/threads/:id`) against the real built Worker in Miniflare (workerd) and a real
// local D1 with the project's migrations.
// Proves: each thread writes its own row in the background (on creation, after a turn: status,
// turn count, title; a child thread's parent), paging newest first with the opaque cursor
// (no gap, no repeat), every filter, the errors (400 for bad parameters, 401 without the key,
// 403 for a client token), and that a deleted thread is gone: 404 on every route, its socket
// closed with 4404, its row out of the list.
// Does not prove: a D1 outage and the retry of a dirty row (host tests:
// tests/host/thread_index.rs), or Cloudflare's D1 in production.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { withWorker } from '../support/setup.mjs';
import { EdgentClient } from '../support/client.mjs';

let model;
let worker;
let client;

withWorker({ setup: async (env) => {
  ({ model, worker, client } = env);
} });

/** A tag no other test uses, so each test lists only its own threads. */
const uniqueTag = () => `ix-${randomUUID().slice(0, 8)}`;

async function create(body) {
  const r = await client.request('POST', '/api/threads', { body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

async function list(query) {
  const r = await client.request('GET', `/api/threads?${new URLSearchParams(query)}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** Polls the listing until `pred(page)` holds: the rows are written in the background. */
async function listUntil(query, pred, what, timeout = 5000) {
  const deadline = Date.now() + timeout;
  let page;
  while (Date.now() < deadline) {
    page = await list(query);
    if (pred(page)) return page;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}; last page: ${JSON.stringify(page)}`);
}

/** Newest first: created_at, then thread_id, both descending. */
const newestFirst = (a, b) => b.created_at - a.created_at || (a.thread_id < b.thread_id ? 1 : -1);

test('threads are listed newest first, page by page with the cursor, and by each filter', async () => {
  const tag = uniqueTag();
  const made = [];
  for (let i = 0; i < 5; i++) made.push(await create({ agent_id: 'support', tags: [tag, i % 2 ? 'odd' : 'even'] }));
  made.push(await create({ agent_id: 'review', tags: [tag] }));
  const expected = [...made].sort(newestFirst).map((t) => t.thread_id);
  await listUntil({ tag, limit: '200' }, (p) => p.threads.length === 6, 'six rows');

  const seen = [];
  let cursor = null;
  let pages = 0;
  do {
    const page = await list({ tag, limit: '2', ...(cursor ? { cursor } : {}) });
    assert.ok(page.threads.length <= 2);
    seen.push(...page.threads.map((t) => t.thread_id));
    cursor = page.next_cursor;
    pages += 1;
  } while (cursor);
  assert.equal(pages, 3);
  assert.deepEqual(seen, expected, 'every thread once, newest first');

  const row = (await list({ tag, limit: '1' })).threads[0];
  assert.deepEqual(Object.keys(row).sort(), ['agent_id', 'created_at', 'last_error', 'parent', 'status', 'tags', 'thread_id', 'title', 'turn_count', 'updated_at']);
  assert.equal(row.thread_id, expected[0]);
  assert.deepEqual(row.tags, [tag]);
  assert.equal(row.status, 'idle');
  assert.equal(row.title, null, 'no message yet');
  assert.equal(row.parent, null);
  assert.equal(row.turn_count, 0);

  const support = await list({ tag, agent: 'support' });
  assert.equal(support.threads.length, 5);
  assert.ok(support.threads.every((t) => t.agent_id === 'support'));
  assert.deepEqual((await list({ tag, agent: 'review' })).threads.map((t) => t.thread_id), [made[5].thread_id]);
  const odd = (await list({ tag: 'odd', limit: '200' })).threads.map((t) => t.thread_id);
  for (const t of made) assert.equal(odd.includes(t.thread_id), t.tags.includes('odd'), t.thread_id);

  // A stopped thread moves to the stopped filter once its row catches up.
  const stoppedId = made[2].thread_id;
  assert.equal((await client.request('POST', `/api/threads/${stoppedId}/stop`)).status, 200);
  const stopped = await listUntil({ tag, status: 'stopped' }, (p) => p.threads.length === 1, 'the stopped row');
  assert.equal(stopped.threads[0].thread_id, stoppedId);
  const idle = await list({ tag, status: 'idle' });
  assert.equal(idle.threads.length, 5);
  assert.ok(!idle.threads.some((t) => t.thread_id === stoppedId));
  assert.equal((await list({ tag, status: 'running' })).threads.length, 0);
});

test('a turn updates the row: running, then idle with its turn count and the first message as title', async () => {
  const tag = uniqueTag();
  const { thread_id: id } = await create({ agent_id: 'support', tags: [tag] });
  model.push({ text: 'Hello!' });
  const first = `Ça ${'é'.repeat(100)}\nand more`;
  const r = await client.request('POST', `/api/threads/${id}/messages`, { body: { content: first } });
  assert.equal(r.status, 202);
  const page = await listUntil({ tag }, (p) => p.threads[0]?.turn_count === 1 && p.threads[0].status === 'idle', 'the finished turn');
  const row = page.threads[0];
  assert.equal([...row.title].length, 80, row.title);
  assert.ok(row.title.startsWith('Ça éé'));
  assert.equal(row.last_error, null);
  assert.ok(row.updated_at >= row.created_at);

  // A failed turn shows its error; the title stays the first message.
  model.push({ error: { status: 400, message: 'bad request from the test' } });
  await client.request('POST', `/api/threads/${id}/messages`, { body: { content: 'second' } });
  const failed = await listUntil({ tag }, (p) => p.threads[0]?.last_error, 'the failed turn\'s error');
  assert.match(failed.threads[0].last_error, /bad request from the test/);
  assert.equal(failed.threads[0].title, row.title);
  const summary = await client.request('GET', `/api/threads/${id}`);
  assert.equal(failed.threads[0].last_error, summary.body.last_error);
});

test('a child thread (a dual_ai agent called as a tool) is listed under its parent', async () => {
  const put = await client.request('PUT', '/api/config', {
    body: {
      prompts: [
        { name: 'ix-side', model: 'default', system: 'You debate.' },
        { name: 'ix-main', model: 'default', system: 'You moderate.', tools: ['ix-debate'] },
      ],
      agents: [
        { id: 'ix-debate', kind: 'dual_ai', max_turns: 1, expose_as_tool: true, side_a: { prompt: 'ix-side' }, side_b: { prompt: 'ix-side' } },
        { id: 'ix-main', side_a: { prompt: 'ix-main' } },
      ],
    },
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const { thread_id: parent } = await create({ agent_id: 'ix-main' });
  model.push(
    { toolCalls: [{ id: 'call_debate', name: 'ix-debate', arguments: { input: 'Tabs or spaces?' } }] },
    { text: 'Tabs.' },
    { text: 'The debate says tabs.' },
  );
  await client.request('POST', `/api/threads/${parent}/messages`, { body: { content: 'Settle it.' } });
  const page = await listUntil({ parent }, (p) => p.threads[0]?.status === 'stopped', 'the child row');
  assert.equal(page.threads.length, 1);
  const child = page.threads[0];
  assert.equal(child.parent, parent);
  assert.equal(child.agent_id, 'ix-debate');
  assert.equal(child.title, 'Tabs or spaces?');
  assert.equal(child.turn_count, 1);
  const parentRow = await listUntil({ agent: 'ix-main' }, (p) => p.threads[0]?.turn_count === 1, 'the parent row');
  assert.equal(parentRow.threads[0].parent, null);
});

test('bad parameters are 400, no key 401, a client token 403', async () => {
  for (const query of ['limit=0', 'limit=201', 'limit=x', 'status=done', 'parent=nope', 'agent=', 'cursor=%25%25', `cursor=${Buffer.from('x.y').toString('base64url')}`]) {
    const r = await client.request('GET', `/api/threads?${query}`);
    assert.equal(r.status, 400, `${query}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'invalid_request');
  }
  const id = (await create({ agent_id: 'support' })).thread_id;
  assert.equal((await client.request('GET', '/api/threads', { key: null })).status, 401);
  assert.equal((await client.request('GET', '/api/threads', { key: 'wrong' })).status, 401);
  assert.equal((await client.request('DELETE', `/api/threads/${id}`, { key: null })).status, 401);
  const minted = await client.request('POST', `/api/threads/${id}/tokens`, { body: { scopes: ['chat', 'approve'] } });
  assert.equal(minted.status, 201);
  const browser = new EdgentClient(worker.url, minted.body.token);
  assert.equal((await browser.request('GET', '/api/threads')).status, 403);
  assert.equal((await browser.request('DELETE', `/api/threads/${id}`)).status, 403);
  assert.equal((await client.request('GET', `/api/threads/${id}`)).status, 200, 'not deleted by the refused token');
  const bad = await client.request('DELETE', '/api/threads/not-a-uuid');
  assert.equal(bad.status, 404);
});

test('DELETE erases the thread: its socket is closed, every route answers 404, and it leaves the list', async (t) => {
  const tag = uniqueTag();
  const { thread_id: id } = await create({ agent_id: 'support', tags: [tag] });
  model.push({ text: 'Stored.' });
  await client.request('POST', `/api/threads/${id}/messages`, { body: { content: 'Remember me' } });
  await listUntil({ tag }, (p) => p.threads[0]?.turn_count === 1, 'the row');
  const minted = await client.request('POST', `/api/threads/${id}/tokens`, { body: { scopes: ['chat'] } });
  assert.equal(minted.status, 201);
  const sock = await client.connect(id);
  t.after(() => sock.close());
  const closed = new Promise((resolve) => sock.ws.once('close', (code, reason) => resolve([code, reason.toString()])));

  const r = await client.request('DELETE', `/api/threads/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, { deleted: id });
  assert.deepEqual(await closed, [4404, 'the thread was deleted']);

  for (const [method, path, body] of [
    ['GET', `/api/threads/${id}`],
    ['GET', `/api/threads/${id}/messages`],
    ['POST', `/api/threads/${id}/messages`, { content: 'hello?' }],
    ['POST', `/api/threads/${id}/stop`],
    ['DELETE', `/api/threads/${id}`],
  ]) {
    const gone = await client.request(method, path, { body });
    assert.equal(gone.status, 404, `${method} ${path}: ${JSON.stringify(gone.body)}`);
  }
  await assert.rejects(client.connect(id), (e) => e.status === 404);
  // Its client tokens went with it.
  assert.equal((await new EdgentClient(worker.url, minted.body.token).request('GET', `/api/threads/${id}`)).status, 404);
  assert.deepEqual((await list({ tag })).threads, []);
  // Nothing a late background write could bring back.
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual((await list({ tag })).threads, []);
});
