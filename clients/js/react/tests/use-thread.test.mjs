// useThread in a real React render (react-dom/client in a happy-dom window) against the fake
// server: the hook renders the store's snapshot, re-renders on frames, and its actions call
// the rpc methods. The state logic itself is tested without React (client/tests/state.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Window } from 'happy-dom';
import WebSocket from 'ws';
import { FakeServer, until } from '../../client/tests/fake-server.mjs';

const window = new Window();
globalThis.window = window;
globalThis.document = window.document;
globalThis.navigator ??= window.navigator;
globalThis.IS_REACT_ACT_ENVIRONMENT = false;

const React = await import('react');
const { createRoot } = await import('react-dom/client');
const { renderToString } = await import('react-dom/server');
const { useThread, messageText } = await import('../dist/index.js');

test('useThread renders messages, streamed text and status, and send() calls send_message', async (t) => {
  const server = new FakeServer();
  await server.ready;
  server.handle('get_messages', () => ({
    messages: [{ id: 'u1', role: 'user', content: 'hi', created_at: 1, silent: false, depth: 0, status: 'completed' }],
    total: 1,
    has_more: false,
  }));
  server.handle('get_tool_calls', () => ({ tool_calls: [], total: 0, has_more: false }));
  server.handle('send_message', () => ({ message_id: 'u2' }));

  let latest;
  function Chat() {
    const thread = useThread({ url: server.url, threadId: 't1', token: 'tok', WebSocket, heartbeatIntervalMs: 0 });
    latest = thread;
    const snapshot = thread.store?.getSnapshot();
    return React.createElement(
      'ul',
      { 'data-status': thread.status?.state ?? 'none', 'data-connection': thread.connection },
      thread.messages.map((m) => React.createElement('li', { key: m.id }, `${m.role}: ${snapshot ? messageText(snapshot, m) : m.content}`)),
    );
  }

  const container = document.createElement('div');
  document.body.appendChild(container);
  const root = createRoot(container);
  t.after(async () => {
    root.unmount();
    await server.close();
  });
  root.render(React.createElement(Chat));
  await until(() => container.textContent === 'user: hi', 3000, 'the first page rendered');
  assert.equal(container.firstChild.getAttribute('data-connection'), 'open');
  assert.equal(container.firstChild.getAttribute('data-status'), 'idle');

  server.broadcast({ type: 'status', state: 'running', turn: 0, side: 'a' });
  server.broadcast({ type: 'message', message: { id: 'a1', role: 'assistant', content: '', created_at: 2, silent: false, depth: 0, status: 'pending' } });
  server.broadcast({ type: 'message_chunk', message_id: 'a1', delta: 'Hel' });
  server.broadcast({ type: 'message_chunk', message_id: 'a1', delta: 'lo' });
  await until(() => container.textContent === 'user: hiassistant: Hello', 3000, 'streamed text rendered');
  assert.equal(latest.streaming.a1, 'Hello');
  assert.equal(container.firstChild.getAttribute('data-status'), 'running');

  // Schedules: a frame shows in the result, by id.
  const schedule = { id: 's1', kind: 'every', spec: '60000', action: { message: 'tick' }, status: 'active', created_by: 'server', created_at: 3, fired_count: 0, next_at: 60003 };
  server.broadcast({ type: 'schedule', schedule });
  await until(() => latest.schedules.s1?.status === 'active', 3000, 'the schedule in the result');
  server.broadcast({ type: 'schedule', schedule: { ...schedule, status: 'cancelled', next_at: undefined } });
  await until(() => latest.schedules.s1.status === 'cancelled', 3000, 'the cancelled schedule in the result');

  assert.deepEqual(await latest.send('again'), { message_id: 'u2' });
  assert.equal(server.rpcs.find((r) => r.method === 'send_message').params.content, 'again');

  // Unmounting closes the socket.
  root.unmount();
  await server.connections[0].closed;
});

test('after: a page reloaded mid-answer resumes from the seq it saved and shows the whole answer', async (t) => {
  // The thread's log: the answer began after seq 2 (what the page saved while idle).
  const log = [
    { type: 'status', state: 'running', turn: 1, side: 'a', seq: 3 },
    { type: 'message', message: { id: 'a1', role: 'assistant', content: '', created_at: 2, silent: false, depth: 0, status: 'pending' }, seq: 4 },
    { type: 'message_chunk', message_id: 'a1', delta: 'Once upon ', seq: 5 },
    { type: 'message_chunk', message_id: 'a1', delta: 'a time', seq: 6 },
  ];
  const server = new FakeServer({
    helloSeq: 6,
    onConnection: (conn) => {
      for (const f of log) if (conn.after !== undefined && f.seq > conn.after) conn.send(f);
    },
  });
  await server.ready;
  server.seq = 6;
  server.handle('get_messages', () => ({
    messages: [
      { id: 'a1', role: 'assistant', content: '', created_at: 2, silent: false, depth: 0, status: 'pending' },
      { id: 'u1', role: 'user', content: 'a story', created_at: 1, silent: false, depth: 0, status: 'completed' },
    ],
    total: 2,
    has_more: false,
  }));
  server.handle('get_tool_calls', () => ({ tool_calls: [], total: 0, has_more: false }));

  let latest;
  function Chat() {
    latest = useThread({ url: server.url, threadId: 't1', token: 'tok', WebSocket, heartbeatIntervalMs: 0, after: 2 });
    return React.createElement('p', null, latest.streaming.a1 ?? '');
  }
  const container = document.createElement('div');
  document.body.appendChild(container);
  const root = createRoot(container);
  t.after(async () => {
    root.unmount();
    await server.close();
  });
  root.render(React.createElement(Chat));
  await until(() => container.textContent === 'Once upon a time', 3000, 'the replayed answer rendered');
  assert.equal(server.connections[0].after, 2, 'the socket asked for the frames after the saved seq');
  server.broadcast({ type: 'message_chunk', message_id: 'a1', delta: '...' });
  await until(() => container.textContent === 'Once upon a time...', 3000, 'live chunks follow');
  assert.equal(latest.status?.state, 'running');
  assert.equal(latest.store?.connection.lastSeq, 7);
});

test('server rendering shows the empty state without connecting', () => {
  let constructed = 0;
  class NoWS {
    constructor() {
      constructed++;
    }
  }
  function Chat() {
    const thread = useThread({ url: 'http://x', threadId: 't', token: 'k', WebSocket: NoWS });
    return React.createElement('p', null, `${thread.connection}:${thread.messages.length}:${thread.loaded}`);
  }
  assert.equal(renderToString(React.createElement(Chat)), '<p>connecting:0:false</p>');
  assert.equal(constructed, 0);
});
