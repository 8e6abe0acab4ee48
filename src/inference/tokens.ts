// Input tokens a request can be billed for, two ways from one walk per wire format: the hold's
// cheap upper bound (a byte-level BPE token covers at least one byte, so text bytes bound text
// tokens) and the tokenizer count a tight balance needs (o200k_base), images as the model bills
// them. Counted by refusal: every member of a body counts (as its JSON text) unless it is named
// in NOT_INPUT as one the provider does not bill, so a field a provider adds tomorrow counts too
// (docs/billing.md#what-the-input-count-reads).
import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { CatalogueEntry, ToolUseTokens, VisionBilling } from '../catalogue/models.ts';
import type { TokenUsage } from '../billing/pricing.ts';
import type { WireFormat } from '../tenancy/operator-objects.ts';
import { base64ImageSize, dataUrlBase64, imageTokens } from './media/image-tokens.ts';
import type { Plan } from '../metering/plan.ts';

// The encoder builds its tables on the first count, which is slow: here, at start-up, rather than in
// the middle of the first request that needs a count.
countTokens('warm up');

type Json = Record<string, unknown>;

export const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** Special tokens' text (`<|endoftext|>`) in a request is text like any other, not a reason to throw. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };
/**
 * Long text is counted in slices of at most this many characters: BPE's time grows with the
 * square of a run that has no break (one long word, a line of base64), so a single
 * 100,000-letter run took 18 s. A slice ends before a space where there is one, which is where
 * the tokenizer splits words anyway; elsewhere a boundary can only stop merges, so the sum is
 * not below the whole's count.
 */
const SLICE = 1_024;

function sliced(count: (text: string, options: typeof AS_TEXT) => number): (text: string) => number {
  return (text) => {
    if (text.length <= SLICE) return text.length === 0 ? 0 : count(text, AS_TEXT);
    let n = 0;
    for (let at = 0; at < text.length; ) {
      let end = Math.min(at + SLICE, text.length);
      if (end < text.length) {
        const space = text.lastIndexOf(' ', end - 1);
        if (space > at + SLICE / 2) end = space;
        else if (isHighSurrogate(text.charCodeAt(end - 1))) end++; // never split a surrogate pair
      }
      n += count(text.slice(at, end), AS_TEXT);
      at = end;
    }
    return n;
  };
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;

/** o200k_base tokens of a text (OpenAI's current models; Claude's text is counted with it too). */
export const countTextTokens = sliced(countTokens);
/** cl100k_base tokens of a text (OpenAI's embedding models). */
export const countCl100kTokens = sliced(countCl100k);

/** What counting a request's input needs of its model: how it bills images and tools, and its context window. */
export type InputModel = Pick<CatalogueEntry, 'vision' | 'contextWindow' | 'toolUse'>;

/**
 * Top-level members the provider does not bill as input: the model, output caps, sampling and
 * delivery knobs, ids and tags. Every other member is input. A name here must be one the
 * provider documents as such; when in doubt a field stays counted.
 */
const NOT_INPUT: Record<WireFormat, ReadonlySet<string>> = {
  chat: new Set([
    'model',
    'stream',
    'stream_options',
    'max_tokens',
    'max_completion_tokens',
    'n',
    'temperature',
    'top_p',
    'frequency_penalty',
    'presence_penalty',
    'logit_bias',
    'logprobs',
    'top_logprobs',
    'seed',
    'stop',
    'user',
    'safety_identifier',
    'prompt_cache_key',
    'prompt_cache_retention',
    'metadata',
    'store',
    'service_tier',
    'parallel_tool_calls',
    'reasoning_effort',
    'verbosity',
    'modalities',
  ]),
  messages: new Set([
    'model',
    'stream',
    'max_tokens',
    'temperature',
    'top_p',
    'top_k',
    'stop_sequences',
    'metadata',
    'service_tier',
    'thinking',
    'cache_control',
  ]),
  responses: new Set([
    'model',
    'stream',
    'stream_options',
    'max_output_tokens',
    'max_tool_calls',
    'temperature',
    'top_p',
    'top_logprobs',
    'truncation',
    'user',
    'safety_identifier',
    'prompt_cache_key',
    'prompt_cache_retention',
    'metadata',
    'store',
    'service_tier',
    'parallel_tool_calls',
    'background',
    'include',
    'reasoning',
  ]),
};

/** The member that holds the conversation: each of its entries is framed as a message. */
const CONVERSATION: Record<WireFormat, string> = { chat: 'messages', messages: 'messages', responses: 'input' };

/** How text is measured, and what framing the provider adds around what it renders. */
interface Measure {
  text(s: string): number;
  perRequest: number;
  /** Role markers and separators around each message or input item. */
  perMessage: number;
  /** The provider's framing of a structured member in its prompt (tools, functions, a schema: "namespace functions { … }"). */
  perStructure: number;
  /** … and of each entry of a list of them (one function's "type f = (_: {…}) => any;"). */
  perEntry: number;
}

/** The hold's bound: UTF-8 bytes, with generous framing. */
const BYTES: Measure = { text: utf8Length, perRequest: 16, perMessage: 8, perStructure: 64, perEntry: 16 };
/** The tokenizer's count: o200k tokens; JSON punctuation is more than the provider's rendering adds, framing aside. */
const TOKENS: Measure = { text: countTextTokens, perRequest: 3, perMessage: 3, perStructure: 32, perEntry: 8 };

/** Without a rule, an image counts as on the model that bills one dearest in tokens (gpt-4o-mini: 48,169 at most). */
const DEAREST_IMAGES: VisionBilling = { kind: 'tiles', baseTokens: 2_833, tileTokens: 5_667 };

/**
 * A Claude model the book says nothing about: the dearest tool-use system prompt Anthropic has
 * published (Claude 3 Opus, auto: 530) and its current per-tool figures.
 */
const DEAREST_TOOL_USE: ToolUseTokens = {
  systemPrompt: { auto: 530, any: 530 },
  tools: { bash: 245, text_editor: 700, computer: 1_234 },
};

/**
 * The images of one request on one model (docs/billing.md#images): each at what the model bills
 * for it, and whether one may fill the context window (a provider with no published rule).
 */
class Images {
  private readonly model: InputModel | undefined;
  private fillsWindow = false;

  constructor(model: InputModel | undefined) {
    this.model = model;
  }

  /**
   * One image: `url` a data URL, a URL or undefined (by file id); `base64` its bytes when given
   * apart (Claude). Undefined on a model that reads no images (its provider refuses them): the
   * part counts as any other part, by its JSON.
   */
  count(source: { url?: unknown; base64?: unknown }, detail: unknown): number | undefined {
    const rule = this.model?.vision ?? DEAREST_IMAGES;
    if (rule.kind === 'none') return undefined;
    if (rule.kind === 'window') {
      this.fillsWindow = true;
      return 0;
    }
    const base64 =
      typeof source.base64 === 'string'
        ? source.base64
        : typeof source.url === 'string'
          ? dataUrlBase64(source.url)
          : undefined;
    return imageTokens(rule, base64 === undefined ? undefined : base64ImageSize(base64), detail);
  }

  /** The request's input tokens: at least the context window when an image's cost is not published. */
  total(tokens: number): number {
    return this.fillsWindow && this.model ? Math.max(tokens, this.model.contextWindow) : tokens;
  }
}

/** An image part of each wire format, wherever it sits (a message, a tool's result or output), counted by `images`. */
const IMAGE_PARTS: Record<WireFormat, { mark: RegExp; count(o: Json, images: Images): number | undefined }> = {
  // `{type: 'image_url', image_url: {url, detail}}`, or the URL alone.
  chat: {
    mark: /"image_url"/,
    count: (o, images) => {
      if (o.type !== 'image_url') return undefined;
      const image = o.image_url;
      if (typeof image === 'string') return images.count({ url: image }, undefined);
      const i = (image ?? {}) as Json;
      return images.count({ url: i.url }, i.detail);
    },
  },
  // `{type: 'image', source}`: base64 bytes, or a URL or file the provider fetches.
  messages: {
    mark: /"image"/,
    count: (o, images) => {
      if (o.type !== 'image') return undefined;
      const source = (o.source ?? {}) as Json;
      return images.count(source.type === 'base64' ? { base64: source.data } : {}, undefined);
    },
  },
  // `input_image` parts and a computer call's `computer_screenshot` output: `image_url` (data URL or URL) or `file_id`.
  responses: {
    mark: /"(?:input_image|computer_screenshot)"/,
    count: (o, images) =>
      o.type === 'input_image' || o.type === 'computer_screenshot'
        ? images.count({ url: o.image_url }, o.detail)
        : undefined,
  },
};

/** One value as the provider may render it: a string as its text, anything else as its JSON text, images as images (their place in the JSON a null). */
function valueInput(v: unknown, format: WireFormat, images: Images, m: Measure): number {
  if (typeof v === 'string') return m.text(v);
  const json = JSON.stringify(v) ?? '';
  const parts = IMAGE_PARTS[format];
  if (!parts.mark.test(json)) return m.text(json);
  let n = 0;
  const rest = JSON.stringify(v, (_key, x: unknown) => {
    if (x === null || typeof x !== 'object' || Array.isArray(x)) return x;
    const counted = parts.count(x as Json, images);
    if (counted === undefined) return x;
    n += counted;
    return null;
  });
  return n + m.text(rest);
}

/**
 * A body's input: every member not in NOT_INPUT, the conversation entry by entry (each framed
 * as a message), other members with the framing a provider renders them in.
 */
function bodyInput(body: Json, format: WireFormat, images: Images, m: Measure): number {
  const notInput = NOT_INPUT[format];
  const conversation = CONVERSATION[format];
  let total = m.perRequest;
  for (const [k, v] of Object.entries(body)) {
    if (v === null || v === undefined || notInput.has(k)) continue;
    if (k === conversation) {
      if (Array.isArray(v)) {
        for (const entry of v) total += m.perMessage + valueInput(entry, format, images, m);
        continue;
      }
      if (typeof v === 'string') {
        total += m.perMessage + m.text(v);
        continue;
      }
    }
    total += valueInput(v, format, images, m);
    // A string (instructions, a system prompt) is rendered as a message of its own; a structure in a framing.
    total += typeof v === 'object' ? m.perStructure + (Array.isArray(v) ? v.length * m.perEntry : 0) : m.perMessage;
  }
  return total;
}

/**
 * What Anthropic adds to a request that carries tools: the tool-use system prompt (by
 * tool_choice; an unknown choice at the dearer figure) and fixed tokens per tool type it
 * defines (`bash_20250124` is `bash`; a type the book does not list at its dearest figure).
 */
export function claudeToolUseTokens(body: Json, model?: InputModel): number {
  const tools = Array.isArray(body.tools) ? (body.tools as unknown[]) : [];
  if (tools.length === 0) return 0;
  const rule = model?.toolUse ?? DEAREST_TOOL_USE;
  const choice = (body.tool_choice as Json | undefined)?.type;
  const { auto, any } = rule.systemPrompt;
  let n =
    choice === undefined || choice === 'auto' || choice === 'none'
      ? auto
      : choice === 'any' || choice === 'tool'
        ? any
        : Math.max(auto, any);
  const dearest = Math.max(0, ...Object.values(rule.tools));
  for (const t of tools) {
    const type = (t as Json | null)?.type;
    if (typeof type !== 'string' || type === 'custom') continue;
    const name = type.replace(/_\d{8}$/, '');
    n += Object.hasOwn(rule.tools, name) ? rule.tools[name]! : dearest;
  }
  return n;
}

function input(body: Json, format: WireFormat, model: InputModel | undefined, m: Measure): number {
  const images = new Images(model);
  const n = bodyInput(body, format, images, m) + (format === 'messages' ? claudeToolUseTokens(body, model) : 0);
  return images.total(n);
}

/** An upper bound on a chat completions request's input tokens, without tokenizing: cheap enough for every request. */
export function inputTokensUpperBound(body: Json, model?: InputModel): number {
  return input(body, 'chat', model, BYTES);
}

/** A chat completions request's input tokens as an OpenAI-style tokenizer sees them (o200k_base), images as `model` bills them. */
export function countInputTokens(body: Json, model?: InputModel): number {
  return input(body, 'chat', model, TOKENS);
}

/** An upper bound on an Anthropic messages request's input tokens, Claude's tool-use tokens included. */
export function anthropicInputUpperBound(body: Json, model?: InputModel): number {
  return input(body, 'messages', model, BYTES);
}

/** Tokenizer count of an Anthropic request (o200k: close to, not exactly, Claude's tokenizer), tool-use tokens included. */
export function countAnthropicInput(body: Json, model?: InputModel): number {
  return input(body, 'messages', model, TOKENS);
}

/** An upper bound on a Responses API request's input tokens. */
export function responsesInputUpperBound(body: Json, model?: InputModel): number {
  return input(body, 'responses', model, BYTES);
}

/** Tokenizer count of a Responses API request, images as `model` bills them. */
export function countResponsesInput(body: Json, model?: InputModel): number {
  return input(body, 'responses', model, TOKENS);
}

/** A reply's usage counted by the gateway (the provider reported none): the plan's input count and the delivered text. */
export function countedUsage(plan: Pick<Plan, 'countInput'>, outputText: string): TokenUsage {
  return {
    inputTokens: plan.countInput(),
    outputTokens: BigInt(countTextTokens(outputText)),
    cachedTokens: 0n,
    cacheWriteTokens: 0n,
  };
}
