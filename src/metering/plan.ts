// What a priced request is to the metering: the plan a route makes for it (inference routes and
// video alike), the state the metering keeps on it, and the charge it ends with.
import type { ResolvedDeployment, ResolvedModel } from '../catalogue/catalogue.ts';
import type { TokenPrices, TokenUsage, WorstCase } from '../billing/pricing.ts';
import type { Caller } from '../billing/caller.ts';
import type { Reservation } from '../billing/leases.ts';
import type { Markup } from '../billing/markup.ts';
import type { Span } from '../tracing/spans.ts';
import type { InFlightBound } from '../billing/in-flight.ts';
import type { WindowRef } from '../billing/budget-holds.ts';
import type { AttemptLog } from '../billing/attempts.ts';

export type Json = Record<string, unknown>;

export interface ChargeInfo {
  requestId: string;
  costNano: bigint;
  /** The deployment whose answer decided the request (`<model>/<deployment>`, plan.servedBy), when one answered. */
  deployment?: string;
  /** Tokens, and for routes billed otherwise the billed quantity (`units` of `unit`). */
  usage: TokenUsage & { estimated: boolean; units?: bigint; unit?: string };
}

export const zeroUsage = (): ChargeInfo['usage'] => ({
  inputTokens: 0n,
  outputTokens: 0n,
  cachedTokens: 0n,
  cacheWriteTokens: 0n,
  estimated: false,
});

/** The charge as a stream's last chunk carries it (`x_gateway`). */
export function chargeField(c: ChargeInfo) {
  return { request_id: c.requestId, cost_nano_usd: c.costNano.toString(), usage_estimated: c.usage.estimated };
}

/**
 * A priced request as its route declares it (model, prices, the worst case, the bounds of its
 * input and output), and the caller it is made for. The route fills it before the hold; after
 * that only the metering writes `meter` and the upstream calls `upstreamStartedAt`.
 */
export interface Plan {
  readonly requestId: string;
  readonly route: string;
  readonly caller: Caller;
  readonly model: ResolvedModel;
  readonly prices: TokenPrices;
  /** What the hold must cover beyond the body's own bound (bill-policy.ts); list prices and one pass when unset. */
  worst?: WorstCase;
  readonly body: Json;
  /** Cheap upper bound of input tokens (no tokenizer). */
  readonly inputUpper: bigint;
  /** Tokenizer count of the input, used only when the balance is tight. */
  readonly countInput: () => bigint;
  /** Output cap per choice and the number of choices. */
  maxOutput: bigint;
  readonly choices: bigint;
  readonly startedAt: number;
  /** When the first upstream attempt started (for the added-latency metric). */
  upstreamStartedAt?: number;
  /**
   * The deployment whose answer decided the request (set by the upstream call): the one that
   * answered, or of a request that failed on every deployment the last one that gave an HTTP
   * answer (docs/providers.md#deployments). Its usage row names it and its prices are the provider cost.
   */
  servedBy?: ResolvedDeployment;
  /** The upstream attempts so far, in order and bounded (set by the upstream calls): the usage row and the request line carry them. */
  attempts?: AttemptLog;
  /** What the request took from that deployment's shared limits window, at its bound; set right at the settle. */
  deploymentWindow?: DeploymentWindow;
  /** The deployment whose concurrent slot the request holds (a deployment with a concurrency limit); given back at the settle. */
  deploymentSlot?: string;
  /** The metering's own state for this request (metering.ts): set by the hold, closed by the settle. */
  meter?: MeterState;
  /** The upstream attempt's span whose answer the request uses: the settle ends it with the usage (tracing on). */
  answerSpan?: Span;
}

/** A deployment's limits window a request took `tokens` from (inference/routing/deployment-limits.ts). */
export interface DeploymentWindow {
  deployment: string;
  windowStart: string;
  tokens: bigint;
}

export interface MeterState {
  /** Keeps a database hold from expiring while the request runs; cleared by the settle. */
  renewal?: NodeJS.Timeout;
  /** The budget windows the hold took from: its settle locks as the hold did (Ledger.settle), then checks their alerts. */
  budgeted?: readonly WindowRef[];
  /** With credit leases: the in-memory reservation this request spends (instead of a hold). */
  lease?: Reservation;
  /** The one settle of this request: later calls get the same charge. */
  settling?: Promise<ChargeInfo>;
  /** The markup the caller's group pays on plan.model, taken once at the hold: the settle charges at it. */
  markup?: Markup;
  /** The request's span (its RPC's), where the settle writes the money (tracing on). */
  span?: Span;
  /** What the hold reserved, for the request's span. */
  heldNano?: bigint;
  /** The bounds on requests in flight the request holds a slot of (src/billing/in-flight.ts); given back by the settle. */
  inFlight?: readonly InFlightBound[];
}

export interface Held {
  amountNano: bigint;
  /** Set when the balance covers less than the worst case: the per-choice output cap it affords. */
  loweredOutputCap?: bigint;
}
