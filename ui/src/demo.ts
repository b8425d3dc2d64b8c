// The demo model: `npm run dev` with no model key seeds the default model to answer from
// edgent's scripted demo server (scripts/demo-model.mjs) under this model id, and the UI marks
// every model that has it.
import type { ConfigDefinition } from '@edgent/client';

/** The model id the demo server answers as. */
export const DEMO_MODEL_ID = 'edgent-demo';

/** The names of the models answered by the demo. */
export function demoModelNames(models: readonly ConfigDefinition[]): string[] {
  return models.filter((m) => m.model === DEMO_MODEL_ID).map((m) => String(m.name));
}
