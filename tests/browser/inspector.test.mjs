// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs),
// the scripted model server, and a local stand-in for the weather service.
// Proves: the thread index lists threads made through the API and filters them by agent, status
// and tag (kept in the URL), pages with a small limit; the inspector's timeline shows a thread's
// messages with their tool calls and a sub-prompt's messages under the call they answered; the
// Tool calls tab shows every attempt of a retried call with its outcome; the Requests tab shows
// one row per model attempt (a failed one and its retry included) with tokens and the thread's
// totals; the tabs move with the arrow keys and live in the URL; with the page open, a new turn
// appears without a reload and an event a tool emits shows in the Events tab; a narrow window
// scrolls tables inside their box, not the page.
// Requests of a model the demo server answers now carry a "demo" badge (the log records a model's
// name, not what served it, so the badge follows the model's current configuration).
// Does not prove: child threads of a dual-AI agent, or a webhook's URL in a waiting call (see
// tests/e2e for the API side of both).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uiTest, until } from './harness.mjs';
import { startWeatherServer, defaultReply } from '../support/weather-server.mjs';

let app, weather, page;
/** The threads made for these tests, by what they hold. */
const threads = {};

before(async () => {
  weather = await startWeatherServer();
  // Model calls beyond a test's script (a forced turn after a queued tool) get a plain answer.
  app = await startApp({
    fallback: { text: 'Anything else?' },
    vars: { WEATHER_API_URL: weather.url, WEATHER_API_KEY: 'owm-browser-key' },
  });
  const create = async (agent_id, tags) => (await app.api('POST', '/api/threads', { agent_id, tags })).thread_id;

  // A turn with two calls, one of them a sub-prompt (summarize) that asks the model itself.
  threads.time = await create('support', ['insp', 'insp-time']);
  app.model.push(
    { toolCalls: [{ id: 'call_time', name: 'get_current_time', arguments: {} }, { id: 'call_sum', name: 'summarize', arguments: { input: 'the time' } }] },
    { text: '- The user asked for the time.' },
    { text: 'It is noon.' },
  );
  await turn(threads.time, 'What time is it?');

  // A model call that fails once and is retried, and a tool call whose first attempt fails.
  threads.weather = await create('support', ['insp', 'insp-weather']);
  let asked = 0;
  weather.reply((r) => (++asked === 1 ? { status: 503, body: 'Service Unavailable' } : defaultReply(r)));
  app.model.push(
    { error: { status: 500, message: 'overloaded' } },
    { toolCalls: [{ id: 'call_weather', name: 'get_weather', arguments: { city: 'Lisbon' } }] },
    { text: 'It is 21.5 °C in Lisbon.' },
  );
  await turn(threads.weather, 'Weather in Lisbon?');

  threads.review = await create('review', ['insp']);
  threads.stopped = await create('support', ['insp']);
  await app.api('POST', `/api/threads/${threads.stopped}/stop`);
  // The index is written in the background: wait until it has caught up with all four.
  await until(async () => {
    const { threads: rows } = await app.api('GET', '/api/threads?tag=insp');
    const by = Object.fromEntries(rows.map((r) => [r.thread_id, r]));
    return rows.length === 4 && by[threads.stopped]?.status === 'stopped' && by[threads.weather]?.turn_count === 1 && by[threads.time]?.title;
  }, 'the thread index');
});
after(async () => {
  await app?.stop();
  await weather?.close();
});

/** Sends a user message and waits until the turn it starts has ended. */
async function turn(threadId, content) {
  const before = (await app.api('GET', `/api/threads/${threadId}`)).turn_count;
  await app.api('POST', `/api/threads/${threadId}/messages`, { content });
  return until(async () => {
    const s = await app.api('GET', `/api/threads/${threadId}`);
    return s.status === 'idle' && s.turn_count > before && s;
  }, `the turn "${content}"`);
}

/** Moves the app to a route, as a link would. */
async function go(p, hash) {
  await p.evaluate((h) => (window.location.hash = h), hash);
}

async function signedIn(options) {
  const p = await app.page(options);
  await app.login(p);
  return p;
}

uiTest('the thread index filters by agent, status and tag in the URL, and pages with a small limit', async () => {
  page = await signedIn();
  await go(page, '#/threads?tag=insp');
  await page.getByText('4 threads shown.').waitFor();
  await page.getByRole('link', { name: 'What time is it?' }).waitFor();
  await page.getByRole('link', { name: 'Weather in Lisbon?' }).waitFor();

  await page.getByLabel('Agent', { exact: true }).selectOption('review');
  await page.getByText('1 thread shown.').waitFor();
  assert.match(page.url(), /agent=review/);
  assert.equal(await page.getByRole('cell', { name: 'review', exact: true }).count(), 1);

  await page.getByLabel('Agent', { exact: true }).selectOption('');
  await page.getByLabel('Status', { exact: true }).selectOption('stopped');
  await page.getByText('1 thread shown.').waitFor();
  assert.match(page.url(), /status=stopped/);
  assert.equal(await page.getByRole('table').getByText('stopped', { exact: true }).count(), 1);

  await page.getByLabel('Status', { exact: true }).selectOption('');
  await page.getByLabel('Tag', { exact: true }).fill('insp-weather');
  await page.getByLabel('Tag', { exact: true }).press('Enter');
  await page.getByText('1 thread shown.').waitFor();
  assert.match(page.url(), /tag=insp-weather/);
  await page.getByRole('link', { name: 'Weather in Lisbon?' }).waitFor();

  await page.getByLabel('Tag', { exact: true }).fill('no-such-tag');
  await page.getByLabel('Tag', { exact: true }).press('Enter');
  await page.getByText('No threads match these filters.').waitFor();

  // A tag typed, then a status chosen before the tag applies (500 ms): both end up in the URL.
  await go(page, '#/threads');
  await page.getByText(/threads? shown/).waitFor();
  await page.getByLabel('Tag', { exact: true }).fill('insp');
  await page.getByLabel('Status', { exact: true }).selectOption('stopped');
  await page.waitForFunction(() => /tag=insp\b/.test(location.hash) && /status=stopped/.test(location.hash));
  await page.getByText('1 thread shown.').waitFor();
  await page.getByRole('button', { name: 'Clear filters' }).click();

  // Two a page: "Load more" follows the cursor to the end.
  await go(page, '#/threads?tag=insp&limit=2');
  await page.getByText('2 threads shown, more on the next page.').waitFor();
  await page.getByRole('button', { name: 'Load more' }).click();
  await page.getByText('4 threads shown.').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Load more' }).count(), 0);
}, () => page);

uiTest('a thread: its timeline, every attempt of a retried tool call, and a row per model attempt', async () => {
  page = await signedIn();
  await go(page, '#/threads?tag=insp-weather');
  await page.getByRole('link', { name: 'Weather in Lisbon?' }).click();
  await page.getByRole('heading', { name: `Thread ${threads.weather}` }).waitFor();

  const messages = page.getByRole('list', { name: 'Messages' });
  await messages.getByText('Weather in Lisbon?').waitFor();
  await messages.getByText('It is 21.5 °C in Lisbon.').waitFor();
  await messages.getByText('calls get_weather').waitFor();
  await messages.getByText('answers call call_weather').waitFor();

  // The keyboard moves between tabs, and the tab is in the URL.
  await page.getByRole('tab', { name: 'Timeline' }).focus();
  await page.keyboard.press('ArrowRight');
  await page.getByRole('tab', { name: 'Tool calls', selected: true }).waitFor();
  assert.match(page.url(), /tab=tools/);
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Tool calls');
  const attempts = page.getByRole('table', { name: 'Attempts of get_weather call_weather' });
  await attempts.waitFor();
  const rows = attempts.getByRole('row');
  assert.equal(await rows.count(), 3, 'a header and two attempts');
  await rows.nth(1).getByText('failed', { exact: true }).waitFor();
  await rows.nth(1).getByText(/HTTP 503/).waitFor();
  await rows.nth(2).getByText('success', { exact: true }).waitFor();

  await page.keyboard.press('ArrowRight');
  await page.getByRole('tab', { name: 'Requests', selected: true }).waitFor();
  assert.match(page.url(), /tab=requests/);
  const log = page.getByRole('table', { name: 'Model requests, oldest first' });
  await log.waitFor();
  const requestRows = log.getByRole('row');
  assert.equal(await requestRows.count(), 4, 'a header and three model attempts');
  await requestRows.nth(1).getByText(/overloaded/).waitFor();
  const cells = async (i) => (await requestRows.nth(i).getByRole('cell').allInnerTexts()).map((t) => t.trim());
  const [first, second, third] = [await cells(1), await cells(2), await cells(3)];
  // #, time, model, provider, attempt, status, http, latency, ttft, in, out, cost, error
  assert.deepEqual([first[4], first[5], first[6]], ['1', 'error', '500']);
  assert.deepEqual([second[4], second[5], second[6]], ['2', 'ok', '200']);
  assert.deepEqual([third[4], third[5]], ['1', 'ok']);
  for (const row of [second, third]) assert.ok(Number(row[9].replace(/\D/g, '')) > 0, `input tokens in ${row}`);
  const summary = await app.api('GET', `/api/threads/${threads.weather}`);
  const totals = page.getByRole('region', { name: 'Totals' });
  await totals.getByText('Requests (thread)').waitFor();
  assert.match(await totals.innerText(), new RegExp(`Tokens \\(thread\\)\\s+${summary.tokens_used.toLocaleString('en-US')}`));
  assert.match(await totals.innerText(), /Requests \(thread\)\s+3/);

  await page.keyboard.press('Home');
  await page.getByRole('tab', { name: 'Timeline', selected: true }).waitFor();
}, () => page);

uiTest("a sub-prompt's messages sit under the call they answered", async () => {
  page = await signedIn();
  await go(page, `#/threads/${threads.time}`);
  const sub = page.getByRole('list', { name: 'Sub-prompt of summarize' });
  await sub.getByText('- The user asked for the time.').waitFor();
  await sub.getByText('sub-prompt').first().waitFor();
  await page.getByRole('list', { name: 'Messages' }).getByText('It is noon.').waitFor();
  await page.getByText('None: this thread has not called a dual-AI agent.').waitFor();
}, () => page);

uiTest('with the page open, a new turn appears by itself and an emitted event shows in Events', async () => {
  page = await signedIn();
  await go(page, `#/threads/${threads.time}?tab=timeline`);
  await page.getByRole('status').getByText('live').waitFor();
  const messages = page.getByRole('list', { name: 'Messages' });
  await messages.getByText('It is noon.').waitFor();

  // process_order queues send_notification, which emits a `notification` event.
  app.model.push(
    {
      toolCalls: [{
        name: 'process_order',
        arguments: { customer_id: 'cus_1001', items: [{ sku: 'TSHIRT-RED', quantity: 1 }], shipping: { method: 'standard' }, confirmation_email: 'ada@example.com' },
      }],
    },
    { text: 'Your order is placed.' },
  );
  await app.api('POST', `/api/threads/${threads.time}/messages`, { content: 'Order a red shirt, please.' });
  await messages.getByText('Order a red shirt, please.').waitFor();
  await messages.getByText('Your order is placed.').waitFor({ timeout: 15_000 });

  // Events is two tabs before the last (Schedules, then MCP).
  await page.getByRole('tab', { name: 'Timeline' }).focus();
  await page.keyboard.press('End');
  await page.getByRole('tab', { name: 'MCP', selected: true }).waitFor();
  await page.keyboard.press('ArrowLeft');
  await page.getByRole('tab', { name: 'Schedules', selected: true }).waitFor();
  await page.keyboard.press('ArrowLeft');
  await page.getByRole('tab', { name: 'Events', selected: true }).waitFor();
  const events = page.getByRole('table', { name: 'Events, newest first' });
  await events.getByRole('cell', { name: 'notification', exact: true }).waitFor();
  await events.getByText(/ada@example\.com/).waitFor();
}, () => page);

uiTest('a narrow window scrolls the tables inside their box, not the page', async () => {
  page = await signedIn({ viewport: { width: 360, height: 740 } });
  for (const hash of ['#/threads?tag=insp', `#/threads/${threads.weather}?tab=requests`, `#/threads/${threads.weather}?tab=tools`]) {
    await go(page, hash);
    await page.getByRole('table').first().waitFor();
    const sideways = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(sideways <= 0, `${hash} is ${sideways}px wider than the window`);
  }
}, () => page);

// Last: it turns the `default` model into the demo model for the rest of the file.
// The badge says which rows name a model the demo answers NOW: a request log row records the
// model's name only, so rows written before the switch get the badge too (recording the model id
// that served each request would be a server change).
uiTest('rows of a model the demo answers now are marked "demo", whenever they were written', async () => {
  page = await signedIn();
  await go(page, `#/threads/${threads.weather}?tab=requests`);
  const log = page.getByRole('table', { name: 'Model requests, oldest first' });
  await log.waitFor();
  assert.equal(await log.getByText('demo', { exact: true }).count(), 0);
  const model = await app.api('GET', '/api/models/default');
  await app.api('PUT', '/api/models/default', { ...model, model: 'edgent-demo' });
  await page.reload();
  await log.getByText('demo', { exact: true }).nth(2).waitFor();
  assert.equal(await log.getByText('demo', { exact: true }).count(), 3, 'every row of the thread names `default`');
}, () => page);
