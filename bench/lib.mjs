// Shared by the benches: percentile summaries, the bench agent, the harness's model server.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { seed } from '../scripts/lib/d1.mjs';
import { freePort } from '../tests/support/net.mjs';

const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/** The median of `xs` as `summary` prints it: the upper middle value of an even count. */
export const median = (xs) => q([...xs].sort((a, b) => a - b), 0.5);

/** Prints n, median, p95, mean, min and max of `xs` (milliseconds). */
export function summary(label, xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `${label}: n=${xs.length} median=${q(s, 0.5).toFixed(2)} ms p95=${q(s, 0.95).toFixed(2)} ms ` +
      `mean=${mean.toFixed(2)} ms min=${s[0].toFixed(2)} ms max=${s.at(-1).toFixed(2)} ms`,
  );
}

/** The pid of the workerd process listening on `url`'s port (`ss -ltnp`), or `undefined`. */
export function workerdPid(url) {
  const port = Number(new URL(url).port);
  const out = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  for (const line of out.split('\n')) {
    if (!line.includes('"workerd"') || Number(line.split(/\s+/)[3]?.split(':').at(-1)) !== port) continue;
    return Number(/pid=(\d+)/.exec(line)?.[1]);
  }
  return undefined;
}

/** CPU time (user + system) a process has used so far, in ms (clock ticks of 10 ms). */
export function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The example support prompt as agent `bench_support`, without the default 25-turn limit. */
export function benchAgentRow() {
  return {
    id: 'bench_support', kind: 'ai_human', description: '', max_turns: 100000, expose_as_tool: 0,
    tool_description: '', hooks: '[]', side_a: JSON.stringify({ prompt: 'support' }), side_b: null,
  };
}

/** Seeds `bench_support` (and any extra rows) into the Worker's D1. */
export async function seedBench(db, { prompts = [], agents = [] } = {}) {
  await seed(db, { models: [], prompts, agents: [benchAgentRow(), ...agents] });
}

/**
 * The side-by-side harness's scripted OpenAI-compatible server (`scripted_openai.py` in
 * `harness`, the one both frameworks are measured against), serving `script` in order (its last
 * step repeats), written to `file`. Started through the harness's listen-backlog wrapper when
 * present (20 conversations starting at once overflow socketserver's default of 5).
 */
export async function startScripted(harness, file, script) {
  const scripted = join(harness, 'scripted_openai.py');
  const backlog = join(harness, 'sidebyside', 'backlog_scripted.py');
  writeFileSync(file, JSON.stringify(script));
  const port = await freePort();
  const argv = existsSync(backlog) ? [backlog, scripted] : [scripted];
  const proc = spawn('python3', [...argv, String(port), file], { stdio: 'ignore', detached: true });
  for (let i = 0; ; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/`);
      break;
    } catch {
      if (i > 200) throw new Error('the scripted model server did not start');
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  return {
    url: `http://127.0.0.1:${port}/v1`,
    stop: () => {
      try {
        process.kill(-proc.pid, 'SIGKILL');
      } catch {}
    },
  };
}

/** The side-by-side harness (../shared/bench-peer, or EDGENT_BENCH_PEER). */
export const HARNESS_DIR = process.env.EDGENT_BENCH_PEER ?? join(new URL('..', import.meta.url).pathname, '..', 'shared', 'bench-peer');
/** The reply the harness scripts for a text turn (14 words: 16 streamed pieces). */
export const HARNESS_TEXT = 'Sure, here is a short scripted reply from the model for this benchmark turn.';

/**
 * The model server of a harness-shaped run (`--harness`): the harness's `scripted_openai.py`
 * answering every request with HARNESS_TEXT when the harness is on the machine, else the
 * project's scripted server with the same reply. `url` ends in `/v1`.
 */
export async function harnessModel(dir) {
  if (existsSync(join(HARNESS_DIR, 'scripted_openai.py'))) {
    const server = await startScripted(HARNESS_DIR, join(dir, 'harness-script.json'), [{ text: HARNESS_TEXT }]);
    return { name: 'scripted_openai.py', url: server.url, close: async () => server.stop() };
  }
  const { startModelServer } = await import('../tests/support/model-server.mjs');
  const m = await startModelServer({ fallback: { text: HARNESS_TEXT } });
  return { name: 'tests/support/model-server.mjs', url: `${m.url}/v1`, close: () => m.close() };
}

/**
 * `turns` turns on each of `turnFns` (a side's `turn` functions), one after another per thread,
 * the threads at once. Returns the turns per second and workerd `pid`'s CPU per turn.
 */
export async function timedRound(pid, turnFns, turns, label) {
  const [c0, t0] = [cpuMs(pid), performance.now()];
  await Promise.all(turnFns.map(async (turn) => {
    for (let i = 0; i < turns; i++) await turn(`${label} ${i}`);
  }));
  const [wall, used] = [performance.now() - t0, cpuMs(pid) - c0];
  const count = turnFns.length * turns;
  return { perSecond: (count * 1000) / wall, cpu: used / count };
}

/**
 * One round of `threads` x `turns` at once the way the harness runs it: fresh threads (a side's
 * `open()`), two untimed warm-up turns each, then `turns` on every thread at once, timed.
 */
export async function freshRound(side, threads, turns, label) {
  const opened = [];
  for (let i = 0; i < threads; i++) opened.push(await side.open());
  await timedRound(side.pid, opened, 2, `${label} warm-up`);
  return timedRound(side.pid, opened, turns, label);
}
