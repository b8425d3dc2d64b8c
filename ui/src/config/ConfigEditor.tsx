// Placeholder: the configuration editor is being built.
export function ConfigEditor({ kind, name }: { kind?: string; name?: string }) {
  return <h1>Configuration {kind} {name}</h1>;
}
