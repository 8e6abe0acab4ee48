// What a provider bills, computed the plain way for tests to hold the gateway's charges against:
// a book price per million tokens as an exact whole number of nano-USD, the usage it reported,
// one rounding up at the end.

/** A decimal USD price per million tokens in nano-USD per million tokens, exactly (book prices have at most 9 decimals). */
export function nanoPerMtok(usd: string | undefined): bigint {
  const [whole, frac = ''] = (usd ?? '0').split('.');
  return BigInt(whole!) * 1_000_000_000n + BigInt((frac + '000000000').slice(0, 9));
}

/**
 * What a provider bills for one reply, in nano-USD: the usage it reported on `path` (Messages,
 * chat completions or Responses) at `prices` (a book model's), rounded up once.
 */
export function billedNano(prices: Record<string, string>, path: string, usage: Record<string, unknown>): bigint {
  const n = (v: unknown) => BigInt(Number(v ?? 0));
  const cachedOf = (details: unknown) => n((details as Record<string, unknown> | undefined)?.cached_tokens);
  let sum: bigint;
  if (path === '/v1/messages') {
    sum =
      n(usage.input_tokens) * nanoPerMtok(prices.input_per_mtok) +
      n(usage.cache_creation_input_tokens) * nanoPerMtok(prices.cache_write_per_mtok) +
      n(usage.cache_read_input_tokens) * nanoPerMtok(prices.cached_input_per_mtok) +
      n(usage.output_tokens) * nanoPerMtok(prices.output_per_mtok);
  } else if (path === '/v1/chat/completions') {
    const cached = cachedOf(usage.prompt_tokens_details);
    sum =
      (n(usage.prompt_tokens) - cached) * nanoPerMtok(prices.input_per_mtok) +
      cached * nanoPerMtok(prices.cached_input_per_mtok) +
      n(usage.completion_tokens) * nanoPerMtok(prices.output_per_mtok);
  } else {
    const cached = cachedOf(usage.input_tokens_details);
    sum =
      (n(usage.input_tokens) - cached) * nanoPerMtok(prices.input_per_mtok) +
      cached * nanoPerMtok(prices.cached_input_per_mtok) +
      n(usage.output_tokens) * nanoPerMtok(prices.output_per_mtok);
  }
  return (sum + 999_999n) / 1_000_000n;
}

/** A chat request's provider bill in nano-USD: `input` and `output` tokens at per-million-token `prices`, rounded up once. */
export function chatCostNano(prices: Record<string, string>, input: bigint, output: bigint): bigint {
  const sum = input * nanoPerMtok(prices.input_per_mtok) + output * nanoPerMtok(prices.output_per_mtok);
  return (sum + 999_999n) / 1_000_000n;
}
