// The field tables: one row per field of a model, prompt and agent, as docs/api.md
// ("Configuration") and docs/agents.md define them. The form is generated from these rows, so a
// new field is one line here.
import type { ConfigKind } from '@edgent/client';

export const KINDS: readonly ConfigKind[] = ['models', 'prompts', 'agents'];

/** What a control looks like and how its text becomes JSON. */
export type FieldType =
  | 'name' // the definition's name (`name`, or `id` for agents): fixed once stored
  | 'text'
  | 'longtext' // a large textarea (a prompt's `system`)
  | 'number'
  | 'integer'
  | 'select'
  | 'checkbox'
  | 'list' // an array of strings, as chips
  | 'json' // an object (or, when the default is one, an array), typed as JSON
  | 'secret_name' // the NAME of a Worker secret, never its value
  | 'side'; // an agent's side: a nested fieldset of SIDE_FIELDS

/** Where a control's suggestions come from (filled in by the editor from the API). */
export type Suggest = 'models' | 'tool_names' | 'secret_names' | 'prompts' | 'stop_tools';

export interface FieldSpec {
  key: string;
  label: string;
  type: FieldType;
  /** The value a new definition starts with (what the server assumes when it is left out). */
  default: unknown;
  /** Empty means `null` (a number, or text like a side's `label`). */
  nullable?: boolean;
  /** A side that may be absent (`side_b`): a checkbox turns it on. */
  optional?: boolean;
  options?: readonly string[];
  suggest?: Suggest;
  /** One line for people: what it does, its default and range. */
  help?: string;
  /**
   * Shown in an empty control: what the server uses instead ("… (default)", "none", "no limit"),
   * or, starting with "e.g.", an example of a value the field needs.
   */
  placeholder?: string;
}

const timeout = (key: string, label: string, dflt: string, what: string): FieldSpec => ({
  key,
  label,
  type: 'integer',
  default: null,
  nullable: true,
  placeholder: `${dflt} (default)`,
  help: `${what} 100 to 3600000 ms; empty uses ${dflt}.`,
});

const HOOKS: FieldSpec = {
  key: 'hooks',
  label: 'Hooks',
  type: 'list',
  default: [],
  help: 'Hook names, each a file in agents/hooks/ compiled into this Worker.',
};

export const MODEL_FIELDS: readonly FieldSpec[] = [
  { key: 'name', label: 'Name', type: 'name', default: '', help: '1 to 64 characters of a-z A-Z 0-9 _ - .' },
  { key: 'provider', label: 'Provider', type: 'select', default: 'openai', options: ['openai', 'anthropic', 'workers_ai'] },
  { key: 'model', label: 'Model', type: 'text', default: '', help: "The provider's model id, e.g. gpt-4o-mini or claude-sonnet-4-5." },
  {
    key: 'base_url',
    label: 'Base URL',
    type: 'text',
    default: '',
    // No default: the server refuses an empty base URL for openai and anthropic.
    placeholder: 'e.g. https://api.openai.com/v1',
    help: 'Required for openai and anthropic: an https:// URL (/chat/completions or /messages is appended). Not used by workers_ai.',
  },
  {
    key: 'api_key_secret',
    label: 'API key secret name',
    type: 'secret_name',
    default: null,
    nullable: true,
    suggest: 'secret_names',
    help: 'The NAME of the Worker secret holding the key (A-Z a-z 0-9 _). Empty: no key is sent.',
  },
  { key: 'fallbacks', label: 'Fallbacks', type: 'list', default: [], suggest: 'models', help: 'Models tried in order when this one gives up.' },
  { key: 'input_price_per_mtok', label: 'Input price (USD per million tokens)', type: 'number', default: 0 },
  { key: 'output_price_per_mtok', label: 'Output price (USD per million tokens)', type: 'number', default: 0 },
  timeout('first_chunk_timeout_ms', 'First chunk timeout (ms)', '60000', 'For the headers, and again for the first body chunk:'),
  timeout('stall_timeout_ms', 'Stall timeout (ms)', '60000', 'Between two body chunks:'),
  timeout('total_timeout_ms', 'Total timeout (ms)', '600000', 'For a whole attempt:'),
  {
    key: 'max_history_tokens',
    label: 'Max history tokens',
    type: 'integer',
    default: null,
    nullable: true,
    placeholder: '100000 (default)',
    help: 'Estimated tokens of history sent to the model.',
  },
  {
    key: 'max_output_tokens',
    label: 'Max output tokens',
    type: 'integer',
    default: null,
    nullable: true,
    placeholder: 'none',
    help: 'Sent as max_tokens; anthropic sends 4096 when empty.',
  },
];

export const PROMPT_FIELDS: readonly FieldSpec[] = [
  { key: 'name', label: 'Name', type: 'name', default: '', help: '1 to 64 characters of a-z A-Z 0-9 _ - .' },
  { key: 'model', label: 'Model', type: 'text', default: '', suggest: 'models', help: 'A model that exists (its fallbacks come with it).' },
  { key: 'description', label: 'Description', type: 'text', default: '', help: 'The tool description when another prompt offers this one as a tool.' },
  { key: 'system', label: 'System', type: 'longtext', default: '', help: '{{key}} is filled from the thread context before every model call.' },
  {
    key: 'tools',
    label: 'Tools',
    type: 'list',
    default: [],
    suggest: 'tool_names',
    help: 'Registered tools, prompts, or agents with "expose as tool"; not this prompt itself.',
  },
  {
    key: 'max_offered_tools',
    label: 'Max offered tools',
    type: 'integer',
    default: null,
    nullable: true,
    placeholder: 'every tool',
    help: 'At least 1: each model call is offered only the tools most relevant to the latest messages.',
  },
  {
    key: 'pinned_tools',
    label: 'Pinned tools',
    type: 'list',
    default: [],
    suggest: 'tool_names',
    help: 'Always offered when Max offered tools applies; each one of Tools, at most that many.',
  },
  {
    key: 'tool_selection_model',
    label: 'Tool selection model',
    type: 'text',
    default: null,
    nullable: true,
    placeholder: 'BM25 (no model)',
    suggest: 'models',
    help: 'An embedding model (openai or workers_ai, e.g. @cf/baai/bge-small-en-v1.5) that ranks the tools when Max offered tools applies; BM25 when unset or when it fails.',
  },
  { key: 'tool_choice', label: 'Tool choice', type: 'select', default: 'auto', options: ['auto', 'none', 'required'] },
  { key: 'parallel_tool_calls', label: 'Parallel tool calls', type: 'checkbox', default: true, help: 'Calls of one reply run at the same time.' },
  { key: 'include_chat', label: 'Include chat', type: 'checkbox', default: true, help: 'As a sub-prompt: it sees the calling conversation.' },
  HOOKS,
  {
    key: 'tool_bindings',
    label: 'Tool bindings (JSON)',
    type: 'json',
    default: {},
    help: 'Runtime context per tool, {"<tool>": {…}}: each key in Tools, each value an object. The model never sees it.',
  },
  {
    key: 'compaction_prompt',
    label: 'Compaction prompt',
    type: 'text',
    default: null,
    nullable: true,
    suggest: 'prompts',
    help: "When the history outgrows the model's max history tokens, this prompt summarises the older messages instead of leaving them out.",
  },
  {
    key: 'mcp_servers',
    label: 'MCP servers (JSON)',
    type: 'json',
    default: [],
    help: '[{"name": "kb", "url": "https://…/mcp", "token_secret"?: "KB_TOKEN", "tools"?: […], "approval"?: […]}]: their tools are offered as <name>__<tool>. The secret must be listed in MCP_SECRETS.',
  },
];

export const SIDE_FIELDS: readonly FieldSpec[] = [
  { key: 'prompt', label: 'Prompt', type: 'select', default: '', suggest: 'prompts', help: 'The prompt this side runs.' },
  { key: 'label', label: 'Label', type: 'text', default: null, nullable: true, help: "How the other side sees this side's words (dual_ai)." },
  { key: 'stop_on_response', label: 'Stop on response', type: 'checkbox', default: true, help: 'A reply without tool calls ends the turn.' },
  {
    key: 'stop_tool',
    label: 'Stop tool',
    type: 'text',
    default: null,
    nullable: true,
    suggest: 'stop_tools',
    help: "A tool of this side's prompt that ends the turn (ai_human) or the conversation (dual_ai).",
  },
  {
    key: 'stop_tool_response_property',
    label: 'Stop tool response property',
    type: 'text',
    default: null,
    nullable: true,
    help: "Which property of the stop tool's result is the answer; needs a stop tool.",
  },
  { key: 'max_steps', label: 'Max steps', type: 'integer', default: 10, help: 'Model calls in one turn of this side, 1 to 1000.' },
];

export const AGENT_FIELDS: readonly FieldSpec[] = [
  { key: 'id', label: 'ID', type: 'name', default: '', help: 'What POST /api/threads takes as agent_id.' },
  {
    key: 'kind',
    label: 'Kind',
    type: 'select',
    default: 'ai_human',
    options: ['ai_human', 'dual_ai'],
    help: 'ai_human: a person talks to side A. dual_ai: sides A and B talk to each other.',
  },
  { key: 'description', label: 'Description', type: 'text', default: '', help: 'For people; the tool description when Tool description is blank.' },
  { key: 'side_a', label: 'Side A', type: 'side', default: null },
  { key: 'side_b', label: 'Side B', type: 'side', default: null, optional: true, help: 'Needed for dual_ai, refused for ai_human.' },
  { key: 'max_turns', label: 'Max turns', type: 'integer', default: 25, help: '1 to 10000, for both kinds.' },
  {
    key: 'max_tokens',
    label: 'Max tokens (budget)',
    type: 'integer',
    default: null,
    nullable: true,
    placeholder: 'no limit',
    help: "The thread's token budget over its life; not a reply length.",
  },
  {
    key: 'max_cost_usd',
    label: 'Max cost (USD)',
    type: 'number',
    default: null,
    nullable: true,
    placeholder: 'no limit',
    help: "The thread's budget in US dollars, at the models' prices.",
  },
  { key: 'expose_as_tool', label: 'Expose as tool', type: 'checkbox', default: false, help: 'Prompts may list this agent in their tools.' },
  { key: 'tool_description', label: 'Tool description', type: 'text', default: '', help: 'What a model reads about this agent as a tool.' },
  HOOKS,
];

export const FIELDS: Record<ConfigKind, readonly FieldSpec[]> = { models: MODEL_FIELDS, prompts: PROMPT_FIELDS, agents: AGENT_FIELDS };

/** One definition of a kind, in the singular: "model", "prompt", "agent". */
export function singular(kind: ConfigKind): string {
  return kind.slice(0, -1);
}

/** The key that names a definition: `id` for agents, `name` otherwise. */
export function nameKey(kind: ConfigKind): string {
  return kind === 'agents' ? 'id' : 'name';
}

export function isKind(s: string | undefined): s is ConfigKind {
  return (KINDS as readonly string[]).includes(s ?? '');
}

/** The secret names the Worker allows by default (MODEL_SECRETS in docs/agents.md). */
export const KNOWN_SECRET_NAMES = ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY'];

/** The shape the server accepts for a secret's name; anything else may be a pasted key. */
export const SECRET_NAME = /^[A-Za-z0-9_]+$/;
