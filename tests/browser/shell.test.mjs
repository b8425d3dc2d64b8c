// Layer: the UI in headless Chromium against the real Worker under wrangler dev (harness.mjs).
// Proves: the sign-in screen refuses a wrong key with a visible error and keeps the right one
// for the tab only (sessionStorage: a reload stays signed in, the key is never in the URL, a new
// tab context is signed out); signing out forgets it; a client token in the fragment opens its
// one thread (the fragment is cleared, no configuration or thread index is offered), a revoked
// one is refused and not kept, one arriving in a tab signed in with the key asks before
// switching; a key no WebSocket could carry is refused with what to do; the pages make no
// request outside the Worker's origin; a narrow window has no sideways scrolling; the
// shell can be used with the keyboard alone (skip link, tab order reaching navigation).
// Does not prove: the playground, inspector and configuration views (their own files).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { KEY, load, startApp, uiTest } from './harness.mjs';

let app, page;
before(async () => {
  app = await startApp();
});
after(async () => {
  await app?.stop();
});

uiTest('a wrong key is refused with a visible error and nothing is kept', async () => {
  page = await app.page();
  await load(page, '/');
  await page.getByLabel('Server key or client token').fill('not-the-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'did not accept' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('edgent.session')), null);
}, () => page);

uiTest('the server key signs in for this tab only, never in the URL, until signed out', async () => {
  page = await app.page();
  await app.login(page);
  for (const name of ['Playground', 'Threads', 'Configuration']) {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name }).waitFor();
  }
  assert.ok(!page.url().includes(KEY));
  await page.reload();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  // Another context (another tab's storage) is not signed in.
  const other = await app.page();
  await load(other, '/');
  await other.getByLabel('Server key or client token').waitFor();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Server key or client token').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('edgent.session')), null);
}, () => page);

uiTest('a client token in the fragment opens its one thread and leaves the URL', async () => {
  const created = await app.api('POST', '/api/threads', { agent_id: 'support', token: { scopes: ['chat', 'approve'] } });
  page = await app.page();
  await load(page, `/#token=${created.token.token}`);
  await page.getByText('client token', { exact: true }).waitFor();
  assert.ok(!page.url().includes('token='), page.url());
  assert.ok(page.url().includes(created.thread_id), page.url());
  assert.equal(await page.getByRole('link', { name: 'Configuration' }).count(), 0);
  assert.equal(await page.getByRole('link', { name: 'Threads' }).count(), 0);
}, () => page);

uiTest('a link token is checked before it is kept: a revoked one is refused and not stored', async () => {
  const created = await app.api('POST', '/api/threads', { agent_id: 'support', token: { scopes: ['chat'] } });
  await app.api('POST', `/api/threads/${created.thread_id}/tokens/revoke`);
  page = await app.page();
  await load(page, `/#token=${created.token.token}`);
  await page.getByRole('alert').filter({ hasText: 'did not accept this client token' }).waitFor();
  assert.ok(!page.url().includes('token='), page.url());
  assert.equal(await page.evaluate(() => sessionStorage.getItem('edgent.session')), null);
}, () => page);

uiTest('a link token opened in a tab signed in with the key asks first, and leaves the address either way', async () => {
  const created = await app.api('POST', '/api/threads', { agent_id: 'support', token: { scopes: ['chat'] } });
  page = await app.page();
  await app.login(page);
  // Declined: still the server key. The link arrives as a same-document navigation.
  page.once('dialog', (d) => d.dismiss());
  await page.evaluate((t) => { window.location.hash = `#token=${t}`; }, created.token.token);
  await page.getByRole('link', { name: 'Configuration' }).waitFor();
  await page.waitForFunction(() => !window.location.hash.includes('token='));
  assert.equal(await page.getByText('server key', { exact: true }).count(), 1);
  // Accepted: the token's one thread.
  page.once('dialog', (d) => d.accept());
  await page.evaluate((t) => { window.location.hash = `#token=${t}`; }, created.token.token);
  await page.getByText('client token', { exact: true }).waitFor();
  assert.ok(!page.url().includes('token='), page.url());
  assert.equal(await page.getByRole('link', { name: 'Configuration' }).count(), 0);
}, () => page);

uiTest('a key no socket could carry is refused at sign-in with what to do', async () => {
  page = await app.page();
  await load(page, '/');
  await page.getByLabel('Server key or client token').fill('abc/def+ghi=');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'characters a WebSocket cannot carry' }).waitFor();
}, () => page);

uiTest('a narrow window scrolls only down, and the keyboard reaches the skip link and the navigation first', async () => {
  page = await app.page({ viewport: { width: 360, height: 740 } });
  await app.login(page);
  const sideways = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(sideways <= 0, `the page is ${sideways}px wider than the window`);
  await page.reload();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Playground');
}, () => page);

uiTest('the page is served with a policy that keeps it on its origin and out of frames', async () => {
  const res = await fetch(`${app.base}/`);
  const csp = res.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /connect-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
  // The API's own answers are the Worker's, not the page's.
  assert.equal((await fetch(`${app.base}/api/health`)).headers.get('content-security-policy'), null);
}, () => page);

uiTest('no page request leaves the Worker (no fonts, no CDNs)', async () => {
  page = await app.page();
  const seen = [];
  page.on('request', (r) => seen.push(r.url()));
  await app.login(page);
  for (const hash of ['#/threads', '#/config/models/default', '#/']) {
    await page.goto(`/${hash}`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.waitForLoadState('networkidle');
  }
  const foreign = seen.filter((u) => !u.startsWith(app.base) && !u.startsWith(app.base.replace('http', 'ws')) && !u.startsWith('data:'));
  assert.deepEqual(foreign, []);
  assert.ok(seen.length > 5, `the pages made requests: ${seen.length}`);
}, () => page);
