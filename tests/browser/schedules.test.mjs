// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs)
// and the scripted model server.
// Proves: the inspector's Schedules tab (reached with the keyboard) makes a schedule through its
// form, lists it active, and shows it turn `done` with one firing once the Durable Object's alarm
// fired it (its message answered by the model) without a reload; a bad cron expression shows the
// server's 400 beside the form, on the cron field, and stores nothing; a cron schedule is listed
// with its UTC expression and next due time, survives "Keep", and is cancelled by a second press
// (the thread's summary then has no next schedule); one made through the API while the page is
// open shows up by itself (its `schedule` frame).
// Does not prove: schedules that post a tool call, or repeat (tests/e2e/schedules.test.mjs and
// the host tests cover the API and the timing), nor a client token's view (the inspector is the
// server key's).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uiTest, until } from './harness.mjs';

const ANSWER = 'Standup noted: nothing blocks.';
let app, page;

before(async () => {
  app = await startApp({ fallback: { text: ANSWER } });
});
after(async () => {
  await app?.stop();
});

/** The table's columns, in order. */
const COLUMNS = ['name', 'when', 'action', 'status', 'next', 'fired', 'last', 'by', 'actions'];

/** The row of the schedule named `name`, and its cells by column. */
function row(name) {
  const r = page.getByRole('row').filter({ hasText: name });
  const cell = (column) => r.getByRole('cell').nth(COLUMNS.indexOf(column));
  return { row: r, cell };
}

uiTest('a schedule made in the form fires from the alarm and turns done; a bad cron shows the 400; a cron one is cancelled', async () => {
  const { thread_id: id } = await app.api('POST', '/api/threads', { agent_id: 'support' });
  page = await app.page();
  await app.login(page);
  await page.evaluate((h) => (window.location.hash = h), `#/threads/${id}?tab=timeline`);

  // The tab before the last (MCP), by keyboard.
  await page.getByRole('tab', { name: 'Timeline' }).focus();
  await page.keyboard.press('End');
  await page.getByRole('tab', { name: 'MCP', selected: true }).waitFor();
  await page.keyboard.press('ArrowLeft');
  const tab = page.getByRole('tab', { name: 'Schedules' });
  await page.getByRole('tab', { name: 'Schedules', selected: true }).waitFor();
  assert.equal(await tab.getAttribute('aria-selected'), 'true');
  assert.match(page.url(), /tab=schedules/);
  await page.getByText('No schedules yet.').waitFor();

  // Once, after 1 s: listed active, then done after the alarm fired it.
  const form = page.getByRole('form', { name: 'New schedule' });
  assert.equal(await form.getByLabel('Once, after a delay').isChecked(), true, 'the delay is the default');
  await form.getByLabel('Delay (seconds)').fill('1');
  await form.getByLabel('Message').fill('Time for the standup.');
  await form.getByLabel('Name (optional)').fill('standup');
  await form.getByRole('button', { name: 'Create schedule' }).click();
  await page.getByRole('status').filter({ hasText: 'Created schedule standup.' }).waitFor();
  const once = row('standup');
  await once.row.waitFor();
  // Seen as made: the list is read again as the POST answers, well before the alarm at 1 s.
  assert.equal(await once.cell('status').innerText(), 'active');
  assert.notEqual(await once.cell('next').innerText(), '—');
  assert.equal(await once.cell('fired').innerText(), '0');
  assert.match(await once.cell('when').innerText(), /^once at .+/);
  assert.equal(await once.cell('action').innerText(), 'message Time for the standup.');
  assert.equal(await form.getByLabel('Message').inputValue(), '', 'the form is cleared for the next one');

  await until(async () => (await once.cell('status').innerText()) === 'done', 'the schedule to turn done without a reload');
  assert.equal(await once.cell('fired').innerText(), '1');
  assert.equal(await once.cell('next').innerText(), '—');
  assert.notEqual(await once.cell('last').innerText(), '—');
  assert.equal(await once.cell('by').innerText().then((t) => t.split('\n')[0]), 'server');
  assert.equal(await once.cell('actions').getByRole('button').count(), 0, 'nothing to cancel once done');
  await until(() => app.model.requests.some((r) => r.body.messages.at(-1)?.content === 'Time for the standup.'), 'the model asked');
  await until(async () => {
    const { messages } = await app.api('GET', `/api/threads/${id}/messages`);
    return messages.some((m) => m.role === 'assistant' && m.content === ANSWER);
  }, 'the answer stored');

  // A bad cron expression: the server's 400 beside the form, on the cron field; nothing stored.
  await form.getByLabel('Cron expression (UTC)').check();
  const cron = form.getByLabel('Cron expression', { exact: true });
  await cron.fill('0 25 * * *');
  await form.getByLabel('Message').fill('Daily summary, please.');
  await form.getByLabel('Name (optional)').fill('daily');
  await form.getByRole('button', { name: 'Create schedule' }).click();
  const alert = form.getByRole('alert');
  await alert.waitFor();
  assert.match(await alert.innerText(), /^cron: not a cron expression/);
  assert.equal(await cron.getAttribute('aria-invalid'), 'true');
  const describedBy = ((await cron.getAttribute('aria-describedby')) ?? '').split(' ');
  assert.ok(describedBy.includes(await alert.getAttribute('id')), 'the cron field is described by the error');
  assert.equal((await app.api('GET', `/api/threads/${id}/schedules?ended=true`)).schedules.length, 1);

  // A good one: listed with its expression in UTC and its next due time.
  await cron.fill('0 9 * * *');
  await form.getByRole('button', { name: 'Create schedule' }).click();
  await page.getByRole('status').filter({ hasText: 'Created schedule daily.' }).waitFor();
  assert.equal(await alert.count(), 0, 'the error is gone');
  const daily = row('daily');
  assert.equal(await daily.cell('when').innerText(), 'cron 0 9 * * * (UTC)');
  assert.equal(await daily.cell('status').innerText(), 'active');
  assert.notEqual(await daily.cell('next').innerText(), '—');
  const [stored] = (await app.api('GET', `/api/threads/${id}/schedules`)).schedules;
  assert.equal(stored.name, 'daily');
  assert.equal(new Date(stored.next_at).getUTCHours(), 9);
  await page.getByRole('term').filter({ hasText: 'Next schedule' }).waitFor();

  // Cancel…, Keep: still active, the focus back on Cancel….
  const cancel = page.getByRole('button', { name: 'Cancel schedule daily' });
  await cancel.click();
  await page.getByRole('group', { name: 'Confirm cancelling schedule daily' }).getByRole('button', { name: 'Keep' }).click();
  await until(() => cancel.evaluate((el) => el === document.activeElement), 'the focus back on Cancel…');
  assert.equal(await daily.cell('status').innerText(), 'active');

  // Cancel…, then confirm (the confirm button has the focus: Enter presses it).
  await cancel.click();
  const confirm = page.getByRole('button', { name: 'Confirm cancel' });
  await until(() => confirm.evaluate((el) => el === document.activeElement), 'the focus on Confirm cancel');
  await page.keyboard.press('Enter');
  await page.getByRole('status').filter({ hasText: 'Cancelled schedule daily.' }).waitFor();
  await until(async () => (await daily.cell('status').innerText()) === 'cancelled', 'the schedule to show cancelled');
  assert.equal(await daily.cell('next').innerText(), '—');
  assert.equal(await cancel.count(), 0);
  assert.equal((await app.api('GET', `/api/threads/${id}/schedules?ended=true`)).schedules.find((s) => s.name === 'daily').status, 'cancelled');
  await until(async () => (await page.getByRole('term').filter({ hasText: 'Next schedule' }).count()) === 0, 'the summary without a next schedule');
  assert.equal(await page.getByRole('caption').innerText(), 'Schedules, in the order made (0 active of 2)');

  // One made elsewhere (the API) shows up by itself: its `schedule` frame refreshes the list.
  await app.api('POST', `/api/threads/${id}/schedules`, { every_seconds: 5400, message: 'Check the queue.', name: 'queue' });
  const queue = row('queue');
  await queue.row.waitFor();
  assert.equal(await queue.cell('when').innerText(), 'every 1 h 30 min');
  assert.equal(await queue.cell('status').innerText(), 'active');
  await page.getByRole('caption').filter({ hasText: '(1 active of 3)' }).waitFor();
}, () => page);
