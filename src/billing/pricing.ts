// Token pricing, cache-aware. Each kind of input token is priced exactly once at its own rate.
import { costNano, parseDecimal, type PricedQuantity } from './money.ts';

export const PER_MILLION = 1_000_000n;

/** The token prices of a chat model, USD decimal strings per 1M tokens. */
export interface TokenPrices {
  input_per_mtok: string;
  output_per_mtok: string;
  /** Cache reads; defaults to the input price when the model has no discount. */
  cached_input_per_mtok?: string;
  /** Cache writes (Anthropic); defaults to the input price. */
  cache_write_per_mtok?: string;
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
}

function count(v: unknown): bigint {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? BigInt(v) : 0n;
}

/** OpenAI: prompt_tokens already include prompt_tokens_details.cached_tokens. */
export function usageFromOpenAI(u: Record<string, unknown>): TokenUsage {
  const input = count(u.prompt_tokens);
  const details = (u.prompt_tokens_details ?? {}) as Record<string, unknown>;
  const cached = count(details.cached_tokens);
  return {
    inputTokens: input,
    outputTokens: count(u.completion_tokens),
    cachedTokens: cached > input ? input : cached,
    cacheWriteTokens: 0n,
  };
}

/** Anthropic: input_tokens EXCLUDE cache_read_input_tokens and cache_creation_input_tokens. */
export function usageFromAnthropic(u: Record<string, unknown>): TokenUsage {
  const uncached = count(u.input_tokens);
  const read = count(u.cache_read_input_tokens);
  const write = count(u.cache_creation_input_tokens);
  return {
    inputTokens: uncached + read + write,
    outputTokens: count(u.output_tokens),
    cachedTokens: read,
    cacheWriteTokens: write,
  };
}

export function tokenCostParts(prices: TokenPrices, usage: TokenUsage): PricedQuantity[] {
  const uncached = usage.inputTokens - usage.cachedTokens - usage.cacheWriteTokens;
  if (uncached < 0n) throw new Error('usage has more cached tokens than input tokens');
  return [
    { quantity: uncached, priceUsd: prices.input_per_mtok, perUnits: PER_MILLION },
    { quantity: usage.cachedTokens, priceUsd: prices.cached_input_per_mtok ?? prices.input_per_mtok, perUnits: PER_MILLION },
    { quantity: usage.cacheWriteTokens, priceUsd: prices.cache_write_per_mtok ?? prices.input_per_mtok, perUnits: PER_MILLION },
    { quantity: usage.outputTokens, priceUsd: prices.output_per_mtok, perUnits: PER_MILLION },
  ];
}

/** Cost in nano-USD of a token usage, rounded up once. */
export function tokenCostNano(prices: TokenPrices, usage: TokenUsage): bigint {
  return costNano(tokenCostParts(prices, usage));
}

/**
 * The most output tokens whose cost, added to `inputTokens` of uncached input, fits in
 * `budgetNano`. Exact: cost = ceil(in*pIn + out*pOut) <= budget  <=>  in*pIn + out*pOut <= budget.
 */
export function affordableOutputTokens(prices: TokenPrices, inputTokens: bigint, budgetNano: bigint): bigint {
  const pIn = parseDecimal(prices.input_per_mtok);
  const pOut = parseDecimal(prices.output_per_mtok);
  // Everything scaled by pIn.den * pOut.den * 1e6 to stay in integers; prices are USD, budget nano-USD.
  const scale = pIn.den * pOut.den * PER_MILLION;
  const budgetScaled = budgetNano * scale;
  const inputScaled = inputTokens * pIn.num * pOut.den * 1_000_000_000n;
  const left = budgetScaled - inputScaled;
  if (left < 0n) return 0n;
  const perOutScaled = pOut.num * pIn.den * 1_000_000_000n;
  if (perOutScaled === 0n) return BigInt(Number.MAX_SAFE_INTEGER);
  return left / perOutScaled;
}

/** OpenAI Responses API: input_tokens include input_tokens_details.cached_tokens. */
export function usageFromOpenAIResponses(u: Record<string, unknown>): TokenUsage {
  const input = count(u.input_tokens);
  const cached = count(((u.input_tokens_details ?? {}) as Record<string, unknown>).cached_tokens);
  return { inputTokens: input, outputTokens: count(u.output_tokens), cachedTokens: cached > input ? input : cached, cacheWriteTokens: 0n };
}
