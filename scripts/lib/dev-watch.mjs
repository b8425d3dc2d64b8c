// For scripts/dev.sh: rebuilds the Worker when the app's Rust sources change, while `wrangler
// dev` runs it. `wrangler dev` is started without the app's [build] (it would build twice at
// startup), so without this a new or edited tool file reached the Worker only after a restart.
// scripts/build.sh replaces build/'s files by renames at its end, and `wrangler dev` reloads
// when they change; a build that fails leaves the last good Worker running and prints why.
//
// Watched: the app's agents/ (tools, workflows, hooks), src/, Cargo.toml and build.rs, and the
// crates/ of the edgent checkout whose scripts run (an app that depends on them by path).
// agents/{models,prompts,agents}/*.toml are definitions in D1, not code: a change to one is
// named, with how to load it, and builds nothing.
//
// Usage: node scripts/lib/dev-watch.mjs <edgent checkout>   (in the app's folder)
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';

const ROOT = resolve(process.argv[2] ?? '.');
const APP = process.cwd();
// Quiet this long after the last change before building: a save can be several writes.
const SETTLE_MS = 300;
const DEFINITIONS = ['models', 'prompts', 'agents'].map((kind) => join(APP, 'agents', kind) + sep);

const say = (line) => console.log(`[dev] ${line}`);

/** What a change to `file` asks for: 'build', 'definition' or nothing (editor temp files). */
function changeKind(file) {
  const name = file.split(sep).pop() ?? '';
  if (name.startsWith('.') || name.endsWith('~') || name.endsWith('.swp') || /^\d+$/.test(name)) return null;
  if (DEFINITIONS.some((dir) => file.startsWith(dir))) return name.endsWith('.toml') ? 'definition' : null;
  return 'build';
}

let building = false;
let current = null;
let pending = new Set();
let timer = null;

function changed(file) {
  const kind = changeKind(file);
  if (kind === 'definition') {
    say(`${relative(APP, file)} changed: definitions live in D1, so restart npm run dev to load it `
      + '(or send it through PUT /api/config, as the UI\'s configuration editor does)');
    return;
  }
  if (kind !== 'build') return;
  pending.add(relative(APP, file) || file);
  clearTimeout(timer);
  timer = setTimeout(build, SETTLE_MS);
}

function build() {
  if (building || pending.size === 0) return;
  building = true;
  const why = [...pending];
  pending = new Set();
  const shown = why.length > 3 ? `${why.slice(0, 3).join(', ')} and ${why.length - 3} more` : why.join(', ');
  say(`${shown} changed: rebuilding the Worker`);
  const started = Date.now();
  const child = (current = spawn('bash', [join(ROOT, 'scripts', 'build.sh')], {
    // Without the wasm-opt pass (EDGENT_FAST_BUILD=1 unless set otherwise): the same code, about
    // 14% larger, in half the time. `wrangler deploy` runs the full build of its own.
    env: { ...process.env, EDGENT_APP_DIR: APP, EDGENT_FAST_BUILD: process.env.EDGENT_FAST_BUILD ?? '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so that stopping npm run dev stops the whole build (cargo too).
    detached: true,
  }));
  const output = [];
  child.stdout.on('data', (d) => output.push(d));
  child.stderr.on('data', (d) => output.push(d));
  child.on('close', (code) => {
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (code === 0) {
      say(`rebuilt in ${seconds} s; wrangler reloads the Worker`);
    } else {
      const lines = Buffer.concat(output).toString('utf8').trimEnd().split('\n');
      console.log(lines.slice(-60).join('\n'));
      say(`the build failed after ${seconds} s (above): the Worker keeps running the last good build`);
    }
    building = false;
    current = null;
    if (pending.size > 0) build();
  });
}

// Polled once a second rather than watched: a save that writes a new file and renames it
// over the old one (sed -i, many editors) ends an inotify watch on the file, and Node's
// recursive watch missed the second such save in a row. A stat of every file takes a few
// milliseconds for these folders.
const POLL_MS = 1000;
const roots = [join(APP, 'agents'), join(APP, 'src'), join(ROOT, 'crates')]
  .filter((dir, i, all) => existsSync(dir) && all.indexOf(dir) === i);
const files = [join(APP, 'Cargo.toml'), join(APP, 'build.rs')];

/** Every watched file with its modification time and size. */
function snapshot() {
  const seen = new Map();
  const note = (path) => {
    try {
      const s = statSync(path);
      if (s.isFile()) seen.set(path, `${s.mtimeMs}:${s.size}`);
    } catch {
      // gone between the listing and the stat: the next poll sees it gone
    }
  };
  for (const file of files) note(file);
  for (const dir of roots) {
    let entries = [];
    try {
      entries = readdirSync(dir, { recursive: true, withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (entry.isFile()) note(join(entry.parentPath ?? entry.path, entry.name));
    }
  }
  return seen;
}

let last = snapshot();
// Stops when dev.sh is gone, even if it could not stop this process (a SIGKILL).
const PARENT = process.ppid;
setInterval(() => {
  if (process.ppid !== PARENT) stop();
  const now = snapshot();
  for (const [path, stamp] of now) if (last.get(path) !== stamp) changed(path);
  for (const path of last.keys()) if (!now.has(path)) changed(path);
  last = now;
}, POLL_MS);
const shownDirs = roots.map((dir) => relative(APP, dir) || '.');
say(`watching Cargo.toml, build.rs, ${shownDirs.join(', ')}: a change rebuilds the Worker (EDGENT_DEV_WATCH=0 turns this off)`);

// npm run dev stops: a build under way stops with it.
function stop() {
  if (current?.pid) {
    try {
      process.kill(-current.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  process.exit(0);
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, stop);
