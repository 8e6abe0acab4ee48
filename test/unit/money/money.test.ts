import { describe, expect, it } from 'vitest';
import { costNano, nanoToUsd, parseDecimal, usdToNano } from '../../../src/money/money.ts';
import {
  affordableOutputTokens,
  tokenCostNano,
  usageFromAnthropic,
  usageFromOpenAI,
  type TokenPrices,
} from '../../../src/billing/pricing.ts';

describe('money', () => {
  it('parses decimal strings exactly and refuses anything else', () => {
    expect(parseDecimal('0.022')).toEqual({ num: 22n, den: 1000n });
    expect(parseDecimal('15')).toEqual({ num: 15n, den: 1n });
    for (const bad of ['', '-1', '1e-3', '0.1.2', ' 1', 'NaN', '.5']) expect(() => parseDecimal(bad)).toThrow();
  });

  it('converts USD and nano-USD both ways without loss', () => {
    expect(usdToNano('5')).toBe(5_000_000_000n);
    expect(usdToNano('0.000000001')).toBe(1n);
    expect(() => usdToNano('0.0000000001')).toThrow();
    expect(nanoToUsd(1_500_000_000n)).toBe('1.5');
    expect(nanoToUsd(1n)).toBe('0.000000001');
    expect(nanoToUsd(-20n)).toBe('-0.00000002');
  });

  it('prices a usage to a hand-computed nano-USD figure, rounded up once', () => {
    // 1,234 tokens of text-embedding-3-small at $0.022 / 1M = 22 nano each = 27,148 nano.
    expect(costNano([{ quantity: 1234n, priceUsd: '0.022', perUnits: 1_000_000n }])).toBe(27_148n);
    // At $0.0001 / 1M a token costs 0.1 nano: 1,234 tokens = 123.4 nano -> 124.
    expect(costNano([{ quantity: 1234n, priceUsd: '0.0001', perUnits: 1_000_000n }])).toBe(124n);
    // gpt-4o-mini: 1,000 in at $0.15/M = 150,000 nano; 333 out at $0.60/M = 199,800 nano.
    const mini: TokenPrices = { input_per_mtok: '0.15', cached_input_per_mtok: '0.075', output_per_mtok: '0.60' };
    expect(
      tokenCostNano(mini, { inputTokens: 1000n, outputTokens: 333n, cachedTokens: 0n, cacheWriteTokens: 0n }),
    ).toBe(349_800n);
    // 3 cached tokens at $0.075/M = 225 nano... and 1 at $0.00015/M = 0.15 nano: 225.15 -> 226.
    expect(
      costNano([
        { quantity: 3n, priceUsd: '0.075', perUnits: 1_000_000n },
        { quantity: 1n, priceUsd: '0.00015', perUnits: 1_000_000n },
      ]),
    ).toBe(226n);
    // Rounded once on the sum, not per part: 0.5 + 0.5 nano = 1 nano, not 2.
    expect(
      costNano([
        { quantity: 1n, priceUsd: '0.5', perUnits: 1_000_000_000n },
        { quantity: 1n, priceUsd: '0.5', perUnits: 1_000_000_000n },
      ]),
    ).toBe(1n);
    // Whisper: 61 seconds at $0.017 per minute = 17,283,333.33 nano -> 17,283,334.
    expect(costNano([{ quantity: 61n, priceUsd: '0.017', perUnits: 60n }])).toBe(17_283_334n);
  });

  it('prices OpenAI cached tokens once, at the cached rate (prompt_tokens include them)', () => {
    const p: TokenPrices = { input_per_mtok: '2.50', cached_input_per_mtok: '0.25', output_per_mtok: '20.00' };
    const u = usageFromOpenAI({
      prompt_tokens: 10_000,
      completion_tokens: 500,
      prompt_tokens_details: { cached_tokens: 8_000 },
    });
    expect(u).toEqual({ inputTokens: 10_000n, outputTokens: 500n, cachedTokens: 8_000n, cacheWriteTokens: 0n });
    // 2,000 * 2500 nano/1k... : 2,000*2.5/1e6 USD = 5,000,000 nano; 8,000*0.25 = 2,000,000; 500*20 = 10,000,000.
    expect(tokenCostNano(p, u)).toBe(17_000_000n);
  });

  it('prices Anthropic cache reads and writes once each (input_tokens exclude them)', () => {
    const p: TokenPrices = {
      input_per_mtok: '3.00',
      cached_input_per_mtok: '0.30',
      cache_write_per_mtok: '3.75',
      output_per_mtok: '15.00',
    };
    const u = usageFromAnthropic({
      input_tokens: 100,
      cache_read_input_tokens: 20_000,
      cache_creation_input_tokens: 1_000,
      output_tokens: 300,
    });
    expect(u).toEqual({ inputTokens: 21_100n, outputTokens: 300n, cachedTokens: 20_000n, cacheWriteTokens: 1_000n });
    // 100*3 = 300,000 nano; 20,000*0.30 = 6,000,000; 1,000*3.75 = 3,750,000; 300*15 = 4,500,000.
    expect(tokenCostNano(p, u)).toBe(14_550_000n);
  });

  it('agrees with an independent rational computation on 1,000 random (price, usage) pairs', () => {
    let seed = 0x2545f491;
    const rand = (n: number) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const randomPrice = () => {
      const scale = rand(7);
      const digits = String(rand(100_000_000));
      return scale === 0
        ? digits
        : `${digits.padStart(scale + 1, '0').slice(0, -scale)}.${digits.padStart(scale + 1, '0').slice(-scale)}`;
    };
    for (let i = 0; i < 1000; i++) {
      const prices: TokenPrices = {
        input_per_mtok: randomPrice(),
        cached_input_per_mtok: randomPrice(),
        output_per_mtok: randomPrice(),
        cache_write_per_mtok: randomPrice(),
      };
      const cached = BigInt(rand(50_000));
      const write = BigInt(rand(5_000));
      const usage = {
        inputTokens: cached + write + BigInt(rand(2_000_000)),
        outputTokens: BigInt(rand(200_000)),
        cachedTokens: cached,
        cacheWriteTokens: write,
      };
      expect(tokenCostNano(prices, usage)).toBe(independentCost(prices, usage));
    }
  });

  it('finds the largest affordable output cap exactly', () => {
    const p: TokenPrices = { input_per_mtok: '2.50', output_per_mtok: '20.00' };
    for (const [input, budget] of [
      [1000n, 3_000_007n],
      [37n, 999_999n],
      [0n, 20_000n],
      [5000n, 12_500_000n],
      [1n, 2_501n],
    ] as const) {
      const out = affordableOutputTokens(p, input, budget);
      const cost = (o: bigint) =>
        tokenCostNano(p, { inputTokens: input, outputTokens: o, cachedTokens: 0n, cacheWriteTokens: 0n });
      expect(cost(out)).toBeLessThanOrEqual(budget);
      expect(cost(out + 1n)).toBeGreaterThan(budget);
    }
  });
});

/**
 * A second, independent way to price: scale every price to one common number of decimal
 * places, sum integer numerators, divide once. No gcd, no fraction adding.
 */
function independentCost(
  p: TokenPrices,
  u: { inputTokens: bigint; outputTokens: bigint; cachedTokens: bigint; cacheWriteTokens: bigint },
): bigint {
  const parts: [bigint, string][] = [
    [u.inputTokens - u.cachedTokens - u.cacheWriteTokens, p.input_per_mtok],
    [u.cachedTokens, p.cached_input_per_mtok!],
    [u.cacheWriteTokens, p.cache_write_per_mtok!],
    [u.outputTokens, p.output_per_mtok],
  ];
  const scale = Math.max(...parts.map(([, s]) => (s.split('.')[1] ?? '').length));
  let numerator = 0n;
  for (const [q, s] of parts) {
    const [whole, frac = ''] = s.split('.');
    numerator += q * BigInt(whole + frac.padEnd(scale, '0'));
  }
  // numerator / 10^scale USD-per-M-token-units -> nano-USD: * 1e9 / 1e6 = * 1000.
  const num = numerator * 1000n;
  const den = 10n ** BigInt(scale);
  return num % den === 0n ? num / den : num / den + 1n;
}
