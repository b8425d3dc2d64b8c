// The thread's stored conversation as the AI SDK's UI messages, for `useChat`'s initial
// `messages`: the SDK keeps no history of its own, and the thread's is the truth.
import type { DynamicToolUIPart, UIMessage } from 'ai';
import type { EdgentClient, Message, ToolCallRecord } from '@edgent/client';

/**
 * The thread's stored conversation as UI messages, so a reload shows the history. The SDK keeps
 * no history of its own; the thread's is the truth. A pending answer is left out: `resume: true`
 * replays it from its start.
 */
export async function loadHistory(client: EdgentClient, threadId: string): Promise<UIMessage[]> {
  const [page, calls] = await Promise.all([
    client.getMessages(threadId, { limit: 200, order: 'desc' }),
    client.getToolCalls(threadId, { limit: 200 }),
  ]);
  return toUIMessages([...page.messages].reverse(), calls.tool_calls);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function toUIMessages(messages: Message[], calls: ToolCallRecord[]): UIMessage[] {
  const callById = new Map(calls.map((c) => [c.id, c]));
  const results = new Map<string, Message>();
  for (const m of messages) if (m.role === 'tool' && m.tool_call_id) results.set(m.tool_call_id, m);
  const out: UIMessage[] = [];
  for (const m of messages) {
    if (m.depth !== 0) continue; // sub-prompts belong to the socket's view, as in the chat stream
    if (m.role === 'user') {
      out.push({ id: m.id, role: 'user', parts: [{ type: 'text', text: m.content }] });
      continue;
    }
    // Failed answers (a regenerated one, a failed model call) are not part of the conversation.
    if (m.role !== 'assistant' || m.status !== 'completed') continue;
    // One answer (model calls with tools between them) is one UI message of several steps.
    const last = out.at(-1);
    const message: UIMessage = last?.role === 'assistant' ? last : { id: m.id, role: 'assistant', parts: [] };
    if (message !== last) out.push(message);
    message.parts.push({ type: 'step-start' });
    if (m.content) message.parts.push({ type: 'text', text: m.content, state: 'done' });
    for (const call of m.tool_calls ?? []) {
      const base = { type: 'dynamic-tool' as const, toolName: call.name, toolCallId: call.id, input: parseJson(call.arguments) };
      const record = callById.get(call.id);
      const result = results.get(call.id);
      let part: DynamicToolUIPart;
      if (result && record?.status === 'error') part = { ...base, state: 'output-error', errorText: result.content };
      else if (result) part = { ...base, state: 'output-available', output: parseJson(result.content) };
      else if (record?.status === 'waiting' && (record.waiting_for as { approval?: unknown })?.approval === 'pending')
        part = { ...base, state: 'approval-requested', approval: { id: call.id } };
      else part = { ...base, state: 'input-available' };
      message.parts.push(part);
    }
  }
  return out;
}

