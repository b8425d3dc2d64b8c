#!/usr/bin/env node
// What the Worker's wasm is made of: the largest functions and the crates they come from, by
// code size. Needs a build that kept the function names (`EDGENT_KEEP_NAMES=1 npm run build`).
// Usage: node bench/wasm-size.mjs [build/index_bg.wasm] [top]
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? new URL('../build/index_bg.wasm', import.meta.url).pathname;
const TOP = Number(process.argv[3] ?? 25);
const buf = readFileSync(file);
let pos = 8;
const u32 = () => {
  let result = 0, shift = 0, byte;
  do { byte = buf[pos++]; result |= (byte & 0x7f) << shift; shift += 7; } while (byte & 0x80);
  return result >>> 0;
};
const sections = [];
while (pos < buf.length) {
  const id = buf[pos++];
  const size = u32();
  sections.push({ id, start: pos, size });
  pos += size;
}
let imports = 0;
const sizes = [];
const names = new Map();
for (const s of sections) {
  pos = s.start;
  if (s.id === 2) {
    // count imported functions: their indices come first
    const n = u32();
    for (let i = 0; i < n; i++) {
      const ml = u32(); pos += ml; const fl = u32(); pos += fl;
      const kind = buf[pos++];
      if (kind === 0) { u32(); imports++; }
      else if (kind === 1) { pos++; const f = buf[pos++]; u32(); if (f & 1) u32(); }
      else if (kind === 2) { const f = buf[pos++]; u32(); if (f & 1) u32(); }
      else if (kind === 3) { pos += 2; }
      else if (kind === 4) { pos++; u32(); }
    }
  } else if (s.id === 10) {
    const n = u32();
    for (let i = 0; i < n; i++) { const size = u32(); sizes.push(size); pos += size; }
  } else if (s.id === 0) {
    const nl = u32();
    const name = buf.toString('utf8', pos, pos + nl); pos += nl;
    if (name !== 'name') continue;
    const end = s.start + s.size;
    while (pos < end) {
      const sub = buf[pos++]; const len = u32(); const subEnd = pos + len;
      if (sub === 1) {
        const n = u32();
        for (let i = 0; i < n; i++) { const idx = u32(); const l = u32(); names.set(idx, buf.toString('utf8', pos, pos + l)); pos += l; }
      }
      pos = subEnd;
    }
  }
}
const total = sizes.reduce((a, b) => a + b, 0);
const fns = sizes.map((size, i) => ({ size, name: names.get(i + imports) ?? `func[${i + imports}]` }));
const crateOf = (name) => {
  const m = name.match(/^<?(?:&(?:mut )?)?([a-z_][a-z0-9_]*)(?:\[[0-9a-f]+\])?::/);
  return m ? m[1] : name.startsWith('<') ? (name.match(/ as ([a-z_][a-z0-9_]*)::/)?.[1] ?? 'other') : 'other';
};
const byCrate = new Map();
for (const f of fns) byCrate.set(crateOf(f.name), (byCrate.get(crateOf(f.name)) ?? 0) + f.size);
console.log(`${file}: ${buf.length} B, code ${total} B in ${sizes.length} functions`);
console.log('\nby crate (code bytes):');
for (const [c, s] of [...byCrate.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
  console.log(`${String(s).padStart(9)}  ${(100 * s / total).toFixed(1).padStart(5)}%  ${c}`);
}
// The same code by what kind of function it is, whatever crate the name kept: the split the
// size records quote (docs/decisions/2026-11-25-worker-size-cuts.md). First match wins.
const KINDS = [
  ['drop glue', /drop_in_place/],
  ['serde, deserializing', /serde_core::de::|Visitor|serde_json::de::|serde::private::de/],
  ['serde, serializing', /Serialize|serde_json::ser::/],
  ['schemars', /JsonSchema|^schemars/],
  ['formatting', /core::fmt|fmt::/],
  ['handlers inlined into future_to_promise', /^js_sys::futures::future_to_promise/],
  ['async state machines and closures', /\{\{closure\}\}/],
  ['core, alloc, std', /^<?(?:&(?:mut )?)?(?:core|alloc|std|hashbrown|dlmalloc)\b/],
  ['bindings (js_sys, wasm_bindgen, web_sys, worker)', /^<?(?:&(?:mut )?)?(?:js_sys|wasm_bindgen|web_sys|worker)\b/],
  ['edgent, plain functions', /edgent/],
];
const byKind = new Map();
for (const f of fns) {
  const kind = KINDS.find(([, re]) => re.test(f.name))?.[0] ?? 'other';
  byKind.set(kind, (byKind.get(kind) ?? 0) + f.size);
}
console.log('\nby kind (code bytes):');
for (const [k, s] of [...byKind.entries()].sort((a, b) => b[1] - a[1])) {
  console.log(`${String(s).padStart(9)}  ${(100 * s / total).toFixed(1).padStart(5)}%  ${k}`);
}
console.log(`\nlargest ${TOP} functions:`);
for (const f of fns.sort((a, b) => b.size - a.size).slice(0, TOP)) {
  console.log(`${String(f.size).padStart(9)}  ${f.name.slice(0, 150)}`);
}
