// The demo's embeddings: OpenAI's API (floats, or base64 little-endian float32 as the OpenAI
// SDK asks by default) and Cohere's Embed v2. A vector is a deterministic function of its text
// (the same text, the same vector), of unit length; tokens are counted as the gateway counts them
// (cl100k_base), and a list of token ids is its length.
import { createHash } from 'node:crypto';
import type http from 'node:http';
import { countCl100kTokens } from '../inference/tokens.ts';
import { openAIError, sendJson, type DemoRequest, newId } from './wire.ts';

/** OpenAI's default dimensions; other models (and Cohere's) 1024. */
const DIMENSIONS: Record<string, number> = {
  'text-embedding-3-large': 3072,
  'text-embedding-3-small': 1536,
  'text-embedding-ada-002': 1536,
};

/** A unit vector of `dims` values from the text's hash, exact in float32 (so base64 round trips compare equal). */
function vectorOf(input: string | number[], dims: number): number[] {
  const seed = createHash('sha256').update(JSON.stringify(input)).digest();
  const raw = Array.from({ length: dims }, (_, i) => seed[i % 32]! - 127.5 + ((i * 7) % 13));
  const norm = Math.sqrt(raw.reduce((s, x) => s + x * x, 0));
  return raw.map((x) => Math.fround(x / norm));
}

function float32Base64(v: readonly number[]): string {
  const out = Buffer.alloc(v.length * 4);
  v.forEach((x, i) => out.writeFloatLE(x, i * 4));
  return out.toString('base64');
}

const isTokens = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === 'number');

export function embeddings(req: DemoRequest, res: http.ServerResponse): void {
  const body = req.json ?? {};
  const input = body.input;
  const inputs: (string | number[])[] =
    typeof input === 'string' || isTokens(input)
      ? [input]
      : Array.isArray(input)
        ? (input as (string | number[])[])
        : [];
  if (inputs.length === 0 || !inputs.every((i) => typeof i === 'string' || isTokens(i)))
    return openAIError(res, 400, "'input' must be a string, an array of strings, or arrays of token ids.", 'input');
  const dims = typeof body.dimensions === 'number' ? body.dimensions : (DIMENSIONS[String(body.model)] ?? 1024);
  const tokens = inputs.reduce((n, i) => n + (typeof i === 'string' ? countCl100kTokens(i) : i.length), 0);
  sendJson(res, 200, {
    object: 'list',
    model: body.model,
    data: inputs.map((i, index) => {
      const v = vectorOf(i, dims);
      return { object: 'embedding', index, embedding: body.encoding_format === 'base64' ? float32Base64(v) : v };
    }),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}

/** Cohere's Embed v2 (the gateway translates OpenAI's requests for Cohere's models to it). */
export function cohereEmbed(req: DemoRequest, res: http.ServerResponse): void {
  const texts = req.json?.texts;
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string'))
    return sendJson(res, 400, { message: 'invalid request: texts must be a list of strings' });
  sendJson(res, 200, {
    id: newId(''),
    texts,
    response_type: 'embeddings_by_type',
    embeddings: { float: texts.map((t) => vectorOf(t, 1024)) },
    meta: {
      api_version: { version: '2' },
      billed_units: { input_tokens: texts.reduce((n, t) => n + countCl100kTokens(t), 0) },
    },
  });
}
