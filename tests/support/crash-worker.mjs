// crash-worker.mjs — the built Worker in workerd, configured from wrangler.toml the way
// `wrangler dev` configures it (Durable Objects on SQLite, D1, vars, a persistence directory),
// that a test can SIGKILL and start again on the same state in a fraction of a second.
//
// workerd is the process that runs the Worker and its Durable Objects and holds their SQLite
// files: SIGKILL takes it down with no chance to flush or clean up, as a crash or an eviction
// would. The test process keeps the Miniflare instance that launched it and spawns a new workerd
// on the same port and directory (`setOptions` with the same options). Under `wrangler dev` the
// same kill costs a whole restart of wrangler (2.3-4.4 s on a busy 2-core machine, against
// 0.2-0.5 s here), which is what bounded the number of kills a test could afford.
//
//   const w = new CrashableWorker({ buildDir, persistTo, port, vars });
//   await w.start();          // first start; `w.base` is the URL
//   const killedAt = await w.kill();   // SIGKILL of workerd; waits until it is gone and the port free
//   await w.start();          // the same state, a new process
//   await w.dispose();
import { Miniflare } from 'miniflare';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseToml } from 'smol-toml';
import { freePort } from './net.mjs';

/** Live (non-zombie) processes, from /proc: `{ pid, ppid, comm }`. */
export function processes() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z') out.push({ pid: Number(name), ppid: Number(fields[1]), comm });
  }
  return out;
}

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Whether nothing listens on 127.0.0.1:`port` (we can bind it). */
export function portFree(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * Miniflare options equivalent to what `wrangler dev` derives from `wranglerToml` (bindings
 * of Durable Objects, which of them are on SQLite, D1 databases, the compatibility date), for
 * the Worker built into `buildDir`.
 */
export function optionsFromWranglerToml(wranglerToml, { buildDir, persistTo, port, vars }) {
  const config = parseToml(readFileSync(wranglerToml, 'utf8'));
  const sqlite = new Set((config.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? []));
  const durableObjects = {};
  for (const b of config.durable_objects?.bindings ?? []) {
    durableObjects[b.name] = { className: b.class_name, useSQLite: sqlite.has(b.class_name) };
  }
  const d1Databases = {};
  for (const d of config.d1_databases ?? []) d1Databases[d.binding] = d.database_id;
  return {
    scriptPath: join(buildDir, 'index.js'),
    modules: true,
    modulesRoot: buildDir,
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags ?? [],
    durableObjects,
    d1Databases,
    bindings: { ...(config.vars ?? {}), ...vars },
    defaultPersistRoot: persistTo,
    host: '127.0.0.1',
    port,
  };
}

export class CrashableWorker {
  /** `options`: Miniflare options (see `optionsFromWranglerToml`); `port` must be fixed. */
  constructor(options, { log = () => {} } = {}) {
    this.options = {
      ...options,
      // workerd's own output, kept for post-mortems; lines that look like errors are collected.
      handleRuntimeStdio: (stdout, stderr) => {
        const n = this.starts;
        for (const stream of [stdout, stderr]) {
          let partial = '';
          stream.on('data', (d) => {
            this.output = (this.output + d).slice(-200_000);
            const lines = (partial + d).split('\n');
            partial = lines.pop();
            for (const line of lines) {
              if (/error|uncaught|panick/i.test(line)) this.errors.push(`start #${n}: ${line.trim()}`);
            }
          });
          stream.on('error', () => {});
        }
      },
    };
    this.log = log;
    this.mf = null;
    this.pid = null;
    this.output = '';
    this.errors = [];
    this.starts = 0;
    this.kills = 0;
    this.killedProcesses = 0;
    this.crashed = null;
    this.killing = false;
  }

  get port() {
    return this.options.port;
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts workerd (the first time, or again after `kill`) and waits until it answers. */
  async start() {
    const began = Date.now();
    this.starts += 1;
    this.output += `\n===== workerd start #${this.starts} =====\n`;
    if (!this.mf) {
      this.mf = new Miniflare(this.options);
      await this.mf.ready;
    } else {
      try {
        await this.mf.setOptions(this.options);
      } catch (e) {
        // Someone took the port while workerd was down: move on (callers read `base` again).
        if (!/ADDRESS_IN_USE|Address already in use/.test(`${e.code} ${e.message}`)) throw e;
        this.options.port = await freePort();
        this.log(`port taken while down: moving to ${this.options.port}`);
        await this.mf.setOptions(this.options);
      }
    }
    const mine = processes().filter((p) => p.ppid === process.pid && p.comm === 'workerd');
    if (mine.length !== 1) throw new Error(`expected one workerd child of the test process, found ${JSON.stringify(mine)}`);
    this.pid = mine[0].pid;
    this.killing = false;
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const r = await fetch(`${this.base}/api/health`);
        if (r.ok) break;
      } catch {}
      if (Date.now() > deadline) throw new Error(`workerd did not answer /api/health:\n${this.tail()}`);
      await sleep(20);
    }
    this.readyAt = Date.now();
    return this.readyAt - began;
  }

  /** The D1 database of `binding` (only while workerd runs). */
  db(binding = 'DB') {
    return this.mf.getD1Database(binding);
  }

  /** SIGKILLs workerd, then waits until it is gone and its port is free. Returns the kill time. */
  async kill() {
    const pid = this.pid;
    this.killing = true;
    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    this.kills += 1;
    this.killedProcesses += 1;
    const deadline = Date.now() + 10_000;
    while (alive(pid)) {
      if (Date.now() > deadline) throw new Error(`workerd ${pid} survived SIGKILL`);
      await sleep(10);
    }
    while (!(await portFree(this.port))) {
      if (Date.now() > deadline) throw new Error(`port ${this.port} still taken after workerd ${pid} died`);
      await sleep(20);
    }
    return killedAt;
  }

  /** Throws if workerd died without `kill`. */
  check() {
    if (!this.killing && this.pid && !alive(this.pid)) this.crashed = `workerd ${this.pid} (start #${this.starts}) exited by itself`;
    if (this.crashed) throw new Error(`${this.crashed}\n${this.tail()}`);
  }

  tail(n = 6000) {
    return this.output.slice(-n);
  }

  async dispose() {
    if (!this.mf) return;
    const mf = this.mf;
    this.mf = null;
    this.killing = true;
    await mf.dispose().catch(() => {});
  }
}
