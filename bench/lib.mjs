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
