// The metering engine every inference route shares: key check, body parse, hold, upstream
// call, settle, and the streaming relay that settles exactly once however a stream ends.
// Routes (chat.ts, messages.ts, responses.ts) decide what to send and how to read the reply.
import type { Logger } from 'pino';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Config } from '../config/config.ts';
import type { ResolvedModel } from '../catalogue/catalogue.ts';
import { isWellFormedKey } from '../billing/keys.ts';
import { LedgerError, newId, type Ledger } from '../billing/ledger.ts';
import { affordableOutputTokens, tokenCostNano, type TokenPrices, type TokenUsage } from '../billing/pricing.ts';
import { badRequest, gatewayError, toGatewayError, unauthorized } from '../rpc/errors.ts';
import { isAbort, upstreamFailure, type Upstream, type UpstreamBody, type UpstreamResponse } from './upstream.ts';
import { readSse, type SseEvent } from './sse.ts';
import type { RateDecision, RateLimiter } from '../billing/rate-limits.ts';
import type { Metrics } from '../log/metrics.ts';
import type { LeaseBook, Reservation } from '../billing/leases.ts';
import { KeyCheck } from '../billing/key-check.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export type Json = Record<string, unknown>;

export interface ChargeInfo {
  requestId: string;
  costNano: bigint;
  /** Tokens, and for routes billed otherwise the billed quantity (`units` of `unit`). */
  usage: TokenUsage & { estimated: boolean; units?: bigint; unit?: string };
}

/** What the facade writes, in order. `event` is the SSE event name where the format has one. */
export type StreamEvent =
  | { kind: 'request_id'; requestId: string }
  | { kind: 'data'; event?: string; json: string }
  | { kind: 'error'; event?: string; json: string }
  | { kind: 'charge'; charge: ChargeInfo };

/** An event for the caller; `needsCharge` events wait for the settle and the last one carries it. */
export interface OutEvent {
  event?: string;
  data: Json;
  needsCharge?: boolean;
}

export interface StepResult {
  out?: OutEvent[];
  /** Usage reported so far (providers may report it in pieces). */
  usage?: TokenUsage;
  /** The usage is final: settle now, before the events that carry the charge go out. */
  finalUsage?: boolean;
  /** The upstream reported an error inside the stream. */
  error?: { event?: string; json: string; message: string };
  /** The upstream said it is done. */
  done?: boolean;
}

/** Reads one upstream streaming format and writes the caller's. */
export interface StreamProcessor {
  step(ev: SseEvent): StepResult;
  /** Text delivered so far, to count tokens when the upstream reports no usage. */
  deliveredText(): string;
  /** Events to send once the charge is known (e.g. a usage chunk the upstream never sent). */
  finish?(charge: ChargeInfo, usageReported: boolean): OutEvent[];
}

export interface Plan {
  requestId: string;
  route: string;
  model: ResolvedModel;
  prices: TokenPrices;
  body: Json;
  /** Cheap upper bound of input tokens (no tokenizer). */
  inputUpper: bigint;
  /** Tokenizer count of the input, used only when the balance is tight. */
  countInput: () => bigint;
  /** Output cap per choice and the number of choices. */
  maxOutput: bigint;
  choices: bigint;
  startedAt: number;
  /** Set by the hold: whose window the tokens are counted in. */
  keyHash?: Buffer;
  /** When the first upstream attempt started (for the added-latency metric). */
  upstreamStartedAt?: number;
  /** Keeps the hold from expiring while the request runs; cleared by the settle. */
  renewal?: NodeJS.Timeout;
  /** With credit leases: the in-memory reservation this request spends (instead of a hold). */
  lease?: Reservation;
  keyId?: string;
  settledLeased?: boolean;
}

/** One deployment's result: an answer to use, or a failure not yet settled. */
interface Attempted {
  res?: UpstreamResponse;
  failure?: ConnectError;
  outcome?: 'upstream_timeout' | 'upstream_unreachable' | 'upstream_error';
}

export interface Held {
  amountNano: bigint;
  /** Set when the balance covers less than the worst case: the per-choice output cap it affords. */
  loweredOutputCap?: bigint;
}

const MAX_ERROR_BODY = 64 * 1024;
const encoder = new TextEncoder();

export const zeroUsage = (): ChargeInfo['usage'] => ({ inputTokens: 0n, outputTokens: 0n, cachedTokens: 0n, cacheWriteTokens: 0n, estimated: false });
export const newRequestId = (): string => newId('req');

export function chargeField(c: ChargeInfo) {
  return { request_id: c.requestId, cost_nano_usd: c.costNano.toString(), usage_estimated: c.usage.estimated };
}

export class Engine {
  readonly config: Config;
  readonly ledger: Ledger;
  readonly upstream: Upstream;
  readonly limiter: RateLimiter;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Set when BILLING_MODE=lease. */
  readonly leases: LeaseBook | undefined;
  /** Is a key live? Asked before any work on its request. */
  readonly keys: KeyCheck;
  /** Holds placed by this process and not yet settled. */
  private inFlight = 0;

  constructor(deps: { config: Config; ledger: Ledger; upstream: Upstream; limiter: RateLimiter; metrics: Metrics; log: Logger; leases?: LeaseBook; keys?: KeyCheck }) {
    this.leases = deps.leases;
    this.keys = deps.keys ?? new KeyCheck(deps.ledger);
    this.config = deps.config;
    this.ledger = deps.ledger;
    this.upstream = deps.upstream;
    this.limiter = deps.limiter;
    this.metrics = deps.metrics;
    this.log = deps.log;
  }

  /** Authenticates the key and counts the request against its per-minute limits (429 past them, 401 for an unknown key). */
  async admit(apiKey: string, requestId: string): Promise<Buffer> {
    return (await this.admitKey(apiKey, requestId)).keyHash;
  }

  private async admitKey(apiKey: string, requestId: string): Promise<{ keyHash: Buffer; accountId: string; keyId: string }> {
    const keyHash = this.ledger.hash(apiKey);
    const d = await this.limiter.admit(keyHash);
    if (!d) throw unauthorized();
    this.keys.remember(keyHash);
    if (!d.allowed) throw rateLimited(d, requestId);
    return { keyHash, accountId: d.accountId, keyId: d.keyId };
  }

  /** With credit leases on: reserves `amountNano` in memory; false when the lease cannot cover it (the caller then holds in the database). */
  private async reserveFromLease(plan: Plan, key: { keyHash: Buffer; accountId: string; keyId: string }, amountNano: bigint): Promise<boolean> {
    if (!this.leases) return false;
    const r = await this.leases.reserve(key.keyHash, key.accountId, amountNano);
    if (!r) return false;
    plan.lease = r;
    plan.keyId = key.keyId;
    this.inFlight++;
    this.metrics.holdsOpen.inc();
    return true;
  }

  /** The key when well formed (401 otherwise), checked before any database work. */
  wellFormedKey(apiKey: string | undefined): string {
    if (!apiKey || !isWellFormedKey(apiKey)) throw unauthorized();
    return apiKey;
  }

  /** 401 unless the key is live: checked before anything else is done for a request. */
  async authenticate(apiKey: string | undefined): Promise<string> {
    if (!apiKey || !(await this.keys.live(apiKey))) throw unauthorized();
    return apiKey;
  }

  /** A live key (checked first: nothing is parsed for a stranger) and a JSON object body. */
  async parse(caller: string | undefined, raw: Uint8Array): Promise<{ apiKey: string; body: Json }> {
    const apiKey = await this.authenticate(caller);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
    } catch {
      return this.invalid(apiKey, badRequest('The request body is not valid JSON.', 'invalid_json'));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return this.invalid(apiKey, badRequest('The request body must be a JSON object.', 'invalid_json'));
    const unsafe = unsafeJson(body);
    if (unsafe) return this.invalid(apiKey, badRequest(unsafe, 'invalid_json'));
    return { apiKey, body: body as Json };
  }

  /**
   * Resolves once every hold this process placed is settled, or after `timeoutMs`: shutdown
   * waits here so no request is left to the sweeper.
   */
  async drain(timeoutMs: number): Promise<number> {
    const until = performance.now() + timeoutMs;
    while (this.inFlight > 0 && performance.now() < until) await sleep(20);
    return this.inFlight;
  }

  /** Throws `err`, unless the key is unknown, in which case 401 (so bad input never reveals more than a bad key). */
  async invalid(apiKey: string, err: Error): Promise<never> {
    if (!(await this.ledger.findKey({ apiKey }))) throw unauthorized();
    throw err;
  }

  /**
   * Holds the worst case on the cheap input bound; when that does not fit, counts the input
   * precisely and holds what the balance affords (402 below the least possible cost).
   */
  async hold(apiKey: string, plan: Plan): Promise<Held> {
    const key = await this.admitKey(apiKey, plan.requestId);
    const keyHash = key.keyHash;
    plan.keyHash = keyHash;
    const cost = (input: bigint, output: bigint) => tokenCostNano(plan.prices, { inputTokens: input, outputTokens: output, cachedTokens: 0n, cacheWriteTokens: 0n });
    let input = plan.inputUpper;
    const maxCost = cost(input, plan.maxOutput * plan.choices);
    if (await this.reserveFromLease(plan, key, maxCost)) return { amountNano: maxCost };
    const ttlSeconds = this.config.holds.ttlSeconds;
    let hold;
    try {
      hold = await this.ledger.placeHold({ apiKeyHash: keyHash, requestId: plan.requestId, minNano: cost(input, plan.choices), maxNano: maxCost, ttlSeconds });
      if (hold.kind === 'insufficient') {
        input = plan.countInput();
        const min = cost(input, plan.choices);
        if (hold.availableNano >= min) hold = await this.ledger.placeHold({ apiKeyHash: keyHash, requestId: plan.requestId, minNano: min, maxNano: maxCost, ttlSeconds });
      }
    } catch (err) {
      throw duplicateRequest(err);
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient') {
      throw gatewayError({
        httpStatus: 402, type: 'insufficient_quota', code: 'insufficient_credits', requestId: plan.requestId,
        message: `Insufficient credits: this request needs at least ${cost(input, plan.choices)} nano-USD and ${hold.availableNano} are available. Top up the key's balance.`,
      });
    }
    this.keepHold(plan);
    if (hold.amountNano >= maxCost) return { amountNano: hold.amountNano };
    const perChoice = affordableOutputTokens(plan.prices, input, hold.amountNano) / plan.choices;
    return { amountNano: hold.amountNano, loweredOutputCap: perChoice < 1n ? 1n : perChoice };
  }

  /**
   * Holds an amount known up front (a price per image, second or character): 402 when the
   * available balance is below it.
   */
  async holdExact(apiKey: string, plan: Plan, amountNano: bigint): Promise<void> {
    const key = await this.admitKey(apiKey, plan.requestId);
    plan.keyHash = key.keyHash;
    if (await this.reserveFromLease(plan, key, amountNano)) return;
    await this.placeExactHold(plan.keyHash, plan.requestId, amountNano, this.config.holds.ttlSeconds);
    this.keepHold(plan);
  }

  /** One hold of exactly `amountNano`: 409 for a reused request id, 401, or 402 below it. */
  async placeExactHold(keyHash: Buffer, requestId: string, amountNano: bigint, ttlSeconds: number): Promise<{ accountId: string; keyId: string }> {
    let hold;
    try {
      hold = await this.ledger.placeHold({ apiKeyHash: keyHash, requestId, minNano: amountNano, maxNano: amountNano, ttlSeconds });
    } catch (err) {
      throw duplicateRequest(err);
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient') {
      throw gatewayError({
        httpStatus: 402, type: 'insufficient_quota', code: 'insufficient_credits', requestId,
        message: `Insufficient credits: this request costs ${amountNano} nano-USD and ${hold.availableNano} are available. Top up the key's balance.`,
      });
    }
    return { accountId: hold.accountId, keyId: hold.keyId };
  }

  private keepHold(plan: Plan): void {
    const ttlSeconds = this.config.holds.ttlSeconds;
    // A hold lives HOLD_TTL_SECONDS unless renewed: long requests renew theirs until settled,
    // so only a dead process's holds ever expire.
    // Renewals stop after two hours, so a request lost to a bug cannot pin a balance forever.
    const renewEveryMs = Math.max(1000, (ttlSeconds * 1000) / 3);
    let renewalsLeft = Math.ceil(7_200_000 / renewEveryMs);
    plan.renewal = setInterval(() => {
      if (--renewalsLeft < 0) return clearInterval(plan.renewal);
      this.ledger.renewHold(plan.requestId, ttlSeconds).catch((err) => this.log.warn({ err, requestId: plan.requestId }, 'hold renewal failed'));
    }, renewEveryMs);
    plan.renewal.unref();
    this.inFlight++;
    this.metrics.holdsOpen.inc();
  }

  /** Settles at `costNano` when given (routes not billed by tokens), else at the token price of `usage`. */
  async settle(plan: Plan, usage: ChargeInfo['usage'], status: string, httpStatus: number, costNano?: bigint): Promise<ChargeInfo> {
    if (plan.renewal) {
      clearInterval(plan.renewal);
      plan.renewal = undefined;
      this.inFlight--;
      this.metrics.holdsOpen.dec();
    }
    const cost = costNano ?? tokenCostNano(plan.prices, usage);
    if (plan.lease) {
      const lease = plan.lease;
      plan.lease = undefined;
      plan.settledLeased = true;
      this.inFlight--;
      this.metrics.holdsOpen.dec();
      const charged = this.leases!.settle(lease, {
        requestId: plan.requestId, keyId: plan.keyId!, model: plan.model.id, route: plan.route,
        inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedTokens: usage.cachedTokens, cacheWriteTokens: usage.cacheWriteTokens,
        usageEstimated: usage.estimated, status, httpStatus, latencyMs: Math.round(performance.now() - plan.startedAt), units: usage.units ?? 0n, unit: usage.unit ?? '',
      }, cost);
      if (charged > 0n) this.metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(charged));
      if (plan.keyHash) this.limiter.addTokens(plan.keyHash, usage.inputTokens + usage.outputTokens);
      return { requestId: plan.requestId, costNano: charged, usage };
    }
    if (plan.settledLeased) return { requestId: plan.requestId, costNano: 0n, usage };
    const r = await this.ledger.settle({
      requestId: plan.requestId, costNano: cost, model: plan.model.id, route: plan.route,
      inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedTokens: usage.cachedTokens, cacheWriteTokens: usage.cacheWriteTokens,
      usageEstimated: usage.estimated, units: usage.units, unit: usage.unit, status, httpStatus, latencyMs: Math.round(performance.now() - plan.startedAt),
    });
    if (r.firstSettle && r.chargedNano > 0n) this.metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(r.chargedNano));
    if (plan.keyHash && r.firstSettle) this.limiter.addTokens(plan.keyHash, usage.inputTokens + usage.outputTokens);
    return { requestId: plan.requestId, costNano: r.chargedNano, usage };
  }

  /**
   * POST upstream. 429, 5xx and connection failures are retried with backoff (honouring
   * retry-after, capped) — safe because the caller has received nothing yet. What still fails
   * settles at zero: a transport failure becomes 502/504, an HTTP error is returned as is.
   */
  async post(plan: Plan, url: string, headers: Record<string, string>, body: UpstreamBody, signal?: AbortSignal): Promise<UpstreamResponse> {
    if (plan.upstreamStartedAt === undefined) {
      plan.upstreamStartedAt = performance.now();
      this.metrics.addedLatencyOf(plan.route).observe((plan.upstreamStartedAt - plan.startedAt) / 1000);
    }
    const canFall = plan.model.providerConfig.fallback !== undefined && url.startsWith(plan.model.providerConfig.baseUrl);
    const first = await this.attempts(plan, url, headers, body, signal, canFall);
    if (first.res || !canFall) return this.finish(plan, first);
    // The first deployment failed before the caller got anything: the same request, once more,
    // on the fallback deployment (its URL and credentials; the caller's body unchanged).
    const primary = plan.model.providerConfig;
    const fallback = primary.fallback!;
    const swap = (v: string) => (primary.apiKey ? v.split(primary.apiKey).join(fallback.apiKey) : v);
    const fbHeaders = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, swap(v)]));
    this.metrics.upstreamRetries.inc({ provider: plan.model.provider, reason: 'fallback' });
    this.log.warn({ requestId: plan.requestId, provider: plan.model.provider }, 'first deployment failed; trying the fallback deployment');
    return this.finish(plan, await this.attempts(plan, fallback.baseUrl + url.slice(primary.baseUrl.length), fbHeaders, body, signal, false));
  }

  /**
   * One deployment's attempts with backoff. Returns the answer to use, or (when `keepFailure`)
   * the failure, left unsettled for a fallback to try.
   */
  private async attempts(plan: Plan, url: string, headers: Record<string, string>, body: UpstreamBody, signal: AbortSignal | undefined, keepFailure: boolean): Promise<Attempted> {
    const { retries, retryBaseMs, retryMaxWaitMs } = this.config.upstream;
    const provider = plan.model.provider;
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      const backoff = Math.min(retryMaxWaitMs, retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2));
      let res: UpstreamResponse;
      try {
        res = await this.upstream.post(url, headers, body, signal);
      } catch (err) {
        if (isAbort(err)) throw err;
        const failure = upstreamFailure(err, plan.requestId);
        const timedOut = failure.code === Code.DeadlineExceeded;
        if (!timedOut && attempt < retries) {
          this.metrics.upstreamRetries.inc({ provider, reason: 'connection' });
          await sleep(backoff, undefined, { signal });
          continue;
        }
        return { failure, outcome: timedOut ? 'upstream_timeout' : 'upstream_unreachable' };
      }
      this.metrics.upstreamLatencyOf(provider, String(res.statusCode)).observe((performance.now() - started) / 1000);
      const retryable = res.statusCode === 429 || res.statusCode >= 500;
      if (retryable && (attempt < retries || keepFailure)) {
        const retryAfter = Number(res.headers['retry-after']) * 1000;
        await res.body.dump().catch(() => {});
        if (attempt >= retries) return { failure: upstreamStatusFailure(res.statusCode, plan.requestId), outcome: 'upstream_error' };
        this.metrics.upstreamRetries.inc({ provider, reason: String(res.statusCode) });
        await sleep(Math.min(retryMaxWaitMs, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : backoff), undefined, { signal });
        continue;
      }
      return { res };
    }
  }

  /** A transport failure settles at zero and becomes 502/504. */
  private async finish(plan: Plan, r: Attempted): Promise<UpstreamResponse> {
    if (r.res) return r.res;
    await this.settle(plan, zeroUsage(), r.outcome!, toGatewayError(r.failure).httpStatus);
    throw r.failure;
  }

  /** Reads a unary JSON reply; a broken or non-JSON body settles at zero and becomes 502. */
  async readJson(plan: Plan, res: UpstreamResponse): Promise<{ text: string; json: Json }> {
    try {
      const text = await res.body.text();
      const json = JSON.parse(text) as Json;
      if (json === null || typeof json !== 'object') throw new Error('not an object');
      return { text, json };
    } catch (err) {
      await this.settle(plan, zeroUsage(), 'upstream_bad_reply', 502);
      throw (err as { code?: string }).code?.startsWith('UND_ERR')
        ? upstreamFailure(err, plan.requestId)
        : gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_bad_reply', message: 'The upstream provider sent a reply that is not JSON.', requestId: plan.requestId });
    }
  }

  /**
   * An upstream error answer: settled at zero, its body passed on when it is in the caller's
   * wire format, with a status that does not blame the caller for the gateway's credentials.
   */
  async upstreamError(plan: Plan, res: UpstreamResponse, opts: { passBody: boolean; settle?: boolean }) {
    let text = '';
    try { text = (await res.body.text()).slice(0, MAX_ERROR_BODY); } catch { /* body lost: the status is enough */ }
    if (opts.settle !== false) await this.settle(plan, zeroUsage(), 'upstream_error', res.statusCode);
    const s = res.statusCode;
    const status = s === 401 || s === 403 ? 502 : s;
    const retryAfter = Number(res.headers['retry-after']);
    let message = `The upstream provider answered ${s}.`;
    try { message = errorMessage((JSON.parse(text) as Json).error) || message; } catch { /* not JSON */ }
    return gatewayError({
      httpStatus: status,
      type: s === 429 ? 'rate_limit_error' : s >= 500 || status === 502 ? 'server_error' : 'invalid_request_error',
      code: s === 429 ? 'upstream_rate_limited' : 'upstream_error',
      message,
      upstreamBody: opts.passBody && status === s ? encoder.encode(text) : undefined,
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? Math.ceil(retryAfter) : s === 429 ? 1 : 0,
      requestId: plan.requestId,
    });
  }

  /**
   * Relays an upstream SSE stream through `processor`. Nothing is yielded before the first
   * event for the caller, so failures before it remain proper HTTP errors. Settles exactly
   * once: at the final usage, at the end, or — cut, failed or abandoned — in `finally`,
   * charging what was delivered (nothing when nothing was).
   */
  async *relay(plan: Plan, opts: {
    send: (signal: AbortSignal) => Promise<UpstreamResponse>;
    processor: StreamProcessor;
    passErrorBody: boolean;
    countUsage: (delivered: string) => TokenUsage;
    brokenStreamEvent: (message: string) => { event?: string; json: string };
    signal: AbortSignal;
  }): AsyncGenerator<StreamEvent> {
    const upstreamAbort = new AbortController();
    const onAbort = () => upstreamAbort.abort();
    opts.signal.addEventListener('abort', onAbort, { once: true });

    const p = opts.processor;
    let usage: TokenUsage | undefined;
    let charge: ChargeInfo | undefined;
    let started = false;
    let sawContent = false;
    let outcome = 'ok';
    let httpStatus = 200;
    const waiting: OutEvent[] = [];
    const emit = (e: OutEvent): StreamEvent => ({ kind: 'data', ...(e.event ? { event: e.event } : {}), json: JSON.stringify(e.data) });
    const stamp = (events: OutEvent[], c: ChargeInfo) => {
      const last = [...events].reverse().find((e) => e.needsCharge);
      if (last) last.data.x_gateway = chargeField(c);
    };

    try {
      let res: UpstreamResponse;
      try {
        res = await opts.send(upstreamAbort.signal);
      } catch (err) {
        if (isAbort(err)) { outcome = 'client_closed'; httpStatus = 499; return; }
        outcome = 'upstream_unreachable'; httpStatus = 502;
        throw err instanceof ConnectError ? err : upstreamFailure(err, plan.requestId);
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        outcome = 'upstream_error'; httpStatus = res.statusCode;
        throw await this.upstreamError(plan, res, { passBody: opts.passErrorBody, settle: false });
      }

      try {
        for await (const ev of readSse(res.body)) {
          const r = p.step(ev);
          if (r.usage) usage = r.usage;
          if (r.error) {
            outcome = 'upstream_stream_error';
            if (!started) {
              httpStatus = 502;
              throw gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_stream_error', message: r.error.message, upstreamBody: opts.passErrorBody ? encoder.encode(r.error.json) : undefined, requestId: plan.requestId });
            }
            yield { kind: 'error', ...(r.error.event ? { event: r.error.event } : {}), json: r.error.json };
            return;
          }
          if (p.deliveredText().length > 0) sawContent = true;
          if (r.finalUsage && usage && !charge) charge = await this.settle(plan, { ...usage, estimated: false }, 'ok', 200);
          for (const e of r.out ?? []) {
            if (e.needsCharge && !charge) { waiting.push(e); continue; }
            if (e.needsCharge && charge) stamp([e], charge);
            if (!started) { started = true; yield { kind: 'request_id', requestId: plan.requestId }; }
            yield emit(e);
          }
          if (charge && waiting.length) {
            stamp(waiting, charge);
            for (const e of waiting.splice(0)) yield emit(e);
          }
          if (r.done) break;
        }
      } catch (err) {
        if (err instanceof ConnectError) throw err;
        if (isAbort(err) || opts.signal.aborted) { outcome = 'client_closed'; httpStatus = 499; return; }
        outcome = sawContent ? 'upstream_cut' : 'upstream_unreachable';
        httpStatus = 502;
        if (!started && !sawContent) throw upstreamFailure(err, plan.requestId);
        this.log.warn({ requestId: plan.requestId, err: (err as Error).message }, 'upstream stream broke');
        if (!started) { started = true; yield { kind: 'request_id', requestId: plan.requestId }; }
        const broken = opts.brokenStreamEvent('The upstream provider connection broke during the stream.');
        yield { kind: 'error', ...(broken.event ? { event: broken.event } : {}), json: broken.json };
        return;
      }

      const reported = charge !== undefined || usage !== undefined;
      if (!charge) charge = await this.settle(plan, deliveredUsage(usage, p.deliveredText(), opts.countUsage), 'ok', 200);
      const tail = [...waiting.splice(0), ...(p.finish?.(charge, reported) ?? [])];
      stamp(tail, charge);
      if (!started) { started = true; yield { kind: 'request_id', requestId: plan.requestId }; }
      for (const e of tail) yield emit(e);
      yield { kind: 'charge', charge };
    } finally {
      opts.signal.removeEventListener('abort', onAbort);
      upstreamAbort.abort();
      if (!charge) {
        const u = deliveredUsage(usage, p.deliveredText(), opts.countUsage);
        await this.settle(plan, u, outcome === 'ok' ? 'client_closed' : outcome, outcome === 'ok' ? 499 : httpStatus).catch((err) =>
          this.log.error({ err, requestId: plan.requestId }, 'settle failed; the hold will expire'),
        );
      }
    }
  }
}

/**
 * What to charge when the stream ended without final usage: nothing if nothing was delivered;
 * otherwise the reported figures, with output no lower than our count of what was delivered
 * (a provider may report input at the start and output only at the end).
 */
function deliveredUsage(usage: TokenUsage | undefined, delivered: string, count: (d: string) => TokenUsage): ChargeInfo['usage'] {
  if (delivered.length === 0) return zeroUsage();
  const counted = count(delivered);
  if (!usage) return { ...counted, estimated: true };
  return { ...usage, outputTokens: usage.outputTokens > counted.outputTokens ? usage.outputTokens : counted.outputTokens, estimated: true };
}

/** A reused request id is the caller's conflict (409); any other failure passes through. */
function duplicateRequest(err: unknown): unknown {
  if (err instanceof LedgerError && err.code === 'duplicate_request') return gatewayError({ httpStatus: 409, type: 'invalid_request_error', code: 'duplicate_request_id', message: err.message });
  return err;
}

const MAX_JSON_DEPTH = 64;

/**
 * Refuses bodies that could poison prototypes where a body is merged into an object
 * (`__proto__`, `constructor.prototype`) and bodies nested deeper than any real request.
 * Iterative, so a hostile depth cannot overflow the stack.
 */
export function unsafeJson(root: object): string | undefined {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`;
    if (Array.isArray(v)) {
      for (const item of v) if (item !== null && typeof item === 'object') stack.push([item, depth + 1]);
      continue;
    }
    for (const key of Object.keys(v)) {
      const child = (v as Json)[key];
      if (key === '__proto__' || (key === 'constructor' && child !== null && typeof child === 'object' && 'prototype' in child)) {
        return `The request body contains the key '${key}', which is not allowed.`;
      }
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return undefined;
}

/** The last status of a deployment whose answers were all 429/5xx, once a fallback failed too. */
function upstreamStatusFailure(status: number, requestId: string) {
  return gatewayError({
    httpStatus: status, type: status === 429 ? 'rate_limit_error' : 'server_error', code: status === 429 ? 'upstream_rate_limited' : 'upstream_error',
    message: `The upstream provider answered ${status}.`, retryAfterSeconds: status === 429 ? 1 : 0, requestId,
  });
}

function rateLimited(d: RateDecision, requestId: string): ConnectError {
  const err = gatewayError({
    httpStatus: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded', requestId, retryAfterSeconds: d.resetSeconds,
    message: `Rate limit reached for this key: ${d.limitRequests} requests and ${d.limitTokens} tokens per minute (0 = unlimited). Try again in ${d.resetSeconds}s.`,
  });
  err.metadata.set('x-ratelimit-limit-requests', String(d.limitRequests));
  err.metadata.set('x-ratelimit-remaining-requests', String(d.remainingRequests));
  err.metadata.set('x-ratelimit-reset-requests', `${d.resetSeconds}s`);
  err.metadata.set('x-ratelimit-limit-tokens', String(d.limitTokens));
  err.metadata.set('x-ratelimit-remaining-tokens', String(d.remainingTokens));
  err.metadata.set('x-ratelimit-reset-tokens', `${d.resetSeconds}s`);
  return err;
}

export function errorMessage(e: unknown): string {
  if (e && typeof e === 'object' && typeof (e as Json).message === 'string') return (e as Json).message as string;
  return typeof e === 'string' ? e : '';
}
