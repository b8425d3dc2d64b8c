// `npm run dev` rebuilding the Worker when the app's sources change (scripts/lib/dev-watch.mjs,
// started by scripts/dev.sh). The real dev.sh in a copy of scripts/ whose build.sh is a stub
// that records each run and fails or stalls on request (tests/support/dev-script.mjs).
// Proves: a new tool file, a changed src/ file or Cargo.toml starts one build (without the
// wasm-opt pass; the startup build keeps it), and saves made together start one; a failing
// build prints its output and says the last good Worker keeps running, and the next save
// builds again; a change to a model/prompt/agent definition builds
// nothing and says how to load it; EDGENT_DEV_WATCH=0 turns the watch off; stopping dev.sh
// stops a build under way. Does not prove: that `wrangler dev` reloads the rebuilt Worker
// (scripts/build.sh replaces build/'s files by renames; checked by hand, docs/testing.md).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { exited, startDev, stubRoot, tempApp } from '../support/dev-script.mjs';
import { until } from '../support/until.mjs';

// Records each run in the app's builds.log (the startup build is the first), prints a compiler
// error and fails while fail-build exists, and stalls while slow-build exists (its pid in
// build.pid), so a test can stop dev.sh in the middle of a build.
const BUILD = `#!/usr/bin/env bash
echo "run \${EDGENT_FAST_BUILD:-full}" >> "$EDGENT_APP_DIR/builds.log"
if [[ -f "$EDGENT_APP_DIR/fail-build" ]]; then
  echo "error[E0609]: no field \\\`wordz\\\` on type \\\`Shout\\\`" >&2
  exit 101
fi
if [[ -f "$EDGENT_APP_DIR/slow-build" ]]; then
  echo $$ > "$EDGENT_APP_DIR/build.pid"
  sleep 60
fi
exit 0
`;

const TOOL = 'use edgent::prelude::*;\n';

/** An app with agents/tools and src/, and dev.sh running for it with the demo off. */
async function watchedApp(t, env = {}) {
  const root = stubRoot(t, { build: BUILD });
  const app = tempApp(t, 'EDGENT_API_KEY=abc\nOPENAI_API_KEY=sk-x\n');
  mkdirSync(join(app, 'agents', 'tools'), { recursive: true });
  mkdirSync(join(app, 'src'), { recursive: true });
  writeFileSync(join(app, 'src', 'lib.rs'), '// the app\n');
  writeFileSync(join(app, 'Cargo.toml'), '[package]\nname = "watched"\n');
  const dev = await startDev(t, root, app, { EDGENT_DEMO: '0', ...env });
  await dev.until(/stub wrangler dev/);
  const builds = () => readFileSync(join(app, 'builds.log'), 'utf8').split('\n').filter(Boolean).length;
  const count = (pattern) => (dev.output().match(new RegExp(pattern, 'g')) ?? []).length;
  return { app, dev, builds, count };
}

test('a new tool file rebuilds the Worker once, and saves made together build once', { timeout: 60_000 }, async (t) => {
  const { app, dev, builds, count } = await watchedApp(t);
  await dev.until(/\[dev\] watching Cargo\.toml, build\.rs, agents, src/);
  assert.equal(builds(), 1, 'the startup build');

  writeFileSync(join(app, 'agents', 'tools', 'shout.rs'), TOOL);
  await dev.until(/\[dev\] agents\/tools\/shout\.rs changed: rebuilding the Worker\n/);
  await dev.until(/\[dev\] rebuilt in \d+\.\d s; wrangler reloads the Worker/);
  assert.equal(builds(), 2);
  // The startup build is the full one, rebuilds skip the wasm-opt pass.
  assert.deepEqual(readFileSync(join(app, 'builds.log'), 'utf8').split('\n').filter(Boolean), ['run full', 'run 1']);

  // Three saves of two files made together (the watch polls once a second, so saves that
  // straddle a poll would build twice, rightly): one build that names both.
  for (const text of ['// 1\n', '// 2\n', '// 3\n']) {
    writeFileSync(join(app, 'src', 'lib.rs'), text);
    writeFileSync(join(app, 'Cargo.toml'), `[package]\nname = "watched"\n${text.replace('//', '#')}`);
  }
  await dev.until(/rebuilt in[\s\S]*rebuilt in/);
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(builds(), 3, dev.output());
  assert.match(dev.output(), /\[dev\] (src\/lib\.rs, Cargo\.toml|Cargo\.toml, src\/lib\.rs) changed/);
  assert.equal(count('rebuilding the Worker'), 2);
});

test('a failing build shows why and keeps the last Worker; the next save builds again', { timeout: 60_000 }, async (t) => {
  const { app, dev, builds } = await watchedApp(t);
  await dev.until(/\[dev\] watching/);
  writeFileSync(join(app, 'fail-build'), '');
  writeFileSync(join(app, 'agents', 'tools', 'shout.rs'), TOOL);
  await dev.until(/error\[E0609\]: no field `wordz` on type `Shout`\n\[dev\] the build failed after \d+\.\d s \(above\): the Worker keeps running the last good build/);
  rmSync(join(app, 'fail-build'));
  writeFileSync(join(app, 'agents', 'tools', 'shout.rs'), `${TOOL}// fixed\n`);
  await dev.until(/\[dev\] rebuilt in/);
  assert.equal(builds(), 3);
});

test('a definition\'s change builds nothing and says how to load it', { timeout: 60_000 }, async (t) => {
  const { app, dev, builds } = await watchedApp(t);
  await dev.until(/\[dev\] watching/);
  const prompt = join(app, 'agents', 'prompts', 'support.toml');
  assert.ok(existsSync(prompt), 'the example app has a support prompt');
  writeFileSync(prompt, `${readFileSync(prompt, 'utf8')}\n# edited\n`);
  await dev.until(/\[dev\] agents\/prompts\/support\.toml changed: definitions live in D1, so restart npm run dev to load it \(or send it through PUT \/api\/config/);
  await new Promise((r) => setTimeout(r, 2000));
  assert.equal(builds(), 1, 'only the startup build');
});

test('EDGENT_DEV_WATCH=0 watches nothing', { timeout: 60_000 }, async (t) => {
  const { app, dev, builds } = await watchedApp(t, { EDGENT_DEV_WATCH: '0' });
  writeFileSync(join(app, 'agents', 'tools', 'shout.rs'), TOOL);
  await new Promise((r) => setTimeout(r, 2500));
  assert.doesNotMatch(dev.output(), /\[dev\] watching|rebuilding/);
  assert.equal(builds(), 1);
});

test('stopping dev.sh stops a build under way', { timeout: 60_000 }, async (t) => {
  const { app, dev } = await watchedApp(t);
  await dev.until(/\[dev\] watching/);
  writeFileSync(join(app, 'slow-build'), '');
  writeFileSync(join(app, 'agents', 'tools', 'shout.rs'), TOOL);
  const pidFile = join(app, 'build.pid');
  await until(() => existsSync(pidFile), 'the slow build to start', 20_000, 50);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  dev.child.kill('SIGTERM');
  assert.equal(await exited(dev.child, 10_000), 143);
  const running = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await until(() => !running(), `the build (pid ${pid}) to stop with dev.sh`, 5000, 50);
});
