// What the chat needs beyond the socket's snapshot: the thread's summary (its agent and last
// error), whether that agent has two sides, and the URLs of webhooks calls wait for (only in
// the calls' records, and only for the server key: frames never carry them).
import { useEffect, useState } from 'react';
import type { EdgentClient, ThreadSnapshot, ThreadSummary } from '@edgent/client';
import { useLoad } from '../api';
import { isWaitingForWebhook } from './ToolCallCard';

/** The summary, read again whenever the thread's state or turn changes. */
export function useSummary(client: EdgentClient, threadId: string, status: ThreadSnapshot['status']): ThreadSummary | undefined {
  return useLoad(() => client.getThread(threadId), [client, threadId, status?.state, status?.turn]).data;
}

/** Whether the agent is `dual_ai` (server key: the configuration is not a token's to read). */
export function useDualAi(client: EdgentClient, isServer: boolean, agentId: string | undefined): boolean {
  const kind = useLoad(
    async () => (isServer && agentId ? (await client.getConfig('agents', agentId)).kind : undefined),
    [client, isServer, agentId],
  );
  return kind.data === 'dual_ai';
}

/** Which webhook a call waits for now: a workflow may wait for several, one after another. */
function webhookKey(callId: string, waitingFor: unknown): string | null {
  const name = (waitingFor as { webhook?: unknown } | null | undefined)?.webhook;
  return typeof name === 'string' ? `${callId}/${name}` : null;
}

/**
 * The URL of the webhook each waiting call waits for now, by call id; fetched from the execution
 * history whenever a call starts waiting for a webhook not seen before ('' until it is known).
 */
export function useWebhookUrls(
  client: EdgentClient,
  threadId: string,
  isServer: boolean,
  toolCalls: ThreadSnapshot['toolCalls'],
): Record<string, string> {
  // By `<call id>/<webhook name>`, so a second wait of the same call is a new URL, not the first.
  const [urls, setUrls] = useState<Record<string, string>>({});
  const waiting = isServer
    ? Object.values(toolCalls).flatMap((c) => {
        const key = isWaitingForWebhook(c) ? webhookKey(c.tool_call_id, c.waiting_for) : null;
        return key ? [{ id: c.tool_call_id, key }] : [];
      })
    : [];
  const missing = waiting
    .filter((w) => !(w.key in urls))
    .map((w) => w.key)
    .sort()
    .join(' ');
  useEffect(() => {
    if (!missing) return;
    let live = true;
    (async () => {
      let page = await client.getToolCalls(threadId, { limit: 200 });
      if (page.has_more) page = await client.getToolCalls(threadId, { limit: 200, offset: Math.max(0, page.total - 200) });
      const found: Record<string, string> = {};
      for (const call of page.tool_calls) {
        const key = webhookKey(call.id, call.waiting_for);
        const url = (call.waiting_for as { url?: unknown } | null | undefined)?.url;
        if (key && typeof url === 'string') found[key] = url;
      }
      // Waits still without a URL are remembered as such, so they are not asked for again.
      for (const key of missing.split(' ')) found[key] ??= '';
      if (live) setUrls((u) => ({ ...u, ...found }));
    })().catch(() => {
      // The URL is a convenience: the call's status still shows.
    });
    return () => {
      live = false;
    };
  }, [client, threadId, missing]);
  return Object.fromEntries(waiting.map((w) => [w.id, urls[w.key] ?? '']));
}
