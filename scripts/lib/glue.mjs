#!/usr/bin/env node
// One change to the JavaScript glue worker-build writes (build/index.js), made after every
// build: js-sys's task queue (which runs every Rust future of the Worker) is told the global
// scope has no `queueMicrotask`, so it takes its own fallback, `Promise.prototype.then` on a
// resolved promise. Both queue a microtask; in workerd `queueMicrotask` costs about 3 µs a call
// (workerd wraps each callback before V8 queues it) and `then` about 0.1 µs, and a turn
// schedules the queue dozens of times. Measured in docs/decisions/2026-12-02-futures-queued-with-then.md.
//
// The getter js-sys reads once, when its queue is created, is the import whose body returns
// `<global>.queueMicrotask`. Exactly one must be found: the toolchain is pinned (wasm-bindgen
// 0.2.130, and js-sys with it), so a miss means the glue's shape changed with a version bump,
// and the build stops and says so rather than ship a slower Worker unnoticed.
//
// Usage: node scripts/lib/glue.mjs build/index.js
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The getter's import, minified (`function(e){return e.queueMicrotask}`) or not. */
const GETTER =
  /(__wbg_queueMicrotask_[0-9a-f]+\s*:\s*function\s*\(\s*(\w+)\s*\)\s*\{)[^{}]*?\breturn\s+(?:\2\.queueMicrotask|\w+)\s*;?\s*\}/g;

/** `glue` with the queue's getter answering `undefined`; throws unless exactly one was found. */
export function patchGlue(glue) {
  const getters = [...glue.matchAll(GETTER)].filter(([whole, , arg]) =>
    new RegExp(`\\b${arg}\\.queueMicrotask\\b`).test(whole),
  );
  if (getters.length !== 1) {
    throw new Error(
      `expected one queueMicrotask getter in the wasm-bindgen glue, found ${getters.length}: ` +
        'the glue changed shape (a wasm-bindgen or js-sys update?); update scripts/lib/glue.mjs',
    );
  }
  const [[whole, head]] = getters;
  return glue.replace(whole, () => `${head}return undefined}`);
}

/** Whether this file is the script node was asked to run (through a symlink or not). */
function isMain() {
  try {
    return realpathSync(process.argv[1] ?? '') === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  const path = process.argv[2];
  if (!path) {
    console.error('usage: node scripts/lib/glue.mjs <build/index.js>');
    process.exit(2);
  }
  try {
    writeFileSync(path, patchGlue(readFileSync(path, 'utf8')));
  } catch (e) {
    console.error(`[build] ${e.message}`);
    process.exit(1);
  }
}
