// scripts/dev.sh run for real in a copy of scripts/ whose heavy parts are stubs (setup.sh, the
// UI's build and `wrangler dev`; build.sh too unless a test gives its own), for the dev.sh tests
// of demo_model.test.mjs and dev_watch.test.mjs: the real build costs minutes. The stub
// `wrangler dev` prints its arguments and waits for a signal, or exits at once with
// $STUB_WRANGLER_EXIT.
import { spawn } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './worker.mjs';
import { freePort, freePortPair } from './net.mjs';

/** Resolves with the child's exit code (or signal) once it has exited. */
export const exited = (child, ms = 5000) => new Promise((resolve, reject) => {
  if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode ?? child.signalCode);
  const timer = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms);
  child.once('exit', (code, signal) => { clearTimeout(timer); resolve(code ?? signal); });
});

/** A copy of the example app's definitions and config in a temp folder, with `devVars`. */
export function tempApp(t, devVars) {
  const dir = mkdtempSync(join(tmpdir(), 'edgent-demo-app-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const kind of ['models', 'prompts', 'agents']) cpSync(join(ROOT, 'agents', kind), join(dir, 'agents', kind), { recursive: true });
  writeFileSync(join(dir, 'wrangler.toml'), readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace(/^migrations_dir = .*$/m, `migrations_dir = ${JSON.stringify(join(ROOT, 'migrations'))}`));
  if (devVars !== undefined) writeFileSync(join(dir, '.dev.vars'), devVars);
  return dir;
}

const STUB_WRANGLER = `#!/usr/bin/env bash
if [[ "$1" == "dev" ]]; then
  echo "stub wrangler $*"
  [[ -n "\${STUB_WRANGLER_EXIT:-}" ]] && exit "$STUB_WRANGLER_EXIT"
  trap 'exit 0' TERM INT
  while true; do sleep 0.1; done
fi
exit 0
`;

/**
 * A repository root holding the real dev.sh and what it runs, with the heavy parts stubbed;
 * `build` is the text of its scripts/build.sh (by default one that does nothing).
 */
export function stubRoot(t, { build = 'exit 0\n' } = {}) {
  const root = mkdtempSync(join(tmpdir(), 'edgent-dev-root-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'scripts', 'lib'), { recursive: true });
  mkdirSync(join(root, 'tests', 'support'), { recursive: true });
  for (const f of ['dev.sh', 'seed.mjs', 'demo-model.mjs', 'dev-config.mjs', 'lib/d1.mjs', 'lib/dev-watch.mjs']) {
    cpSync(join(ROOT, 'scripts', f), join(root, 'scripts', f));
  }
  for (const f of ['model-server.mjs', 'demo-model.mjs', 'weather-server.mjs']) cpSync(join(ROOT, 'tests', 'support', f), join(root, 'tests', 'support', f));
  for (const f of ['setup.sh', 'ui.sh']) writeFileSync(join(root, 'scripts', f), 'exit 0\n');
  writeFileSync(join(root, 'scripts', 'build.sh'), build);
  mkdirSync(join(root, 'node_modules', '.bin'), { recursive: true });
  for (const pkg of ['miniflare', 'smol-toml']) symlinkSync(join(ROOT, 'node_modules', pkg), join(root, 'node_modules', pkg));
  writeFileSync(join(root, 'node_modules', '.bin', 'wrangler'), STUB_WRANGLER);
  chmodSync(join(root, 'node_modules', '.bin', 'wrangler'), 0o755);
  return root;
}

/** Runs dev.sh for `app`; `output()` is everything it printed so far. */
export async function startDev(t, root, app, env = {}) {
  // The demo listens on its port and, with the weather stand-in, on the next one.
  const demoPort = env.EDGENT_DEMO_PORT ?? String(await freePortPair());
  let port = await freePort();
  while (port === Number(demoPort) || port === Number(demoPort) + 1) port = await freePort();
  const child = spawn('bash', [join(root, 'scripts', 'dev.sh')], {
    env: { ...process.env, EDGENT_APP_DIR: app, PORT: String(port), EDGENT_DEMO_PORT: demoPort, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own: a test that ends early kills dev.sh and what it started (the
    // stub wrangler, the watch, a build), whose open pipes would keep the test process alive.
    detached: true,
  });
  t.after(() => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const until = async (pattern, ms = 30_000) => {
    const deadline = Date.now() + ms;
    while (!pattern.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`dev.sh never printed ${pattern}:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, demoUrl: `http://127.0.0.1:${demoPort}`, output: () => out, until };
}
