// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs).
// Proves: the configuration editor reads and writes D1 through the configuration API: a refused
// save shows the server's message beside the field it names (linked with aria-describedby,
// aria-invalid, focused) and writes nothing; a fixed save writes and says "Saved"; a new model
// is created and listed; a new model under a name that exists is refused beside Name and sends
// nothing; deleting a model in use shows the 409 message and keeps it; a model's key appears only
// as the NAME of a secret; the form can be reached, edited and saved with the keyboard alone; a
// name typed into a list but not added is saved with it; leaving a form with unsaved changes
// (header link, browser Back) asks first and stays when refused; a narrow window stacks the list
// above the form without sideways scrolling.
// Does not prove: every field's server-side rule (tests/e2e and the Rust config tests do), nor
// that a change reaches a running thread's next turn (tests/e2e).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { KEY, startApp, uiTest } from './harness.mjs';

let app, page;
before(async () => {
  app = await startApp();
});
after(async () => {
  await app?.stop();
});

const saved = () => page.getByRole('status').filter({ hasText: /^Saved$/ });
const list = (kind) => page.getByRole('navigation', { name: kind });

/** Polls `check` every 50 ms until it holds; fails after `ms`. */
async function until(check, what, ms = 5000) {
  for (const deadline = Date.now() + ms; !(await check()); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
  }
}

/**
 * Runs `action` and proves it sent no PUT to `path`: waits a second for one, so a late request
 * fails the test too.
 */
async function sendsNoPut(path, action) {
  const put = page.waitForRequest((r) => r.method() === 'PUT' && new URL(r.url()).pathname === path, { timeout: 1000 });
  await action();
  await assert.rejects(put, /Timeout/, `a PUT ${path} was sent`);
}

/** Presses Tab until `matches(activeElement)` holds; fails after `max` presses. */
async function tabTo(description, matches, max = 60) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(matches)) return;
  }
  assert.fail(`Tab never reached ${description}`);
}

uiTest('a refused save shows the message beside its field and writes nothing; a fixed one saves', async () => {
  page = await app.page();
  await app.login(page);
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Configuration' }).click();
  await page.getByRole('tab', { name: 'Prompts' }).click();
  await list('Prompts').getByRole('link', { name: 'support', exact: true }).click();
  await page.getByRole('heading', { name: 'Prompt "support"' }).waitFor();

  const model = page.getByLabel('Model', { exact: true });
  assert.equal(await model.inputValue(), 'default');
  await model.fill('ghost');
  await page.getByText('Unsaved changes').waitFor();
  await page.getByRole('button', { name: 'Save' }).click();
  const text = 'prompt "support": "model" is "ghost", which is not a model';
  const message = page.getByText(text, { exact: true });
  await message.waitFor();
  assert.equal(await model.getAttribute('aria-invalid'), 'true');
  const messageId = await message.getAttribute('id');
  assert.ok(messageId, 'the message has an id to point at');
  assert.ok((await model.getAttribute('aria-describedby')).split(' ').includes(messageId), 'the Model control is described by the message');
  assert.equal(await model.evaluate((el) => el === document.activeElement), true, 'the Model control has the focus');
  assert.equal((await app.api('GET', '/api/prompts/support')).model, 'default', 'nothing was written');

  await model.fill('default');
  assert.equal(await model.getAttribute('aria-invalid'), null, 'editing clears the old message');
  const system = 'You are terse. Edited in the browser.';
  await page.getByLabel('System', { exact: true }).fill(system);
  await page.getByRole('button', { name: 'Save' }).click();
  await saved().waitFor();
  assert.equal(await page.getByText('Unsaved changes').count(), 0);
  const stored = await app.api('GET', '/api/prompts/support');
  assert.equal(stored.system, system);
  assert.equal(stored.model, 'default');
  assert.ok(stored.tools.includes('review'), 'fields the form did not touch are kept');
}, () => page);

uiTest('a new model is created and listed', async () => {
  await page.getByRole('tab', { name: 'Models' }).click();
  await list('Models').getByRole('link', { name: 'New model' }).click();
  await page.getByRole('heading', { name: 'New model' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('fast');
  await page.getByLabel('Provider', { exact: true }).selectOption('openai');
  await page.getByLabel('Model', { exact: true }).fill('gpt-4o-mini');
  await page.getByLabel('Base URL', { exact: true }).fill('https://api.example.com/v1');
  await page.getByLabel('API key secret name', { exact: true }).fill('OPENAI_API_KEY');
  await page.getByRole('button', { name: 'Save' }).click();
  await saved().waitFor();
  await list('Models').getByRole('link', { name: 'fast', exact: true }).waitFor();
  await page.getByRole('heading', { name: 'Model "fast"' }).waitFor();
  assert.match(page.url(), /#\/config\/models\/fast$/);
  const stored = await app.api('GET', '/api/models/fast');
  assert.equal(stored.api_key_secret, 'OPENAI_API_KEY');
  assert.equal(stored.base_url, 'https://api.example.com/v1');
}, () => page);

uiTest('a new model under a name that exists is refused beside Name, and nothing is sent', async () => {
  const stored = await app.api('GET', '/api/models/default');
  await list('Models').getByRole('link', { name: 'New model' }).click();
  await page.getByRole('heading', { name: 'New model' }).waitFor();
  const name = page.getByLabel('Name', { exact: true });
  await name.fill('default');
  await page.getByLabel('Model', { exact: true }).fill('gpt-4o');
  await page.getByLabel('Base URL', { exact: true }).fill('https://api.example.com/v1');
  await sendsNoPut('/api/models/default', () => page.getByRole('button', { name: 'Save' }).click());
  const message = page.getByText('A model named "default" exists already: open it to change it, or pick another name', { exact: true });
  await message.waitFor();
  assert.equal(await name.getAttribute('aria-invalid'), 'true');
  assert.ok((await name.getAttribute('aria-describedby')).split(' ').includes(await message.getAttribute('id')), 'Name is described by the message');
  assert.equal(await name.evaluate((el) => el === document.activeElement), true, 'Name has the focus');
  assert.deepEqual(await app.api('GET', '/api/models/default'), stored, 'the stored default is unchanged');
  await page.getByRole('button', { name: 'Reset' }).click();
}, () => page);

uiTest('deleting a model in use shows why and keeps it', async () => {
  await list('Models').getByRole('link', { name: 'default', exact: true }).click();
  await page.getByRole('heading', { name: 'Model "default"' }).waitFor();
  await page.getByRole('button', { name: 'Delete…' }).click();
  await page.getByRole('button', { name: 'Confirm delete' }).click();
  await page.getByRole('alert').filter({ hasText: 'model "default" is used by prompt' }).waitFor();
  assert.equal((await app.api('GET', '/api/models/default')).name, 'default');
}, () => page);

uiTest('a model shows its key only as the name of a secret', async () => {
  const secret = page.getByLabel('API key secret name', { exact: true });
  assert.equal(await secret.inputValue(), 'OPENAI_API_KEY');
  await page.getByText('wrangler secret put NAME').waitFor();
  const shown = await page.evaluate(() => document.body.innerText);
  // The harness gives OPENAI_API_KEY the value sk-browser; neither it nor the server key shows.
  assert.ok(!shown.includes('sk-browser') && !shown.includes(KEY), 'no secret value on the page');
  assert.doesNotMatch(shown, /\bsk-[A-Za-z0-9]/);
  const values = await page.evaluate(() => [...document.querySelectorAll('input, textarea')].map((e) => e.value).join('\n'));
  assert.ok(!values.includes('sk-browser') && !values.includes(KEY), 'no secret value in a control');
}, () => page);

uiTest("a side's field gets its own message; bad JSON is shown before saving; Reset restores", async () => {
  await page.getByRole('tab', { name: 'Agents' }).click();
  await list('Agents').getByRole('link', { name: 'review', exact: true }).click();
  await page.getByRole('heading', { name: 'Agent "review"' }).waitFor();
  const sideA = page.getByRole('group', { name: 'Side A' });
  const stopTool = sideA.getByLabel('Stop tool', { exact: true });
  await stopTool.fill('finish');
  await page.getByRole('button', { name: 'Save' }).click();
  const message = sideA.getByText('"side_a.stop_tool" is "finish"');
  await message.waitFor();
  assert.equal(await stopTool.getAttribute('aria-invalid'), 'true');
  assert.ok((await stopTool.getAttribute('aria-describedby')).includes(await message.getAttribute('id')));
  assert.equal(await page.getByRole('group', { name: 'Side B' }).getByLabel('Stop tool', { exact: true }).getAttribute('aria-invalid'), null);
  assert.equal((await app.api('GET', '/api/agents/review')).side_a.stop_tool, null);
  await page.getByRole('button', { name: 'Reset' }).click();
  assert.equal(await stopTool.inputValue(), '');
  assert.equal(await page.getByText('Unsaved changes').count(), 0);

  await page.getByRole('tab', { name: 'Prompts' }).click();
  await list('Prompts').getByRole('link', { name: 'writer', exact: true }).click();
  const bindings = page.getByLabel('Tool bindings (JSON)', { exact: true });
  await bindings.fill('{"get_weather": ');
  await page.getByText('Tool bindings (JSON): not valid JSON').waitFor();
  assert.equal(await bindings.getAttribute('aria-invalid'), 'true');
  await sendsNoPut('/api/prompts/writer', () => page.getByRole('button', { name: 'Save' }).click());
  assert.equal(await bindings.evaluate((el) => el === document.activeElement), true, 'the bad JSON has the focus');
  await page.getByRole('button', { name: 'Reset' }).click();
  assert.equal(await bindings.inputValue(), '{}');
}, () => page);

uiTest('the keyboard alone reaches a field, edits it and saves', async () => {
  await page.goto('/#/config/prompts');
  await page.getByRole('link', { name: 'summarize', exact: true }).waitFor();
  await page.locator('body').focus();
  await tabTo('the summarize link', () => document.activeElement?.textContent === 'summarize');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Prompt "summarize"' }).waitFor();
  await tabTo('the Description field', () => document.activeElement?.labels?.[0]?.textContent === 'Description');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('Summarizes, edited by keyboard.');
  await tabTo('the Save button', () => document.activeElement?.textContent === 'Save');
  await page.keyboard.press('Enter');
  await saved().waitFor();
  assert.equal((await app.api('GET', '/api/prompts/summarize')).description, 'Summarizes, edited by keyboard.');
}, () => page);

uiTest('a name typed into a list but not added is saved with the rest', async () => {
  await list('Prompts').getByRole('link', { name: 'writer', exact: true }).click();
  await page.getByRole('heading', { name: 'Prompt "writer"' }).waitFor();
  // Typed, no Enter and no "Add": Save takes it all the same.
  await page.getByLabel('Tools', { exact: true }).fill('get_current_time');
  await page.getByRole('button', { name: 'Save' }).click();
  await saved().waitFor();
  assert.deepEqual((await app.api('GET', '/api/prompts/writer')).tools, ['lookup_customer', 'get_current_time']);
  await page.getByRole('list', { name: 'Tools: chosen' }).getByText('get_current_time', { exact: true }).waitFor();
}, () => page);

uiTest('leaving a form with unsaved changes asks first: refused, the edit stays; accepted, it goes', async () => {
  const description = page.getByLabel('Description', { exact: true });
  await description.fill('An edit not saved yet.');
  await page.getByText('Unsaved changes').waitFor();
  const heading = page.getByRole('heading', { name: 'Prompt "writer"' });
  const asked = [];
  const answer = (accept) => page.once('dialog', (d) => (asked.push(d.message()), accept ? d.accept() : d.dismiss()));

  // The browser's Back, refused.
  answer(false);
  await page.evaluate(() => history.back());
  await until(() => asked.length === 1, 'the question on Back');
  await heading.waitFor();
  assert.equal(await description.inputValue(), 'An edit not saved yet.');
  assert.match(page.url(), /#\/config\/prompts\/writer$/);

  // The header's Threads link: refused, then accepted.
  const threadsLink = page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Threads' });
  answer(false);
  await threadsLink.click();
  await until(() => asked.length === 2, 'the question on the Threads link');
  await heading.waitFor();
  assert.equal(await description.inputValue(), 'An edit not saved yet.');
  assert.match(page.url(), /#\/config\/prompts\/writer$/);
  answer(true);
  await threadsLink.click();
  await page.getByRole('heading', { name: 'Threads', exact: true }).waitFor();
  assert.deepEqual(asked, Array(3).fill('Leave without saving your changes?'));
  assert.equal((await app.api('GET', '/api/prompts/writer')).description, 'Drafts customer replies.', 'nothing was saved');
}, () => page);

uiTest('a narrow window stacks the list above the form and never scrolls sideways', async () => {
  page = await app.page({ viewport: { width: 360, height: 740 } });
  await app.login(page);
  await page.goto('/#/config/agents/review');
  await page.getByRole('heading', { name: 'Agent "review"' }).waitFor();
  await page.getByRole('group', { name: 'Side B' }).getByLabel('Stop tool', { exact: true }).waitFor();
  const listBox = await list('Agents').boundingBox();
  const formBox = await page.getByRole('form', { name: 'Agent "review"' }).boundingBox();
  assert.ok(listBox.y + listBox.height <= formBox.y, 'the list is above the form');
  const sideways = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(sideways <= 0, `the page is ${sideways}px wider than the window`);
}, () => page);
