#!/usr/bin/env node
// The cost of an MCP tool call against a local one, in Miniflare (real workerd + Durable
// Object SQLite), with a real MCP server built with the official SDK on loopback
// (tests/support/mcp-server.mjs) and the scripted model:
//   - for each turn the model asks for one tool, either the MCP server's `kb__search` or the
//     local `get_current_time`, alternating, then answers;
//   - the whole turn (message posted → idle) is timed for each kind, and the difference of the
//     medians is the round-trip overhead of going over MCP (HTTP to the server, JSON-RPC, its
//     SSE answer decoded). The call's own frames cannot time it: `running`, `success` and the
//     result go out in one flush.
// The first MCP turn (initialize, tools/list) is measured apart.
// Usage: npm run build && node bench/mcp.mjs [turns=100]
import { median, summary } from './lib.mjs';
import { startWorker } from '../tests/support/worker.mjs';
import { startModelServer } from '../tests/support/model-server.mjs';
import { startMcpServer } from '../tests/support/mcp-server.mjs';

const TURNS = Number(process.argv[2] ?? 100);

const model = await startModelServer({ fallback: { text: 'ok' } });
const mcp = await startMcpServer();
const worker = await startWorker({ modelUrl: `${model.url}/v1` });
const client = worker.client;
await client.request('PUT', '/api/prompts/bench_mcp', {
  body: { model: 'default', tools: ['get_current_time'], mcp_servers: [{ name: 'kb', url: mcp.url }] },
});
await client.request('PUT', '/api/agents/bench_mcp', { body: { side_a: { prompt: 'bench_mcp' }, max_turns: 1000 } });

const id = await client.createThread('bench_mcp');
const sock = await client.connect(id);
await sock.waitFor((f) => f.type === 'status');

async function turn(tool) {
  const from = sock.frames.length;
  const callId = `c${from}`;
  const args = tool === 'kb__search' ? { query: 'refunds' } : {};
  model.push({ toolCalls: [{ id: callId, name: tool, arguments: args }] }, { text: 'done' });
  const start = performance.now();
  await client.request('POST', `/api/threads/${id}/messages`, { body: { content: `call ${tool}` } });
  await sock.waitFor((f) => f.type === 'message' && f.message.tool_call_id === callId, { from, timeout: 10000 });
  await sock.waitFor((f) => f.type === 'status' && f.state === 'idle', { from, timeout: 10000 });
  return { turnMs: performance.now() - start };
}

const first = await turn('kb__search');
console.log(`first MCP turn (initialize + tools/list + call): ${first.turnMs.toFixed(1)} ms`);
const turns = { mcp: [], local: [] };
for (let i = 0; i < TURNS; i++) {
  const kind = i % 2 === 0 ? 'mcp' : 'local';
  const r = await turn(kind === 'mcp' ? 'kb__search' : 'get_current_time');
  turns[kind].push(r.turnMs);
  // The frames of finished turns are not needed again.
  if (sock.frames.length > 2000) sock.frames.length = 0;
}
summary('turn with an MCP call', turns.mcp);
summary('turn with a local call', turns.local);
console.log(`MCP round-trip overhead per call (difference of the median turns): ${(median(turns.mcp) - median(turns.local)).toFixed(2)} ms`);
console.log(`MCP server requests: ${mcp.log.requests.length} for ${turns.mcp.length + 1} calls (initialize ${mcp.log.initializes}×)`);
sock.close();
await worker.dispose();
await mcp.close();
await model.close();
