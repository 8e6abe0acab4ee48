// Token estimates for holds and token counts for upstreams that report no usage.
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { CatalogueEntry, VisionBilling } from '../catalogue/models.ts';
import { base64ImageSize, dataUrlBase64, imageTokens } from './media/image-tokens.ts';

// The encoder builds its tables on the first count, which is slow: here, at start-up, rather than in
// the middle of the first request that needs a count.
countTokens('warm up');

type Json = Record<string, unknown>;

const PER_MESSAGE_OVERHEAD = 8;
const PER_REQUEST_OVERHEAD = 16;

export const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** What counting a request's input needs of its model: how it bills images, and its context window. */
export type InputModel = Pick<CatalogueEntry, 'vision' | 'contextWindow'>;

/** Without a rule, an image counts as on the model that bills one dearest in tokens (gpt-4o-mini: 48,169 at most). */
const DEAREST_IMAGES: VisionBilling = { kind: 'tiles', baseTokens: 2_833, tileTokens: 5_667 };

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
   * apart (Claude). A model that reads no images has its provider refuse them: the part counts as
   * `asPart()`, its bytes, as any other part.
   */
  count(source: { url?: unknown; base64?: unknown }, detail: unknown, asPart: () => number): number {
    const rule = this.model?.vision ?? DEAREST_IMAGES;
    if (rule.kind === 'none') return asPart();
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

/** A chat `image_url` part (`{url, detail}`, or the URL alone). */
function chatImage(part: Json, images: Images, asPart: () => number): number {
  const image = part.image_url;
  if (typeof image === 'string') return images.count({ url: image }, undefined, asPart);
  const o = (image ?? {}) as Json;
  return images.count({ url: o.url }, o.detail, asPart);
}

/** A Claude `image` block: base64 bytes, or a URL or file the provider fetches. */
function claudeImage(block: Json, images: Images, asPart: () => number): number {
  const source = (block.source ?? {}) as Json;
  return images.count(source.type === 'base64' ? { base64: source.data } : {}, undefined, asPart);
}

/** A Responses `input_image` part, or a computer call's `computer_screenshot` output: `image_url` (a data URL or a URL) or `file_id`. */
function responsesImage(part: Json, images: Images, asPart: () => number): number {
  return images.count({ url: part.image_url }, part.detail, asPart);
}

const MAY_HOLD_IMAGES = /"(?:input_image|computer_screenshot)"/;
const isResponsesImage = (v: unknown): v is Json =>
  v !== null &&
  typeof v === 'object' &&
  ((v as Json).type === 'input_image' || (v as Json).type === 'computer_screenshot');

/**
 * A Responses item other than a message (a tool call's output can hold images): by its JSON
 * without the images, measured by `measure`, plus the images as images.
 */
function itemWithImages(item: unknown, images: Images, measure: (json: string) => number): number {
  const json = JSON.stringify(item ?? null);
  if (!MAY_HOLD_IMAGES.test(json)) return measure(json);
  let n = 0;
  const rest = JSON.stringify(item, (_key, v: unknown) => {
    if (!isResponsesImage(v)) return v;
    n += responsesImage(v, images, () => measure(JSON.stringify(v)));
    return null;
  });
  return n + measure(rest);
}

/**
 * An upper bound on the request's input tokens without tokenizing: a byte-level BPE token
 * covers at least one byte, so text bytes bound text tokens. Images are counted as `model` bills
 * them, not by the bytes of their URL or data. Cheap enough for every request.
 */
export function inputTokensUpperBound(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = PER_REQUEST_OVERHEAD;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) {
    total += PER_MESSAGE_OVERHEAD;
    if (m === null || typeof m !== 'object') continue;
    for (const [k, v] of Object.entries(m)) {
      if (k === 'content') total += contentUpperBound(v, images);
      else if (typeof v === 'string') total += utf8Length(v);
      else if (v !== null && v !== undefined) total += utf8Length(JSON.stringify(v));
    }
  }
  for (const field of ['tools', 'functions', 'response_format', 'tool_choice', 'prediction']) {
    if (body[field] !== undefined) total += utf8Length(JSON.stringify(body[field]));
  }
  return images.total(total);
}

function contentUpperBound(content: unknown, images: Images): number {
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return content == null ? 0 : utf8Length(JSON.stringify(content));
  let n = 0;
  for (const part of content as Json[]) {
    if (part?.type === 'text' && typeof part.text === 'string') n += utf8Length(part.text) + 4;
    else if (part?.type === 'image_url') n += chatImage(part, images, () => utf8Length(JSON.stringify(part)));
    else n += utf8Length(JSON.stringify(part));
  }
  return n;
}

export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : countTokens(text);
}

/** The request's input tokens as an OpenAI-style tokenizer sees them (o200k_base), images as `model` bills them. */
export function countInputTokens(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = 3;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) {
    total += 3;
    if (m === null || typeof m !== 'object') continue;
    const content = m.content;
    if (typeof content === 'string') total += countTextTokens(content);
    else if (Array.isArray(content)) {
      for (const part of content as Json[]) {
        if (part?.type === 'text' && typeof part.text === 'string') total += countTextTokens(part.text);
        else if (part?.type === 'image_url')
          total += chatImage(part, images, () => countTextTokens(JSON.stringify(part)));
        else total += countTextTokens(JSON.stringify(part));
      }
    }
    if (typeof m.name === 'string') total += 1 + countTextTokens(m.name);
    if (m.tool_calls !== undefined) total += countTextTokens(JSON.stringify(m.tool_calls));
  }
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return images.total(total);
}

/**
 * Upper bound of an Anthropic messages request's input tokens: text bytes, images as `model`
 * bills them, base64 documents by their decoded size, everything else by its JSON bytes.
 */
export function anthropicInputUpperBound(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = PER_REQUEST_OVERHEAD + blocksUpperBound(body.system, images);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) total += PER_MESSAGE_OVERHEAD + blocksUpperBound(m?.content, images);
  if (body.tools !== undefined) total += utf8Length(JSON.stringify(body.tools));
  if (body.tool_choice !== undefined) total += utf8Length(JSON.stringify(body.tool_choice));
  return images.total(total);
}

function blocksUpperBound(content: unknown, images: Images): number {
  if (content == null) return 0;
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return utf8Length(JSON.stringify(content));
  let n = 0;
  for (const b of content as Json[]) {
    const source = b?.source as Json | undefined;
    if (b?.type === 'text' && typeof b.text === 'string') n += utf8Length(b.text) + 4;
    else if (b?.type === 'image') n += claudeImage(b, images, () => utf8Length(JSON.stringify(b)));
    else if (b?.type === 'document' && source?.type === 'base64' && typeof source.data === 'string')
      n += Math.ceil((source.data.length * 3) / 4);
    else if (b?.type === 'tool_result') n += 8 + blocksUpperBound(b.content, images);
    else n += utf8Length(JSON.stringify(b));
  }
  return n;
}

/** Tokenizer count of an Anthropic request (o200k: close to, not exactly, Claude's tokenizer), images as `model` bills them. */
export function countAnthropicInput(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = 3 + blocksCount(body.system, images);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) total += 3 + blocksCount(m?.content, images);
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return images.total(total);
}

function blocksCount(content: unknown, images: Images): number {
  if (content == null) return 0;
  if (typeof content === 'string') return countTextTokens(content);
  if (!Array.isArray(content)) return countTextTokens(JSON.stringify(content));
  let n = 0;
  for (const b of content as Json[]) {
    if (b?.type === 'text' && typeof b.text === 'string') n += countTextTokens(b.text);
    else if (b?.type === 'image') n += claudeImage(b, images, () => countTextTokens(JSON.stringify(b)));
    else if (b?.type === 'tool_result') n += blocksCount(b.content, images);
    else n += countTextTokens(JSON.stringify(b));
  }
  return n;
}

/** Upper bound of a Responses API request's input tokens (same reasoning as for chat). */
export function responsesInputUpperBound(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = PER_REQUEST_OVERHEAD;
  if (typeof body.instructions === 'string') total += utf8Length(body.instructions);
  const input = body.input;
  if (typeof input === 'string') total += PER_MESSAGE_OVERHEAD + utf8Length(input);
  else if (Array.isArray(input)) {
    for (const item of input as Json[]) {
      total += PER_MESSAGE_OVERHEAD;
      if (item?.type === 'message' || (item && 'role' in item)) total += partsUpperBound(item.content, images);
      else total += itemWithImages(item, images, utf8Length);
    }
  }
  if (body.tools !== undefined) total += utf8Length(JSON.stringify(body.tools));
  if (body.text !== undefined) total += utf8Length(JSON.stringify(body.text));
  return images.total(total);
}

function partsUpperBound(content: unknown, images: Images): number {
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return content == null ? 0 : utf8Length(JSON.stringify(content));
  let n = 0;
  for (const p of content as Json[]) {
    if (typeof p?.text === 'string') n += utf8Length(p.text) + 4;
    else if (p?.type === 'input_image') n += responsesImage(p, images, () => utf8Length(JSON.stringify(p)));
    else if (p?.type === 'input_file' && typeof p.file_data === 'string') n += Math.ceil((p.file_data.length * 3) / 4);
    else n += utf8Length(JSON.stringify(p));
  }
  return n;
}

/** Tokenizer count of a Responses API request, images as `model` bills them. */
export function countResponsesInput(body: Json, model?: InputModel): number {
  const images = new Images(model);
  let total = 3;
  if (typeof body.instructions === 'string') total += 3 + countTextTokens(body.instructions);
  const input = body.input;
  if (typeof input === 'string') total += 3 + countTextTokens(input);
  else if (Array.isArray(input)) {
    for (const item of input as Json[]) {
      total += 3;
      const content = item?.content;
      if (typeof content === 'string') total += countTextTokens(content);
      else if (Array.isArray(content)) {
        for (const p of content as Json[]) {
          if (typeof p?.text === 'string') total += countTextTokens(p.text);
          else if (p?.type === 'input_image')
            total += responsesImage(p, images, () => countTextTokens(JSON.stringify(p)));
          else total += countTextTokens(JSON.stringify(p));
        }
      } else total += itemWithImages(item, images, countTextTokens);
    }
  }
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return images.total(total);
}
