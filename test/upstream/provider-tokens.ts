// The stand-in's input token count: the prompt each provider builds from a request, rendered as
// its docs describe and counted with o200k_base (OpenAI's tokenizer; Anthropic's is not public,
// so Claude's text is counted with it too). What each provider adds on its side is added as it
// documents it: OpenAI renders function definitions into its system message as a TypeScript
// namespace and a response schema under "# Response Formats"; Anthropic adds a tool-use system
// prompt (346 tokens for tool_choice auto/none, 313 for any/tool) and fixed tokens per tool it
// defines (bash 245, text editor 700, computer use 735 plus its 499-token system prompt).
// A member the stand-in does not know is billed as its JSON text, as a provider would bill a
// field it added. Images and stored references are counted apart (vision.ts, server-state.ts).
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

type Json = Record<string, unknown>;

// Special tokens' text in a request is text to the provider.
const tok = (s: string): number => (s.length === 0 ? 0 : countTokens(s, { disallowedSpecial: new Set() }));
/** Image parts, counted apart by the stand-in's vision rules: not as their JSON. */
const IMAGES = new Set(['image_url', 'input_image', 'image', 'computer_screenshot']);
const tokJson = (v: unknown): number =>
  tok(
    JSON.stringify(v, (_k, x: unknown) =>
      x !== null && typeof x === 'object' && IMAGES.has(String((x as Json).type)) ? null : x,
    ) ?? '',
  );
const arr = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What the providers document as no part of the prompt: the model, caps, sampling and delivery
 * settings. The stand-in's own list, not the gateway's NOT_INPUT: borrowing that would have the
 * property test check the gateway against itself.
 */
const SETTINGS = new Set([
  'model',
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'max_tool_calls',
  'n',
  'temperature',
  'top_p',
  'top_k',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'seed',
  'stop',
  'stop_sequences',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'metadata',
  'store',
  'service_tier',
  'parallel_tool_calls',
  'reasoning_effort',
  'reasoning',
  'verbosity',
  'modalities',
  'thinking',
  'cache_control',
  'truncation',
  'background',
  'include',
  // Billed as output (rejected prediction tokens), not as input.
  'prediction',
]);

/** A JSON schema as OpenAI renders a parameter's type. */
function schemaType(schema: unknown, indent: string): string {
  if (!isObject(schema)) return 'any';
  if (Array.isArray(schema.enum)) return schema.enum.map((e) => JSON.stringify(e)).join(' | ');
  if (schema.type === 'array') return `${schemaType(schema.items, indent)}[]`;
  if (schema.type === 'object' && isObject(schema.properties)) return objectType(schema, indent);
  if (Array.isArray(schema.anyOf)) return schema.anyOf.map((s) => schemaType(s, indent)).join(' | ');
  return typeof schema.type === 'string' ? (schema.type === 'integer' ? 'number' : schema.type) : 'any';
}

function objectType(schema: Json, indent: string): string {
  const required = new Set(arr(schema.required) as unknown as string[]);
  let out = '{\n';
  for (const [key, prop] of Object.entries(schema.properties as Json)) {
    const p = isObject(prop) ? prop : {};
    if (typeof p.description === 'string') out += `${indent}// ${p.description}\n`;
    out += `${indent}${key}${required.has(key) ? '' : '?'}: ${schemaType(p, `${indent}`)},\n`;
  }
  return `${out}${indent}}`;
}

/** Function definitions as OpenAI's system message carries them. */
function functionsNamespace(functions: Json[]): string {
  let out = '# Tools\n\n## functions\n\nnamespace functions {\n\n';
  for (const f of functions) {
    if (typeof f.description === 'string') out += `// ${f.description}\n`;
    const params =
      isObject(f.parameters) && isObject(f.parameters.properties) ? `_: ${objectType(f.parameters, '')}` : '';
    out += `type ${String(f.name)} = (${params}) => any;\n\n`;
  }
  return `${out}} // namespace functions`;
}

function responseFormat(name: unknown, description: unknown, schema: unknown): string {
  return `# Response Formats\n\n## ${String(name ?? 'response')}\n\n${typeof description === 'string' ? `// ${description}\n` : ''}${JSON.stringify(schema ?? {})}`;
}

/** OpenAI tools: functions in the namespace, any other tool as its JSON. */
function openAITools(tools: Json[], fnOf: (t: Json) => Json | undefined): number {
  const functions: Json[] = [];
  let n = 0;
  for (const t of tools) {
    const f = fnOf(t);
    if (f) functions.push(f);
    else n += tokJson(t);
  }
  return n + (functions.length ? tok(functionsNamespace(functions)) : 0);
}

/** Text of a chat or Responses content part list (images apart). */
function partsTokens(content: unknown): number {
  if (typeof content === 'string') return tok(content);
  let n = 0;
  for (const p of arr(content)) {
    if (typeof p?.text === 'string') n += tok(p.text);
    else if (p?.type === 'image_url' || p?.type === 'input_image') continue;
    else n += tokJson(p);
  }
  return n;
}

/** POST /v1/chat/completions. */
export function chatInputTokens(body: Json): number {
  let n = 3;
  for (const [k, v] of Object.entries(body)) {
    if (v == null || SETTINGS.has(k)) continue;
    if (k === 'messages') for (const m of arr(v)) n += chatMessage(m);
    else if (k === 'tools') n += openAITools(arr(v), (t) => (t.type === 'function' ? (t.function as Json) : undefined));
    else if (k === 'functions') n += openAITools(arr(v), (f) => f);
    else if (k === 'response_format' && isObject(v) && isObject(v.json_schema))
      n += tok(responseFormat(v.json_schema.name, v.json_schema.description, v.json_schema.schema));
    else n += typeof v === 'string' ? tok(v) : tokJson(v);
  }
  return n;
}

function chatMessage(m: Json): number {
  if (!isObject(m)) return 3 + tokJson(m);
  let n = 3;
  for (const [k, v] of Object.entries(m)) {
    if (v == null) continue;
    if (k === 'content') n += partsTokens(v);
    else if (k === 'name') n += 1 + tok(String(v));
    else if (k === 'tool_calls')
      for (const c of arr(v)) {
        const f = (c?.function ?? c?.custom ?? {}) as Json;
        n += 3 + tok(String(f.name ?? '')) + tok(String(f.arguments ?? f.input ?? ''));
      }
    else if (k === 'function_call' && isObject(v)) n += 3 + tok(String(v.name ?? '')) + tok(String(v.arguments ?? ''));
    else n += typeof v === 'string' ? tok(v) : tokJson(v);
  }
  return n;
}

/** Anthropic's tool-use additions: its system prompt by tool_choice, and fixed tokens per tool it defines. */
const CLAUDE_TOOL_PROMPT = { auto: 346, any: 313 };
const CLAUDE_TOOLS: Record<string, number> = { bash: 245, text_editor: 700, computer: 735 + 499 };

function claudeBlocks(content: unknown): number {
  if (typeof content === 'string') return tok(content);
  let n = 0;
  for (const b of arr(content)) {
    if (b?.type === 'text') n += tok(String(b.text ?? ''));
    else if (b?.type === 'image') continue;
    else if (b?.type === 'tool_use') n += 3 + tok(String(b.name ?? '')) + tokJson(b.input ?? {});
    else if (b?.type === 'tool_result') n += 3 + claudeBlocks(b.content);
    else if (b?.type === 'thinking') n += tok(String(b.thinking ?? ''));
    else n += tokJson(b);
  }
  return n;
}

/** POST /v1/messages (and count_tokens). */
export function messagesInputTokens(body: Json): number {
  let n = 3;
  for (const [k, v] of Object.entries(body)) {
    if (v == null || SETTINGS.has(k)) continue;
    if (k === 'system') n += 3 + claudeBlocks(v);
    else if (k === 'messages') for (const m of arr(v)) n += 3 + (isObject(m) ? claudeBlocks(m.content) : tokJson(m));
    else if (k === 'tools') n += claudeTools(body);
    else if (k === 'tool_choice')
      continue; // it picks the system prompt's size
    else n += typeof v === 'string' ? tok(v) : tokJson(v);
  }
  return n;
}

function claudeTools(body: Json): number {
  const tools = arr(body.tools);
  if (tools.length === 0) return 0;
  const choice = (body.tool_choice as Json | undefined)?.type;
  let n = choice === 'any' || choice === 'tool' ? CLAUDE_TOOL_PROMPT.any : CLAUDE_TOOL_PROMPT.auto;
  for (const t of tools) {
    const type = typeof t?.type === 'string' ? t.type : 'custom';
    const fixed = CLAUDE_TOOLS[type.replace(/_\d{8}$/, '')];
    if (fixed !== undefined) n += fixed;
    else if (type === 'custom')
      n += tok(String(t.name ?? '')) + tok(String(t.description ?? '')) + tokJson(t.input_schema ?? {});
    else n += tokJson(t);
  }
  return n;
}

/** POST /v1/responses. */
export function responsesInputTokens(body: Json): number {
  let n = 3;
  for (const [k, v] of Object.entries(body)) {
    if (v == null || SETTINGS.has(k)) continue;
    if (k === 'instructions' && typeof v === 'string') n += 3 + tok(v);
    else if (k === 'input')
      n += typeof v === 'string' ? 3 + tok(v) : arr(v).reduce((s, i) => s + 3 + responsesItem(i), 0);
    else if (k === 'tools') n += openAITools(arr(v), (t) => (t.type === 'function' ? t : undefined));
    else if (k === 'text' && isObject(v)) {
      const f = v.format as Json | undefined;
      if (f?.type === 'json_schema') n += tok(responseFormat(f.name, f.description, f.schema));
      else if (f != null) n += tokJson(f);
    } else n += typeof v === 'string' ? tok(v) : tokJson(v);
  }
  return n;
}

function responsesItem(item: Json): number {
  if (!isObject(item)) return tokJson(item);
  if (item.type === 'message' || (item.type === undefined && 'role' in item))
    return tok(String(item.role ?? '')) + partsTokens(item.content);
  if (item.type === 'function_call') return tok(String(item.name ?? '')) + tok(String(item.arguments ?? ''));
  if (item.type === 'function_call_output')
    return typeof item.output === 'string' ? tok(item.output) : partsTokens(item.output);
  return tokJson(item);
}
