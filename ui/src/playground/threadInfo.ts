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

/** Webhook URLs by call id, fetched from the execution history when a call starts waiting for one. */
export function useWebhookUrls(
  client: EdgentClient,
  threadId: string,
  isServer: boolean,
  toolCalls: ThreadSnapshot['toolCalls'],
): Record<string, string> {
  const [urls, setUrls] = useState<Record<string, string>>({});
  const missing = isServer
    ? Object.values(toolCalls)
        .filter((c) => isWaitingForWebhook(c) && !(c.tool_call_id in urls))
        .map((c) => c.tool_call_id)
        .sort()
        .join(' ')
    : '';
  useEffect(() => {
    if (!missing) return;
    let live = true;
    (async () => {
      let page = await client.getToolCalls(threadId, { limit: 200 });
      if (page.has_more) page = await client.getToolCalls(threadId, { limit: 200, offset: Math.max(0, page.total - 200) });
      const found: Record<string, string> = {};
      for (const call of page.tool_calls) {
        const url = (call.waiting_for as { url?: unknown } | null | undefined)?.url;
        if (typeof url === 'string') found[call.id] = url;
      }
      // Calls still without a URL are remembered as such, so they are not asked for again.
      for (const id of missing.split(' ')) found[id] ??= '';
      if (live) setUrls((u) => ({ ...u, ...found }));
    })().catch(() => {
      // The URL is a convenience: the call's status still shows.
    });
    return () => {
      live = false;
    };
  }, [client, threadId, missing]);
  return urls;
}
