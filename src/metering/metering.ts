// Metering: what a priced request holds before its upstream call and what it is charged after.
// The rule: a request is charged what the provider bills for it times (1 + the markup its
// caller's group pays on the model), rounded up once (src/billing/markup.ts), never more than its
// hold, and it settles exactly once (`plan.meter.settling ??= …`), in both billing modes: a
// database hold per request, or a reservation in this instance's credit lease
// (src/billing/leases.ts). Every amount held is in the customer's money. A request that ends
// without an answer to charge for settles at zero with the reason its failure carries
// (outcomes.ts), in one place: `run`. The hold also takes the request's slots under its key's and
// account's bounds on requests in flight (src/billing/in-flight.ts), and the settle gives them back.
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import { customerId, type Caller } from '../billing/caller.ts';
import type { KeyCheck } from '../billing/key-check.ts';
import { LedgerError, type HoldResult, type Ledger } from '../billing/ledger.ts';
import type { BudgetShortfall, WindowRef } from '../billing/budget-holds.ts';
import { budgetExceeded } from './budget-refusal.ts';
import type { LeaseBook } from '../billing/leases.ts';
import { costRational } from '../money/money.ts';
import { customerNano, providerBudgetNano, providerNano, type Markup, type ProviderCost } from '../billing/markup.ts';
import { affordableCap, usageCostParts, worstCostNano } from '../billing/pricing.ts';
import { markupFor } from '../catalogue/catalogue.ts';
import type { RateDecision, RateLimiter } from '../billing/rate-limits.ts';
import { boundsOf, type InFlightBound, type InFlightLimits } from '../billing/in-flight.ts';
import type { Metrics } from '../log/metrics.ts';
import type { RequestLines } from '../log/request-lines.ts';
import { conflict, gatewayError, insufficientQuota, unauthorized } from '../errors/errors.ts';
import { baseWorst } from './bill-policy.ts';
import { outcomeOf } from './outcomes.ts';
import { endHoldSpan, endSettleSpan, startHoldSpan, startSettleSpan } from './money-spans.ts';
import { sampledTraceId, type Span } from '../tracing/spans.ts';
import {
  zeroUsage,
  type ChargeInfo,
  type DeploymentWindow,
  type Held,
  type Json,
  type MeterState,
  type Plan,
} from './plan.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface MeteringDeps {
  holds: Config['holds'];
  ledger: Ledger;
  limiter: RateLimiter;
  keys: KeyCheck;
  metrics: Metrics;
  log: Logger;
  /** Set when BILLING_MODE=lease. */
  leases?: LeaseBook;
  /** The bounds on requests in flight per key and per account (MAX_IN_FLIGHT_PER_*), shared by every instance. */
  inFlight?: InFlightLimits;
  /** MAX_IN_FLIGHT_PER_ACCOUNT; 0 or unset: no bound per account. */
  maxInFlightPerAccount?: number;
  /**
   * The budgets a request is under (src/budgets/budget-book.ts); unset: none. A request under a
   * budget is held in the database, its hold checked against every budget in one transaction.
   */
  budgets?: { windowsFor(caller: Caller, customer: () => string, now: number): Promise<WindowRef[]> };
  /** Budget alerts (src/budgets/alerts.ts): checked after a charge moved budget windows. */
  alerts?: { check(windows: readonly WindowRef[], span?: Span): Promise<unknown> };
  /**
   * Told, when a request that took from a deployment's shared limits settles: the window it took
   * tokens from at its bound (to set right with the tokens it used), the concurrent slot it held.
   */
  deploymentSettled?: (done: { window?: DeploymentWindow; slot?: string; account: string; usedTokens: bigint }) => void;
  /** The facade's request lines (src/log/request-lines.ts): told when a request holds and what its settle wrote. */
  requestLines?: Pick<RequestLines, 'held' | 'settled'>;
}

/** A provider cost at a price map: the model's for the customer's charge, the serving deployment's for the operator's cost. */
export type PricedAt = (prices: Readonly<Record<string, string>>) => ProviderCost;

export class Metering {
  private readonly deps: MeteringDeps;
  /** Holds and reservations made by this process and not yet settled. */
  private inFlight = 0;

  constructor(deps: MeteringDeps) {
    this.deps = deps;
  }

  /** Counts the request against its key's per-minute limits: 429 past them, 401 for a key revoked since the edge checked it. */
  async admit(caller: Caller, requestId: string): Promise<RateDecision> {
    const d = await this.deps.limiter.admit(caller.keyHash);
    if (!d) throw unauthorized();
    // The key's caller, as the next request of the key starts from: not this request's end customer.
    const { customer: _thisRequests, ...key } = caller;
    this.deps.keys.remember({ ...key, group: d.group });
    if (!d.allowed) throw rateLimited(d, requestId);
    return d;
  }

  /**
   * Admits the request and holds the worst case on the cheap input bound; when that does not
   * fit, counts the input precisely and holds what the balance affords, with a lowered output
   * cap (402 below the least possible cost). The worst case is the route's (plan.worst): input
   * the provider adds on its side is held at the model's full context window per pass, server
   * tool fees at their cap. Every figure is at the customer's price (the markup applied).
   */
  async hold(plan: Plan): Promise<Held> {
    const span = startHoldSpan(plan);
    try {
      const held = await this.holdWorstCase(plan);
      endHoldSpan(span, plan, held);
      this.deps.requestLines?.held(plan.requestId);
      return held;
    } catch (err) {
      this.releaseInFlight(plan);
      endHoldSpan(span, plan, undefined, err);
      throw err;
    }
  }

  private async holdWorstCase(plan: Plan): Promise<Held> {
    await this.takeInFlight(plan, allowedModel(plan, await this.admit(plan.caller, plan.requestId)));
    const keyHash = plan.caller.keyHash;
    const markup = requestMarkup(plan);
    const w = (plan.worst ??= baseWorst(plan.model, plan.prices));
    const cost = (input: bigint, capPerChoice: bigint) =>
      customerNano(worstCostNano(w, input, capPerChoice, plan.choices), markup);
    let input = plan.inputUpper;
    const maxCost = cost(input, plan.maxOutput);
    const windows = await this.budgetWindows(plan);
    if (await this.reserveFromLease(plan, maxCost, windows)) return { amountNano: maxCost };
    const ttlSeconds = this.deps.holds.ttlSeconds;
    let hold: HoldResult;
    try {
      const place = (minNano: bigint) =>
        this.placeHold(plan, { apiKeyHash: keyHash, minNano, maxNano: maxCost, ttlSeconds }, windows);
      hold = await place(cost(input, 1n));
      if (hold.kind === 'insufficient' && (await this.leasesGaveBack(hold))) hold = await place(cost(input, 1n));
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
    if (hold.kind === 'insufficient' && hold.budget) throw budgetExceeded(hold.budget, cost(input, 1n), plan.requestId);
    if (windows.length > 0) (plan.meter ??= {}).budgeted = windows;
    if (hold.kind === 'insufficient') {
      const why = w.unseen
        ? ` It brings in ${w.unseen}, which the provider reads on its side where the gateway cannot see it, so its least cost is the model's full context window (${w.window} tokens${w.passes > 1n ? ` for each of ${w.passes} passes` : ''}) at the input price${w.fees.length ? ', plus the tool call fees' : ''}.`
        : '';
      throw insufficientQuota(
        `Insufficient credits: this request needs at least ${cost(input, 1n)} nano-USD and ${hold.availableNano} are available.${why} Top up the key's balance.`,
        { requestId: plan.requestId },
      );
    }
    this.keepHold(plan);
    if (hold.amountNano >= maxCost) return { amountNano: hold.amountNano };
    // The cap whose worst case, marked up, still fits in the hold.
    const perChoice = affordableCap(w, input, plan.choices, providerBudgetNano(hold.amountNano, markup));
    return { amountNano: hold.amountNano, loweredOutputCap: perChoice < 1n ? 1n : perChoice };
  }

  /**
   * Admits the request and holds a provider cost known up front (a price per image, second or
   * character) at the customer's price: 402 when the available balance is below it. The amount
   * held, in nano-USD.
   */
  async holdExact(plan: Plan, providerCost: ProviderCost): Promise<bigint> {
    const span = startHoldSpan(plan);
    try {
      await this.takeInFlight(plan, allowedModel(plan, await this.admit(plan.caller, plan.requestId)));
      const amountNano = customerNano(providerCost, requestMarkup(plan));
      const windows = await this.budgetWindows(plan);
      if (!(await this.reserveFromLease(plan, amountNano, windows))) {
        await this.placeExactHold(plan.caller, plan.requestId, amountNano, this.deps.holds.ttlSeconds, windows);
        if (windows.length > 0) (plan.meter ??= {}).budgeted = windows;
        this.keepHold(plan);
      }
      endHoldSpan(span, plan, { amountNano });
      this.deps.requestLines?.held(plan.requestId);
      return amountNano;
    } catch (err) {
      this.releaseInFlight(plan);
      endHoldSpan(span, plan, undefined, err);
      throw err;
    }
  }

  /**
   * One database hold of exactly `amountNano`, in the customer's money (a video job's, settled by
   * its workflow, is marked up by the video service): 409 for a reused request id, 401, or 402 below it.
   */
  async placeExactHold(
    caller: Caller,
    requestId: string,
    amountNano: bigint,
    ttlSeconds: number,
    windows: readonly WindowRef[] = [],
  ): Promise<void> {
    let hold: HoldResult;
    try {
      const place = () =>
        this.placeHold(
          { requestId },
          { apiKeyHash: caller.keyHash, minNano: amountNano, maxNano: amountNano, ttlSeconds },
          windows,
        );
      hold = await place();
      if (hold.kind === 'insufficient' && (await this.leasesGaveBack(hold))) hold = await place();
    } catch (err) {
      throw duplicateRequest(err);
    }
    if (hold.kind === 'unknown_key') throw unauthorized();
    if (hold.kind === 'insufficient' && hold.budget) throw budgetExceeded(hold.budget, amountNano, requestId);
    if (hold.kind === 'insufficient') {
      throw insufficientQuota(
        `Insufficient credits: this request costs ${amountNano} nano-USD and ${hold.availableNano} are available. Top up the key's balance.`,
        { requestId },
      );
    }
  }

  /**
   * The budget windows the request is under now (none when budgets are off or the account has
   * none). Its end customer, asked only when a customer budget could apply: the caller's header,
   * else the body's `user` (OpenAI) or `metadata.user_id` (Anthropic).
   */
  async budgetWindows(plan: { caller: Caller; body?: Json }): Promise<WindowRef[]> {
    if (!this.deps.budgets) return [];
    const customer = () => plan.caller.customer ?? bodyCustomer(plan.body) ?? '';
    return this.deps.budgets.windowsFor(plan.caller, customer, Date.now());
  }

  /** One database hold: checked against the budget windows in the same transaction when there are any. */
  private placeHold(
    plan: Pick<Plan, 'requestId'>,
    h: { apiKeyHash: Buffer; minNano: bigint; maxNano: bigint; ttlSeconds: number },
    windows: readonly WindowRef[],
  ): Promise<HoldResult> {
    const opts = { ...h, requestId: plan.requestId };
    return windows.length > 0
      ? this.deps.ledger.placeBudgetedHold({ ...opts, windows })
      : this.deps.ledger.placeHold(opts);
  }

  /**
   * Runs a held request's upstream work. If it fails, the request settles at zero with the
   * reason its failure carries (outcomes.ts), and the failure goes on to the caller. A request
   * the work already settled is not settled again.
   */
  async run<T>(plan: Plan, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      await this.release(plan, err);
      throw err;
    }
  }

  /** Settles a request that got no answer to charge for at zero, recording why (`failure`'s outcome). */
  async release(plan: Plan, failure: unknown): Promise<void> {
    const { outcome, httpStatus } = outcomeOf(failure);
    await this.settle(plan, zeroUsage(), outcome, httpStatus);
  }

  /**
   * Settles at the provider cost `providerCost` when given (routes not billed by tokens; exact
   * where it is a fraction of a nano-USD; a function of the prices where the deployment's own
   * prices should count), else at what the provider billed for `usage` (its tier, long-context
   * prices, tool fees); charges that, at the model's prices, times (1 + the markup held at),
   * rounded up once, never above the hold. The usage row's provider cost is at the prices of the
   * deployment that answered. Exactly once: a later call gets the first charge.
   */
  settle(
    plan: Plan,
    usage: ChargeInfo['usage'],
    status: string,
    httpStatus: number,
    providerCost?: ProviderCost | PricedAt,
  ): Promise<ChargeInfo> {
    const meter = (plan.meter ??= {});
    return (meter.settling ??= this.settleOnce(plan, meter, usage, status, httpStatus, providerCost));
  }

  /**
   * Resolves once every hold this process placed is settled, or after `timeoutMs`: shutdown
   * waits here so no request is left to the sweeper. The number still open.
   */
  async drain(timeoutMs: number): Promise<number> {
    const until = performance.now() + timeoutMs;
    while (this.inFlight > 0 && performance.now() < until) await sleep(20);
    return this.inFlight;
  }

  private async settleOnce(
    plan: Plan,
    meter: MeterState,
    usage: ChargeInfo['usage'],
    status: string,
    httpStatus: number,
    providerCost?: ProviderCost | PricedAt,
  ): Promise<ChargeInfo> {
    const span = startSettleSpan(plan);
    this.releaseInFlight(plan);
    if (meter.renewal) {
      clearInterval(meter.renewal);
      meter.renewal = undefined;
      this.closed();
    }
    // Marked up before it is rounded: the charge is the usage at the listed customer prices, rounded up once.
    const exact =
      typeof providerCost === 'function'
        ? providerCost(plan.model.prices)
        : (providerCost ?? costRational(usageCostParts(plan.model, usage)));
    const served = plan.servedBy;
    // What the operator pays: the deployment's own prices where it has them (a fixed cost stays fixed).
    const operatorCost = !served?.ownPrices
      ? exact
      : typeof providerCost === 'function'
        ? providerCost(served.providerPrices)
        : providerCost === undefined
          ? costRational(usageCostParts({ ...plan.model, prices: { ...served.providerPrices } }, usage))
          : exact;
    const markup = requestMarkup(plan);
    const row = usageRow(plan, usage, status, httpStatus, providerNano(operatorCost), markup.versionId);
    const tokens = usage.inputTokens + usage.outputTokens;
    if (plan.deploymentWindow || plan.deploymentSlot)
      this.deps.deploymentSettled?.({
        window: plan.deploymentWindow,
        slot: plan.deploymentSlot,
        account: plan.caller.accountId,
        usedTokens: tokens,
      });
    const { charged, billingMode } = await this.write(plan, meter, row, customerNano(exact, markup), tokens);
    const charge = {
      requestId: plan.requestId,
      costNano: charged,
      usage,
      ...(served ? { deployment: served.key } : {}),
    };
    endSettleSpan(span, plan, { charge, ...row, billingMode });
    const { deployment, attempts, providerCostNano } = row;
    this.deps.requestLines?.settled(plan.requestId, { deployment, attempts, providerCostNano, chargeNano: charged });
    return charge;
  }

  /** The charge and its usage row written: into this instance's lease (batched), or by the hold's settle in the database. */
  private async write(
    plan: Plan,
    meter: MeterState,
    row: UsageRow,
    cost: bigint,
    tokens: bigint,
  ): Promise<{ charged: bigint; billingMode: 'lease' | 'hold' }> {
    const { ledger, leases, limiter, metrics } = this.deps;
    if (meter.lease) {
      const lease = meter.lease;
      meter.lease = undefined;
      this.closed();
      const { keyId, memberId, teamId } = plan.caller;
      const charged = leases!.settle(lease, { ...row, keyId, memberId, teamId }, cost);
      if (charged > 0n) metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(charged));
      limiter.addTokens(plan.caller.keyHash, tokens);
      return { charged, billingMode: 'lease' };
    }
    const windows = plan.meter?.budgeted;
    const r = await ledger.settle({ ...row, costNano: cost, budgeted: windows !== undefined });
    if (r.firstSettle && r.chargedNano > 0n) {
      metrics.chargedNanoOf(plan.route, plan.model.id).inc(Number(r.chargedNano));
      // Thresholds its charge reached fire now, with an event on the request's span.
      if (windows) await this.alertsAfter(windows, plan.meter?.span);
    }
    if (r.firstSettle) limiter.addTokens(plan.caller.keyHash, tokens);
    return { charged: r.chargedNano, billingMode: 'hold' };
  }

  /** Budget alerts for the windows a charge moved (never failing the request that made it). */
  private async alertsAfter(windows: readonly WindowRef[], span?: Span): Promise<void> {
    await this.deps.alerts
      ?.check(windows, span)
      .catch((err) =>
        this.deps.log.warn({ err }, 'checking budget alerts failed; the next charge in the window checks again'),
      );
  }

  /**
   * The request's slots under its key's and its account's bounds on requests in flight, held
   * until it settles: 429 naming the bound that has none free.
   */
  private async takeInFlight(plan: Plan, d: RateDecision): Promise<void> {
    const limits = this.deps.inFlight;
    if (!limits || plan.meter?.inFlight) return;
    const bounds = boundsOf(
      { windowId: d.windowId, maxInFlight: d.maxInFlight },
      { id: d.accountId, maxInFlight: this.deps.maxInFlightPerAccount ?? 0 },
      d,
    );
    if (bounds.length === 0) return;
    const refused = await limits.take(bounds);
    if (refused) {
      this.deps.metrics.concurrencyRefusals.of(refused.code).inc();
      throw concurrencyLimited(refused, plan.requestId);
    }
    (plan.meter ??= {}).inFlight = bounds;
  }

  /** Gives the request's in-flight slots back (once). */
  private releaseInFlight(plan: Plan): void {
    const bounds = plan.meter?.inFlight;
    if (!bounds) return;
    plan.meter!.inFlight = undefined;
    this.deps.inFlight?.release(bounds);
  }

  /**
   * With credit leases on: reserves `amountNano` in memory, in the lease and its slice of each
   * budget window; false when they cannot cover it (the caller then holds in the database).
   */
  private async reserveFromLease(plan: Plan, amountNano: bigint, windows: readonly WindowRef[]): Promise<boolean> {
    const leases = this.deps.leases;
    if (!leases) return false;
    const r = await leases.reserve(plan.caller.keyHash, plan.caller.accountId, amountNano, windows);
    if (!r) return false;
    (plan.meter ??= {}).lease = r;
    this.opened();
    return true;
  }

  /**
   * A hold the balance, or a budget window, refused while credit leases (this instance's or
   * another's) hold part of it: a lease and its budget slices are the gateway's reservation, not
   * the customer's spending, so the leases give back what their requests in flight do not use (a
   * bounded wait) and the hold is tried again. A budget asks only where a lease holds a slice of
   * its window, so a budget spent to the end asks no instance for anything.
   */
  private async leasesGaveBack(refused: { accountId: string; budget?: BudgetShortfall }): Promise<boolean> {
    const { ledger, leases } = this.deps;
    if (refused.budget && (!leases || !(await ledger.windowHasSlices(refused.budget.window)))) return false;
    return (await ledger.reclaimLeases(refused.accountId, { waitMs: 1_000, pauseMs: 2_000 })) !== 'none';
  }

  /** A database hold lives HOLD_TTL_SECONDS unless renewed: a request renews its own until settled, so only a dead process's holds expire. */
  private keepHold(plan: Plan): void {
    const { ledger, log } = this.deps;
    const ttlSeconds = this.deps.holds.ttlSeconds;
    // Renewals stop after two hours, so a request lost to a bug cannot pin a balance forever.
    const renewEveryMs = Math.max(1000, (ttlSeconds * 1000) / 3);
    let renewalsLeft = Math.ceil(7_200_000 / renewEveryMs);
    const meter = (plan.meter ??= {});
    meter.renewal = setInterval(() => {
      if (--renewalsLeft < 0) return clearInterval(meter.renewal);
      ledger
        .renewHold(plan.requestId, ttlSeconds)
        .catch((err) => log.warn({ err, requestId: plan.requestId }, 'hold renewal failed'));
    }, renewEveryMs);
    meter.renewal.unref();
    this.opened();
  }

  private opened(): void {
    this.inFlight++;
    this.deps.metrics.holdsOpen.inc();
  }

  private closed(): void {
    this.inFlight--;
    this.deps.metrics.holdsOpen.dec();
  }
}

type UsageRow = ReturnType<typeof usageRow>;

/** The usage row, the same whether it is written from a lease batch or by the hold's settle. */
function usageRow(
  plan: Plan,
  usage: ChargeInfo['usage'],
  status: string,
  httpStatus: number,
  providerCostNano: bigint,
  markupVersion: bigint,
) {
  return {
    requestId: plan.requestId,
    model: plan.model.id,
    requestedModel: requestedModel(plan),
    priceVersion: plan.model.priceVersion,
    providerCostNano,
    deployment: plan.servedBy?.key ?? '',
    attempts: plan.attempts?.text() ?? '',
    // The request's trace, when it was sampled: the console links the row to it (TRACE_UI_URL).
    traceId: plan.meter?.span ? sampledTraceId(plan.meter.span) : '',
    markupVersion,
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
}

/** The markup this request pays: its caller's group's on its model, taken once (at the hold) and kept for the settle. */
function requestMarkup(plan: Plan): Markup {
  return ((plan.meter ??= {}).markup ??= markupFor(plan.model, plan.caller.group));
}

/** The name the caller asked for: an alias of the model that served (src/catalogue/aliases.ts), or its own id. */
function requestedModel(plan: Pick<Plan, 'model' | 'body'>): string {
  const asked = plan.body.model;
  return typeof asked === 'string' && asked !== '' ? asked : plan.model.id;
}

/**
 * The decision, when the key may call the request's model: by its catalogue id or by the name
 * asked for (an alias). Else 403 model_not_allowed, naming what the key may call.
 */
export function allowedModel(plan: Pick<Plan, 'model' | 'body' | 'requestId'>, d: RateDecision): RateDecision {
  const allowed = d.allowedModels;
  if (!allowed || allowed.includes(plan.model.id) || allowed.includes(requestedModel(plan))) return d;
  throw gatewayError({
    httpStatus: 403,
    type: 'permission_error',
    code: 'model_not_allowed',
    param: 'model',
    requestId: plan.requestId,
    message: `This key may not call ${plan.model.id}; it may call ${allowed.slice(0, 20).join(', ')}${allowed.length > 20 ? ', …' : ''}.`,
  });
}

/** A reused request id is the caller's conflict (409); any other failure passes through. */
function duplicateRequest(err: unknown): unknown {
  if (err instanceof LedgerError && err.code === 'duplicate_request')
    return conflict('duplicate_request_id', err.message);
  return err;
}

/** A bound on requests in flight has none free: 429 naming it, to try again in a second. */
function concurrencyLimited(b: InFlightBound, requestId: string) {
  const whose = {
    key_concurrency_limit: 'this key',
    team_concurrency_limit: "this key's team",
    member_concurrency_limit: "this key's member",
    account_concurrency_limit: "this key's account",
  }[b.code];
  return gatewayError({
    httpStatus: 429,
    type: 'rate_limit_error',
    code: b.code,
    requestId,
    retryAfterSeconds: 1,
    message: `Too many requests in flight for ${whose}: at most ${b.limit} at once (${b.code}). Try again when one has finished.`,
  });
}

function rateLimited(d: RateDecision, requestId: string) {
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

/** The end customer a body names: OpenAI's `user`, or Anthropic's `metadata.user_id`. */
function bodyCustomer(body: Json | undefined): string | undefined {
  if (!body) return undefined;
  if (body.user !== undefined) return customerId(body.user, 'user');
  const metadata = body.metadata as Json | undefined;
  if (metadata && typeof metadata === 'object' && metadata.user_id !== undefined)
    return customerId(metadata.user_id, 'metadata.user_id');
  return undefined;
}
