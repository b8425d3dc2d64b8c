/**
 * Every failure the client reports: an HTTP error body, an rpc `result.error`, an `error`
 * frame, a refused or lost socket, a timeout. `code` is stable (branch on it); `message` is
 * for people.
 */
export class EdgentError extends Error {
  /** The HTTP status for API errors and refused upgrades (when known); 0 otherwise. */
  readonly status: number;
  /** The API's code (`unauthorized`, `thread_stopped`, …) or one of the client's own (`timeout`, `disconnected`, `closed`, `network`, `bad_response`). */
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'EdgentError';
    this.status = status;
    this.code = code;
  }
}

/** An rpc that got no `result` within its timeout. A result that arrives later is ignored. */
export class EdgentTimeoutError extends EdgentError {
  /** The rpc method that timed out. */
  readonly method: string;
  /** The timeout it had, in ms. */
  readonly timeoutMs: number;

  constructor(method: string, timeoutMs: number) {
    super(0, 'timeout', `rpc "${method}" got no result within ${timeoutMs} ms`);
    this.name = 'EdgentTimeoutError';
    this.method = method;
    this.timeoutMs = timeoutMs;
  }
}

/** Reads the API's `{"error":{"code","message"}}` body, or describes what came instead. */
export function errorFromBody(status: number, body: unknown, fallbackText = ''): EdgentError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (err && typeof err.code === 'string') {
    return new EdgentError(status, err.code, typeof err.message === 'string' ? err.message : err.code);
  }
  const text = fallbackText.length > 200 ? `${fallbackText.slice(0, 200)}…` : fallbackText;
  return new EdgentError(status, 'bad_response', `HTTP ${status}${text ? `: ${text}` : ''}`);
}
