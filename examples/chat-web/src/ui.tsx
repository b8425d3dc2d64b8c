// Small pieces both pages use.

/** A tool call's status as a coloured label (queued, running, retrying, sleeping, waiting, …). */
export function Badge({ status }: { status: string }) {
  return <span className={`badge ${status}`}>{status.replace(/_/g, ' ')}</span>;
}

/** A JSON text (or any text), pretty-printed when it parses, folded under a label. */
export function Json({ label, text }: { label: string; text: string }) {
  let pretty = text;
  try {
    pretty = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // not JSON: shown as it is
  }
  return (
    <details className="json">
      <summary>{label}</summary>
      <pre>{pretty}</pre>
    </details>
  );
}
