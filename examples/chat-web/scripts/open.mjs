#!/usr/bin/env node
// `npm run open`: creates a thread with the server key and prints this page's address with the
// thread and a client token in its fragment (#thread=…&token=…). The key stays here; the page
// gets a token bound to that one thread, expiring, with the scopes asked for. In production
// your own backend does this (README: "In production").
//
//   npm run open                          # a new `support` thread, token valid 1 hour
//   npm run open -- --agent review --ttl 600
//   npm run open -- --thread <id>         # a fresh token for an existing thread
//   npm run open -- --scopes chat         # a token that cannot approve tool calls
//   npm run open -- --page http://localhost:5173   # the page served by `npm run vite` instead
//
// EDGENT_URL: the Worker (default http://127.0.0.1:8787). EDGENT_API_KEY: the server key, from
// the environment or else the app's .dev.vars (written by `npm run dev`).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const { values: args } = parseArgs({
  options: {
    agent: { type: 'string', default: 'support' },
    ttl: { type: 'string', default: '3600' },
    scopes: { type: 'string', default: 'chat,approve' },
    thread: { type: 'string' },
    page: { type: 'string' },
  },
});

function fail(message) {
  console.error(`[open] ${message}`);
  process.exit(1);
}

/** EDGENT_API_KEY from the environment, or from the app's .dev.vars. */
function apiKey() {
  if (process.env.EDGENT_API_KEY) return process.env.EDGENT_API_KEY;
  const app = resolve(ROOT, process.env.EDGENT_APP_DIR ?? '.');
  const file = join(app, '.dev.vars');
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^EDGENT_API_KEY=(.*)$/.exec(line.trim());
      if (m && m[1]) return m[1].replace(/^"(.*)"$/, '$1');
    }
  }
  fail(`no EDGENT_API_KEY: set it, or run \`npm run dev\` once (it writes ${file})`);
}

const base = (process.env.EDGENT_URL ?? 'http://127.0.0.1:8787').replace(/\/+$/, '');
const key = apiKey();
const ttl = Number(args.ttl);
if (!Number.isInteger(ttl) || ttl < 60 || ttl > 7 * 24 * 3600) fail('--ttl is seconds, from 60 to 604800');
const scopes = args.scopes.split(',').map((s) => s.trim()).filter(Boolean);

async function api(method, path, body) {
  let r;
  try {
    r = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    fail(`cannot reach ${base} (${e.cause?.code ?? e.message}): is \`npm run dev\` running?`);
  }
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  if (!r.ok) {
    const why = json?.error ? `${json.error.code}: ${json.error.message}` : text.slice(0, 200);
    const hint =
      r.status === 401 ? ' (the key is not the one the Worker has: check EDGENT_API_KEY and .dev.vars)'
      : json?.error?.code === 'not_configured' ? ' (set EDGENT_TOKEN_SECRET in .dev.vars; `npm run dev` writes one)'
      : '';
    fail(`${method} ${path} answered ${r.status}: ${why}${hint}`);
  }
  return json;
}

let threadId;
let token;
if (args.thread) {
  threadId = args.thread;
  token = await api('POST', `/api/threads/${encodeURIComponent(threadId)}/tokens`, { scopes, ttl_seconds: ttl });
} else {
  const created = await api('POST', '/api/threads', {
    agent_id: args.agent,
    tags: ['chat-web'],
    token: { scopes, ttl_seconds: ttl },
  });
  threadId = created.thread_id;
  token = created.token;
}

const fragment = new URLSearchParams({ thread: threadId, token: token.token });
console.log(`
  Thread ${threadId} (${args.thread ? 'existing' : `agent ${args.agent}`}); token scopes ${token.scopes.join(', ')}, expires ${new Date(token.expires_at * 1000).toLocaleString()}.
  Open this address in your browser (the part after # never leaves the browser):

  ${(args.page ?? base).replace(/\/+$/, '')}/#${fragment}
`);
