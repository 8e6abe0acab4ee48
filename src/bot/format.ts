// What the bot shows people: dollars from nano-USD (exact, BigInt only), times, HTML escaping.
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import { NANO_PER_USD } from '../money/money.ts';

/**
 * Exact dollars with at least cents and every significant digit below them:
 * 5_000_000_000n -> "$5.00", 1_234_567n -> "$0.001234567", -500_000_000n -> "-$0.50".
 */
export function formatUsd(nano: bigint): string {
  const neg = nano < 0n;
  const abs = neg ? -nano : nano;
  const frac = (abs % NANO_PER_USD).toString().padStart(9, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${neg ? '-' : ''}$${abs / NANO_PER_USD}.${frac}`;
}

/** A signed amount for ledger lines: "+$1.00", "-$0.000021". */
export const formatSignedUsd = (nano: bigint): string => (nano > 0n ? `+${formatUsd(nano)}` : formatUsd(nano));

/** "2025-06-01 12:34 UTC". */
export function formatTime(ts: Timestamp | undefined): string {
  if (!ts) return '';
  return `${timestampDate(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
/** For text sent with parse_mode HTML. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"]/g, (c) => HTML_ESCAPES[c]!);

/** How a key is named to its owner: its visible prefix, never the key. */
export const keyName = (prefix: string): string => `<code>${escapeHtml(prefix)}…</code>`;
