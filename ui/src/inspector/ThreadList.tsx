// Placeholder: the thread index is being built.
export function ThreadList({ query }: { query: URLSearchParams }) {
  return <h1>Threads {query.toString()}</h1>;
}
