// The playground: without a thread, pick an agent and start one (or reopen a recent one); with a
// thread, chat with it live over its socket. A client token has no picker: its thread is the one.
import { useApi } from '../api';
import { Chat } from './Chat';
import { StartThread } from './StartThread';
import './playground.css';

export function Playground({ threadId, onThread }: { threadId?: string; onThread: (id: string) => void }) {
  const api = useApi();
  if (threadId) return <Chat key={threadId} threadId={threadId} />;
  if (!api.isServer) {
    return (
      <section className="panel">
        <h1>Playground</h1>
        <p>This client token opens one thread only, and this page does not name it. Sign out and open the link you were given.</p>
      </section>
    );
  }
  return <StartThread onThread={onThread} />;
}
