// Markup arithmetic (src/billing/markup.ts) against a big-decimal reference, over many random
// provider costs, prices, usages and markups. The PRNG is seeded and the seed is in each test's
// name, so a failure reproduces.
import { Decimal } from 'decimal.js';
import { describe, expect, it } from 'vitest';
import {
  customerNano,
  customerPrice,
  parseMarkup,
  markupPpm,
  providerBudgetNano,
  providerNano,
  type Markup,
} from '../../../src/billing/markup.ts';
import { costNano, costRational, type PricedQuantity } from '../../../src/money/money.ts';
import { mulberry32 } from '../../support/random.ts';

const SEED = 0x26_b00c;
const RUNS = 3_000;
const D = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_CEIL });

/** A seeded sequence (mulberry32) with the draws these tests make. */
function prng(seed: number) {
  const next = mulberry32(seed);
  const int = (n: number) => Math.floor(next() * n); // 0..n-1
  /** 0..max inclusive, for max up to about 10^18. */
  const big = (max: bigint) => ((BigInt(int(2 ** 32)) << 32n) | BigInt(int(2 ** 32))) % (max + 1n);
  const digits = (n: number) => Array.from({ length: n }, () => int(10)).join('');
  /** A decimal with 0..places decimal places below `wholeBelow`, as an operator would write it. */
  const decimal = (wholeBelow: number, places: number) => {
    const p = int(places + 1);
    return p === 0 ? String(int(wholeBelow)) : `${int(wholeBelow)}.${digits(p)}`;
  };
  return { int, big, decimal };
}

/** Random markups up to 100 with 0 to 6 places, and the edges. */
function markups(r: ReturnType<typeof prng>): Markup[] {
  const rates = ['0', '100', '0.000001', '99.999999', '1', '0.2'];
  for (let i = 0; i < RUNS; i++) rates.push(r.decimal(100, 6));
  return rates.map((rate, i) => parseMarkup(BigInt(i + 1), rate));
}

/** ceil(x) of an exact decimal x (precision 60 holds every product here exactly). */
const ceilOf = (x: Decimal) => BigInt(x.toDecimalPlaces(0, Decimal.ROUND_CEIL).toFixed(0));

describe(`markup arithmetic (seed ${SEED.toString(16)})`, () => {
  it(`customerNano(cost) is cost x (1 + markup) rounded up to the nano-USD, over ${RUNS} random costs up to 10^15 nano-USD (seed ${SEED.toString(16)})`, () => {
    const r = prng(SEED);
    for (const m of markups(r)) {
      const cost = r.big(10n ** 15n);
      expect(customerNano(cost, m)).toBe(ceilOf(new D(cost.toString()).times(new D(1).plus(m.rate))));
    }
    const m = parseMarkup(1n, '0.2');
    expect([0n, 1n, 4n, 5n, 6n].map((c) => customerNano(c, m))).toEqual([0n, 2n, 5n, 6n, 8n]);
  });

  it(`customerNano of an exact fractional cost rounds once, after the markup (seed ${(SEED + 1).toString(16)})`, () => {
    const r = prng(SEED + 1);
    for (const m of markups(r)) {
      const den = [1n, 3n, 60n, 1_000_000n, 7n * 10n ** 9n][r.int(5)]!;
      const num = r.big(10n ** 15n) * den + r.big(den - 1n);
      const exact = new D(num.toString()).times(new D(1).plus(m.rate)).div(den.toString());
      expect(customerNano({ num, den }, m)).toBe(ceilOf(exact));
      expect(providerNano({ num, den })).toBe(ceilOf(new D(num.toString()).div(den.toString())));
    }
  });

  it(`providerBudgetNano(b) is the largest provider cost whose customer charge fits in b (seed ${(SEED + 2).toString(16)})`, () => {
    const r = prng(SEED + 2);
    for (const m of markups(r)) {
      const budget = r.int(4) === 0 ? r.big(1000n) : r.big(10n ** 15n);
      const p = providerBudgetNano(budget, m);
      expect(customerNano(p, m)).toBeLessThanOrEqual(budget);
      expect(customerNano(p + 1n, m)).toBeGreaterThan(budget);
      const reference = new D(budget.toString()).div(new D(1).plus(m.rate)).toDecimalPlaces(0, Decimal.ROUND_FLOOR);
      expect(p).toBe(BigInt(reference.toFixed(0)));
    }
    expect(() => providerBudgetNano(-1n, parseMarkup(1n, '0.2'))).toThrow();
  });

  it(`a usage at the listed customer prices, rounded up once, is exactly the customer charge for its provider cost, over random token usages and prices (seed ${(SEED + 3).toString(16)})`, () => {
    const r = prng(SEED + 3);
    // Prices as the book holds them: at most 9 places, per million tokens, per minute or per unit.
    const UNITS = [1n, 60n, 1000n, 1_000_000n];
    const L = 3_000_000; // divisible by every unit
    const price = () => (r.int(3) === 0 ? r.decimal(100, 9) : `0.${r.decimal(10, 8).replace('.', '')}`);
    for (const m of markups(r)) {
      const parts: PricedQuantity[] = Array.from({ length: 1 + r.int(4) }, () => ({
        quantity: r.big(r.int(2) === 0 ? 10_000n : 10_000_000n),
        priceUsd: price(),
        perUnits: UNITS[r.int(4)]!,
      }));
      const listed = parts.map((p) => ({ ...p, priceUsd: customerPrice(p.priceUsd, m) }));
      const charged = customerNano(costRational(parts), m);
      expect(costNano(listed)).toBe(charged);
      // Over a common denominator, so the reference divides once (a division rounded up on the
      // way could push an exact whole figure over).
      const reference = parts.reduce(
        (sum, p) =>
          sum.plus(
            new D(p.quantity.toString())
              .times(p.priceUsd)
              .times(1e9)
              .times(L / Number(p.perUnits)),
          ),
        new D(0),
      );
      expect(charged).toBe(ceilOf(reference.times(new D(1).plus(m.rate)).div(L)));
      // The listed price is the provider's times (1 + markup), exactly: nothing is rounded before the charge.
      for (const [i, p] of parts.entries())
        expect(new D(listed[i]!.priceUsd).eq(new D(p.priceUsd).times(new D(1).plus(m.rate)))).toBe(true);
    }
  });

  it('the markup applies before the one rounding: 1 second of audio at $0.017 a minute with 20% is charged 340,000 nano-USD (at its listed $0.0204 a minute), not 340,001 (283,333.3… rounded up first, then marked up)', () => {
    const m = parseMarkup(1n, '0.2');
    const parts = [{ quantity: 1n, priceUsd: '0.017', perUnits: 60n }];
    expect(providerNano(costRational(parts))).toBe(283_334n);
    expect(customerNano(costRational(parts), m)).toBe(340_000n);
    expect(customerPrice('0.017', m)).toBe('0.0204');
    expect(costNano([{ ...parts[0]!, priceUsd: customerPrice('0.017', m) }])).toBe(340_000n);
  });

  it('markupPpm reads a decimal fraction with at most 6 places into millionths, and refuses negatives, more places and anything else', () => {
    expect(markupPpm('0')).toBe(0n);
    expect(markupPpm('0.2')).toBe(200_000n);
    expect(markupPpm('1.000001')).toBe(1_000_001n);
    expect(markupPpm('100')).toBe(100_000_000n);
    expect(markupPpm('9999.999999')).toBe(9_999_999_999n);
    for (const bad of [
      '-0.1',
      '-1',
      '0.1234567',
      '1.0000000',
      '',
      'abc',
      '0.2x',
      ' 0.2',
      '0.2 ',
      '.5',
      '5.',
      '+1',
      '1e-3',
      '01',
      '10000',
      '0,2',
      'NaN',
      'Infinity',
    ])
      expect(markupPpm(bad), JSON.stringify(bad)).toBeUndefined();
    expect(() => parseMarkup(1n, '-0.2')).toThrow(/not a markup/);
  });
});
