// Money as people read it, from nano-USD with BigInt arithmetic only, so what is shown is exactly
// what the ledger holds: one formatter for the CLI, the bot and the console page.
import { NANO_PER_USD } from './money.ts';

/** How an amount is set: the console groups thousands and typesets its minus sign; text meant to be copied does neither. */
export interface UsdStyle {
  /** "$1,234.50" rather than "$1234.50". */
  grouped?: boolean;
  /** '-' (the default: text a program may read back) or '−' (typeset). */
  minus?: '-' | '−';
}

/** "1234567" -> "1,234,567". */
export const groupDigits = (digits: string): string => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * Exact dollars with at least cents and every significant digit below them:
 * 5_000_000_000n -> "$5.00", 1_234_567n -> "$0.001234567", -500_000_000n -> "-$0.50".
 */
export function formatUsd(nano: bigint, style: UsdStyle = {}): string {
  const abs = nano < 0n ? -nano : nano;
  const whole = (abs / NANO_PER_USD).toString();
  const frac = (abs % NANO_PER_USD).toString().padStart(9, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${nano < 0n ? (style.minus ?? '-') : ''}$${style.grouped ? groupDigits(whole) : whole}.${frac}`;
}

/** A signed amount for ledger lines: "+$1.00", "-$0.000021". */
export const formatSignedUsd = (nano: bigint, style: UsdStyle = {}): string =>
  nano > 0n ? `+${formatUsd(nano, style)}` : formatUsd(nano, style);
