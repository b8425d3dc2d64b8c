// The least a Durable Object can do for a chat turn, as a floor to measure frameworks against
// (bench/floor.mjs): a socket message is stored in the object's SQLite, the whole history goes
// to the model as one streamed chat completion, each streamed text piece goes back as a frame,
// a tool call (only `get_current_time`) is answered in place and the model called again, the
// reply is stored, and an `idle` frame ends the turn. No configuration, validation, request
// log, retries, recovery, hooks or durability of tool calls: everything a framework adds on top
// costs more than this.
import { DurableObject } from 'cloudflare:workers';

export class Floor extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      'CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)',
    );
  }

  async fetch(request) {
    if (request.headers.get('upgrade') !== 'websocket') return new Response('floor');
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server);
    return new Response(null, { status: 101, webSocket: client });
  }

  async webSocketMessage(ws, data) {
    try {
      await this.turn(ws, data);
    } catch (e) {
      ws.send(JSON.stringify({ type: 'error', message: String(e) }));
    }
  }

  async turn(ws, data) {
    const sql = this.ctx.storage.sql;
    const store = (m) => sql.exec('INSERT INTO messages (body) VALUES (?)', JSON.stringify(m));
    store({ role: 'user', content: JSON.parse(data).content });
    for (let step = 0; step < 4; step++) {
      const messages = sql.exec('SELECT body FROM messages ORDER BY seq').toArray().map((r) => JSON.parse(r.body));
      const reply = await this.complete(messages, (delta) => ws.send(JSON.stringify({ type: 'chunk', delta })));
      store(reply);
      if (!reply.tool_calls) break;
      for (const call of reply.tool_calls) {
        store({ role: 'tool', tool_call_id: call.id, content: new Date().toISOString() });
      }
    }
    ws.send('{"type":"idle"}');
  }

  /** One streamed chat completion; returns the assistant message. */
  async complete(messages, onText) {
    const res = await fetch(`${this.env.MODEL_URL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer floor' },
      body: JSON.stringify({
        model: 'floor',
        stream: true,
        messages,
        tools: [{ type: 'function', function: { name: 'get_current_time', parameters: { type: 'object', properties: {} } } }],
      }),
    });
    let text = '';
    const calls = [];
    let buffered = '';
    const decoder = new TextDecoder();
    for await (const bytes of res.body) {
      buffered += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const event = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const delta = JSON.parse(event.slice(6)).choices?.[0]?.delta ?? {};
        if (delta.content) {
          text += delta.content;
          onText(delta.content);
        }
        for (const c of delta.tool_calls ?? []) {
          const call = (calls[c.index] ??= { id: c.id, type: 'function', function: { name: '', arguments: '' } });
          call.function.name += c.function?.name ?? '';
          call.function.arguments += c.function?.arguments ?? '';
        }
      }
    }
    return calls.length ? { role: 'assistant', content: null, tool_calls: calls } : { role: 'assistant', content: text };
  }
}

export default {
  fetch(request, env) {
    const name = new URL(request.url).pathname;
    return env.FLOOR.get(env.FLOOR.idFromName(name)).fetch(request);
  },
};
