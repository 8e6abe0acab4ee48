// Markups: what a customer pays is what the provider bills times (1 + markup), rounded up to the
// nano-USD once per request (docs/billing.md#markups). The provider's cost is computed first,
// exactly as without a markup, as an exact fraction; the markup applies to that total before
// anything is rounded, so a request's charge equals its usage times the customer prices
// /v1/models lists, rounded up once. (Marking up the provider cost already rounded to the nano
// would round twice: up to ceil(1 + markup) nano-USD above the listed prices times the usage.)
import { ceilDiv, type Rational } from '../money/money.ts';

/** Markups are decimal fractions with at most 6 places ("0.2" = 20%), kept as millionths. */
const SCALE = 1_000_000n;
const MARKUP = /^(0|[1-9]\d{0,3})(\.\d{1,6})?$/;

export interface Markup {
  /** The price book's markup version (0 when none applies). */
  versionId: bigint;
  /** The decimal fraction as written, e.g. "0.2". */
  rate: string;
  /** The fraction in millionths: 200_000n for "0.2". */
  ppm: bigint;
}

export const NO_MARKUP: Markup = Object.freeze({ versionId: 0n, rate: '0', ppm: 0n });

/** A markup's millionths, or undefined for anything but a non-negative decimal with at most 6 places (and below 10,000). */
export function markupPpm(rate: string): bigint | undefined {
  const m = MARKUP.exec(rate);
  if (!m) return undefined;
  const frac = (m[2] ?? '.').slice(1).padEnd(6, '0');
  return BigInt(m[1]!) * SCALE + BigInt(frac);
}

export function parseMarkup(versionId: bigint, rate: string): Markup {
  const ppm = markupPpm(rate);
  if (ppm === undefined) throw new Error(`not a markup: ${JSON.stringify(rate)}`);
  return { versionId, rate, ppm };
}

/**
 * A provider cost in nano-USD: the exact fraction a request's usage costs (money.ts costRational,
 * what a charge is computed from), or a whole figure (a worst case, already rounded up).
 */
export type ProviderCost = bigint | Readonly<Rational>;

/** A provider cost as the provider bills it: rounded up to the nano-USD. */
export function providerNano(cost: ProviderCost): bigint {
  return typeof cost === 'bigint' ? cost : ceilDiv(cost.num, cost.den);
}

/** The customer's charge for a provider cost: cost x (1 + markup), rounded up to the nano-USD once. */
export function customerNano(cost: ProviderCost, m: Markup): bigint {
  if (typeof cost === 'bigint') return m.ppm === 0n ? cost : ceilDiv(cost * (SCALE + m.ppm), SCALE);
  return ceilDiv(cost.num * (SCALE + m.ppm), cost.den * SCALE);
}

/**
 * The largest provider cost whose customer charge fits in `customerBudgetNano` (>= 0): what a hold
 * of that amount affords at provider prices (customerNano(result) <= budget, and result + 1 does
 * not fit). Any exact cost up to it fits too: customerNano is monotonic.
 */
export function providerBudgetNano(customerBudgetNano: bigint, m: Markup): bigint {
  if (customerBudgetNano < 0n) throw new Error('providerBudgetNano expects a budget >= 0');
  if (m.ppm === 0n) return customerBudgetNano;
  return (customerBudgetNano * SCALE) / (SCALE + m.ppm);
}

/** A provider price per unit as the customer pays it: exact decimal USD (no rounding: the charge rounds once). */
export function customerPrice(priceUsd: string, m: Markup): string {
  if (m.ppm === 0n) return priceUsd;
  const [whole, frac = ''] = priceUsd.split('.');
  const scaled = BigInt(whole! + frac) * (SCALE + m.ppm);
  const places = frac.length + 6;
  const digits = scaled.toString().padStart(places + 1, '0');
  const out = `${digits.slice(0, -places)}.${digits.slice(-places)}`.replace(/\.?0+$/, '');
  return out === '' ? '0' : out;
}
