// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs),
// with calls queued over the thread's socket (`queue_tool`, the server key) and the weather
// stand-in answering 429 with a long Retry-After.
// Proves: queued calls (each under the assistant message `queue_tool` stores), parked in each
// way, appear in the playground with their live state: a reminder sleeping until its time, a workflow waiting for its webhook with the
// URL (server key) and its timeout, a weather call retrying with the failed attempt, its error
// and the next try; the webhook's delivery moves its call from open to its result; a `chat`
// token sees the waiting call without the webhook URL (a capability).
// Does not prove: rate-limited cards (the same card code, another status).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { KEY, load, startApp, uiTest } from './harness.mjs';
import { startWeatherServer } from '../support/weather-server.mjs';

let app, page, weather;
before(async () => {
  weather = await startWeatherServer();
  weather.reply(() => ({ status: 429, body: { cod: 429, message: 'slow down' }, headers: { 'retry-after': '600' } }));
  app = await startApp({ fallback: { text: 'Noted.' }, vars: { WEATHER_API_KEY: 'k', WEATHER_API_URL: weather.url } });
});
after(async () => {
  await app?.stop();
  await weather?.close();
});

/** Queues calls over a socket of the server key, as a backend would; resolves with their ids. */
async function queue(threadId, calls) {
  const ws = new WebSocket(`${app.base.replace('http', 'ws')}/api/threads/${threadId}/stream`, ['edgent', KEY]);
  const results = new Map();
  ws.on('message', (data) => {
    const frame = JSON.parse(String(data));
    if (frame.type === 'result') results.set(frame.id, frame);
  });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  calls.forEach(([name, args], i) => ws.send(JSON.stringify({ type: 'rpc', id: i + 1, method: 'queue_tool', params: { name, args } })));
  const deadline = Date.now() + 10_000;
  while (results.size < calls.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  ws.close();
  for (const r of results.values()) assert.equal(r.ok, true, JSON.stringify(r));
  assert.equal(results.size, calls.length);
}

uiTest('queued calls show how each is parked: sleeping, waiting for a webhook with its URL, retrying', async () => {
  page = await app.page();
  await app.login(page);
  await page.getByLabel('Agent').selectOption('support');
  await page.getByRole('button', { name: 'Start thread' }).click();
  await page.waitForURL(/#\/threads\/[^/]+\/chat/);
  const threadId = decodeURIComponent(page.url().match(/#\/threads\/([^/]+)\/chat/)[1]);
  await queue(threadId, [
    ['remind_later', { text: 'stretch', in_seconds: 600 }],
    ['wait_for_callback', { purpose: 'payment confirmation', timeout_seconds: 600 }],
    ['get_weather', { city: 'Lisbon' }],
  ]);
  const open = page.getByRole('log', { name: 'Conversation' });
  const reminder = open.getByRole('region', { name: 'Tool call remind_later' });
  await reminder.getByText('sleeping', { exact: true }).waitFor();
  await reminder.getByText(/\(until /).waitFor();

  const callback = open.getByRole('region', { name: 'Tool call wait_for_callback' });
  await callback.getByText('waiting', { exact: true }).waitFor();
  const url = (await callback.locator('code.pg-url').textContent({ timeout: 10_000 })) ?? '';
  assert.match(url, new RegExp(`^${app.base}/webhooks/${threadId}/`));

  const retry = open.getByRole('region', { name: 'Tool call get_weather' });
  await retry.getByText('retrying', { exact: true }).waitFor();
  await retry.getByText(/attempt 1 failed; next try at/).waitFor();
  await retry.getByText(/Attempt failed: the weather service is rate limiting us/).waitFor();

  // The callback arrives: the call succeeds with what was sent.
  const delivered = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"paid":true}' });
  assert.equal(delivered.status, 202, await delivered.text());
  await callback.getByText('success', { exact: true }).waitFor({ timeout: 15_000 });
  await callback.getByText('Result').click();
  await callback.getByText(/"paid":\s*true/).waitFor();
  // The others are still open.
  await reminder.getByText('sleeping', { exact: true }).waitFor();
}, () => page);

uiTest('a chat token sees a waiting call without its webhook URL', async () => {
  const created = await app.api('POST', '/api/threads', { agent_id: 'support', token: { scopes: ['chat'] } });
  await queue(created.thread_id, [['wait_for_callback', { purpose: 'a signature', timeout_seconds: 600 }]]);
  const minted = created.token;
  page = await app.page();
  await load(page, `/#token=${minted.token}`);
  const callback = page.getByRole('region', { name: 'Tool call wait_for_callback' });
  await callback.getByText('waiting', { exact: true }).waitFor();
  await callback.getByText(/for webhook/).waitFor();
  assert.equal(await callback.locator('code.pg-url').count(), 0);
  assert.doesNotMatch(await page.content(), /\/webhooks\//);
}, () => page);
