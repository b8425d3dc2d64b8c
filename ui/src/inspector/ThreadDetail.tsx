// Placeholder: the inspector is being built.
export function ThreadDetail({ threadId }: { threadId: string; query: URLSearchParams }) {
  return <h1>Thread {threadId}</h1>;
}
