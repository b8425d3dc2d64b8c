// A real MCP server for the tests, built with the official @modelcontextprotocol/sdk
// (McpServer over its Streamable HTTP transport, stateful: a session per client), on
// 127.0.0.1. Its tools: `search` (text), `chart` (an image), `fail` (an error result),
// `delete_doc` (text; the prompt asks approval for it), `enable_more` (adds the tool `more`
// and says so with notifications/tools/list_changed in its answer's stream).
// `restart()` drops every session, as a redeploy of the server would: the next request with
// an old session id gets 404, as the transport's rules say.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

// A 1×1 PNG.
export const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

function buildServer(log) {
  const server = new McpServer({ name: 'kb-test', version: '1.0.0' });
  server.registerTool('search', {
    description: 'Searches the knowledge base for articles.',
    inputSchema: { query: z.string().describe('What to look for.') },
  }, async ({ query }) => {
    log.calls.push({ tool: 'search', query });
    return { content: [{ type: 'text', text: `3 articles about ${query}` }] };
  });
  server.registerTool('chart', { description: 'Draws a chart.', inputSchema: {} }, async () => {
    log.calls.push({ tool: 'chart' });
    return { content: [{ type: 'text', text: 'the chart' }, { type: 'image', data: PIXEL, mimeType: 'image/png' }] };
  });
  server.registerTool('fail', { description: 'Always fails.', inputSchema: {} }, async () => {
    log.calls.push({ tool: 'fail' });
    return { content: [{ type: 'text', text: 'the index is offline' }], isError: true };
  });
  server.registerTool('delete_doc', {
    description: 'Deletes an article.',
    inputSchema: { id: z.string() },
  }, async ({ id }) => {
    log.calls.push({ tool: 'delete_doc', id });
    return { content: [{ type: 'text', text: `deleted ${id}` }] };
  });
  server.registerTool('enable_more', { description: 'Enables one more tool.', inputSchema: {} }, async (_args, extra) => {
    log.calls.push({ tool: 'enable_more' });
    if (!log.moreEnabled) {
      log.moreEnabled = true;
      for (const s of log.servers) {
        s.registerTool('more', { description: 'The tool enable_more added.', inputSchema: {} }, async () => {
          log.calls.push({ tool: 'more' });
          return { content: [{ type: 'text', text: 'more!' }] };
        });
      }
    }
    // In this request's own stream, so a client that holds no GET stream hears it too.
    await extra.sendNotification({ method: 'notifications/tools/list_changed' });
    return { content: [{ type: 'text', text: 'enabled' }] };
  });
  log.servers.push(server);
  return server;
}

/**
 * Starts the server; requests must carry `Authorization: Bearer <token>` when `token` is set.
 * `failNext(n)` answers the next n tools/call requests with HTTP 503 (a passing outage).
 */
export async function startMcpServer({ token } = {}) {
  const log = { calls: [], initializes: 0, requests: [], servers: [], moreEnabled: false, failing: 0 };
  let transports = new Map();

  async function handle(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = raw ? JSON.parse(raw) : undefined;
    log.requests.push({ method: req.method, session: req.headers['mcp-session-id'], body, auth: req.headers.authorization });
    if (token && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'bad token' }));
      return;
    }
    if (req.method === 'POST' && body?.method === 'tools/call' && log.failing > 0) {
      log.failing -= 1;
      res.writeHead(503, { 'content-type': 'text/plain' }).end('kb-test: briefly down');
      return;
    }
    const session = req.headers['mcp-session-id'];
    let transport = session ? transports.get(session) : undefined;
    if (!transport) {
      if (session) {
        res.writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      if (req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'No session' }, id: null }));
        return;
      }
      log.initializes += 1;
      const sessions = transports;
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      await buildServer(log).connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => { if (!res.headersSent) res.writeHead(500).end(String(e)); });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/mcp`;
  return {
    url,
    log,
    failNext(n) { log.failing = n; },
    restart() {
      for (const t of transports.values()) t.close().catch(() => {});
      transports = new Map();
    },
    async close() {
      for (const t of transports.values()) await t.close().catch(() => {});
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
