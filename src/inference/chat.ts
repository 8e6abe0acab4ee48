// POST /v1/chat/completions behind the Inference service: validate, hold, forward, meter,
// settle. The request body is forwarded as the caller wrote it, except for the few fields the
// gateway owns (model -> upstream id, a lowered output cap, stream usage on).
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { Catalogue, ResolvedModel } from '../catalogue/catalogue.ts';
import { isWellFormedKey } from '../billing/keys.ts';
import type { Ledger } from '../billing/ledger.ts';
import { LedgerError, newId } from '../billing/ledger.ts';
import { affordableOutputTokens, tokenCostNano, usageFromOpenAI, type TokenPrices, type TokenUsage } from '../billing/pricing.ts';
import { badRequest, gatewayError, unauthorized } from '../rpc/errors.ts';
import { countInputTokens, countTextTokens, inputTokensUpperBound } from './tokens.ts';
import { isAbort, upstreamFailure, type Upstream } from './upstream.ts';
import { openAICompatible, type ChatProvider } from './providers/openai-compatible.ts';
import { readSse } from './sse.ts';

type Json = Record<string, unknown>;

export interface ChargeInfo {
  requestId: string;
  costNano: bigint;
  usage: TokenUsage & { estimated: boolean };
}

export type StreamEvent =
  | { kind: 'request_id'; requestId: string }
  | { kind: 'data'; json: string }
  | { kind: 'error'; json: string }
  | { kind: 'charge'; charge: ChargeInfo };

interface Prepared {
  requestId: string;
  model: ResolvedModel;
  prices: TokenPrices;
  provider: ChatProvider;
  body: Json;
  /** Bytes to send upstream. */
  upstreamBody: string | Uint8Array;
  clientWantsUsage: boolean;
  startedAt: number;
}

const ROUTE = '/v1/chat/completions';
const MAX_ERROR_BODY = 64 * 1024;
const encoder = new TextEncoder();

export class ChatService {
  private readonly config: Config;
  private readonly catalogue: Catalogue;
  private readonly ledger: Ledger;
  private readonly upstream: Upstream;
  private readonly log: Logger;

  constructor(deps: { config: Config; catalogue: Catalogue; ledger: Ledger; upstream: Upstream; log: Logger }) {
    this.config = deps.config;
    this.catalogue = deps.catalogue;
    this.ledger = deps.ledger;
    this.upstream = deps.upstream;
    this.log = deps.log;
  }

  /** Unstreamed: the upstream's JSON reply (model rewritten) and what it cost. */
  async complete(apiKey: string | undefined, raw: Uint8Array, requestId: string): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const p = await this.prepare(apiKey, raw, requestId, false);
    let res;
    try {
      res = await this.upstream.post(p.provider.chatUrl, p.provider.headers, p.upstreamBody);
    } catch (err) {
      await this.settleZero(p, 'upstream_unreachable', 502);
      throw upstreamFailure(err, p.requestId);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) throw await this.upstreamHttpError(p, res);

    let text: string;
    let reply: Json;
    try {
      text = await res.body.text();
      reply = JSON.parse(text) as Json;
      if (reply === null || typeof reply !== 'object') throw new Error('not an object');
    } catch (err) {
      await this.settleZero(p, 'upstream_bad_reply', 502);
      throw isAbort(err) || (err as { code?: string }).code?.startsWith('UND_ERR')
        ? upstreamFailure(err, p.requestId)
        : gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_bad_reply', message: 'The upstream provider sent a reply that is not JSON.', requestId: p.requestId });
    }

    let usage: ChargeInfo['usage'];
    if (reply.usage && typeof reply.usage === 'object') usage = { ...usageFromOpenAI(reply.usage as Json), estimated: false };
    else usage = { ...this.countUsage(p.body, outputTextOfReply(reply)), estimated: true };
    const charge = await this.settle(p, usage, 'ok', 200);

    // The caller sees the model as they named it; everything else as the upstream sent it.
    const out = reply.model === p.model.id ? text : JSON.stringify({ ...reply, model: p.model.id });
    return { body: encoder.encode(out), charge };
  }

  /**
   * Streamed. Nothing is yielded until the upstream has sent its first chunk, so a failure
   * before that still becomes a proper HTTP error status instead of a broken stream.
   */
  async *stream(apiKey: string | undefined, raw: Uint8Array, requestId: string, signal: AbortSignal): AsyncGenerator<StreamEvent> {
    const p = await this.prepare(apiKey, raw, requestId, true);
    const upstreamAbort = new AbortController();
    const onAbort = () => upstreamAbort.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const renew = setInterval(() => {
      this.ledger.renewHold(p.requestId, this.config.holds.ttlSeconds).catch((err) => this.log.warn({ err, requestId: p.requestId }, 'hold renewal failed'));
    }, Math.max(1000, (this.config.holds.ttlSeconds * 1000) / 3));
    renew.unref();

    const delivered: string[] = [];
    let sawContent = false;
    let usage: ChargeInfo['usage'] | undefined;
    let charge: ChargeInfo | undefined;
    let started = false;
    let outcome = 'ok';
    let httpStatus = 200;
    const finishChunks: Json[] = [];
    let lastMeta: Json | undefined;

    try {
      let res;
      try {
        res = await this.upstream.post(p.provider.chatUrl, p.provider.headers, p.upstreamBody, upstreamAbort.signal);
      } catch (err) {
        if (isAbort(err)) { outcome = 'client_closed'; httpStatus = 499; return; }
        outcome = 'upstream_unreachable'; httpStatus = 502;
        throw upstreamFailure(err, p.requestId);
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        outcome = 'upstream_error';
        httpStatus = res.statusCode;
        throw await this.upstreamHttpError(p, res, false);
      }

      try {
        for await (const ev of readSse(res.body)) {
          if (ev.data === '[DONE]') break;
          let chunk: Json;
          try {
            chunk = JSON.parse(ev.data) as Json;
          } catch {
            continue; // not JSON: keep-alive noise some providers send
          }
          if (chunk.error !== undefined) {
            outcome = 'upstream_stream_error';
            const errJson = JSON.stringify({ error: chunk.error });
            if (!started) {
              httpStatus = 502;
              throw gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_stream_error', message: errorMessage(chunk.error), upstreamBody: encoder.encode(errJson), requestId: p.requestId });
            }
            yield { kind: 'error', json: errJson };
            return;
          }
          const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
          for (const c of choices) {
            const text = deltaText(c.delta as Json | undefined);
            if (text) { delivered.push(text); sawContent = true; }
          }
          if (chunk.model !== undefined) chunk.model = p.model.id;
          lastMeta ??= { id: chunk.id, object: chunk.object, created: chunk.created, model: p.model.id, system_fingerprint: chunk.system_fingerprint ?? null };
          const hasUsage = chunk.usage !== null && typeof chunk.usage === 'object';
          if (hasUsage) usage = { ...usageFromOpenAI(chunk.usage as Json), estimated: false };
          // Some providers repeat running usage on every chunk; the final figure comes with
          // the usage-only chunk (choices: []) or the finishing one.
          const finalUsage = hasUsage && (choices.length === 0 || choices.some((c) => c.finish_reason != null));

          if (finalUsage && !charge) {
            // The usage chunk: settle now so the figure we show is the figure we charge.
            charge = await this.settle(p, usage!, 'ok', 200);
            if (choices.length === 0 && !p.clientWantsUsage) continue;
            if (!p.clientWantsUsage) delete chunk.usage;
            if (p.clientWantsUsage) chunk.x_gateway = gatewayField(charge);
          } else if (!p.clientWantsUsage && (chunk.usage === null || hasUsage)) {
            delete chunk.usage;
          }

          if (!p.clientWantsUsage && choices.some((c) => c.finish_reason != null)) {
            // Held back so the charge can ride on the last chunk the caller gets.
            finishChunks.push(chunk);
            continue;
          }
          if (!started) { started = true; yield { kind: 'request_id', requestId: p.requestId }; }
          yield { kind: 'data', json: JSON.stringify(chunk) };
        }
      } catch (err) {
        if (err instanceof Error && 'findDetails' in err) throw err;
        if (isAbort(err) || signal.aborted) { outcome = 'client_closed'; httpStatus = 499; return; }
        outcome = sawContent ? 'upstream_cut' : 'upstream_unreachable';
        httpStatus = 502;
        if (!started && !sawContent) throw upstreamFailure(err, p.requestId);
        this.log.warn({ requestId: p.requestId, err: (err as Error).message }, 'upstream stream broke');
        if (!started) { started = true; yield { kind: 'request_id', requestId: p.requestId }; }
        yield { kind: 'error', json: JSON.stringify({ error: { message: 'The upstream provider connection broke during the stream.', type: 'server_error', param: null, code: 'upstream_stream_broken' } }) };
        return;
      }

      let synthesized: Json | undefined;
      if (!charge) {
        usage ??= { ...this.countUsage(p.body, delivered.join('')), estimated: true };
        charge = await this.settle(p, sawContent || !usage.estimated ? usage : zeroUsage(), 'ok', 200);
        // The caller asked for usage and the upstream sent none: give them our count.
        if (p.clientWantsUsage && lastMeta) synthesized = { ...lastMeta, choices: [], usage: openAIUsage(charge.usage), x_gateway: gatewayField(charge) };
      }
      if (!started) { started = true; yield { kind: 'request_id', requestId: p.requestId }; }
      finishChunks.forEach((c, i) => { if (i === finishChunks.length - 1) c.x_gateway = gatewayField(charge!); });
      for (const c of finishChunks) yield { kind: 'data', json: JSON.stringify(c) };
      if (synthesized) yield { kind: 'data', json: JSON.stringify(synthesized) };
      yield { kind: 'charge', charge };
    } finally {
      clearInterval(renew);
      signal.removeEventListener('abort', onAbort);
      upstreamAbort.abort();
      if (!charge) {
        // Failed, cut or abandoned: charge what was delivered, nothing if nothing was.
        const u = sawContent ? { ...this.countUsage(p.body, delivered.join('')), estimated: true } : zeroUsage();
        if (usage && sawContent) Object.assign(u, usage);
        await this.settle(p, u, outcome === 'ok' ? 'client_closed' : outcome, outcome === 'ok' ? 499 : httpStatus).catch((err) =>
          this.log.error({ err, requestId: p.requestId }, 'settle failed; the hold will expire'),
        );
      }
    }
  }

  private async prepare(apiKey: string | undefined, raw: Uint8Array, requestId: string, streamRoute: boolean): Promise<Prepared> {
    const startedAt = performance.now();
    if (!apiKey || !isWellFormedKey(apiKey)) throw unauthorized();
    const keyHash = this.ledger.hash(apiKey);
    // Validation errors still answer 401 first for a key we do not know.
    const invalid = async (e: Error): Promise<never> => {
      if (!(await this.ledger.findKey({ apiKey }))) throw unauthorized();
      throw e;
    };

    let body: Json;
    try {
      body = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8')) as Json;
    } catch {
      return invalid(badRequest('The request body is not valid JSON.', 'invalid_json'));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return invalid(badRequest('The request body must be a JSON object.', 'invalid_json'));
    if (typeof body.model !== 'string' || body.model === '') return invalid(badRequest("Missing required parameter: 'model'.", 'missing_required_parameter', 'model'));
    if (!Array.isArray(body.messages) || body.messages.length === 0) return invalid(badRequest("Missing required parameter: 'messages'.", 'missing_required_parameter', 'messages'));
    if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') return invalid(badRequest("'stream' must be a boolean.", 'invalid_type', 'stream'));
    if (Boolean(body.stream) !== streamRoute) return invalid(badRequest(streamRoute ? 'StreamChatCompletion needs "stream": true.' : 'Use StreamChatCompletion for "stream": true.', 'invalid_value', 'stream'));
    for (const f of ['max_tokens', 'max_completion_tokens', 'n'] as const) {
      const v = body[f];
      if (v !== undefined && v !== null && !(Number.isSafeInteger(v) && (v as number) >= 1)) return invalid(badRequest(`'${f}' must be a positive integer.`, 'invalid_value', f));
    }

    const model = this.catalogue.get(body.model);
    if (!model || !model.enabled) return invalid(gatewayError({ httpStatus: 400, type: 'invalid_request_error', code: 'model_not_found', param: 'model', message: `The model '${body.model}' does not exist on this gateway. GET /v1/models lists the models.` }));
    if (model.kind !== 'chat') return invalid(badRequest(`The model '${model.id}' is a ${model.kind} model; it cannot be used on ${ROUTE}.`, 'model_not_supported', 'model'));
    if (model.provider === 'anthropic') return invalid(badRequest(`Claude models are served on /v1/messages; '${model.id}' on ${ROUTE} is not available yet.`, 'model_not_supported', 'model'));
    if (!model.available) return invalid(gatewayError({ httpStatus: 400, type: 'invalid_request_error', code: 'model_not_available', param: 'model', message: `The model '${model.id}' is not available: ${model.unavailableReason}.` }));

    const prices = model.prices as unknown as TokenPrices;
    const provider = openAICompatible(model.providerConfig);
    const n = BigInt((body.n as number | undefined) ?? 1);
    const clientCapField = body.max_completion_tokens != null ? 'max_completion_tokens' : body.max_tokens != null ? 'max_tokens' : undefined;
    const askedOut = BigInt(clientCapField ? (body[clientCapField] as number) : model.maxOutputTokens);
    const maxOut = askedOut * n;

    // Hold the worst case on a cheap upper bound of the input; only when that does not fit,
    // count the input precisely and hold what the balance affords.
    let inputEstimate = BigInt(inputTokensUpperBound(body));
    const maxCost = tokenCostNano(prices, { inputTokens: inputEstimate, outputTokens: maxOut, cachedTokens: 0n, cacheWriteTokens: 0n });
    const minCostFor = (input: bigint) => tokenCostNano(prices, { inputTokens: input, outputTokens: n, cachedTokens: 0n, cacheWriteTokens: 0n });
    let hold;
    try {
      hold = await this.ledger.placeHold({ apiKeyHash: keyHash, requestId, minNano: minCostFor(inputEstimate), maxNano: maxCost, ttlSeconds: this.config.holds.ttlSeconds });
      if (hold.kind === 'insufficient') {
        inputEstimate = BigInt(countInputTokens(body));
        const min = minCostFor(inputEstimate);
        if (hold.availableNano >= min) hold = await this.ledger.placeHold({ apiKeyHash: keyHash, requestId, minNano: min, maxNano: maxCost, ttlSeconds: this.config.holds.ttlSeconds });
      }
    } catch (err) {
      if (err instanceof LedgerError && err.code === 'duplicate_request') throw gatewayError({ httpStatus: 409, type: 'invalid_request_error', code: 'duplicate_request_id', message: err.message });
      throw err;
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient') {
      throw gatewayError({ httpStatus: 402, type: 'insufficient_quota', code: 'insufficient_credits', message: `Insufficient credits: this request needs at least ${minCostFor(inputEstimate)} nano-USD and ${hold.availableNano} are available. Top up the key's balance.`, requestId });
    }

    // What goes upstream: the caller's bytes unless the gateway must own a field.
    let changed = false;
    const out: Json = { ...body };
    if (model.upstreamId !== model.id) { out.model = model.upstreamId; changed = true; }
    if (hold.amountNano < maxCost) {
      const perChoice = affordableOutputTokens(prices, inputEstimate, hold.amountNano) / n;
      const cap = perChoice < 1n ? 1n : perChoice;
      out[clientCapField ?? provider.maxTokensField] = Number(cap);
      changed = true;
    }
    const streamOptions = (body.stream_options ?? {}) as Json;
    const clientWantsUsage = streamRoute && streamOptions.include_usage === true;
    if (streamRoute && !clientWantsUsage) { out.stream_options = { ...streamOptions, include_usage: true }; changed = true; }

    return { requestId, model, prices, provider, body, upstreamBody: changed ? JSON.stringify(out) : raw, clientWantsUsage, startedAt };
  }

  private countUsage(body: Json, outputText: string): TokenUsage {
    return { inputTokens: BigInt(countInputTokens(body)), outputTokens: BigInt(countTextTokens(outputText)), cachedTokens: 0n, cacheWriteTokens: 0n };
  }

  private async settle(p: Prepared, usage: ChargeInfo['usage'], status: string, httpStatus: number): Promise<ChargeInfo> {
    const cost = tokenCostNano(p.prices, usage);
    const r = await this.ledger.settle({
      requestId: p.requestId, costNano: cost, model: p.model.id, route: ROUTE,
      inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedTokens: usage.cachedTokens, cacheWriteTokens: usage.cacheWriteTokens,
      usageEstimated: usage.estimated, status, httpStatus, latencyMs: Math.round(performance.now() - p.startedAt),
    });
    return { requestId: p.requestId, costNano: r.chargedNano, usage };
  }

  private settleZero(p: Prepared, status: string, httpStatus: number): Promise<ChargeInfo> {
    return this.settle(p, zeroUsage(), status, httpStatus);
  }

  /** An upstream error answer: settle at zero, pass the body on with a status that fits. */
  private async upstreamHttpError(p: Prepared, res: { statusCode: number; headers: Record<string, string | string[] | undefined>; body: { text(): Promise<string> } }, settle = true) {
    let text = '';
    try { text = (await res.body.text()).slice(0, MAX_ERROR_BODY); } catch { /* body lost: status is enough */ }
    if (settle) await this.settleZero(p, 'upstream_error', res.statusCode);
    const s = res.statusCode;
    // Our credentials failing upstream is the gateway's problem, not the caller's key.
    const status = s === 401 || s === 403 ? 502 : s;
    const retryAfter = Number(res.headers['retry-after']);
    let message = `The upstream provider answered ${s}.`;
    try { message = errorMessage((JSON.parse(text) as Json).error) || message; } catch { /* not JSON */ }
    return gatewayError({
      httpStatus: status,
      type: s === 429 ? 'rate_limit_error' : s >= 500 || status === 502 ? 'server_error' : 'invalid_request_error',
      code: s === 429 ? 'upstream_rate_limited' : 'upstream_error',
      message,
      upstreamBody: status === s ? encoder.encode(text) : undefined,
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? Math.ceil(retryAfter) : s === 429 ? 1 : 0,
      requestId: p.requestId,
    });
  }
}

export const newRequestId = (): string => newId('req');

const zeroUsage = (): ChargeInfo['usage'] => ({ inputTokens: 0n, outputTokens: 0n, cachedTokens: 0n, cacheWriteTokens: 0n, estimated: false });

function gatewayField(c: ChargeInfo) {
  return { request_id: c.requestId, cost_nano_usd: c.costNano.toString(), usage_estimated: c.usage.estimated };
}

function openAIUsage(u: TokenUsage) {
  const prompt = Number(u.inputTokens);
  const completion = Number(u.outputTokens);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: Number(u.cachedTokens) } };
}

function errorMessage(e: unknown): string {
  if (e && typeof e === 'object' && typeof (e as Json).message === 'string') return (e as Json).message as string;
  return typeof e === 'string' ? e : '';
}

function deltaText(delta: Json | undefined): string {
  if (!delta) return '';
  let s = '';
  if (typeof delta.content === 'string') s += delta.content;
  if (typeof delta.refusal === 'string') s += delta.refusal;
  if (typeof delta.reasoning_content === 'string') s += delta.reasoning_content;
  if (Array.isArray(delta.tool_calls)) {
    for (const tc of delta.tool_calls as Json[]) {
      const fn = tc.function as Json | undefined;
      if (typeof fn?.name === 'string') s += fn.name;
      if (typeof fn?.arguments === 'string') s += fn.arguments;
    }
  }
  return s;
}

function outputTextOfReply(reply: Json): string {
  const choices = Array.isArray(reply.choices) ? (reply.choices as Json[]) : [];
  return choices.map((c) => deltaText(c.message as Json | undefined)).join('');
}
