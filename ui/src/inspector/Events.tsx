// The thread's application events (`emit_thread_event`, workflows' `tool_progress`), from the
// socket: those the frame log still holds when the page opened, then each one as it comes.
import type { ThreadEvent } from '@edgent/client';
import { Json, Time } from '../components';

export function Events({ events }: { events: readonly ThreadEvent[] }) {
  // Newest first: what just happened is what one looks for.
  const shown = [...events].reverse();
  return (
    <div className="stack">
      <p className="muted small">
        Events the thread's frame log still holds, then live ones (ephemeral events only while this page is open). The
        newest 200 are kept.
      </p>
      {shown.length === 0 ? (
        <p className="muted">No events yet.</p>
      ) : (
        <div className="table-wrap">
          <table>
            <caption className="sr-only">Events, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Data</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((e, i) => (
                <tr key={`${e.timestamp}-${shown.length - i}`}>
                  <td>
                    <Time ms={e.timestamp} />
                  </td>
                  <td>
                    <code>{e.event}</code>
                  </td>
                  <td className="wide">
                    <Json value={e.data} label={`Data of ${e.event}`} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
