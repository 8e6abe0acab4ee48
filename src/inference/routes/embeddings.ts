// POST /v1/embeddings: OpenAI models natively, Cohere through its own API (translated both
// ways). Input longer than the model's context is refused before any upstream call; the
// charge is the upstream's token count at the catalogue's per-1M price.
import type { Caller } from '../../billing/caller.ts';
import { badRequest } from '../../errors/errors.ts';
import { EMBEDDINGS } from '../providers/openai-compatible.ts';
import { cohere, COHERE_MAX_TEXTS, embedReply, embedRequest } from '../providers/cohere.ts';
import { zeroUsage, type ChargeInfo, type Json } from '../../metering/plan.ts';
import { badUpstreamReply, mediaPlan, modelOfKind } from '../media/common.ts';
import { readJson, readUpstreamError } from '../upstream/replies.ts';
import { replyNamingModel } from '../upstream/reply-text.ts';
import { parseBody } from '../request-body.ts';
import type { RouteDeps } from '../deps.ts';
import { tokenCostNano, type TokenPrices } from '../../billing/pricing.ts';
import { countCl100kTokens } from '../tokens.ts';

export const EMBEDDINGS_ROUTE = '/v1/embeddings';
const MAX_INPUTS = 2048;
const encoder = new TextEncoder();

/** Models whose output size the caller may choose, and the largest. */
const DIMENSIONS: Record<string, number> = { 'text-embedding-3-large': 3072, 'text-embedding-3-small': 1536 };

type EmbeddingInput = { text: string } | { tokens: number[] };

/** POST /v1/embeddings. */
export class EmbeddingsRoute {
  private readonly deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.deps = deps;
  }

  async create(caller: Caller, raw: Uint8Array, requestId: string): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const startedAt = performance.now();
    const { metering, calls } = this.deps;
    const body = parseBody(raw);
    const model = modelOfKind(this.deps.catalogue, body.model, 'embedding', EMBEDDINGS_ROUTE);
    const isCohere = model.dialect === 'cohere';

    const inputs = readInputs(body.input);
    if (inputs instanceof Error) throw inputs;
    if (body.encoding_format !== undefined && body.encoding_format !== 'float' && body.encoding_format !== 'base64') {
      throw badRequest("'encoding_format' must be 'float' or 'base64'.", 'invalid_value', 'encoding_format');
    }
    if (body.dimensions !== undefined && body.dimensions !== null) {
      const max = DIMENSIONS[model.id];
      if (max === undefined)
        throw badRequest(
          `The model '${model.id}' has a fixed output size; 'dimensions' is not supported.`,
          'unsupported_parameter',
          'dimensions',
        );
      if (!Number.isInteger(body.dimensions) || (body.dimensions as number) < 1 || (body.dimensions as number) > max)
        throw badRequest(
          `'dimensions' must be an integer from 1 to ${max} for ${model.id}.`,
          'invalid_value',
          'dimensions',
        );
    }
    if (isCohere) {
      if (inputs.some((i) => 'tokens' in i))
        throw badRequest(`The model '${model.id}' takes text input only, not token arrays.`, 'invalid_value', 'input');
      if (inputs.length > COHERE_MAX_TEXTS)
        throw badRequest(
          `The model '${model.id}' takes at most ${COHERE_MAX_TEXTS} inputs per request.`,
          'invalid_value',
          'input',
        );
    }

    // Refuse what the model cannot take, before anything is held. Bytes bound tokens from
    // above, so most inputs never need the tokenizer.
    let holdTokens = 0n;
    for (let i = 0; i < inputs.length; i++) {
      const input = inputs[i]!;
      const bound = 'tokens' in input ? input.tokens.length : Buffer.byteLength(input.text) + 2;
      const tokens = bound <= model.contextWindow || 'tokens' in input ? bound : countCl100kTokens(input.text);
      if (tokens > model.contextWindow) {
        throw badRequest(
          `This model's maximum context length is ${model.contextWindow} tokens, however input ${i} has ${tokens} tokens. Shorten the input.`,
          'context_length_exceeded',
          'input',
        );
      }
      holdTokens += BigInt(bound);
    }

    const plan = mediaPlan(requestId, EMBEDDINGS_ROUTE, caller, model, body, startedAt);
    const prices = model.prices as unknown as TokenPrices;
    const priceOf = (tokens: bigint) =>
      tokenCostNano(prices, { inputTokens: tokens, outputTokens: 0n, cachedTokens: 0n, cacheWriteTokens: 0n });
    await metering.holdExact(plan, priceOf(holdTokens));
    const counted = () =>
      inputs.reduce((n, i) => n + BigInt('tokens' in i ? i.tokens.length : countCl100kTokens(i.text)), 0n);
    const settleTokens = (tokens: bigint | undefined) => {
      const usage = { ...zeroUsage(), inputTokens: tokens ?? counted(), estimated: tokens === undefined };
      return metering.settle(plan, usage, 'ok', 200);
    };
    return metering.run(plan, async () => {
      if (isCohere) {
        const texts = inputs.map((i) => (i as { text: string }).text);
        const res = await calls.post(
          plan,
          (t) => {
            const call = cohere(t);
            return { url: call.embedUrl, headers: call.headers };
          },
          JSON.stringify(embedRequest(model.upstreamId, texts, body.input_type)),
        );
        if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
        const { json } = await readJson(res, plan.requestId);
        const out = embedReply(json, model.id, body.encoding_format === 'base64');
        if (!out) throw badUpstreamReply(plan.requestId, 'a reply without embeddings');
        const charge = await settleTokens(out.inputTokens);
        (out.body.usage as Json).prompt_tokens = Number(charge.usage.inputTokens);
        (out.body.usage as Json).total_tokens = Number(charge.usage.inputTokens);
        return { body: encoder.encode(JSON.stringify(out.body)), charge };
      }

      const upstreamBody =
        body.model === model.upstreamId ? Buffer.from(raw) : JSON.stringify({ ...body, model: model.upstreamId });
      const res = await calls.post(plan, EMBEDDINGS, upstreamBody);
      if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
      const reply = await readJson(res, plan.requestId);
      const { json } = reply;
      const prompt = (json.usage as Json | undefined)?.prompt_tokens;
      const charge = await settleTokens(
        typeof prompt === 'number' && Number.isSafeInteger(prompt) && prompt >= 0 ? BigInt(prompt) : undefined,
      );
      return { body: replyNamingModel(reply, model.id), charge };
    });
  }
}

/** OpenAI's accepted input shapes: a string, strings, a token array, token arrays. */
function readInputs(input: unknown): EmbeddingInput[] | Error {
  const bad = (why: string) => badRequest(`'input' ${why}`, 'invalid_value', 'input');
  if (input === undefined || input === null)
    return badRequest("Missing required parameter: 'input'.", 'missing_required_parameter', 'input');
  const isTokens = (v: unknown): v is number[] =>
    Array.isArray(v) && v.length > 0 && v.every((t) => Number.isSafeInteger(t) && (t as number) >= 0);
  let list: EmbeddingInput[];
  if (typeof input === 'string') list = [{ text: input }];
  else if (isTokens(input)) list = [{ tokens: input }];
  else if (Array.isArray(input) && input.length > 0) {
    list = [];
    for (const v of input) {
      if (typeof v === 'string') list.push({ text: v });
      else if (isTokens(v)) list.push({ tokens: v });
      else return bad('must be a string, an array of strings, or token arrays.');
    }
  } else return bad('must be a non-empty string, an array of strings, or token arrays.');
  if (list.length > MAX_INPUTS) return bad(`may hold at most ${MAX_INPUTS} inputs.`);
  if (list.some((i) => 'text' in i && i.text.length === 0)) return bad('must not contain empty strings.');
  return list;
}
