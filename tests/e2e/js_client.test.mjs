// End-to-end tests of the TypeScript client (@edgent/client, built: clients/js/client/dist)
// against the real built Worker in Miniflare (workerd) and a scripted model server.
// Proves: the server key creates a thread and mints a client token; the token opens the socket
// as a subprotocol; a message sent through the client streams its answer into ThreadStore and
// the final message carries the same text; a socket killed mid-answer reconnects and resumes
// with ?after= so the streamed text has no gap and no duplicate; rpc timeouts reject while the
// connection keeps working; a refused or revoked token is surfaced as an EdgentError and not
// retried; the key pages the thread index and deletes a thread, closing its sockets.
// Does not prove: browsers' own WebSocket (Node uses the `ws` package's class, through the same
// WHATWG interface); React (clients/js/react/tests); behaviour on Cloudflare's edge.

import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startWorker, API_KEY, ROOT } from '../support/worker.mjs';
import { startModelServer } from '../support/model-server.mjs';
import { until } from '../support/until.mjs';

const DIST = join(ROOT, 'clients', 'js', 'client', 'dist', 'index.js');
const built = existsSync(DIST);
const skipAll = built ? false : 'clients/js is not built: run `npm test --prefix clients/js` (scripts/test.sh does)';
const js = built ? await import(DIST) : null;

let model;
let worker;
/** @type {import('../../clients/js/client/dist/index.js').EdgentClient} */
let api;
/** Whether this Worker resumes sockets (hello carries `seq`): decided by the first connection. */
let resumable;

before(async () => {
  if (skipAll) return;
  model = await startModelServer();
  worker = await startWorker({ modelUrl: `${model.url}/v1` });
  api = new js.EdgentClient({ url: worker.url, token: API_KEY });
});

after(async () => {
  await worker?.dispose();
  await model?.close();
});

beforeEach(() => model?.reset());

/** The `ws` class, recording every socket the client opens (so a test can kill one). */
function trackedWebSocket() {
  const sockets = [];
  class Tracked extends WebSocket {
    constructor(...args) {
      super(...args);
      sockets.push(this);
    }
  }
  return { Tracked, sockets };
}

/** A thread created with the key, with a `chat` token minted for it in the same request. */
async function threadWithToken(scopes = ['chat']) {
  const created = await api.createThread({ agent_id: 'support', token: { scopes, ttl_seconds: 600 } });
  assert.ok(created.token, `POST /api/threads answered no token: ${JSON.stringify(created)}`);
  return created;
}

function open(t, threadId, token, options = {}) {
  const { Tracked, sockets } = trackedWebSocket();
  const conn = new js.ThreadConnection({
    url: worker.url,
    threadId,
    token,
    WebSocket: Tracked,
    heartbeatIntervalMs: 0,
    reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
    ...options,
  });
  const store = new js.ThreadStore(conn);
  t.after(() => store.close());
  return { conn, store, sockets };
}

const finalAssistant = (store) =>
  store.getSnapshot().messages.find((m) => m.role === 'assistant' && m.status !== 'pending');

test('the key mints a chat token; the token connects as a subprotocol; the answer streams, then is stored', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  assert.deepEqual(created.token.scopes, ['chat']);
  assert.equal(created.token.thread_id, created.thread_id);
  const minted = await api.mintToken(created.thread_id, { scopes: ['chat'], ttl_seconds: 120 });
  assert.match(minted.token, /^et1\./);
  assert.ok(minted.expires_at > Date.now() / 1000);

  const { conn, store, sockets } = open(t, created.thread_id, created.token.token);
  const chunks = [];
  conn.on('message_chunk', (f) => chunks.push(f.delta));
  await until(() => store.getSnapshot().loaded, 'the first page');
  resumable ??= typeof conn.lastSeq === 'number';
  assert.equal(sockets[0].protocol, 'edgent', 'the server answered with the edgent subprotocol');
  assert.ok(!sockets[0].url.includes('token='), 'the token is not in the URL');

  const text = 'Streaming through the TypeScript client, chunk by chunk.';
  // Pieces further apart than the Worker's chunk window (20 ms): each is a frame of its own.
  model.push({ text, chunkSize: 6, chunkDelayMs: 30 });
  const { message_id } = await store.send('hello from @edgent/client');
  assert.ok(message_id);
  const final = await until(() => finalAssistant(store), 'the final assistant message');
  assert.equal(final.content, text);
  assert.equal(final.status, 'completed');
  assert.ok(chunks.length >= 3, `several chunks, got ${chunks.length}`);
  assert.equal(chunks.join(''), text, 'the chunks add up to the final text');
  assert.equal(store.getSnapshot().streaming[final.id], undefined, 'the stream is done');
  await until(() => store.getSnapshot().status?.state === 'idle', 'idle');
  assert.deepEqual(store.getSnapshot().messages.map((m) => m.role), ['user', 'assistant']);

  // The HTTP side with the same token reads the thread.
  const asBrowser = new js.EdgentClient({ url: worker.url, token: created.token.token });
  const page = await asBrowser.getMessages(created.thread_id, { order: 'asc' });
  assert.equal(page.messages[1].content, text);
});

test('a socket killed mid-answer reconnects, and the store ends with the whole answer once', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  const { conn, store, sockets } = open(t, created.thread_id, created.token.token);
  await until(() => store.getSnapshot().loaded, 'the first page');
  const chunks = [];
  conn.on('message_chunk', (f) => chunks.push(f.delta));
  const states = [];
  conn.on('state', (s) => states.push(s));

  const text = 'Cut off in the middle, and whole all the same once the client is back.';
  model.push({ text, chunkSize: 3, chunkDelayMs: 40 });
  await store.send('talk slowly');
  await until(() => chunks.length >= 3, 'a few chunks');
  sockets[0].terminate();

  const final = await until(() => finalAssistant(store), 'the final assistant message', 20000);
  assert.equal(final.content, text);
  assert.deepEqual(states.slice(0, 2), ['reconnecting', 'open']);
  assert.ok(sockets.length >= 2, 'a second socket was opened');
  const snapshot = store.getSnapshot();
  assert.deepEqual(snapshot.messages.map((m) => m.role), ['user', 'assistant'], 'each message once');
  assert.equal(snapshot.streaming[final.id], undefined);
});

test('a socket killed mid-answer reconnects and resumes: the streamed text has no gap and no duplicate', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  const { conn, store, sockets } = open(t, created.thread_id, created.token.token);
  await until(() => store.getSnapshot().loaded, 'the first page');
  resumable ??= typeof conn.lastSeq === 'number';
  if (!resumable) {
    t.skip('this Worker does not resume sockets yet (hello carries no seq): resumable frames are not merged');
    return;
  }
  const seqs = [];
  conn.on('frame', (f) => {
    if (typeof f.seq === 'number' && f.type !== 'hello') seqs.push(f.seq);
  });
  const chunks = [];
  conn.on('message_chunk', (f) => chunks.push(f.delta));
  const opens = [];
  // Whether the answer was already complete when the new socket opened (then the frame log
  // had compacted its chunks away, and only the final message is replayed).
  conn.on('open', (e) => opens.push({ ...e, answered: Boolean(finalAssistant(store)) }));

  const text = 'A slow answer that outlives the socket it started on, and arrives whole anyway.';
  model.push({ text, chunkSize: 3, chunkDelayMs: 40 });
  await store.send('talk slowly');
  await until(() => chunks.length >= 3, 'a few chunks');
  const seenBefore = conn.lastSeq;
  sockets[0].terminate();

  const final = await until(() => finalAssistant(store), 'the final assistant message', 20000);
  assert.equal(final.content, text);
  assert.ok(sockets.length >= 2, 'a second socket was opened');
  // Frames the dead socket had already read may still be delivered, so `after` is at least the
  // seq seen when it was killed.
  const after = Number(new URL(sockets[1].url).searchParams.get('after'));
  assert.ok(Number.isInteger(after) && after >= seenBefore, `it resumed after the last seq delivered (${sockets[1].url}, ${seenBefore})`);
  assert.ok(opens.some((e) => e.reconnected && e.resumed), 'the reconnection resumed');
  assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, 'frames in seq order');
  assert.equal(new Set(seqs).size, seqs.length, 'no seq delivered twice');
  const streamed = chunks.join('');
  const resumedMidAnswer = !opens.find((e) => e.reconnected).answered;
  t.diagnostic(`resumed ${resumedMidAnswer ? 'mid-answer' : 'after the answer'}; ${chunks.length} chunks`);
  if (resumedMidAnswer) {
    // The replay picked up right after the last chunk delivered: the chunks add up exactly.
    assert.equal(streamed, text, 'no gap and no duplicate in the streamed text');
  } else {
    // The answer completed while the client was away: its chunks were compacted away and the
    // final message replayed; the chunks delivered are a prefix.
    assert.ok(text.startsWith(streamed), `the chunks are in order without duplicates: ${JSON.stringify(streamed)}`);
  }
  assert.equal(store.getSnapshot().messages.filter((m) => m.role === 'assistant').length, 1);
});

test('an rpc without a result in time rejects with EdgentTimeoutError; the connection keeps working', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  // The rpc leaves 50 ms late, so its 1 ms timeout always runs out first (on a busy machine
  // a result could otherwise beat the timer).
  const hold = { on: false };
  class Held extends WebSocket {
    send(...args) {
      if (hold.on) setTimeout(() => super.send(...args), 50);
      else super.send(...args);
    }
  }
  const { conn, store } = open(t, created.thread_id, created.token.token, { WebSocket: Held });
  await until(() => store.getSnapshot().loaded, 'the first page');
  hold.on = true;
  await assert.rejects(conn.call('get_messages', { limit: 200 }, { timeoutMs: 1 }), (e) => {
    assert.ok(e instanceof js.EdgentTimeoutError);
    assert.equal(e.code, 'timeout');
    return true;
  });
  hold.on = false;
  // The late result is ignored; the next call gets its own.
  const page = await conn.getMessages({ limit: 5 });
  assert.equal(page.total, 0);
  assert.equal(conn.state, 'open');
});

test('rpc errors come back as EdgentError with the server code', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  const { conn, store } = open(t, created.thread_id, created.token.token);
  await until(() => store.getSnapshot().loaded, 'the first page');
  await assert.rejects(conn.sendMessage(''), (e) => e instanceof js.EdgentError && e.code === 'invalid_request');
  await assert.rejects(conn.forceTurn('a'), (e) => e.code === 'forbidden', 'a chat token cannot force a turn');
});

test('a refused token is surfaced as an EdgentError and not retried', { skip: skipAll }, async (t) => {
  const a = await threadWithToken();
  const b = await threadWithToken();
  // HTTP: another thread's token.
  const asB = new js.EdgentClient({ url: worker.url, token: b.token.token });
  await assert.rejects(asB.getThread(a.thread_id), (e) => e instanceof js.EdgentError && e.status === 403 && e.code === 'forbidden');
  const forged = new js.EdgentClient({ url: worker.url, token: `${a.token.token.slice(0, -2)}xx` });
  await assert.rejects(forged.getThread(a.thread_id), (e) => e.status === 401 && e.code === 'unauthorized');

  // The socket: a forged token is refused at the upgrade; the client gives up.
  const { conn, sockets } = open(t, a.thread_id, `${a.token.token.slice(0, -2)}xx`);
  const failures = [];
  conn.on('failure', (e) => failures.push(e));
  await until(() => conn.state === 'closed', 'the connection to give up');
  assert.equal(failures.at(-1).status, 401);
  assert.equal(failures.at(-1).code, 'unauthorized');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(sockets.length, 1, 'no retry');
});

test('revoking the thread\'s tokens closes the client\'s socket for good', { skip: skipAll }, async (t) => {
  const created = await threadWithToken();
  const { conn, store } = open(t, created.thread_id, created.token.token);
  await until(() => store.getSnapshot().loaded, 'the first page');
  const revoked = await api.revokeTokens(created.thread_id);
  assert.equal(revoked.generation, 1);
  await until(() => conn.state === 'closed', 'the socket to close');
  assert.equal(store.getSnapshot().error?.code, 'unauthorized');
});

test('the key pages the thread index and deletes a thread; the client\'s socket closes for good', { skip: skipAll }, async (t) => {
  const tag = `js-${Date.now()}`;
  const created = await api.createThread({ agent_id: 'support', tags: [tag], token: { scopes: ['chat'] } });
  const { conn, store } = open(t, created.thread_id, created.token.token);
  await until(() => store.getSnapshot().loaded, 'the first page');
  model.push({ text: 'Indexed.' });
  await store.send('Index me, please');
  // The index is written in the background: poll it.
  const row = await until(async () => {
    const page = await api.listThreads({ tag, limit: 10 });
    return page.threads.find((r) => r.thread_id === created.thread_id && r.title === 'Index me, please');
  }, 'the thread in the index');
  assert.equal(row.agent_id, 'support');
  assert.deepEqual(row.tags, [tag]);
  const page = await api.listThreads({ tag, limit: 1 });
  assert.equal(page.threads.length, 1);
  assert.ok('next_cursor' in page);
  // A client token may not list the index.
  const asBrowser = new js.EdgentClient({ url: worker.url, token: created.token.token });
  await assert.rejects(asBrowser.listThreads(), (e) => e.status === 403 && e.code === 'forbidden');

  assert.deepEqual(await api.deleteThread(created.thread_id), { deleted: created.thread_id });
  await until(() => conn.state === 'closed', 'the socket to close');
  assert.equal(store.getSnapshot().error?.code, 'not_found');
  await assert.rejects(api.getThread(created.thread_id), (e) => e.status === 404 && e.code === 'not_found');
});
