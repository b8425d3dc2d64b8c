// Two views of one thread: the socket through useThread, and the AI SDK's useChat. The thread
// and its client token come from the URL's fragment (see credentials.ts); the page holds no
// server key.
import { useEffect, useState } from 'react';
import { readFragment, tokenInfo, writeView, type View } from './credentials';
import { ThreadPage } from './ThreadPage';
import { ChatPage } from './ChatPage';

export function App() {
  const [fragment, setFragment] = useState(readFragment);
  useEffect(() => {
    const onHash = () => setFragment(readFragment());
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  const { credentials, view } = fragment;

  if (!credentials) {
    return (
      <main>
        <h1>edgent chat</h1>
        <p>
          This page needs a thread and a client token in its address, after <code>#</code>. In{' '}
          <code>examples/chat-web</code>, run:
        </p>
        <pre>npm run open</pre>
        <p>
          It creates a thread with the server key (which stays in your terminal) and prints this page's
          address with <code>#thread=…&amp;token=…</code>.
        </p>
      </main>
    );
  }

  const info = tokenInfo(credentials.token);
  const expired = info !== null && info.expiresAt * 1000 < Date.now();
  const select = (next: View) => {
    writeView(next);
    setFragment(readFragment());
  };

  return (
    <main>
      <header className="top">
        <h1>edgent chat</h1>
        <nav>
          <button className={view === 'thread' ? 'tab active' : 'tab'} onClick={() => select('thread')}>
            useThread
          </button>
          <button className={view === 'chat' ? 'tab active' : 'tab'} onClick={() => select('chat')}>
            useChat (AI SDK)
          </button>
        </nav>
        <p className="muted small">
          thread <code>{credentials.threadId}</code>
          {info && (
            <>
              {' '}
              · token scopes {info.scopes.join(', ')} · expires {new Date(info.expiresAt * 1000).toLocaleString()}
            </>
          )}
        </p>
      </header>
      {expired && (
        <p role="alert" className="error">
          This token has expired. Run <code>npm run open</code> again for a new thread and token.
        </p>
      )}
      {view === 'thread' ? (
        <ThreadPage key={`t:${credentials.threadId}:${credentials.token}`} {...credentials} />
      ) : (
        <ChatPage key={`c:${credentials.threadId}:${credentials.token}`} {...credentials} />
      )}
    </main>
  );
}
