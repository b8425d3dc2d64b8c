#!/usr/bin/env node
// Takes the README's and docs/ui.md's screenshots: the UI in Chromium against the real Worker,
// answered by the demo model (what a first `npm run dev` shows). Not a test; run it after a UI
// change: `node tests/browser/screenshots.mjs` (needs the Worker and ui/dist built).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startApp } from './harness.mjs';
import { ROOT } from '../support/worker.mjs';
import { demoStep } from '../support/demo-model.mjs';
import { startWeatherServer } from '../support/weather-server.mjs';

const OUT = join(ROOT, 'docs', 'images');
mkdirSync(OUT, { recursive: true });
const weather = await startWeatherServer();
const app = await startApp({ fallback: demoStep, demo: true, vars: { WEATHER_API_KEY: 'demo', WEATHER_API_URL: weather.url } });
try {
  const page = await app.page({ viewport: { width: 1200, height: 1130 } });
  await app.login(page);
  await page.getByRole('button', { name: 'Start thread' }).click();
  const input = page.getByLabel('Message', { exact: true });
  await input.fill('Hi, what time is it?');
  await input.press('Enter');
  await page.getByText(/It is \d\d:\d\d UTC/).waitFor({ timeout: 20_000 });
  await input.fill('What is the weather in Lisbon?');
  await input.press('Enter');
  await page.getByText(/Lisbon.*21\.5/).waitFor({ timeout: 20_000 });
  await page.waitForTimeout(1500);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(OUT, 'playground.png') });
  await page.getByRole('link', { name: 'Inspect' }).click();
  await page.getByRole('tab', { name: /Tool calls/ }).click();
  await page.waitForTimeout(1000);
  await page.screenshot({ path: join(OUT, 'inspector.png') });
  console.log(`wrote ${join(OUT, 'playground.png')} and ${join(OUT, 'inspector.png')}`);
} finally {
  await app.stop();
  await weather.close();
}
