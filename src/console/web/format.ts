// How the console writes figures. Money arrives as nano-USD decimal strings and is written with
// BigInt arithmetic only, so what the page shows is exactly what the ledger holds (a float would
// turn 0.000123456 into 0.00012345599999). Times are UTC, as the daily figures are.

import { NANO_PER_USD } from '../../money/money.ts';
import { formatUsd, groupDigits } from '../../money/format.ts';

/** An integer that may arrive as a JSON number or a decimal string (int64 fields). */
export type Int = number | string;

export const big = (v: Int | bigint | null | undefined): bigint =>
  v === null || v === undefined || v === '' ? 0n : typeof v === 'bigint' ? v : BigInt(v);

/** 1234567 -> "1,234,567". */
export function grouped(v: Int | bigint): string {
  const n = big(v);
  return (n < 0n ? '−' : '') + groupDigits((n < 0n ? -n : n).toString());
}

/**
 * nano-USD -> "$1,234.50", "$0.000123456", "−$0.02": every digit the amount has, at least cents.
 */
export const usd = (nano: Int | bigint): string => formatUsd(big(nano), { grouped: true, minus: '−' });

/** A price per unit as the book writes it ("2.50" USD) -> "$2.50". */
export function usdText(decimal: string): string {
  const [whole = '0', frac = ''] = decimal.split('.');
  return `$${grouped(whole)}.${frac.padEnd(2, '0')}`;
}

/**
 * "12.5" (a USD amount a person typed) -> nano-USD, or undefined when it is not a plain
 * non-negative decimal with at most 9 places.
 */
export function parseUsd(text: string): bigint | undefined {
  const m = /^\s*\$?(\d+)(?:\.(\d{1,9}))?\s*$/.exec(text.replaceAll(',', ''));
  if (!m) return undefined;
  return BigInt(m[1]!) * NANO_PER_USD + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/** For chart positions only (never for text): nano-USD -> USD as a float. */
export const usdFloat = (nano: bigint): number => Number(nano) / 1e9;

/** "2026-07-01T14:03:22.123Z" -> "2026-07-01 14:03:22" (UTC). */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toISOString().slice(0, 19).replace('T', ' ');
}

/** "2026-07-01T14:03:22Z" -> "2026-07-01" (UTC). */
export function day(iso: string | null | undefined): string {
  return iso ? time(iso).slice(0, 10) : '—';
}

/** A markup fraction "0.25" -> "25%" (exact: decimal string arithmetic, at most 6 places). */
export function percent(fraction: string): string {
  if (!fraction) return '—';
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(fraction);
  if (!m) return fraction;
  const frac = (m[3] ?? '').padEnd(2, '0');
  const whole = (BigInt(m[2]!) * 100n + BigInt(frac.slice(0, 2))).toString();
  const rest = frac.slice(2).replace(/0+$/, '');
  return `${m[1]}${whole}${rest ? `.${rest}` : ''}%`;
}

/** Today's UTC date, "YYYY-MM-DD", plus `days` (may be negative). */
export function utcDate(days = 0): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
}

/** A price key of the book ("cached_input_per_mtok") -> words ("Cached input / 1M tokens"). */
export function priceKeyLabel(key: string): string {
  const units: [RegExp, string][] = [
    [/_per_mtok$/, ' / 1M tokens'],
    [/_per_call$/, ' / call'],
    [/^per_mchar$/, 'per 1M characters'],
    [/^per_second$/, 'per second'],
    [/^per_megapixel$/, 'per megapixel'],
    [/^per_audio_minute$/, 'per audio minute'],
  ];
  for (const [re, words] of units)
    if (re.test(key)) {
      const head = key.replace(re, '');
      return head ? `${sentence(head)}${words}` : sentence(words);
    }
  const image = /^image_(low|medium|high)_(\d+x\d+)$/.exec(key);
  if (image) return `Image, ${image[1]} quality, ${image[2]!.replace('x', '×')}`;
  return sentence(key);
}

const sentence = (s: string): string => {
  const words = s.replaceAll('_', ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** When a price or markup version took effect: the shipped book's versions date from the epoch. */
export function since(iso: string | null | undefined): string {
  if (!iso) return '—';
  return Date.parse(iso) <= 0 ? 'the start' : time(iso);
}

/** A deployment key (`<model>/<deployment>`) as a row of `model` shows it: the deployment's own id, or the whole key for another model's. */
export function deploymentName(key: string, model: string): string {
  return key.startsWith(`${model}/`) ? key.slice(model.length + 1) : key;
}

/**
 * A request's attempts as words, in order: "plain 429", "third ok"; the ones left out of a long
 * record as "+3 more" before the last. The CLI joins the same words with arrows
 * (src/billing/attempts.ts); the page with "›", which its one font has.
 */
export function attemptWords(
  attempts: readonly { deployment: string; outcome: string }[],
  omitted: number,
  model: string,
): string[] {
  const words = attempts.map((a) => `${deploymentName(a.deployment, model)} ${a.outcome.replace('_', ' ')}`);
  if (omitted > 0) words.splice(Math.max(0, words.length - 1), 0, `+${omitted} more`);
  return words;
}
