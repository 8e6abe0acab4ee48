// Cohere's Embed API v2: its own request and reply shapes, translated to and from OpenAI's
// embeddings format here (pure functions; the service does the I/O).
import { credentialHeader, withProviderHeaders, type Target } from './target.ts';

type Json = Record<string, unknown>;

export const COHERE_MAX_TEXTS = 96;

export function cohere(t: Target) {
  return {
    embedUrl: `${t.provider.baseUrl}/v2/embed`,
    headers: withProviderHeaders(t, {
      ...credentialHeader(t, 'authorization', `Bearer ${t.apiKey}`),
      'content-type': 'application/json',
      accept: 'application/json',
    }),
  };
}

/** OpenAI request fields -> Cohere's. `input_type` is Cohere's own and may be given by the caller. */
export function embedRequest(upstreamModel: string, texts: string[], inputType: unknown): Json {
  return {
    model: upstreamModel,
    texts,
    input_type: typeof inputType === 'string' ? inputType : 'search_document',
    embedding_types: ['float'],
    // Never cut input silently: the gateway checked the length, the upstream must agree.
    truncate: 'NONE',
  };
}

/** Cohere's reply -> OpenAI's list of embeddings; undefined when the reply has no float vectors. */
export function embedReply(
  reply: Json,
  model: string,
  base64: boolean,
): { body: Json; inputTokens: bigint | undefined } | undefined {
  const emb = reply.embeddings as Json | unknown[] | undefined;
  const vectors = Array.isArray(emb) ? emb : (emb as Json | undefined)?.float;
  if (!Array.isArray(vectors)) return undefined;
  const billed = ((reply.meta as Json | undefined)?.billed_units as Json | undefined)?.input_tokens;
  const inputTokens =
    typeof billed === 'number' && Number.isSafeInteger(billed) && billed >= 0 ? BigInt(billed) : undefined;
  const tokens = Number(inputTokens ?? 0n);
  return {
    inputTokens,
    body: {
      object: 'list',
      data: vectors.map((v, index) => ({
        object: 'embedding',
        index,
        embedding: base64 ? float32Base64(v as number[]) : v,
      })),
      model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
  };
}

/** OpenAI's base64 encoding: the vector as little-endian float32, base64. */
export function float32Base64(v: readonly number[]): string {
  const out = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) out.writeFloatLE(v[i]!, i * 4);
  return out.toString('base64');
}
