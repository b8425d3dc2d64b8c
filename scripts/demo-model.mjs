#!/usr/bin/env node
// Runs edgent's demo model: the scripted model server (tests/support/model-server.mjs) answering
// every request with demoStep (tests/support/demo-model.mjs), on 127.0.0.1.
//
//   node scripts/demo-model.mjs [--port N] [--secret NAME] [--weather-port N]
//
// Prints one line, `demo model: http://127.0.0.1:PORT (…)`, once it listens; point a model's
// base_url at that URL + /v1. --secret names the key that would switch to the real model (the
// demo's text tells the user to set it; default OPENAI_API_KEY). `npm run dev` starts it when
// the default model has no key (scripts/dev.sh). --weather-port also starts the weather
// stand-in of the tests (tests/support/weather-server.mjs: the same light rain for every city)
// there, for the get_weather tool when no WEATHER_API_KEY is set. Stops on SIGINT or SIGTERM, and when the
// process that started it is gone, so a dev server killed with SIGKILL leaves no demo behind.
import { startModelServer } from '../tests/support/model-server.mjs';
import { demoStep } from '../tests/support/demo-model.mjs';
import { defaultReply, startWeatherServer } from '../tests/support/weather-server.mjs';

const args = process.argv.slice(2);

function fail(message, code = 2) {
  console.error(`demo-model: ${message}`);
  process.exit(code);
}

function flagValue(name) {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) fail(`${name} needs a value`);
  return v;
}

const known = new Set(['--port', '--secret', '--weather-port']);
for (let i = 0; i < args.length; i += 2) {
  if (!known.has(args[i])) fail(`unknown argument ${JSON.stringify(args[i])} (usage: demo-model.mjs [--port N] [--secret NAME] [--weather-port N])`);
}
const port = Number(flagValue('--port') ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be a port number, got ${flagValue('--port')}`);
const secret = flagValue('--secret') ?? 'OPENAI_API_KEY';
const weatherPort = flagValue('--weather-port') === undefined ? undefined : Number(flagValue('--weather-port'));
if (weatherPort !== undefined && (!Number.isInteger(weatherPort) || weatherPort < 0 || weatherPort > 65535)) {
  fail(`--weather-port must be a port number, got ${flagValue('--weather-port')}`);
}

let server;
try {
  server = await startModelServer({
    port,
    fallback: (request) => {
      // The server records every request for tests; a dev session would keep them all.
      server.reset();
      return demoStep(request, { secret });
    },
  });
} catch (e) {
  fail(`cannot listen on 127.0.0.1:${port} (${e.code ?? e.message})`, 1);
}
console.log(`demo model: ${server.url} (OpenAI and Anthropic routes under ${server.url}/v1)`);

let weather;
if (weatherPort !== undefined) {
  try {
    weather = await startWeatherServer({ port: weatherPort });
  } catch (e) {
    await server.close();
    fail(`cannot listen on 127.0.0.1:${weatherPort} for the weather stand-in (${e.code ?? e.message})`, 1);
  }
  weather.reply((request) => {
    weather.requests.length = 0; // as above: nothing kept across a dev session
    return defaultReply(request);
  });
  console.log(`demo weather: ${weather.url} (for get_weather's WEATHER_API_URL)`);
}

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await Promise.all([server.close(), weather?.close()]);
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

// Orphaned (the parent died without stopping us, e.g. SIGKILL): the kernel hands us to another
// parent, so ppid changes. Checked once a second, without keeping the process alive by itself.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) stop(); }, 1000).unref();
