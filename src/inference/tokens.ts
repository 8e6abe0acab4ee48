// Token estimates for holds and token counts for upstreams that report no usage.
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

// The encoder builds its tables on the first count (~35 ms): here, at start-up, rather than in
// the middle of the first request that needs a count.
countTokens('warm up');

type Json = Record<string, unknown>;

/** Tokens an image part may cost at most (high detail, many tiles); it has few bytes of its own. */
export const IMAGE_PART_TOKENS = 2_000;
const PER_MESSAGE_OVERHEAD = 8;
const PER_REQUEST_OVERHEAD = 16;

export const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * An upper bound on the request's input tokens without tokenizing: a byte-level BPE token
 * covers at least one byte, so text bytes bound text tokens. Images are counted at their
 * ceiling, not by the bytes of their URL or data. Cheap enough for every request.
 */
export function inputTokensUpperBound(body: Json): number {
  let total = PER_REQUEST_OVERHEAD;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) {
    total += PER_MESSAGE_OVERHEAD;
    if (m === null || typeof m !== 'object') continue;
    for (const [k, v] of Object.entries(m)) {
      if (k === 'content') total += contentUpperBound(v);
      else if (typeof v === 'string') total += utf8Length(v);
      else if (v !== null && v !== undefined) total += utf8Length(JSON.stringify(v));
    }
  }
  for (const field of ['tools', 'functions', 'response_format', 'tool_choice', 'prediction']) {
    if (body[field] !== undefined) total += utf8Length(JSON.stringify(body[field]));
  }
  return total;
}

function contentUpperBound(content: unknown): number {
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return content == null ? 0 : utf8Length(JSON.stringify(content));
  let n = 0;
  for (const part of content as Json[]) {
    if (part?.type === 'text' && typeof part.text === 'string') n += utf8Length(part.text) + 4;
    else if (part?.type === 'image_url') n += IMAGE_PART_TOKENS;
    else n += utf8Length(JSON.stringify(part));
  }
  return n;
}

export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : countTokens(text);
}

/** The request's input tokens as an OpenAI-style tokenizer sees them (o200k_base). */
export function countInputTokens(body: Json): number {
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
        else if (part?.type === 'image_url') total += IMAGE_PART_TOKENS;
        else total += countTextTokens(JSON.stringify(part));
      }
    }
    if (typeof m.name === 'string') total += 1 + countTextTokens(m.name);
    if (m.tool_calls !== undefined) total += countTextTokens(JSON.stringify(m.tool_calls));
  }
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return total;
}

/** Tokens a Claude image may cost at most (about 1.6k for the largest size Claude keeps). */
const CLAUDE_IMAGE_TOKENS = 2_000;

/**
 * Upper bound of an Anthropic messages request's input tokens: text bytes, images at their
 * ceiling, base64 documents by their decoded size, everything else by its JSON bytes.
 */
export function anthropicInputUpperBound(body: Json): number {
  let total = PER_REQUEST_OVERHEAD + blocksUpperBound(body.system);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) total += PER_MESSAGE_OVERHEAD + blocksUpperBound(m?.content);
  if (body.tools !== undefined) total += utf8Length(JSON.stringify(body.tools));
  if (body.tool_choice !== undefined) total += utf8Length(JSON.stringify(body.tool_choice));
  return total;
}

function blocksUpperBound(content: unknown): number {
  if (content == null) return 0;
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return utf8Length(JSON.stringify(content));
  let n = 0;
  for (const b of content as Json[]) {
    const source = b?.source as Json | undefined;
    if (b?.type === 'text' && typeof b.text === 'string') n += utf8Length(b.text) + 4;
    else if (b?.type === 'image') n += CLAUDE_IMAGE_TOKENS;
    else if (b?.type === 'document' && source?.type === 'base64' && typeof source.data === 'string') n += Math.ceil((source.data.length * 3) / 4);
    else if (b?.type === 'tool_result') n += 8 + blocksUpperBound(b.content);
    else n += utf8Length(JSON.stringify(b));
  }
  return n;
}

/** Tokenizer count of an Anthropic request (o200k: close to, not exactly, Claude's tokenizer). */
export function countAnthropicInput(body: Json): number {
  let total = 3 + blocksCount(body.system);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages as Json[]) total += 3 + blocksCount(m?.content);
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return total;
}

function blocksCount(content: unknown): number {
  if (content == null) return 0;
  if (typeof content === 'string') return countTextTokens(content);
  if (!Array.isArray(content)) return countTextTokens(JSON.stringify(content));
  let n = 0;
  for (const b of content as Json[]) {
    if (b?.type === 'text' && typeof b.text === 'string') n += countTextTokens(b.text);
    else if (b?.type === 'image') n += CLAUDE_IMAGE_TOKENS;
    else if (b?.type === 'tool_result') n += blocksCount(b.content);
    else n += countTextTokens(JSON.stringify(b));
  }
  return n;
}

/** Upper bound of a Responses API request's input tokens (same reasoning as for chat). */
export function responsesInputUpperBound(body: Json): number {
  let total = PER_REQUEST_OVERHEAD;
  if (typeof body.instructions === 'string') total += utf8Length(body.instructions);
  const input = body.input;
  if (typeof input === 'string') total += PER_MESSAGE_OVERHEAD + utf8Length(input);
  else if (Array.isArray(input)) {
    for (const item of input as Json[]) {
      total += PER_MESSAGE_OVERHEAD;
      if (item?.type === 'message' || (item && 'role' in item)) total += partsUpperBound(item.content);
      else total += utf8Length(JSON.stringify(item ?? null));
    }
  }
  if (body.tools !== undefined) total += utf8Length(JSON.stringify(body.tools));
  if (body.text !== undefined) total += utf8Length(JSON.stringify(body.text));
  return total;
}

function partsUpperBound(content: unknown): number {
  if (typeof content === 'string') return utf8Length(content);
  if (!Array.isArray(content)) return content == null ? 0 : utf8Length(JSON.stringify(content));
  let n = 0;
  for (const p of content as Json[]) {
    if (typeof p?.text === 'string') n += utf8Length(p.text) + 4;
    else if (p?.type === 'input_image') n += IMAGE_PART_TOKENS;
    else if (p?.type === 'input_file' && typeof p.file_data === 'string') n += Math.ceil((p.file_data.length * 3) / 4);
    else n += utf8Length(JSON.stringify(p));
  }
  return n;
}

/** Tokenizer count of a Responses API request. */
export function countResponsesInput(body: Json): number {
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
        for (const p of content as Json[]) total += typeof p?.text === 'string' ? countTextTokens(p.text) : p?.type === 'input_image' ? IMAGE_PART_TOKENS : countTextTokens(JSON.stringify(p));
      } else total += countTextTokens(JSON.stringify(item ?? null));
    }
  }
  if (body.tools !== undefined) total += countTextTokens(JSON.stringify(body.tools));
  return total;
}
