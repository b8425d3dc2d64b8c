// The shell: sign-in, the navigation, and the page the route names. A client token sees only
// its thread's playground; the server key sees everything.
import { useEffect, useMemo, useState } from 'react';
import { ApiContext, makeClient, useApi, type Api } from './api';
import { Login } from './Login';
import { ErrorNote } from './components';
import { href, navigate, useRoute, type Route } from './route';
import { clearSession, loadSession, saveSession, type Session } from './session';
import { Playground } from './playground/Playground';
import { ThreadList } from './inspector/ThreadList';
import { ThreadDetail } from './inspector/ThreadDetail';
import { ConfigEditor } from './config/ConfigEditor';
import { demoModelNames } from './demo';
import { useLinkToken } from './linkToken';

export function App() {
  const [session, setSession] = useState<Session | null>(() => loadSession());
  const route = useRoute();
  const api = useMemo<Api | null>(() => {
    if (!session) return null;
    return {
      client: makeClient(session),
      session,
      isServer: session.kind === 'key',
      logout: () => {
        clearSession();
        setSession(null);
      },
    };
  }, [session]);

  const link = useLinkToken(session, (s) => {
    clearSession();
    saveSession(s);
    setSession(s);
  });

  if (link.checking) {
    return (
      <main className="login" id="main">
        <p role="status">Checking the link's token…</p>
      </main>
    );
  }
  if (!api) {
    return (
      <Login
        notice={link.refused}
        onLogin={(s) => {
          saveSession(s);
          setSession(s);
        }}
      />
    );
  }
  return (
    <ApiContext.Provider value={api}>
      <Shell route={route} notice={link.refused} />
    </ApiContext.Provider>
  );
}

function Shell({ route, notice }: { route: Route; notice: string | null }) {
  const api = useApi();
  const demo = useDemoModels(api);
  // A client token reaches one thread: every route shows that thread's playground.
  const shown: Route = api.isServer ? route : { page: 'playground', threadId: api.session.kind === 'token' ? api.session.threadId : undefined };
  const section = shown.page === 'thread' || shown.page === 'threads' ? 'threads' : shown.page;
  return (
    <>
      <a className="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">edgent</span>
        {api.isServer && (
          <nav aria-label="Sections">
            <a href={href({ page: 'playground' })} aria-current={section === 'playground' ? 'page' : undefined}>
              Playground
            </a>
            <a href={href({ page: 'threads', query: new URLSearchParams() })} aria-current={section === 'threads' ? 'page' : undefined}>
              Threads
            </a>
            <a href={href({ page: 'config' })} aria-current={section === 'config' ? 'page' : undefined}>
              Configuration
            </a>
          </nav>
        )}
        <span className="spacer" />
        {demo.length > 0 && (
          <span className="badge badge-demo" title={`Model(s) ${demo.join(', ')} answer from edgent's scripted demo, not a real model`}>
            demo model
          </span>
        )}
        <span className="muted who">{api.isServer ? 'server key' : 'client token'}</span>
        <button type="button" className="secondary" onClick={api.logout}>
          Sign out
        </button>
      </header>
      {demo.length > 0 && shown.page === 'playground' && (
        <p className="demo-note" role="note">
          Answers come from edgent's <strong>demo model</strong>: no model key is set. Put <code>OPENAI_API_KEY</code> in{' '}
          <code>.dev.vars</code> and restart <code>npm run dev</code> to use the real model.
        </p>
      )}
      <main id="main" tabIndex={-1}>
        <ErrorNote>{notice}</ErrorNote>
        <Page route={shown} />
      </main>
    </>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'playground':
      return <Playground threadId={route.threadId} onThread={(id) => navigate({ page: 'playground', threadId: id })} />;
    case 'threads':
      return <ThreadList query={route.query} />;
    case 'thread':
      // Keyed by thread: nothing of one thread's page (its summary, its loads) shows on another's.
      return <ThreadDetail key={route.threadId} threadId={route.threadId} query={route.query} />;
    case 'config':
      return <ConfigEditor kind={route.kind} name={route.name} />;
  }
}

/** The names of models that the demo server answers for (server key only: it reads /api/models). */
function useDemoModels(api: Api): string[] {
  const [names, setNames] = useState<string[]>([]);
  useEffect(() => {
    if (!api.isServer) return;
    let live = true;
    api.client.listConfig('models').then(
      (models) => live && setNames(demoModelNames(models)),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [api]);
  return names;
}
