#!/usr/bin/env node
// Where a turn's CPU goes, measured from outside the isolate: the workerd process's CPU per
// turn (/proc, user + system), edgent beside the floor (bench/floor-worker.mjs: the least a
// Durable Object can do for the same turn), for a text turn and for a reply streamed in CHUNKS
// pieces 1 ms apart. With `strace` on the machine, also the system calls per turn that show
// storage and frames: `fsync` (one per SQLite commit), `pwrite64` (WAL pages written), `writev`
// (WebSocket frames). With `--perf` (and `perf` on the machine), the CPU split by where it runs:
// the kernel, JIT code (wasm and JS), V8's compiler (wasm tier-up), SQLite, V8 and workerd.
//
// Why not the V8 profile (bench/profile.mjs): its samples land on whatever JavaScript or wasm
// frame is on the stack while native code runs or blocks, so its "busy" time is wall time in
// the isolate, several times the CPU (a 100-piece reply: 99 ms "busy", 19 ms of CPU). It shows
// which functions are on the path; this shows what the turn costs.
//
// Usage: npm run build && node bench/cpu.mjs [turns] [--perf]   (CHUNKS=100 by default)
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startModelServer } from '../tests/support/model-server.mjs';
import { cpuMs } from './lib.mjs';
import { startEdgent, startFloor } from './sides.mjs';

const TURNS = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 200);
const PERF = process.argv.includes('--perf');
const CHUNKS = Number(process.env.CHUNKS ?? 100);
const WARMUP = 20;
const dir = mkdtempSync(join(tmpdir(), 'edgent-cpu-'));
const has = (tool) => {
  try {
    execFileSync('which', [tool], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

/** Runs `fn` with `tool` attached to `pid` (stopped with SIGINT after), if it is installed. */
async function attached(tool, args, fn) {
  if (!has(tool)) return fn();
  const proc = spawn(tool, args, { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500)); // attached before the turns start
  try {
    return await fn();
  } finally {
    proc.kill('SIGINT');
    await new Promise((r) => proc.on('exit', r));
  }
}

/** `strace -c` output: calls per turn of the storage and socket calls. */
function syscalls(file) {
  if (!existsSync(file)) return '';
  const calls = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 5 && /^\d/.test(f[0])) calls[f.at(-1)] = Number(f[3]);
  }
  const per = (name) => ((calls[name] ?? 0) / TURNS).toFixed(1);
  return `; per turn: fsync ${per('fsync')}, pwrite64 ${per('pwrite64')}, writev ${per('writev')}`;
}

/** `perf report` output, folded into where the CPU ran (percent of the process's samples). */
function perfSplit(file) {
  const out = execFileSync('perf', ['report', '-i', file, '--no-children', '--sort', 'dso,sym', '-g', 'none'], { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] });
  const kinds = [
    ['V8 compiler (tier-up)', /v8::internal::(compiler|turboshaft|maglev|wasm::)|Liftoff|WasmFullDecoder/],
    ['SQLite', /sqlite|^wal[A-Z]|vdbe|btree|pager/i],
    ['zlib (socket compression)', /deflate|longest_match|build_tree|compress_block|send_bits|pqdownheap|fill_window/],
    ['GC', /Scaveng|MarkCompact|Heap::|Sweeper|ConcurrentMarking|GlobalHandles|TracedReference|cppgc|HeapTracer/],
    ['V8 builtins', /Builtins_/],
    ['allocator, memcpy', /tcmalloc|TCMalloc|memmove|memcpy|memset|malloc|free/],
    ['kj (I/O, promises)', /kj::|capnp/],
    ['workerd API', /workerd::/],
    ['V8 other', /v8::/],
  ];
  const split = new Map();
  for (const line of out.split('\n')) {
    const m = /^\s+([\d.]+)%\s+(\S+(?: tid \d+)?)\s+\[.\]\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, pct, dso, sym] = m;
    const kind = dso.startsWith('[kernel') ? 'kernel' : dso.startsWith('[JIT') ? 'JIT code (wasm, JS)' : (kinds.find(([, re]) => re.test(sym))?.[0] ?? 'other');
    split.set(kind, (split.get(kind) ?? 0) + Number(pct));
  }
  return [...split].sort((a, b) => b[1] - a[1]);
}

const replies = [['text turn', { text: 'ok, noted.' }], [`${CHUNKS}-piece reply`, { text: 'word '.repeat(CHUNKS), chunkSize: 5, chunkDelayMs: 1 }]];
try {
  for (const [kind, reply] of replies) {
    const model = await startModelServer({ fallback: reply });
    const cpu = {};
    for (const [name, start] of [['floor', startFloor], ['edgent', startEdgent]]) {
      const side = await start(`${model.url}/v1`);
      try {
        for (let i = 0; i < WARMUP; i++) await side.turn(`warm-up ${i}`);
        const base = join(dir, `${name}-${kind.replace(/\W/g, '')}`);
        // One pass under strace (counts only), another for the CPU (and perf): strace slows
        // every system call, so its pass is not the one timed.
        await attached('strace', ['-c', '-f', '-p', String(side.pid), '-o', `${base}.strace`], async () => {
          for (let i = 0; i < TURNS; i++) await side.turn(`counted ${i}`);
        });
        const run = async () => {
          const c0 = cpuMs(side.pid);
          for (let i = 0; i < TURNS; i++) await side.turn(`timed ${i}: what time is it?`);
          return (cpuMs(side.pid) - c0) / TURNS;
        };
        cpu[name] = PERF && has('perf') ? await attached('perf', ['record', '-F', '2000', '-p', String(side.pid), '-o', `${base}.perf`], run) : await run();
        console.log(`${kind.padEnd(16)} ${name.padEnd(7)}: workerd CPU ${cpu[name].toFixed(2)} ms per turn${syscalls(`${base}.strace`)}`);
        if (PERF && existsSync(`${base}.perf`)) {
          for (const [k, pct] of perfSplit(`${base}.perf`)) {
            if (pct >= 1) console.log(`    ${(cpu[name] * pct / 100).toFixed(3).padStart(7)} ms ${pct.toFixed(1).padStart(5)}%  ${k}`);
          }
        }
      } finally {
        await side.dispose();
      }
    }
    console.log(`${kind.padEnd(16)} edgent adds ${(cpu.edgent - cpu.floor).toFixed(2)} ms per turn (x${(cpu.edgent / cpu.floor).toFixed(2)} the floor's CPU)`);
    await model.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
