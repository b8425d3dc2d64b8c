// Layer: the UI in headless Chromium against the real Worker under wrangler dev, answers from the
// scripted model server (harness.mjs).
// Proves: the playground starts a thread with the agent picked, lists it among the recent
// threads and reopens it; a streamed answer shows while it is written (chunk by chunk) and the
// thread goes back to idle; a tool call shows its live status (running, then success) under the
// message that made it, with its arguments and result expandable; a call that needs approval
// waits, is approved with the keyboard alone, and the answer follows; a reload in the middle of an
// answer shows the answer from its start again while it is still being written (resumed from
// the seq this tab saved) and then whole; an injected system message shows, marked; Stop stops
// the thread and the composer closes; a client-token session chats but offers no inject, force
// turn or approval.
// Does not prove: retrying, sleeping, webhook and rate-limited statuses in the browser (their
// wording is rendered from the same frames the e2e layer checks), a dual-AI side choice.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startApp, uiTest } from './harness.mjs';

let app, page;
before(async () => {
  app = await startApp();
});
after(async () => {
  await app?.stop();
});

const slow = (text) => ({ text, chunkSize: 4, chunkDelayMs: 40 });
const conversation = () => page.getByRole('log', { name: 'Conversation' });
const threadStatus = () => page.getByRole('status', { name: 'Thread status' });
/** The message of the conversation holding `text`. */
const messageWith = (text) => conversation().getByRole('listitem').filter({ hasText: text }).last();

async function send(text) {
  const box = page.getByLabel('Message', { exact: true });
  await box.fill(text);
  await box.press('Enter');
  await messageWith(text).waitFor();
}

/** The playground of a new `support` thread, started from the picker. */
async function startSupportThread() {
  await page.goto('/#/');
  await page.getByLabel('Agent').selectOption('support');
  await page.getByRole('button', { name: 'Start thread' }).click();
  await page.waitForURL(/#\/threads\/[^/]+\/chat$/);
  await threadStatus().filter({ hasText: 'open' }).waitFor();
  return decodeURIComponent(/#\/threads\/([^/]+)\/chat/.exec(page.url())[1]);
}

let threadId;

uiTest('a support thread starts from the picker; a streamed answer shows as it is written', async () => {
  page = await app.page();
  await app.login(page);
  await page.getByRole('heading', { name: 'Recent threads' }).waitFor();
  threadId = await startSupportThread();
  await threadStatus().filter({ hasText: 'idle' }).waitFor();

  const answer = 'Hello! I am the support assistant, and this answer arrives a few letters at a time.';
  app.model.push(slow(answer));
  await send('Hi');
  // Part of the answer, while it is still being written.
  await page.waitForFunction(
    (log) => log.textContent.includes('Hello! I am') && log.textContent.includes('writing…'),
    await conversation().elementHandle(),
  );
  await messageWith(answer).waitFor();
  await threadStatus().filter({ hasText: 'idle' }).filter({ hasText: 'turn 1' }).waitFor();
  assert.equal(await conversation().getByText('writing…').count(), 0);

  // The thread is among the recent ones, and its link reopens it.
  await page.getByRole('link', { name: 'Playground' }).click();
  const recent = page.getByRole('region', { name: 'Recent threads' });
  // Titled by its first message, with its agent and status.
  const row = recent.getByRole('listitem').filter({ has: page.getByRole('link', { name: 'Hi', exact: true }) });
  await row.filter({ hasText: 'support' }).filter({ hasText: 'idle' }).waitFor();
  await row.getByRole('link').click();
  await page.waitForURL(`**/#/threads/${threadId}/chat`);
  await messageWith(answer).waitFor();
}, () => page);

uiTest('a tool call shows running then success under its message, with arguments and result', async () => {
  app.model.push(
    { text: 'Let me check.', toolCalls: [{ name: 'get_current_time', arguments: {} }] },
    { text: 'It is the time the tool said.' },
  );
  // Every status the call showed, in order: frames render one by one, some only briefly.
  await page.evaluate(() => {
    const seen = (window.__callStatuses = []);
    new MutationObserver(() => {
      const status = /get_current_time(queued|running|success|error)/.exec(document.body.textContent)?.[1];
      if (status && seen.at(-1) !== status) seen.push(status);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await send('What time is it?');
  await messageWith('It is the time the tool said.').waitFor();
  const call = page.getByRole('region', { name: 'Tool call get_current_time' });
  await call.getByText('success', { exact: true }).waitFor();
  const statuses = await page.evaluate(() => window.__callStatuses);
  assert.ok(statuses.includes('running'), `statuses seen: ${statuses}`);
  assert.equal(statuses.at(-1), 'success');
  // Under the assistant message that made it.
  assert.equal(await messageWith('Let me check.').getByRole('region', { name: 'Tool call get_current_time' }).count(), 1);
  await call.getByText('Arguments', { exact: true }).click();
  await call.getByLabel('Arguments of get_current_time').filter({ hasText: '{}' }).waitFor();
  await call.getByText('Result', { exact: true }).click();
  assert.match(await call.getByLabel('Result of get_current_time').textContent(), /\d{4}-\d\d-\d\d/);
  await threadStatus().filter({ hasText: 'idle' }).waitFor();
}, () => page);

uiTest('a refund waits for approval, is approved with the keyboard, and the answer follows', async () => {
  app.model.push(
    { toolCalls: [{ name: 'issue_refund', arguments: { customer_id: 'cus_1001', amount_cents: 500, reason: 'late delivery' } }] },
    { text: 'Your refund of 5.00 is on its way.' },
  );
  await send('Please refund my late order');
  const call = page.getByRole('region', { name: 'Tool call issue_refund' });
  await call.getByText('Waiting for approval.').waitFor();
  await call.getByText('waiting', { exact: true }).waitFor();
  // It does not run by itself.
  assert.equal(await call.getByText('success', { exact: true }).count(), 0);
  const approve = call.getByRole('button', { name: 'Approve' });
  await approve.focus();
  await page.keyboard.press('Enter');
  await call.getByText('success', { exact: true }).waitFor();
  await messageWith('Your refund of 5.00 is on its way.').waitFor();
  assert.equal(await call.getByRole('button', { name: 'Approve' }).count(), 0);
  await call.getByText('Result', { exact: true }).click();
  await call.getByLabel('Result of issue_refund').filter({ hasText: '500 cents issued to cus_1001' }).waitFor();
}, () => page);

uiTest('a reload mid-answer shows the answer from its start while it is written, then whole', async () => {
  const sentences = Array.from({ length: 12 }, (_, i) => `Sentence ${i + 1} of a long answer.`);
  const answer = sentences.join(' ');
  app.model.push(slow(answer));
  await send('Tell me a long story');
  await conversation().getByText('Sentence 2 of').waitFor();
  await page.reload();
  // Replayed from the answer's start (the seq saved before it began), still being written.
  await page.waitForFunction(
    (log) => log.textContent.includes('Sentence 1 of a long answer.') && log.textContent.includes('writing…'),
    await conversation().elementHandle(),
  );
  await messageWith(answer).waitFor();
  await threadStatus().filter({ hasText: 'idle' }).waitFor();
  assert.equal(await conversation().getByText(answer).count(), 1, 'the answer once');
}, () => page);

uiTest('an injected system message shows, marked as such', async () => {
  const note = 'The customer is on the pro plan.';
  const asked = app.model.requests.length;
  const controls = page.getByRole('complementary', { name: 'Thread controls' });
  await controls.getByLabel('Role').selectOption('system');
  await controls.getByLabel('Content').fill(note);
  await controls.getByRole('button', { name: 'Inject' }).click();
  const injected = messageWith(note);
  await injected.waitFor();
  await injected.getByText('system message').waitFor();
  await injected.getByText('injected').waitFor();
  // No turn starts: the model is not asked (proving an absence takes a wait).
  await sleep(500);
  assert.equal(app.model.requests.length, asked, 'no turn started');
  await threadStatus().filter({ hasText: 'idle' }).waitFor();
}, () => page);

uiTest('Stop stops the thread mid-answer and the composer closes', async () => {
  // About six seconds of answer (580 characters, 4 every 40 ms): Stop lands in the middle even
  // on a busy machine.
  const lines = Array.from({ length: 15 }, (_, i) => `Line ${i + 1} of an answer that goes on.`).join(' ');
  app.model.push(slow(`This answer will be cut short by the stop button. ${lines} It ends here.`));
  await send('One more thing');
  // A phrase of this answer only (an earlier answer says "this answer" too).
  await conversation().getByText(/cut short by the stop button/).waitFor();
  await page.getByRole('button', { name: 'Stop' }).click();
  await threadStatus().filter({ hasText: 'stopped' }).waitFor();
  await page.getByText('This thread is stopped').waitFor();
  // Cut off: what was written stays, the rest never comes.
  await conversation().getByText('writing…').waitFor({ state: 'detached' });
  assert.doesNotMatch(await messageWith('cut short by the stop button').textContent(), /It ends here\./);
  assert.equal(await page.getByLabel('Message', { exact: true }).isDisabled(), true);
  assert.equal(await page.getByRole('button', { name: 'Stop' }).isDisabled(), true);
  const summary = await app.api('GET', `/api/threads/${threadId}`);
  assert.equal(summary.status, 'stopped');
}, () => page);

uiTest('a narrow window: the chat fills the width and nothing scrolls sideways', async () => {
  page = await app.page({ viewport: { width: 360, height: 740 } });
  await app.login(page);
  await page.goto(`/#/threads/${threadId}/chat`);
  await messageWith('The customer is on the pro plan.').waitFor();
  const sideways = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(sideways <= 0, `the page is ${sideways}px wider than the window`);
  const log = await conversation().boundingBox();
  assert.ok(log.width >= 320, `the conversation is ${log.width}px wide`);
  // The controls follow the chat rather than squeezing it.
  const controls = await page.getByRole('complementary', { name: 'Thread controls' }).boundingBox();
  assert.ok(controls.y > log.y + log.height, 'the controls are below the conversation');
}, () => page);

uiTest('a client token chats, without inject, force turn or approval', async () => {
  const created = await app.api('POST', '/api/threads', { agent_id: 'support' });
  const { token } = await app.api('POST', `/api/threads/${created.thread_id}/tokens`, { scopes: ['chat'] });
  page = await app.page();
  await app.login(page, token);
  await threadStatus().filter({ hasText: 'open' }).waitFor();
  app.model.push(slow('Hello, token holder.'));
  await send('Hi from a token');
  await messageWith('Hello, token holder.').waitFor();
  await threadStatus().filter({ hasText: 'idle' }).waitFor();
  for (const name of ['Inject', 'Force turn']) assert.equal(await page.getByRole('button', { name }).count(), 0, name);
  assert.equal(await page.getByRole('link', { name: 'Inspect' }).count(), 0);

  app.model.push({ toolCalls: [{ name: 'issue_refund', arguments: { customer_id: 'cus_1001', amount_cents: 100, reason: 'test' } }] });
  await send('Refund me');
  const call = page.getByRole('region', { name: 'Tool call issue_refund' });
  await call.getByText('Waiting for approval by someone who may approve it.').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Reject' }).count(), 0);
}, () => page);
