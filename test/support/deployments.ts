// Helpers for the deployment routing tests (test/e2e/deployments.test.ts): bounded-concurrency
// request runs, polling with a deadline, and a chat charge computed exactly from a usage row.

/** Runs `fn(0..n-1)` with at most `concurrency` in flight; the results in index order. */
export async function inPool<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      out[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, worker));
  return out;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every `everyMs` until it returns a value other than undefined; throws naming `what` past `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A decimal USD price in 1e-15 USD (book prices have at most 9 decimal places). */
export function femtoUsd(price: string): bigint {
  const [whole, frac = ''] = price.split('.');
  if (frac.length > 15) throw new Error(`${price} has more than 15 decimal places`);
  return BigInt(whole! + frac.padEnd(15, '0'));
}

/**
 * A chat request's cost in nano-USD at per-million-token prices: the exact cost rounded up once.
 * tokens x 1e-15 USD per million tokens = 1e-21 USD; a nano-USD is 1e12 of those.
 */
export function chatCostNano(prices: Record<string, string>, input: bigint, output: bigint): bigint {
  const exact = input * femtoUsd(prices.input_per_mtok!) + output * femtoUsd(prices.output_per_mtok!);
  const perNano = 10n ** 12n;
  return (exact + perNano - 1n) / perNano;
}
