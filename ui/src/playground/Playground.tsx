// Placeholder: the playground (pick an agent, start a thread, chat) is being built.
export function Playground({ threadId }: { threadId?: string; onThread: (id: string) => void }) {
  return <h1>Playground {threadId}</h1>;
}
