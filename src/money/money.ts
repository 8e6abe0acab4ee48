// Exact money arithmetic. Amounts are integer nano-USD (1e-9 USD) as bigint; prices are
// decimal strings parsed into exact rationals. Nothing here ever touches a float.

export const NANO_PER_USD = 1_000_000_000n;

/** A non-negative exact fraction num/den (den > 0). */
export interface Rational {
  num: bigint;
  den: bigint;
}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

// Prices are a few hundred distinct strings, parsed on every request: remembered once parsed.
const parsed = new Map<string, Readonly<Rational>>();

/** Parses a decimal string such as "0.022" into an exact rational. Refuses anything else. */
export function parseDecimal(text: string): Readonly<Rational> {
  const known = parsed.get(text);
  if (known) return known;
  const m = DECIMAL.exec(text);
  if (!m) throw new Error(`not a non-negative decimal string: ${JSON.stringify(text)}`);
  const frac = m[2] ?? '';
  const r = Object.freeze({ num: BigInt(m[1]! + frac), den: 10n ** BigInt(frac.length) });
  if (parsed.size < 10_000) parsed.set(text, r);
  return r;
}

/** USD decimal string -> nano-USD, refusing anything finer than a nano-dollar. */
export function usdToNano(text: string): bigint {
  const r = parseDecimal(text);
  const scaled = r.num * NANO_PER_USD;
  if (scaled % r.den !== 0n) throw new Error(`${text} USD is not a whole number of nano-USD`);
  return scaled / r.den;
}

/** nano-USD -> exact USD decimal string, e.g. 1500000000n -> "1.5". */
export function nanoToUsd(nano: bigint): string {
  const neg = nano < 0n;
  const abs = neg ? -nano : nano;
  const whole = abs / NANO_PER_USD;
  const frac = (abs % NANO_PER_USD).toString().padStart(9, '0').replace(/0+$/, '');
  return `${neg ? '-' : ''}${whole}${frac ? '.' + frac : ''}`;
}

export function ceilDiv(num: bigint, den: bigint): bigint {
  if (den <= 0n || num < 0n) throw new Error('ceilDiv expects num >= 0 and den > 0');
  return (num + den - 1n) / den;
}

/**
 * One priced quantity: `quantity` units at `priceUsd` USD per `perUnits` units
 * (e.g. 1200 tokens at "2.50" USD per 1_000_000 tokens).
 */
export interface PricedQuantity {
  quantity: bigint;
  priceUsd: string;
  perUnits: bigint;
}

/**
 * Exact cost of a sum of priced quantities in nano-USD, rounded up once, at the end, to the
 * next whole nano-USD. Summing exact fractions first means splitting a request into parts
 * never changes what it costs.
 */
export function costNano(parts: readonly PricedQuantity[]): bigint {
  const r = costRational(parts);
  return ceilDiv(r.num, r.den);
}

/** The same sum as an exact fraction of nano-USD, not rounded (for what-fits-in-a-budget questions). */
export function costRational(parts: readonly PricedQuantity[]): Rational {
  let num = 0n;
  let den = 1n;
  for (const p of parts) {
    if (p.quantity < 0n) throw new Error('negative quantity');
    if (p.quantity === 0n) continue;
    const price = parseDecimal(p.priceUsd);
    // quantity * price * 1e9 / perUnits, as a fraction.
    const pNum = p.quantity * price.num * NANO_PER_USD;
    const pDen = price.den * p.perUnits;
    num = num * pDen + pNum * den;
    den = den * pDen;
    const g = gcd(num, den);
    num /= g;
    den /= g;
  }
  return { num, den };
}

/** The larger of two decimal price strings (exact). */
export function dearer(a: string, b: string): string {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  return x.num * y.den >= y.num * x.den ? a : b;
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a === 0n ? 1n : a;
}
