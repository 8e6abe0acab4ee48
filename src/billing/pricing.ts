// Token pricing, cache-aware. Each kind of input token is priced exactly once at its own rate;
// the prices are the ones the provider billed the request at: the service tier it reports,
// its long-context prices past the model's threshold, 1-hour cache writes apart from 5-minute
// ones, and a fee per server tool call it reports (docs/billing.md).
import { costNano, costRational, dearer, parseDecimal, type PricedQuantity } from '../money/money.ts';

export const PER_MILLION = 1_000_000n;

/** The token prices of a chat model, USD decimal strings per 1M tokens. */
export interface TokenPrices {
  input_per_mtok: string;
  output_per_mtok: string;
  /** Cache reads; defaults to the input price when the model has no discount. */
  cached_input_per_mtok?: string;
  /** Cache writes (5-minute, Anthropic); defaults to the input price. */
  cache_write_per_mtok?: string;
  /** 1-hour cache writes (Anthropic); defaults to the 5-minute write price. */
  cache_write_1h_per_mtok?: string;
}

/**
 * Usage normalised across providers. `inputTokens` is ALL input: uncached + cache reads + cache
 * writes, so the uncached part is inputTokens - cachedTokens - cacheWriteTokens.
 */
export interface TokenUsage {
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  cacheWriteTokens: bigint;
  /** Of cacheWriteTokens, those written to the 1-hour cache. */
  cacheWrite1hTokens?: bigint;
  /** Server tool calls the provider reports, by the price key of their fee (e.g. web_search_per_call). */
  toolCalls?: Record<string, bigint>;
  /** The service tier the provider reports having served the request at (OpenAI: default, flex, priority). */
  serviceTier?: string;
}

/** What of a catalogue entry pricing needs. */
export interface PricedModel {
  prices: Record<string, string>;
  /** Input tokens above which the whole request is billed at the `long_` prices. */
  longContextAboveTokens?: number;
}

/** Service tiers the catalogue can price (`<tier>_input_per_mtok`, …); any other is refused. */
export const PRICED_TIERS = ['priority', 'flex'] as const;

/** The fee of one web search, where the model has a priced web search tool. */
export const WEB_SEARCH_FEE = 'web_search_per_call';

function count(v: unknown): bigint {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? BigInt(v) : 0n;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v !== null && typeof v === 'object' ? (v as Json) : {});
const tierOf = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * OpenAI-format chat usage: prompt_tokens include the cached ones (DeepSeek names its cache hits
 * prompt_cache_hit_tokens). Reasoning tokens are inside completion_tokens at OpenAI and DeepSeek;
 * xAI reports them beside it (and inside total_tokens), and bills them as output all the same.
 */
export function usageFromOpenAI(u: Json, serviceTier?: unknown): TokenUsage {
  const input = count(u.prompt_tokens);
  const details = obj(u.prompt_tokens_details);
  const cached = details.cached_tokens !== undefined ? count(details.cached_tokens) : count(u.prompt_cache_hit_tokens);
  const completion = count(u.completion_tokens);
  const reasoning = count(obj(u.completion_tokens_details).reasoning_tokens);
  const outside = reasoning > 0n && count(u.total_tokens) >= input + completion + reasoning;
  return {
    inputTokens: input,
    outputTokens: outside ? completion + reasoning : completion,
    cachedTokens: cached > input ? input : cached,
    cacheWriteTokens: 0n,
    ...(tierOf(serviceTier) ? { serviceTier: tierOf(serviceTier) } : {}),
  };
}

/**
 * Anthropic: input_tokens EXCLUDE cache_read_input_tokens and cache_creation_input_tokens;
 * cache_creation splits the writes by TTL; server_tool_use counts the web searches.
 */
export function usageFromAnthropic(u: Json): TokenUsage {
  const uncached = count(u.input_tokens);
  const read = count(u.cache_read_input_tokens);
  const split = obj(u.cache_creation);
  const write1h = count(split.ephemeral_1h_input_tokens);
  const splitTotal = count(split.ephemeral_5m_input_tokens) + write1h;
  const reported = count(u.cache_creation_input_tokens);
  const write = reported > splitTotal ? reported : splitTotal;
  const searches = count(obj(u.server_tool_use).web_search_requests);
  return {
    inputTokens: uncached + read + write,
    outputTokens: count(u.output_tokens),
    cachedTokens: read,
    cacheWriteTokens: write,
    ...(write1h > 0n ? { cacheWrite1hTokens: write1h } : {}),
    ...(searches > 0n ? { toolCalls: { [WEB_SEARCH_FEE]: searches } } : {}),
  };
}

/**
 * OpenAI Responses API: input_tokens include input_tokens_details.cached_tokens; web searches
 * are the response's `web_search_call` output items; the tier is the response's service_tier.
 */
export function usageFromOpenAIResponses(u: Json, response: Json = {}): TokenUsage {
  const input = count(u.input_tokens);
  const cached = count(obj(u.input_tokens_details).cached_tokens);
  const searches = BigInt(
    (Array.isArray(response.output) ? (response.output as Json[]) : []).filter((o) => o?.type === 'web_search_call')
      .length,
  );
  return {
    inputTokens: input,
    outputTokens: count(u.output_tokens),
    cachedTokens: cached > input ? input : cached,
    cacheWriteTokens: 0n,
    ...(searches > 0n ? { toolCalls: { [WEB_SEARCH_FEE]: searches } } : {}),
    ...(tierOf(response.service_tier) ? { serviceTier: tierOf(response.service_tier) } : {}),
  };
}

/** The token prices of a variant (`''`, `priority_`, `flex_`, `long_`), or undefined when the catalogue has none. */
export function variantPrices(prices: Record<string, string>, prefix: string): TokenPrices | undefined {
  const input = prices[`${prefix}input_per_mtok`];
  const output = prices[`${prefix}output_per_mtok`];
  if (input === undefined || output === undefined) return undefined;
  const write = prices[`${prefix}cache_write_per_mtok`] ?? input;
  return {
    input_per_mtok: input,
    output_per_mtok: output,
    cached_input_per_mtok: prices[`${prefix}cached_input_per_mtok`] ?? input,
    cache_write_per_mtok: write,
    cache_write_1h_per_mtok: prices[`${prefix}cache_write_1h_per_mtok`] ?? write,
  };
}

/** The prefix of a priced service tier (`priority_`, `flex_`), '' for the list prices. */
export function tierPrefix(tier: string | undefined): string {
  return (PRICED_TIERS as readonly string[]).includes(tier ?? '') ? `${tier}_` : '';
}

/** Whether `inputTokens` of input put the request at the model's long-context prices. */
export function isLongContext(model: PricedModel, inputTokens: bigint): boolean {
  return model.longContextAboveTokens !== undefined && inputTokens > BigInt(model.longContextAboveTokens);
}

/**
 * The prices a usage is billed at: the tier the provider reports (list prices for default, auto
 * or a tier the catalogue has no prices for: requests never ask for those, see bill-policy.ts),
 * else the long-context prices when the input passed the model's threshold, else list prices.
 */
export function pricesFor(model: PricedModel, usage: Pick<TokenUsage, 'inputTokens' | 'serviceTier'>): TokenPrices {
  const tiered = tierPrefix(usage.serviceTier);
  if (tiered) {
    const p = variantPrices(model.prices, tiered);
    if (p) return p;
  }
  if (isLongContext(model, usage.inputTokens)) {
    const p = variantPrices(model.prices, 'long_');
    if (p) return p;
  }
  return variantPrices(model.prices, '') ?? (model.prices as unknown as TokenPrices);
}

export function tokenCostParts(prices: TokenPrices, usage: TokenUsage): PricedQuantity[] {
  const uncached = usage.inputTokens - usage.cachedTokens - usage.cacheWriteTokens;
  if (uncached < 0n) throw new Error('usage has more cached tokens than input tokens');
  const write1h = usage.cacheWrite1hTokens ?? 0n;
  if (write1h > usage.cacheWriteTokens) throw new Error('usage has more 1-hour cache writes than cache writes');
  const write = prices.cache_write_per_mtok ?? prices.input_per_mtok;
  return [
    { quantity: uncached, priceUsd: prices.input_per_mtok, perUnits: PER_MILLION },
    {
      quantity: usage.cachedTokens,
      priceUsd: prices.cached_input_per_mtok ?? prices.input_per_mtok,
      perUnits: PER_MILLION,
    },
    { quantity: usage.cacheWriteTokens - write1h, priceUsd: write, perUnits: PER_MILLION },
    { quantity: write1h, priceUsd: prices.cache_write_1h_per_mtok ?? write, perUnits: PER_MILLION },
    { quantity: usage.outputTokens, priceUsd: prices.output_per_mtok, perUnits: PER_MILLION },
  ];
}

/** Per-call fees of the server tool calls a usage reports (USD per call, by price key). */
export function toolFeeParts(
  prices: Record<string, string>,
  calls: Record<string, bigint> | undefined,
): PricedQuantity[] {
  const parts: PricedQuantity[] = [];
  for (const [key, n] of Object.entries(calls ?? {})) {
    const fee = prices[key];
    // Requests with tools whose calls have no price are refused (bill-policy.ts), so a count
    // without a fee cannot come from a request the gateway let through.
    if (fee === undefined) throw new Error(`no price ${key} for the ${n} tool calls reported`);
    parts.push({ quantity: n, priceUsd: fee, perUnits: 1n });
  }
  return parts;
}

/** Cost in nano-USD of a token usage at the given prices (no variants, no fees), rounded up once. */
export function tokenCostNano(prices: TokenPrices, usage: TokenUsage): bigint {
  return costNano(tokenCostParts(prices, usage));
}

/** What the provider bills for a usage, in nano-USD, rounded up once: tokens at their variant's prices plus tool fees. */
export function usageCostNano(model: PricedModel, usage: TokenUsage): bigint {
  return costNano(usageCostParts(model, usage));
}

/** The priced quantities of usageCostNano (the metering marks up their exact sum, src/billing/markup.ts). */
export function usageCostParts(model: PricedModel, usage: TokenUsage): PricedQuantity[] {
  return [...tokenCostParts(pricesFor(model, usage), usage), ...toolFeeParts(model.prices, usage.toolCalls)];
}

/**
 * The most output tokens whose cost, added to `inputTokens` of uncached input, fits in
 * `budgetNano`. Exact: cost = ceil(in*pIn + out*pOut) <= budget  <=>  in*pIn + out*pOut <= budget.
 */
export function affordableOutputTokens(prices: TokenPrices, inputTokens: bigint, budgetNano: bigint): bigint {
  return affordableBeyond(
    [{ quantity: inputTokens, priceUsd: prices.input_per_mtok, perUnits: PER_MILLION }],
    prices.output_per_mtok,
    budgetNano,
  );
}

/**
 * The most units at `unitPriceUsd` per 1M that fit in `budgetNano` on top of the `fixed` parts:
 * ceil(fixed + n*p) <= budget  <=>  fixed + n*p <= budget, all in exact fractions.
 */
export function affordableBeyond(fixed: readonly PricedQuantity[], unitPriceUsd: string, budgetNano: bigint): bigint {
  const f = costRational(fixed);
  const p = parseDecimal(unitPriceUsd);
  // left = budget - f, in nano-USD, as a fraction over f.den.
  const leftNum = budgetNano * f.den - f.num;
  if (leftNum < 0n) return 0n;
  if (p.num === 0n) return BigInt(Number.MAX_SAFE_INTEGER);
  // n <= left / (p * 1e9 / 1e6) = left * p.den / (p.num * 1000)
  return (leftNum * p.den) / (f.den * p.num * 1_000n);
}

/**
 * The worst case a request can be billed, as the route's policy sees it (src/metering/bill-policy.ts):
 * what the hold must cover.
 */
export interface WorstCase {
  /** The dearest token prices the request can be billed at (its tier; list prices otherwise). */
  prices: TokenPrices;
  /** Input the gateway cannot see (state kept by the provider, URLs, files): the parameter that brings it in. */
  unseen?: string;
  /** The model's context window: the most input one pass over the context can read. */
  window: bigint;
  /** Passes the provider can make over the context for one request (1 + the server tool calls it may make). */
  passes: bigint;
  /** The output cap bounds each pass rather than the whole request (server-tool loops on Anthropic). */
  outputPerPass: boolean;
  /** Output tokens the cap does not bound (reasoning beside it), held on top of it. */
  uncappedOutput: bigint;
  /** Per-call fees at the most calls the request can make. */
  fees: PricedQuantity[];
  /** Long-context prices, when the model has them (used when the input can pass the threshold). */
  long?: { aboveTokens: bigint; prices: TokenPrices };
}

/** Input tokens the hold counts: the request's own bound, or a full context window per pass when the provider adds input the gateway cannot see. */
export function worstInput(w: WorstCase, inputBound: bigint): bigint {
  if (!w.unseen && w.passes === 1n) return inputBound;
  const perPass = inputBound > w.window ? inputBound : w.window;
  return perPass * w.passes;
}

function worstPrices(w: WorstCase, input: bigint): TokenPrices {
  return w.long && input > w.long.aboveTokens ? w.long.prices : w.prices;
}

/** The input side and fees of a hold: what it costs before any output token. */
function worstFixedParts(
  w: WorstCase,
  inputBound: bigint,
  uncappedOutputTokens: bigint,
): { parts: PricedQuantity[]; prices: TokenPrices } {
  const input = worstInput(w, inputBound);
  const prices = worstPrices(w, input);
  return {
    prices,
    parts: [
      { quantity: input, priceUsd: prices.input_per_mtok, perUnits: PER_MILLION },
      { quantity: uncappedOutputTokens, priceUsd: prices.output_per_mtok, perUnits: PER_MILLION },
      ...w.fees,
    ],
  };
}

/** Output tokens the provider can bill for a cap of `capPerChoice` over `choices`. */
function worstOutput(w: WorstCase, capPerChoice: bigint, choices: bigint): bigint {
  return capPerChoice * choices * (w.outputPerPass ? w.passes : 1n);
}

/** The hold for a request: its worst case at `inputBound` input tokens and an output cap of `capPerChoice` per choice. */
export function worstCostNano(w: WorstCase, inputBound: bigint, capPerChoice: bigint, choices: bigint): bigint {
  const { parts, prices } = worstFixedParts(w, inputBound, w.uncappedOutput * choices);
  return costNano([
    ...parts,
    { quantity: worstOutput(w, capPerChoice, choices), priceUsd: prices.output_per_mtok, perUnits: PER_MILLION },
  ]);
}

/** The largest output cap per choice whose worst case fits in `budgetNano` (0 when not even the input does). */
export function affordableCap(w: WorstCase, inputBound: bigint, choices: bigint, budgetNano: bigint): bigint {
  const { parts, prices } = worstFixedParts(w, inputBound, w.uncappedOutput * choices);
  const tokens = affordableBeyond(parts, prices.output_per_mtok, budgetNano);
  return tokens / (choices * (w.outputPerPass ? w.passes : 1n));
}

/** The dearest of the input-side prices a request can pay for a token it sends: list, or a cache write (1-hour or 5-minute) when it asks for one. */
export function dearestInputPrice(prices: TokenPrices, writes: 'none' | '5m' | '1h'): string {
  if (writes === 'none') return prices.input_per_mtok;
  const write = prices.cache_write_per_mtok ?? prices.input_per_mtok;
  return dearer(
    prices.input_per_mtok,
    writes === '1h' ? dearer(write, prices.cache_write_1h_per_mtok ?? write) : write,
  );
}
