// Layer: the UI in headless Chromium against the real Worker under wrangler dev, answered by
// the demo model (tests/support/demo-model.mjs, seeded as `npm run dev` seeds it with no key)
// and the weather stand-in (as dev.sh runs it with no WEATHER_API_KEY).
// Proves: a first run shows the whole machinery with no key: the shell and the playground say
// the answers come from the demo; "Hi, what time is it?" streams a get_current_time call that
// succeeds and an answer with the time; a weather question calls get_weather and answers from
// its result; the request log marks the demo's rows.
// Does not prove: dev.sh's choice to start the demo (tests/e2e/demo_model.test.mjs).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uiTest } from './harness.mjs';
import { demoStep } from '../support/demo-model.mjs';
import { startWeatherServer } from '../support/weather-server.mjs';

let app, page, weather;
before(async () => {
  weather = await startWeatherServer();
  app = await startApp({ fallback: demoStep, demo: true, vars: { WEATHER_API_KEY: 'demo', WEATHER_API_URL: weather.url } });
});
after(async () => {
  await app?.stop();
  await weather?.close();
});

uiTest('with no key, the demo model answers a first question with a tool and says it is the demo', async () => {
  page = await app.page();
  await app.login(page);
  await page.getByTitle(/answer from edgent's scripted demo/).waitFor();
  await page.getByRole('note').filter({ hasText: 'OPENAI_API_KEY' }).waitFor();
  await page.getByRole('button', { name: 'Start thread' }).click();
  const box = page.getByLabel('Message', { exact: true });
  await box.fill('Hi, what time is it?');
  await box.press('Enter');
  await page.getByText('Demo model: calling get_current_time.').waitFor();
  const call = page.getByRole('region', { name: 'Tool call get_current_time' });
  await call.getByText('success', { exact: true }).waitFor();
  await page.getByText(/It is \d\d:\d\d UTC/).waitFor();

  await box.fill('What is the weather in Lisbon?');
  await box.press('Enter');
  await page.getByRole('region', { name: 'Tool call get_weather' }).getByText('success', { exact: true }).waitFor();
  // The final answer's words (the tool result's JSON also holds "Lisbon" and 21.5, and shows
  // before the last model request has ended).
  await page.getByText(/In Lisbon it is 21\.5/).waitFor();
  assert.equal(weather.requests.at(-1).query.q, 'Lisbon');

  await page.getByRole('link', { name: 'Inspect' }).click();
  await page.getByRole('tab', { name: /Requests/ }).click();
  const rows = page.getByRole('row').filter({ hasText: 'demo' });
  // The tab follows the thread live: the last request's row comes with the turn's end.
  await rows.nth(3).waitFor();
  assert.ok((await rows.count()) >= 4, 'every model request of the two answers is marked demo');
}, () => page);
