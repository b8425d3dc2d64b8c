// The inspector's socket on one thread: its events (for the Events tab), its state (for the
// "live" indicator), and a tick that moves, at most every ~300 ms, when the thread changed (a
// `status`, `tool`, `message` or `schedule` frame), so the summary and the open tab re-read
// their pages.
import { useEffect, useState } from 'react';
import { useThread, type UseThreadResult } from '@edgent/react';
import type { Frame } from '@edgent/client';
import { useApi } from '../api';
import { EDGENT_URL } from '../session';

const DEBOUNCE_MS = 300;
const CHANGES: ReadonlySet<Frame['type']> = new Set(['status', 'tool', 'message', 'schedule']);

export interface LiveThread {
  thread: UseThreadResult;
  /** Moves when the thread changed since the views read it. */
  tick: number;
}

export function useLiveThread(threadId: string): LiveThread {
  const api = useApi();
  const thread = useThread({
    url: EDGENT_URL,
    threadId,
    token: api.session.credential,
    // From the start of the frame log, so the Events tab holds the events logged before this page
    // opened (the log keeps the newest 2,000 frames), not only those that come while it is open.
    after: 0,
    // The inspector reads messages, calls and schedules over HTTP; the store's own load is kept
    // to one message.
    pageSize: 1,
    loadToolCalls: false,
    loadSchedules: false,
  });
  const [tick, setTick] = useState(0);
  const connection = thread.store?.connection;

  useEffect(() => {
    if (!connection) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // The first socket replays the log up to `hello.seq`: what the first pages already show.
    let replayedUpTo: number | undefined;
    let greeting = false;
    const offOpen = connection.on('open', ({ hello, reconnected }) => {
      if (!reconnected) replayedUpTo = hello.seq;
      // The greeting `status` after a first `hello` says nothing new; after a reconnection it may.
      greeting = !reconnected;
    });
    const offFrame = connection.on('frame', (frame) => {
      if (!CHANGES.has(frame.type)) return;
      const seq = 'seq' in frame ? frame.seq : undefined;
      if (frame.type === 'status' && seq === undefined && greeting) {
        greeting = false;
        return;
      }
      if (seq !== undefined && replayedUpTo !== undefined && seq <= replayedUpTo) return;
      if (timer === undefined) {
        timer = setTimeout(() => {
          timer = undefined;
          setTick((t) => t + 1);
        }, DEBOUNCE_MS);
      }
    });
    return () => {
      offOpen();
      offFrame();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [connection]);

  return { thread, tick };
}
