// The metering engine every inference route shares: key check, body parse, hold, upstream
// call, settle, and the streaming relay (relay.ts) that settles exactly once however a stream
// ends. Routes (chat.ts, messages.ts, responses.ts) decide what to send and how to read the
// reply; bill-policy.ts decides what a request's worst case is. A request is charged what the
// provider bills for it, never more than its hold, and the hold covers the worst case the
// provider can bill (docs/billing.md).
import type { Logger } from 'pino';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Config } from '../config/config.ts';
import type { ResolvedModel } from '../catalogue/catalogue.ts';
import { isWellFormedKey } from '../billing/keys.ts';
import { LedgerError, newId, type Ledger } from '../billing/ledger.ts';
import { affordableCap, usageCostNano, worstCostNano, type TokenPrices, type TokenUsage, type WorstCase } from '../billing/pricing.ts';
import { badRequest, gatewayError, toGatewayError, unauthorized } from '../rpc/errors.ts';
import { bomLength, isAbort, upstreamFailure, type Upstream, type UpstreamBody, type UpstreamResponse } from './upstream.ts';
import type { SseEvent } from './sse.ts';
import { StreamRun, type RelayOptions } from './relay.ts';
import { baseWorst } from './bill-policy.ts';
import { duplicateMember, duplicateMemberRefusal } from './duplicate-members.ts';
import type { RateDecision, RateLimiter } from '../billing/rate-limits.ts';
import type { Metrics } from '../log/metrics.ts';
import type { LeaseBook, Reservation } from '../billing/leases.ts';
import { KeyCheck } from '../billing/key-check.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { isUtf8 } from 'node:buffer';

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
  /** What the hold must cover beyond the body's own bound (bill-policy.ts); list prices and one pass when unset. */
  worst?: WorstCase;
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
  /** Set by the hold: the account the key stands for (it owns what the request stores upstream). */
  accountId?: string;
  /** When the first upstream attempt started (for the added-latency metric). */
  upstreamStartedAt?: number;
  /** Keeps the hold from expiring while the request runs; cleared by the settle. */
  renewal?: NodeJS.Timeout;
  /** With credit leases: the in-memory reservation this request spends (instead of a hold). */
  lease?: Reservation;
  keyId?: string;
  /** The one settle of this request: later calls get the same charge. */
  settling?: Promise<ChargeInfo>;
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
  /** Streams whose caller left, read on for their usage (relay.ts); shutdown shortens their drain. */
  readonly abandonedStreams = new Set<StreamRun>();

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

  /**
   * A hold the balance refused while credit leases (this instance's or another's) hold part of
   * it: a lease is the gateway's reservation, not the customer's spending, so the leases give
   * back what their requests in flight do not use (a bounded wait) and the hold is tried again.
   */
  private async leasesGaveBack(accountId: string): Promise<boolean> {
    return (await this.ledger.reclaimLeases(accountId, { waitMs: 1_000, pauseMs: 2_000 })) !== 'none';
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
    const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return this.invalid(apiKey, badRequest('The request body is not valid JSON.', 'invalid_json'));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return this.invalid(apiKey, badRequest('The request body must be a JSON object.', 'invalid_json'));
    const unsafe = unsafeJson(body);
    if (unsafe) return this.invalid(apiKey, badRequest(unsafe, 'invalid_json'));
    // A name sent twice is read one way here and maybe the other way by the provider: refused.
    const repeated = duplicateMember(text, body);
    if (repeated !== undefined) return this.invalid(apiKey, duplicateMemberRefusal(repeated));
    return { apiKey, body: body as Json };
  }

  /**
   * Resolves once every hold this process placed is settled, or after `timeoutMs`: shutdown
   * waits here so no request is left to the sweeper.
   */
  async drain(timeoutMs: number): Promise<number> {
    const until = performance.now() + timeoutMs;
    // Streams read on after their caller left get most of this wait to see their usage.
    for (const run of this.abandonedStreams) run.cutAfter(Math.max(0, timeoutMs - 2_000));
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
   * precisely and holds what the balance affords, with a lowered output cap (402 below the least
   * possible cost). The worst case is the route's (plan.worst): input the provider adds on its
   * side is held at the model's full context window per pass, server tool fees at their cap.
   */
  async hold(apiKey: string, plan: Plan): Promise<Held> {
    const key = await this.admitKey(apiKey, plan.requestId);
    const keyHash = key.keyHash;
    plan.keyHash = keyHash;
    plan.accountId = key.accountId;
    const w = (plan.worst ??= baseWorst(plan.model, plan.prices));
    const cost = (input: bigint, capPerChoice: bigint) => worstCostNano(w, input, capPerChoice, plan.choices);
    let input = plan.inputUpper;
    const maxCost = cost(input, plan.maxOutput);
    if (await this.reserveFromLease(plan, key, maxCost)) return { amountNano: maxCost };
    const ttlSeconds = this.config.holds.ttlSeconds;
    let hold;
    try {
      const place = (minNano: bigint) => this.ledger.placeHold({ apiKeyHash: keyHash, requestId: plan.requestId, minNano, maxNano: maxCost, ttlSeconds });
      hold = await place(cost(input, 1n));
      if (hold.kind === 'insufficient' && (await this.leasesGaveBack(hold.accountId))) hold = await place(cost(input, 1n));
      if (hold.kind === 'insufficient') {
        // With input the gateway cannot see, the window dominates: the tokenizer would change nothing.
        if (!w.unseen) input = plan.countInput();
        const min = cost(input, 1n);
        if (hold.availableNano >= min) hold = await place(min);
      }
    } catch (err) {
      throw duplicateRequest(err);
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient') {
      const why = w.unseen
        ? ` It brings in ${w.unseen}, which the provider reads on its side where the gateway cannot see it, so its least cost is the model's full context window (${w.window} tokens${w.passes > 1n ? ` for each of ${w.passes} passes` : ''}) at the input price${w.fees.length ? ', plus the tool call fees' : ''}.`
        : '';
      throw gatewayError({
        httpStatus: 402,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        requestId: plan.requestId,
        message: `Insufficient credits: this request needs at least ${cost(input, 1n)} nano-USD and ${hold.availableNano} are available.${why} Top up the key's balance.`,
      });
    }
    this.keepHold(plan);
    if (hold.amountNano >= maxCost) return { amountNano: hold.amountNano };
    const perChoice = affordableCap(w, input, plan.choices, hold.amountNano);
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
      const place = () => this.ledger.placeHold({ apiKeyHash: keyHash, requestId, minNano: amountNano, maxNano: amountNano, ttlSeconds });
      hold = await place();
      if (hold.kind === 'insufficient' && (await this.leasesGaveBack(hold.accountId))) hold = await place();
    } catch (err) {
      throw duplicateRequest(err);
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient') {
      throw gatewayError({
        httpStatus: 402,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        requestId,
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

  /**
   * Settles at `costNano` when given (routes not billed by tokens), else at what the provider
   * billed for `usage` (its tier, long-context prices, tool fees); never above the hold. Exactly
   * once: a later call gets the first charge.
   */
  settle(plan: Plan, usage: ChargeInfo['usage'], status: string, httpStatus: number, costNano?: bigint): Promise<ChargeInfo> {
    return (plan.settling ??= this.settleOnce(plan, usage, status, httpStatus, costNano));
  }

  private async settleOnce(plan: Plan, usage: ChargeInfo['usage'], status: string, httpStatus: number, costNano?: bigint): Promise<ChargeInfo> {
    if (plan.renewal) {
      clearInterval(plan.renewal);
      plan.renewal = undefined;
      this.inFlight--;
      this.metrics.holdsOpen.dec();
    }
    const cost = costNano ?? usageCostNano(plan.model, usage);
    // The usage row, the same whether it is written from a lease batch or by the hold's settle.
    const row = {
      requestId: plan.requestId,
      model: plan.model.id,
      requestedModel: requestedModel(plan),
      route: plan.route,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedTokens: usage.cachedTokens,
      cacheWriteTokens: usage.cacheWriteTokens,
      usageEstimated: usage.estimated,
      units: usage.units ?? 0n,
      unit: usage.unit ?? '',
      status,
      httpStatus,
      latencyMs: Math.round(performance.now() - plan.startedAt),
    };
    if (plan.lease) {
      const lease = plan.lease;
      plan.lease = undefined;
      this.inFlight--;
      this.metrics.holdsOpen.dec();
      const charged = this.leases!.settle(lease, { ...row, keyId: plan.keyId! }, cost);
      if (charged > 0n) this.metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(charged));
      if (plan.keyHash) this.limiter.addTokens(plan.keyHash, usage.inputTokens + usage.outputTokens);
      return { requestId: plan.requestId, costNano: charged, usage };
    }
    const r = await this.ledger.settle({ ...row, costNano: cost });
    if (r.firstSettle && r.chargedNano > 0n) this.metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(r.chargedNano));
    if (plan.keyHash && r.firstSettle) this.limiter.addTokens(plan.keyHash, usage.inputTokens + usage.outputTokens);
    return { requestId: plan.requestId, costNano: r.chargedNano, usage };
  }

  /**
   * POST upstream. 429, 5xx and connection failures are retried with backoff (honouring
   * retry-after, capped) — safe because the caller has received nothing yet, and only while the
   * caller is there (`callerGone`: no new request for a caller who left). What still fails
   * settles at zero: a transport failure becomes 502/504, an HTTP error is returned as is.
   */
  async post(plan: Plan, url: string, headers: Record<string, string>, body: UpstreamBody, signal?: AbortSignal, callerGone?: AbortSignal): Promise<UpstreamResponse> {
    if (plan.upstreamStartedAt === undefined) {
      plan.upstreamStartedAt = performance.now();
      this.metrics.addedLatencyOf(plan.route).observe((plan.upstreamStartedAt - plan.startedAt) / 1000);
    }
    const canFall = plan.model.providerConfig.fallback !== undefined && url.startsWith(plan.model.providerConfig.baseUrl);
    const first = await this.attempts(plan, url, headers, body, signal, canFall, callerGone);
    if (first.res || !canFall) return this.finish(plan, first);
    if (callerGone?.aborted) throw callerGone.reason;
    // The first deployment failed before the caller got anything: the same request, once more,
    // on the fallback deployment (its URL and credentials; the caller's body unchanged).
    const primary = plan.model.providerConfig;
    const fallback = primary.fallback!;
    const swap = (v: string) => (primary.apiKey ? v.split(primary.apiKey).join(fallback.apiKey) : v);
    const fbHeaders = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, swap(v)]));
    this.metrics.upstreamRetries.inc({ provider: plan.model.provider, reason: 'fallback' });
    this.log.warn({ requestId: plan.requestId, provider: plan.model.provider }, 'first deployment failed; trying the fallback deployment');
    return this.finish(plan, await this.attempts(plan, fallback.baseUrl + url.slice(primary.baseUrl.length), fbHeaders, body, signal, false, callerGone));
  }

  /**
   * One deployment's attempts with backoff. Returns the answer to use, or (when `keepFailure`)
   * the failure, left unsettled for a fallback to try.
   */
  private async attempts(
    plan: Plan,
    url: string,
    headers: Record<string, string>,
    body: UpstreamBody,
    signal: AbortSignal | undefined,
    keepFailure: boolean,
    callerGone?: AbortSignal,
  ): Promise<Attempted> {
    const { retries, retryBaseMs, retryMaxWaitMs } = this.config.upstream;
    const provider = plan.model.provider;
    // Only a retry waits on both signals: linked lazily (AbortSignal.any costs on every stream).
    let linked: AbortSignal | undefined;
    const waits = () => (linked ??= signal && callerGone ? AbortSignal.any([signal, callerGone]) : (signal ?? callerGone));
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 && callerGone?.aborted) throw callerGone.reason;
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
          await sleep(backoff, undefined, { signal: waits() });
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
        await sleep(Math.min(retryMaxWaitMs, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : backoff), undefined, { signal: waits() });
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

  /**
   * Reads a unary JSON reply; a broken or non-JSON body settles at zero and becomes 502. `bytes`
   * is `text` encoded: the reply's own bytes when they are valid UTF-8 without a BOM (no encode
   * of a reply passed on unchanged), else `text` encoded again.
   */
  async readJson(plan: Plan, res: UpstreamResponse): Promise<{ text: string; json: Json; bytes: Uint8Array }> {
    try {
      const buf = await res.body.bytes();
      // As undici's text(): a BOM skipped, invalid sequences replaced.
      const bom = bomLength(buf);
      const text = buf.toString('utf8', bom);
      const json = JSON.parse(text) as Json;
      if (json === null || typeof json !== 'object') throw new Error('not an object');
      const bytes = bom === 0 && isUtf8(buf) ? buf : new TextEncoder().encode(text);
      return { text, json, bytes };
    } catch (err) {
      await this.settle(plan, zeroUsage(), 'upstream_bad_reply', 502);
      throw (err as { code?: string }).code?.startsWith('UND_ERR')
        ? upstreamFailure(err, plan.requestId)
        : gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_bad_reply', message: 'The upstream provider sent a reply that is not JSON.', requestId: plan.requestId });
    }
  }

  /**
   * An upstream error answer: settled at zero, in the route's own error shape whatever shape the
   * provider wrote it in (its message, type, param and code kept where it has them), with a
   * status that does not blame the caller for the gateway's credentials.
   */
  async upstreamError(plan: Plan, res: UpstreamResponse, opts: { passBody?: boolean; settle?: boolean } = {}) {
    let text = '';
    try {
      text = (await res.body.text()).slice(0, MAX_ERROR_BODY);
    } catch {
      /* body lost: the status is enough */
    }
    if (opts.settle !== false) await this.settle(plan, zeroUsage(), 'upstream_error', res.statusCode);
    return upstreamErrorOf(res.statusCode, res.headers['retry-after'], text, plan.requestId);
  }

  /** Relays an upstream SSE stream (see relay.ts): nothing goes to the caller before the first event for them, and the request settles exactly once. */
  relay(plan: Plan, opts: RelayOptions): AsyncGenerator<StreamEvent> {
    return new StreamRun(this, plan, opts).events();
  }
}

/** The provider's error fields from whatever shape it answered in. */
export function providerErrorFields(text: string): { message?: string; type?: string; param?: string; code?: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    const plain = text.trim();
    return plain && !plain.startsWith('<') ? { message: plain.slice(0, 1_000) } : {};
  }
  const j = (parsed ?? {}) as Json;
  const e = (typeof j.error === 'object' && j.error !== null ? j.error : j) as Json;
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);
  let message = str(e.message) ?? (typeof j.error === 'string' ? j.error : undefined) ?? str(j.message);
  if (!message && j.detail !== undefined) {
    message = typeof j.detail === 'string' ? j.detail : Array.isArray(j.detail) ? (j.detail as Json[]).map((d) => str(d?.msg) ?? JSON.stringify(d)).join('; ') : undefined;
  }
  return { message, type: str(e.type), param: str(e.param), code: str(e.code) };
}

/** An upstream HTTP error as the gateway's error: the provider's words, the route's shape (the facade writes it). */
export function upstreamErrorOf(s: number, retryAfterHeader: unknown, text: string, requestId: string) {
  // 401/403 are about the gateway's own provider credentials: not the caller's fault, and their text may quote the key.
  const credentials = s === 401 || s === 403;
  const status = credentials ? 502 : s;
  const f = credentials ? {} : providerErrorFields(text);
  const retryAfter = Number(retryAfterHeader);
  const ownType = s === 429 ? 'rate_limit_error' : s >= 500 || status === 502 ? 'server_error' : 'invalid_request_error';
  return gatewayError({
    httpStatus: status,
    type: f.type && f.type !== 'error' ? f.type : ownType,
    code: f.code ?? (s === 429 ? 'upstream_rate_limited' : 'upstream_error'),
    ...(f.param ? { param: f.param } : {}),
    message: f.message ?? (credentials ? "The upstream provider refused the gateway's credentials." : `The upstream provider answered ${s}.`),
    retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? Math.ceil(retryAfter) : s === 429 ? 1 : 0,
    requestId,
  });
}

/** The name the caller asked for: an alias of the model that served (src/catalogue/aliases.ts), or its own id. */
function requestedModel(plan: Plan): string {
  const asked = plan.body.model;
  return typeof asked === 'string' && asked !== '' ? asked : plan.model.id;
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
    httpStatus: status,
    type: status === 429 ? 'rate_limit_error' : 'server_error',
    code: status === 429 ? 'upstream_rate_limited' : 'upstream_error',
    message: `The upstream provider answered ${status}.`,
    retryAfterSeconds: status === 429 ? 1 : 0,
    requestId,
  });
}

function rateLimited(d: RateDecision, requestId: string): ConnectError {
  const err = gatewayError({
    httpStatus: 429,
    type: 'rate_limit_error',
    code: 'rate_limit_exceeded',
    requestId,
    retryAfterSeconds: d.resetSeconds,
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
