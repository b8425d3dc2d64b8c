// Shared by the benches: percentile summaries and the bench agent.
import { seed } from '../scripts/lib/d1.mjs';

const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/** Prints n, median, p95, mean, min and max of `xs` (milliseconds). */
export function summary(label, xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `${label}: n=${xs.length} median=${q(s, 0.5).toFixed(2)} ms p95=${q(s, 0.95).toFixed(2)} ms ` +
      `mean=${mean.toFixed(2)} ms min=${s[0].toFixed(2)} ms max=${s.at(-1).toFixed(2)} ms`,
  );
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
