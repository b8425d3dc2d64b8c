// The checked-in generated types match a fresh generation from the checked-in schema (which
// the Rust host test tests/host/protocol_schema.rs keeps in step with the Rust types).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

test('client/src/generated/protocol.ts is what `npm run gen` makes of the schema', () => {
  const script = fileURLToPath(new URL('../../scripts/gen.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [script, '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr || r.stdout);
});

test('the hand-written ScheduleSpec has exactly the fields of the Rust request', async () => {
  const { readFile } = await import('node:fs/promises');
  const schemaPath = fileURLToPath(new URL('../schema/protocol.schema.json', import.meta.url));
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  const { SCHEDULE_SPEC_FIELDS } = await import('../dist/index.js');
  assert.deepEqual(
    [...SCHEDULE_SPEC_FIELDS].sort(),
    Object.keys(schema.definitions.ScheduleSpec.properties).sort(),
  );
});

test('the hand-written MCP server state has exactly the fields of the Rust answer', async () => {
  const { readFile } = await import('node:fs/promises');
  const schemaPath = fileURLToPath(new URL('../schema/protocol.schema.json', import.meta.url));
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  const { MCP_SERVER_STATE_FIELDS, MCP_TOOL_STATE_FIELDS } = await import('../dist/index.js');
  assert.deepEqual([...MCP_SERVER_STATE_FIELDS].sort(), Object.keys(schema.definitions.McpServerState.properties).sort());
  assert.deepEqual([...MCP_TOOL_STATE_FIELDS].sort(), Object.keys(schema.definitions.McpToolState.properties).sort());
  assert.deepEqual(Object.keys(schema.definitions.McpServerList.properties), ['servers']);
});
