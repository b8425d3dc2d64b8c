// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs),
// the scripted model server, and a real MCP server built with the official SDK in this process
// (tests/support/mcp-server.mjs).
// Proves: the inspector's MCP tab (reached with the keyboard, beside Schedules) shows the
// thread's MCP server after a turn, with its URL's host, an open session, its list's times and
// its tools as offered (`kb__search` and its description), and a server that could not be
// reached as paused with no tools; the Requests tab shows, for a prompt with
// `max_offered_tools`, a collapsed "2 of 8 offered (max 2)" that opens to the tools offered
// (the pinned one marked, the best ranked one with its score) and those left out, matching the
// request log and what the model was sent.
// Does not prove: the route's access rules or its JSON in detail (tests/e2e/mcp_inspect.test.mjs),
// nor a client token's view (the inspector is the server key's).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uiTest, until } from './harness.mjs';
import { startMcpServer } from '../support/mcp-server.mjs';
import { freePort } from '../support/net.mjs';

let app, mcp, page, threadId, downHost;

before(async () => {
  mcp = await startMcpServer();
  app = await startApp({ fallback: { text: 'Here is what the knowledge base says.' } });
  const down = `127.0.0.1:${await freePort()}`;
  downHost = down;
  await app.api('PUT', '/api/prompts/kb_ui', {
    model: 'default',
    system: 'You answer with the knowledge base.',
    tools: ['get_current_time', 'get_weather', 'lookup_customer'],
    max_offered_tools: 2,
    pinned_tools: ['get_current_time'],
    mcp_servers: [
      { name: 'kb', url: mcp.url },
      { name: 'down', url: `http://${down}/mcp` },
    ],
  });
  await app.api('PUT', '/api/agents/kb_ui', { side_a: { prompt: 'kb_ui' } });
  ({ thread_id: threadId } = await app.api('POST', '/api/threads', { agent_id: 'kb_ui' }));
  await app.api('POST', `/api/threads/${threadId}/messages`, { content: 'Search the knowledge base for articles about refunds' });
  await until(async () => (await app.api('GET', `/api/threads/${threadId}`)).status === 'idle'
    && (await app.api('GET', `/api/threads/${threadId}/logs`)).total > 0, 'the turn to end');
});
after(async () => {
  await app?.stop();
  await mcp?.close();
});

uiTest("the MCP tab shows the thread's servers, their state and their tools", async () => {
  page = await app.page();
  await app.login(page);
  await page.evaluate((h) => (window.location.hash = h), `#/threads/${threadId}?tab=schedules`);

  // Beside Schedules, the last tab: one arrow key on.
  await page.getByRole('tab', { name: 'Schedules', selected: true }).focus();
  await page.keyboard.press('ArrowRight');
  await page.getByRole('tab', { name: 'MCP', selected: true }).waitFor();
  assert.match(page.url(), /tab=mcp/);

  const kb = page.getByRole('region', { name: /^kb on / });
  await kb.waitFor();
  assert.equal(await kb.getByRole('heading').innerText(), `kb on ${new URL(mcp.url).host}`);
  const facts = await kb.locator('dl').innerText();
  assert.match(facts, /Session\s+open/);
  assert.match(facts, /Protocol\s+\d{4}-\d{2}-\d{2}/);
  assert.match(facts, /Tools listed\s+\S+/);
  assert.match(facts, /Listed again after\s+\S+/);
  assert.match(facts, /Tools\s+5/);
  assert.doesNotMatch(facts, /Paused/);

  const tools = kb.getByRole('table', { name: 'Tools of kb, as offered to the model' });
  assert.equal(await tools.getByRole('row').count(), 6, 'a header and five tools');
  const search = tools.getByRole('row').filter({ hasText: 'kb__search' });
  assert.deepEqual((await search.getByRole('cell').allInnerTexts()).map((t) => t.trim()),
    ['kb__search', 'Searches the knowledge base for articles.']);

  const down = page.getByRole('region', { name: `down on ${downHost}` });
  const downFacts = await down.locator('dl').innerText();
  assert.match(downFacts, /Session\s+none/);
  assert.match(downFacts, /Paused until\s+.+\(listing failed\)/);
  assert.match(downFacts, /Tools\s+0/);
  assert.equal(await down.getByRole('table').count(), 0);

  // What the page shows is what the route answers; no token or session id is on the page.
  const { servers } = await app.api('GET', `/api/threads/${threadId}/mcp`);
  assert.deepEqual(servers.map((s) => s.name), ['down', 'kb']);
  const sessions = mcp.log.requests.map((r) => r.session).filter(Boolean);
  const text = await page.locator('main').innerText();
  for (const s of sessions) assert.ok(!text.includes(s), 'no session id on the page');
}, () => page);

uiTest('the Requests tab shows which tools a call was offered, the pinned one and the scores', async () => {
  page = await app.page();
  await app.login(page);
  await page.evaluate((h) => (window.location.hash = h), `#/threads/${threadId}?tab=requests`);
  const log = page.getByRole('table', { name: 'Model requests, oldest first' });
  await log.waitFor();

  const [row] = (await app.api('GET', `/api/threads/${threadId}/logs`)).logs;
  const selection = row.tool_selection;
  assert.equal(selection.max, 2);
  assert.equal(Object.keys(selection.scores).length, 8, 'three registered tools and five of kb');
  assert.equal(selection.offered.length, 2);
  assert.ok(selection.offered.includes('get_current_time'), 'the pinned tool');
  assert.ok(selection.offered.includes('kb__search'), `the best ranked: ${JSON.stringify(selection)}`);
  const sent = app.model.requests[0].body.tools.map((t) => t.function.name).sort();
  assert.deepEqual(sent, [...selection.offered].sort(), 'the log says what the model was sent');

  // Collapsed by default: the count only.
  const details = log.getByRole('row').nth(1).locator('details.tool-selection');
  const summary = details.locator('summary');
  assert.equal((await summary.innerText()).trim(), '2 of 8 offered (max 2)');
  assert.equal(await details.getAttribute('open'), null);
  assert.equal(await details.getByRole('list', { name: 'Offered tools' }).isVisible(), false);

  // Opened with the keyboard.
  await summary.focus();
  await page.keyboard.press('Enter');
  const offered = details.getByRole('list', { name: 'Offered tools' });
  await offered.waitFor();
  const items = (await offered.getByRole('listitem').allInnerTexts()).map((t) => t.trim());
  assert.equal(items.length, 2);
  const pinned = items.find((t) => t.startsWith('get_current_time'));
  assert.match(pinned, /pinned$/, `the pinned tool is marked: ${items}`);
  const best = items.find((t) => t.startsWith('kb__search'));
  assert.match(best, /^kb__search \d+(\.\d+)?$/, `the best ranked with its score: ${items}`);
  assert.equal(Number(best.split(' ')[1]), selection.scores.kb__search);
  const left = (await details.getByRole('list', { name: 'Tools left out' }).getByRole('listitem').allInnerTexts()).map((t) => t.trim().split(' ')[0]);
  assert.equal(left.length, 6);
  assert.deepEqual([...left].sort(), Object.keys(selection.scores).filter((n) => !selection.offered.includes(n)).sort());
  // Best score first.
  const leftScores = left.map((n) => selection.scores[n]);
  assert.deepEqual(leftScores, [...leftScores].sort((a, b) => b - a));
}, () => page);
