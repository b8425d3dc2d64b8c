// The one change scripts/build.sh makes to wasm-bindgen's glue (scripts/lib/glue.mjs): js-sys's
// task queue is told there is no `queueMicrotask`, so it queues its futures with `then`.
// Proves: the getter is found in the glue as worker-build writes it (minified) and unminified,
// only that import changes, a glue with none or two getters stops the build with a message that
// says where to look, the script does so when run (directly or through a symlink), and the
// Workers this suite runs were built with the change. Every other
// e2e test then shows the Worker's futures still run with it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { patchGlue } from '../../scripts/lib/glue.mjs';
import { ROOT } from '../support/worker.mjs';

const MINIFIED =
  'var x={__wbg_push_c9:function(e,t){return e.push(t)},' +
  '__wbg_queueMicrotask_1e8503a8a690f0a3:function(e){return e.queueMicrotask},' +
  '__wbg_queueMicrotask_4a1a4d8dd332373b:function(e){queueMicrotask(e)},' +
  '__wbg_then_5:function(e,t){return e.then(t)}};';

const UNMINIFIED = `const imports = {
    __wbg_queueMicrotask_0123abcd: function(arg0) {
        const ret = arg0.queueMicrotask;
        return ret;
    },
    __wbg_queueMicrotask_4567ef01: function(arg0) {
        queueMicrotask(arg0);
    },
};`;

test('the getter of the minified glue answers undefined; the other imports are unchanged', () => {
  const out = patchGlue(MINIFIED);
  assert.equal(
    out,
    MINIFIED.replace('function(e){return e.queueMicrotask}', 'function(e){return undefined}'),
  );
  // the call itself stays: js-sys never reaches it once the getter says there is none
  assert.match(out, /__wbg_queueMicrotask_4a1a4d8dd332373b:function\(e\)\{queueMicrotask\(e\)\}/);
});

test('the getter of unminified glue is found too', () => {
  const out = patchGlue(UNMINIFIED);
  assert.match(out, /__wbg_queueMicrotask_0123abcd: function\(arg0\) \{return undefined\}/);
  assert.doesNotMatch(out, /arg0\.queueMicrotask/);
  assert.match(out, /queueMicrotask\(arg0\);/);
});

test('a glue without the getter, or with two, stops the build and says why', () => {
  const none = MINIFIED.replace('return e.queueMicrotask', 'return e.other');
  assert.throws(() => patchGlue(none), /expected one queueMicrotask getter .* found 0: .*scripts\/lib\/glue\.mjs/);
  const twice = MINIFIED + MINIFIED.replace('1e8503a8a690f0a3', 'ffff');
  assert.throws(() => patchGlue(twice), /found 2/);
  // already changed (a second run over the same file) is a miss as well: build.sh runs it once
  assert.throws(() => patchGlue(patchGlue(MINIFIED)), /found 0/);
});

test('the script rewrites the file it is given, also when started through a symlink, and fails on a miss', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'edgent-glue-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const script = join(ROOT, 'scripts', 'lib', 'glue.mjs');
  const linked = join(dir, 'glue-link.mjs');
  symlinkSync(script, linked);
  for (const entry of [script, linked]) {
    const file = join(dir, 'index.js');
    writeFileSync(file, MINIFIED);
    const ok = spawnSync(process.execPath, [entry, file], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(readFileSync(file, 'utf8'), patchGlue(MINIFIED), `${entry}: the file was not rewritten`);
    // run again over the rewritten file: no getter left, so the build stops
    const again = spawnSync(process.execPath, [entry, file], { encoding: 'utf8' });
    assert.equal(again.status, 1);
    assert.match(again.stderr, /\[build\] expected one queueMicrotask getter .* found 0/);
  }
  const missing = spawnSync(process.execPath, [script], { encoding: 'utf8' });
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /usage: node scripts\/lib\/glue\.mjs/);
});

test('the Workers under test were built with the change', () => {
  for (const app of ['.', 'examples/hello', 'tests/apps/upgraded']) {
    const glue = readFileSync(join(ROOT, app, 'build', 'index.js'), 'utf8');
    assert.match(glue, /__wbg_queueMicrotask_[0-9a-f]+:function\(\w+\)\{return undefined\}/, `${app}: getter not changed`);
    assert.doesNotMatch(glue, /__wbg_queueMicrotask_[0-9a-f]+:function\((\w+)\)\{return \1\.queueMicrotask\}/, app);
  }
});
