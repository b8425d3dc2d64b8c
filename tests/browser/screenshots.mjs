#!/usr/bin/env node
// Takes the README's and docs/ui.md's screenshots: the UI in Chromium against the real Worker,
// answered by the demo model (what a first `npm run dev` shows). Not a test; run it after a UI
// change: `node tests/browser/screenshots.mjs` (needs the Worker and ui/dist built).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startApp } from './harness.mjs';
import { ROOT } from '../support/worker.mjs';
import { demoStep } from '../support/demo-model.mjs';

const OUT = join(ROOT, 'docs', 'images');
mkdirSync(OUT, { recursive: true });
const app = await startApp({ fallback: demoStep, demo: true });
try {
  const page = await app.page({ viewport: { width: 1200, height: 760 } });
  await app.login(page);
  await page.getByRole('button', { name: 'Start thread' }).click();
  const input = page.getByLabel('Message');
  await input.fill('Hi, what time is it?');
  await input.press('Enter');
  await page.getByText(/UTC/).last().waitFor({ timeout: 20_000 });
  await input.fill('What is the weather in Lisbon?');
  await input.press('Enter');
  await page.getByText(/Lisbon/).last().waitFor({ timeout: 20_000 });
  await page.waitForTimeout(1500);
  await page.screenshot({ path: join(OUT, 'playground.png') });
  await page.getByRole('link', { name: 'Inspect' }).click();
  await page.getByRole('tab', { name: /Tool calls/ }).click();
  await page.waitForTimeout(1000);
  await page.screenshot({ path: join(OUT, 'inspector.png') });
  console.log(`wrote ${join(OUT, 'playground.png')} and ${join(OUT, 'inspector.png')}`);
} finally {
  await app.stop();
}
