// Where a reload resumes the thread's socket. The seq kept is the newest one seen while the
// thread was NOT running: during an answer it stays the one from before the answer began, so a
// reload replays the whole answer in progress (its pending message and every chunk) rather than
// only what follows the reload, and the streamed text is whole again at once.
import { useEffect } from 'react';
import type { ThreadStore } from '@edgent/client';
import { rememberSeq } from '../session';

/** sessionStorage is written at most this often while frames stream in. */
const SAVE_EVERY_MS = 250;

export function useResumePoint(store: ThreadStore | null, threadId: string): void {
  useEffect(() => {
    if (!store) return;
    const connection = store.connection;
    // Unknown until a status frame says (the store may hold one already).
    const known = store.getSnapshot().status;
    let running: boolean | null = known ? known.state === 'running' : null;
    let unsaved: number | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const flush = () => {
      timer = null;
      if (unsaved !== null) rememberSeq(threadId, unsaved);
      unsaved = null;
    };
    const off = connection.on('frame', (frame) => {
      if (frame.type === 'status') running = frame.state === 'running';
      if (running !== false || connection.lastSeq === undefined) return;
      // The value is taken now: by the time the timer fires an answer may have begun.
      unsaved = connection.lastSeq;
      timer ??= setTimeout(flush, SAVE_EVERY_MS);
    });
    window.addEventListener('pagehide', flush);
    return () => {
      off();
      window.removeEventListener('pagehide', flush);
      if (timer) clearTimeout(timer);
      flush();
    };
  }, [store, threadId]);
}
