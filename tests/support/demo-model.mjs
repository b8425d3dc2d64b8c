// demo-model.mjs — edgent's demo model: a `fallback` for the scripted model server
// (model-server.mjs) that plays a plausible model when no real one is configured.
//
// `npm run dev` with no model key starts it (scripts/demo-model.mjs), so a first run shows the
// whole machinery (streamed text, tool calls, tool results, approvals) with no key and no
// network. It is not a model: it reads the newest message with a few keyword rules, calls one
// of the tools the request offers with arguments built from the tool's JSON Schema, and answers
// from the result. Everything it says names it as the demo. Node built-ins only.
// User guide: docs/testing-model-server.md#the-demo-model.

// Visible streaming in a playground: a few characters every 25 ms, not one burst.
const STREAM = { chunkSize: 6, chunkDelayMs: 25 };
const MODEL = 'edgent-demo';

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September',
  'October', 'November', 'December'];

/**
 * The step answering one recorded request (OpenAI chat completions or Anthropic Messages):
 * an answer from the tool results when the newest message holds some, else a call of an
 * offered tool the newest user message clearly asks for, else a text saying what the demo is.
 * Never throws: a body it cannot read gets the demo text.
 * @param {{ format?: string, body?: any }} request  as model-server records it
 * @param {{ secret?: string }} [options]  the key secret that switches to the real model (for the text)
 */
export function demoStep(request, { secret = 'OPENAI_API_KEY' } = {}) {
  let conversation;
  try {
    conversation = read(request);
  } catch {
    conversation = { results: [], text: '', tools: [] };
  }
  try {
    if (conversation.results.length) return step({ text: answerFrom(conversation.results) });
    const call = chooseCall(conversation.text, conversation.tools);
    if (call) {
      return step({ text: `Demo model: calling ${call.name}.`, toolCalls: [call] });
    }
  } catch {
    // A schema or text the rules did not expect: the demo text below still answers.
  }
  return step({ text: demoText(conversation, secret) });
}

function step(fields) {
  return { model: MODEL, ...STREAM, ...fields };
}

// ---------------------------------------------------------------------------------------------
// Reading the request: the newest tool results, the newest user text, the offered tools.
// ---------------------------------------------------------------------------------------------

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const list = (v) => (Array.isArray(v) ? v : []);

function read(request) {
  const body = isObject(request?.body) ? request.body : {};
  const messages = list(body.messages).filter(isObject);
  return request?.format === 'anthropic' ? readAnthropic(body, messages) : readOpenai(body, messages);
}

function readOpenai(body, messages) {
  const tools = list(body.tools).filter(isObject).map((t) => {
    const f = isObject(t.function) ? t.function : t;
    return { name: f.name, schema: f.parameters };
  }).filter((t) => typeof t.name === 'string');
  // The calls' names, by id, from the assistant messages that made them.
  const names = new Map();
  for (const m of messages) {
    for (const c of list(m.tool_calls)) if (isObject(c)) names.set(c.id, c.function?.name);
  }
  // Every result since the user spoke, when the newest message is one: a tool may queue
  // another (process_order queues send_notification), and the answer should cover both.
  const userAt = messages.findLastIndex((m) => m.role === 'user');
  const results = messages.at(-1)?.role === 'tool'
    ? messages.slice(userAt + 1).filter((m) => m.role === 'tool')
      .map((m) => ({ name: names.get(m.tool_call_id), content: textOf(m.content) }))
    : [];
  return { results, text: userAt >= 0 ? textOf(messages[userAt].content) : '', tools };
}

function readAnthropic(body, messages) {
  const tools = list(body.tools).filter(isObject)
    .map((t) => ({ name: t.name, schema: t.input_schema }))
    .filter((t) => typeof t.name === 'string');
  const names = new Map();
  for (const m of messages) {
    for (const b of list(m.content)) if (b?.type === 'tool_use') names.set(b.id, b.name);
  }
  // Tool results travel in user messages too: the user's words are the newest user text.
  const userAt = messages.findLastIndex((m) => m.role === 'user' && textOf(m.content, true).trim());
  const resultsOf = (m) => (m.role === 'user' ? list(m.content).filter((b) => b?.type === 'tool_result') : []);
  const results = resultsOf(messages.at(-1) ?? {}).length
    ? messages.slice(userAt + 1).flatMap(resultsOf)
      .map((b) => ({ name: names.get(b.tool_use_id), content: textOf(b.content), error: b.is_error === true }))
    : [];
  return { results, text: userAt >= 0 ? textOf(messages[userAt].content, true) : '', tools };
}

/**
 * The text of a message's content: a string, or the text of an array of parts/blocks.
 * `userOnly` leaves out what Anthropic requests carry in user turns that the user did not say
 * (tool results, and mid-conversation system notes edgent sends as `<system>` text).
 */
function textOf(content, userOnly = false) {
  if (typeof content === 'string') return userOnly && content.startsWith('<system>') ? '' : content;
  return list(content)
    .map((part) => {
      if (typeof part === 'string') return part;
      if (part?.type !== 'text' || typeof part.text !== 'string') return '';
      return userOnly && part.text.startsWith('<system>') ? '' : part.text;
    })
    .filter(Boolean)
    .join('\n');
}

// ---------------------------------------------------------------------------------------------
// Choosing a tool: keyword rules in a fixed order, each naming one tool; a rule whose tool the
// request does not offer is passed over.
// ---------------------------------------------------------------------------------------------

const EMAIL = /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/;
const CUSTOMER_ID = /\bcus_[A-Za-z0-9]+\b/;
const ORDER_ID = /\bord_[A-Za-z0-9]+\b/;
const SKU = /\b[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+\b/;

const RULES = [
  // The example reviewer (side B of `review`) approves the draft it was given, so a review
  // conversation ends instead of running to max_turns.
  { tool: 'approve_draft', when: (t) => t.trim() !== '' },
  { tool: 'get_weather', when: (t) => /\b(weather|temperature|forecast|rain(ing)?|sunny)\b/i.test(t) },
  { tool: 'get_current_time', when: (t) => /\b(time|clock|date|what day)\b/i.test(t) },
  { tool: 'issue_refund', when: (t) => /\brefund/i.test(t) },
  {
    tool: 'process_order',
    when: (t) => (/\border\b/i.test(t) && (ORDER_ID.test(t) || /\d/.test(t))) || /\b(buy|purchase|place an order)\b/i.test(t),
  },
  {
    tool: 'lookup_customer',
    when: (t) => /\b(customer|e-?mail|account|look ?up|find|who is)\b/i.test(t) && (EMAIL.test(t) || CUSTOMER_ID.test(t)),
  },
];

/** The call the text asks for, among the offered tools; `null` when none. */
function chooseCall(text, tools) {
  if (!text.trim() || !tools.length) return null;
  const offered = new Map(tools.map((t) => [t.name, t]));
  let tool = RULES.filter((r) => offered.has(r.tool) && r.when(text)).map((r) => offered.get(r.tool))[0];
  // Any other tool the text names, as written or with spaces ("say hello", "conversation stats").
  tool ??= tools.find((t) => {
    const spaced = t.name.replace(/_/g, ' ');
    return new RegExp(`\\b(${escape(t.name)}|${escape(spaced)})\\b`, 'i').test(text);
  });
  if (!tool) return null;
  const schema = isObject(tool.schema) ? tool.schema : { type: 'object' };
  return { name: tool.name, arguments: fill(schema, schema, hintsFrom(text), text, true) ?? {} };
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Values the text gives, by the argument names they fit. */
function hintsFrom(text) {
  const hints = {};
  const email = text.match(EMAIL)?.[0];
  if (email) hints.email = email;
  const customer = text.match(CUSTOMER_ID)?.[0];
  if (customer) hints.customer_id = customer;
  const order = text.match(ORDER_ID)?.[0];
  if (order) hints.order_id = order;
  const sku = text.match(SKU)?.[0];
  if (sku) hints.sku = sku;
  const cents = amountInCents(text);
  if (cents !== undefined) hints.amount_cents = cents;
  // A small count, once ids, emails and amounts are out of the way: "order 2 shirts".
  const rest = text.replace(EMAIL, ' ').replace(/\b\w+_\w+\b/g, ' ').replace(/[$€£]\s?\d+(\.\d+)?/g, ' ');
  const count = rest.match(/\b(\d{1,3})\b/);
  if (count && Number(count[1]) >= 1 && Number(count[1]) <= 100) hints.quantity = Number(count[1]);
  const city = cityIn(text);
  if (city) hints.city = city;
  const name = properNoun(text);
  if (name) hints.name = name;
  hints.text = text.trim().slice(0, 500);
  return hints;
}

function amountInCents(text) {
  const money = text.match(/[$€£]\s?(\d+(?:\.\d{1,2})?)/) ?? text.match(/\b(\d+(?:\.\d{1,2})?)\s*(?:dollars|euros|pounds|usd|eur|gbp)\b/i);
  if (money) return Math.round(Number(money[1]) * 100);
  const cents = text.match(/\b(\d+)\s*cents?\b/i);
  return cents ? Number(cents[1]) : undefined;
}

const NOT_NAMES = new Set(['I', 'A', 'The', 'What', 'Whats', 'What\'s', 'How', 'Is', 'Are', 'Can', 'Could', 'Please',
  'Hi', 'Hello', 'Hey', 'Tell', 'Show', 'Give', 'Do', 'Does', 'Will', 'Look', 'Find', 'Get', 'Check', 'Say', 'Use',
  'Call', 'And', 'Or', 'In', 'For', 'At', 'To', 'Today', 'Now', 'It', 'My', 'Me', 'Order', 'Refund', 'Weather']);

/** The place after "in", "for" or "at" ("weather in Paris", "in new york"), else a capitalised word. */
function cityIn(text) {
  const after = text.match(/\b(?:in|for|at)\s+([\p{L}][\p{L}'.-]*(?:[ ,][\p{Lu}][\p{L}'.-]*)*)/u);
  if (after) {
    const words = after[1].split(/\s+/).filter((w) => !/^(the|my|our|this|today|tomorrow|now|celsius|fahrenheit)$/i.test(w));
    if (words.length && !/^\d/.test(words[0])) {
      return words.map((w) => w[0].toUpperCase() + w.slice(1)).join(' ').replace(/[.,]+$/, '');
    }
  }
  return properNoun(text);
}

/** The first capitalised word that is not a sentence's usual first word ("Ada", "Lisbon"). */
function properNoun(text) {
  for (const m of text.matchAll(/\b[\p{Lu}][\p{Ll}'-]+\b/gu)) {
    if (!NOT_NAMES.has(m[0])) return m[0];
  }
  return undefined;
}

/** The hint for an argument, by its name. */
function hintFor(key, hints) {
  const k = key.toLowerCase();
  if (k.includes('email')) return hints.email;
  if (k === 'customer_id' || k === 'order_id' || k === 'sku' || k === 'amount_cents' || k === 'city') return hints[k];
  if (k === 'location' || k === 'place') return hints.city;
  if (k === 'quantity' || k === 'count') return hints.quantity;
  if (k === 'amount' && hints.amount_cents !== undefined) return hints.amount_cents / 100;
  if (k === 'name' || k === 'who') return hints.name;
  if (['reason', 'message', 'text', 'final_text', 'input', 'query', 'question'].includes(k)) return hints.text;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Arguments from a JSON Schema: every required property, an optional one only when the text
// gives it, so the arguments validate. Covers what schemars writes: objects, arrays, nullable
// type lists, enums, consts, oneOf/anyOf (tagged unions) and local $refs.
// ---------------------------------------------------------------------------------------------

function resolve(schema, root) {
  for (let i = 0; i < 16 && isObject(schema) && typeof schema.$ref === 'string'; i++) {
    const path = schema.$ref.replace(/^#\//, '').split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    schema = path.reduce((node, key) => (isObject(node) ? node[key] : undefined), root);
  }
  return isObject(schema) ? schema : {};
}

function typeOf(schema) {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  const type = types.find((t) => t && t !== 'null');
  if (type) return type;
  if (schema.properties) return 'object';
  if (schema.items) return 'array';
  return types.includes('null') ? 'null' : undefined;
}

/** Whether `value` fits the schema's type (and enum), as far as a hint needs checking. */
function fits(value, schema) {
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) return false;
  switch (typeOf(schema)) {
    case 'string': return typeof value === 'string' && value !== '';
    case 'integer': return Number.isInteger(value) && inRange(value, schema);
    case 'number': return typeof value === 'number' && inRange(value, schema);
    case undefined: return true;
    default: return false;
  }
}

const inRange = (n, s) => (s.minimum === undefined || n >= s.minimum) && (s.maximum === undefined || n <= s.maximum);

/** The variants of a union (nullable ones last), or `null` when the schema is not one. */
function variants(schema) {
  const options = list(schema.oneOf ?? schema.anyOf).filter(isObject);
  if (!options.length) return null;
  return [...options.filter((o) => o.type !== 'null'), ...options.filter((o) => o.type === 'null')];
}

/** A union's or enum's values that the text names ("express", "fahrenheit"). */
function named(schema, root, text) {
  const values = Array.isArray(schema.enum) ? schema.enum : [];
  const found = values.find((v) => typeof v === 'string' && new RegExp(`\\b${escape(v)}\\b`, 'i').test(text));
  if (found !== undefined) return { value: found };
  for (const option of variants(schema) ?? []) {
    const o = resolve(option, root);
    const tags = [o.const, ...Object.values(o.properties ?? {}).map((p) => resolve(p, root).const)];
    if (tags.some((v) => typeof v === 'string' && new RegExp(`\\b${escape(v)}\\b`, 'i').test(text))) return { option: o };
  }
  return null;
}

function fill(schemaIn, root, hints, text, required, key = '') {
  const schema = resolve(schemaIn, root);
  const hint = key ? hintFor(key, hints) : undefined;
  if (hint !== undefined && fits(hint, schema)) return hint;
  const mention = named(schema, root, text);
  if (!required && !mention) return undefined;
  if ('const' in schema) return schema.const;
  if (mention?.value !== undefined) return mention.value;
  const union = mention?.option ? [mention.option] : variants(schema);
  if (union) return fill(union[0], root, hints, text, true, key);
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  switch (typeOf(schema)) {
    case 'object': {
      const out = {};
      const needed = new Set(list(schema.required));
      for (const [name, prop] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
        const v = fill(prop, root, hints, text, needed.has(name), name);
        if (v !== undefined) out[name] = v;
      }
      return out;
    }
    case 'array': {
      const n = Math.max(1, schema.minItems ?? 1);
      return Array.from({ length: n }, () => fill(schema.items ?? {}, root, hints, text, true, key));
    }
    case 'string': return defaultString(schema, key);
    case 'integer':
    case 'number': return defaultNumber(schema, key);
    case 'boolean': return typeof schema.default === 'boolean' ? schema.default : false;
    case 'null': return null;
    default: return schema.default ?? null;
  }
}

function defaultString(schema, key) {
  if (typeof schema.default === 'string' && schema.default) return schema.default;
  const about = `${schema.description ?? ''} ${schema.format ?? ''}`;
  if (/YYYY-MM-DD|\bdate\b/i.test(about)) return new Date(Date.now() + 7 * 86_400_000).toISOString().slice(0, 10);
  if (/e-?mail/i.test(`${key} ${about}`)) return 'ada@example.com';
  // The schema's own example, as the tools' doc comments write it: "e.g. `cus_1001`".
  const example = about.match(/e\.g\.,?\s*[`"']([^`"']+)[`"']/)?.[1];
  if (example) return example;
  if (/^city|location$/i.test(key)) return 'Lisbon';
  return 'demo';
}

function defaultNumber(schema, key) {
  if (typeof schema.default === 'number' && inRange(schema.default, schema)) return schema.default;
  // A refund or price of one cent reads wrong; ten units of currency reads like a real request.
  const want = /cents/i.test(key) ? 1000 : 1;
  const low = Math.max(schema.minimum ?? want, schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -Infinity);
  const n = Math.max(want, low);
  return schema.maximum !== undefined ? Math.min(n, schema.maximum) : n;
}

// ---------------------------------------------------------------------------------------------
// Answering from tool results.
// ---------------------------------------------------------------------------------------------

function answerFrom(results) {
  return results.map(({ name, content, error }) => sentenceFor(name ?? 'The tool', content, error)).join(' ');
}

function sentenceFor(name, content, error) {
  const text = content.trim();
  if (error || /^Error:/.test(text)) {
    return `${name} did not work: ${sentence(clip(text.replace(/^Error:\s*/, '')) || 'no reason given')}`;
  }
  if (name === 'get_current_time') {
    const when = new Date(text);
    if (!Number.isNaN(when.getTime())) {
      const hh = String(when.getUTCHours()).padStart(2, '0');
      const mm = String(when.getUTCMinutes()).padStart(2, '0');
      return `It is ${hh}:${mm} UTC on ${DAYS[when.getUTCDay()]}, ${when.getUTCDate()} ${MONTHS[when.getUTCMonth()]} ${when.getUTCFullYear()} (get_current_time returned ${text}).`;
    }
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return text ? `${name} returned: ${sentence(clip(text))}` : `${name} returned nothing.`;
  }
  if (name === 'get_weather' && isObject(value) && typeof value.temperature === 'number') {
    const unit = value.units === 'fahrenheit' ? '°F' : '°C';
    const humidity = typeof value.humidity_percent === 'number' ? `, humidity ${value.humidity_percent}%` : '';
    return `In ${value.city ?? 'that city'} it is ${value.temperature} ${unit}, ${value.conditions ?? 'conditions unknown'}${humidity}.`;
  }
  if (isObject(value)) {
    const fields = Object.entries(value).filter(([, v]) => ['string', 'number', 'boolean'].includes(typeof v));
    // The name first when there is one: "Ada Lovelace: id cus_1001, …" reads like an answer.
    const named = fields.find(([k]) => k === 'name');
    const rest = fields.filter(([k]) => k !== 'name').slice(0, 6).map(([k, v]) => `${k.replace(/_/g, ' ')} ${v}`);
    if (!fields.length) return `${name} returned ${clip(text)}.`;
    return named
      ? `${name} found ${named[1]}${rest.length ? `: ${rest.join(', ')}` : ''}.`
      : `${name} returned ${rest.join(', ')}.`;
  }
  if (Array.isArray(value)) return `${name} returned ${value.length} item${value.length === 1 ? '' : 's'}.`;
  return `${name} returned ${clip(String(value))}.`;
}

const sentence = (s) => (/[.!?…]$/.test(s) ? s : `${s}.`);

function clip(s, n = 300) {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

// ---------------------------------------------------------------------------------------------
// The demo text: what this is, what it read, what to try, how to switch.
// ---------------------------------------------------------------------------------------------

const TRIES = [
  ['get_current_time', '"what time is it?"'],
  ['get_weather', '"weather in Lisbon"'],
  ['lookup_customer', '"look up ada@example.com"'],
  ['process_order', '"order 2 TSHIRT-RED for cus_1001"'],
  ['issue_refund', '"refund $20 to cus_1001"'],
];

function demoText({ text, tools }, secret) {
  const offered = new Set(tools.map((t) => t.name));
  const said = text.trim().replace(/\s+/g, ' ');
  const parts = [
    tools.length
      ? `This is edgent's demo model (no API key set), not a real model: it answers a few kinds of request by calling this agent's tools.`
      : `This is edgent's demo model (no API key set), not a real model, and this prompt offers it no tools to call.`,
    said
      ? `You wrote "${clip(said, 120)}"${tools.length ? '; I found no request there for one of its tools' : ''}.`
      : 'I found no message from you to answer.',
  ];
  const tries = TRIES.filter(([tool]) => offered.has(tool)).slice(0, 3).map(([, example]) => example);
  // An app with other tools (examples/hello): naming a tool calls it.
  if (!tries.length && tools.length) tries.push(...tools.slice(0, 3).map((t) => `"${t.name.replace(/_/g, ' ')}"`));
  if (tries.length) parts.push(`Try ${tries.length > 1 ? `${tries.slice(0, -1).join(', ')} or ${tries.at(-1)}` : tries[0]}.`);
  parts.push(`For a real model, set ${secret} in .dev.vars and restart \`npm run dev\`.`);
  return parts.join(' ');
}
