// The thread's MCP servers (`GET /api/threads/:id/mcp`): what the thread keeps of each server
// its prompts name, listed before a model call: the URL's host, whether a session is open,
// when the tool list was fetched and goes stale, a pause after a failed first listing, and the
// tools as the model is offered them (`<server>__<tool>`). No token or session id is shown:
// the API returns none. Re-read when the thread changes (a turn lists the servers again).
import type { McpServerState } from '@edgent/client';
import { useApi, useLoad } from '../api';
import { Badge, ErrorNote } from '../components';
import { Field, Instant } from './parts';

export function McpServers({ threadId, tick }: { threadId: string; tick: number }) {
  const { client } = useApi();
  const list = useLoad(() => client.listMcpServers(threadId), [client, threadId, tick]);
  const servers = list.data?.servers ?? [];

  return (
    <div className="stack">
      <ErrorNote>{list.error}</ErrorNote>
      {!list.data && list.loading && <p className="muted">Loading…</p>}
      {list.data && servers.length === 0 && (
        <p className="muted">
          No MCP servers yet. A prompt's <code>mcp_servers</code> appear here once a model call listed their tools.
        </p>
      )}
      {servers.map((s) => (
        <Server key={s.name} server={s} />
      ))}
    </div>
  );
}

function Server({ server: s }: { server: McpServerState }) {
  const now = Date.now();
  const headingId = `mcp-${s.name}`;
  const stale = s.expires_at !== undefined && s.expires_at <= now;
  return (
    <section className="panel stack mcp-server" aria-labelledby={headingId} data-server={s.name}>
      <h2 id={headingId} className="small-heading">
        <code>{s.name}</code> <span className="muted">on {s.host}</span>
      </h2>
      <dl className="summary">
        <Field term="Session">
          {s.session_open ? <Badge state="active">open</Badge> : <Badge state="none">none</Badge>}
        </Field>
        <Field term="Protocol">{s.protocol_version}</Field>
        <Field term="Tools listed">{s.listed_at !== undefined ? <Instant ms={s.listed_at} /> : null}</Field>
        <Field term={stale ? 'Stale since' : 'Listed again after'}>
          {s.expires_at !== undefined ? <Instant ms={s.expires_at} /> : null}
        </Field>
        {s.expires_at === undefined && s.paused_until === undefined && s.tools.length > 0 && (
          <Field term="Listed again">before the next model call (the server said its tools changed)</Field>
        )}
        <Field term="Paused until">
          {s.paused_until !== undefined ? (
            <>
              <Instant ms={s.paused_until} /> <span className="muted small">(listing failed)</span>
            </>
          ) : null}
        </Field>
        <Field term="Tools">{String(s.tools.length)}</Field>
      </dl>
      {s.tools.length > 0 && (
        <div className="table-wrap">
          <table>
            <caption>Tools of {s.name}, as offered to the model</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Description</th>
              </tr>
            </thead>
            <tbody>
              {s.tools.map((t) => (
                <tr key={t.name} data-tool={t.name}>
                  <td>
                    <code>{t.name}</code>
                  </td>
                  <td className="clip">{t.description || <span className="muted">—</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
