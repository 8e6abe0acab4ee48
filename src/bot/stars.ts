// The terms of a Stars top-up: the rate and bounds shown before anything is paid, the invoice
// payload that carries the rate shown, and the top-up's external id. The one thing the bot
// computes is Stars x configured rate, so the credit is what the user saw.
import type { BotConfig } from '../config/bot-config.ts';
import { formatUsd } from '../money/format.ts';

/** External id of the top-up a Stars payment buys; its refund is found by the same id. */
export const paymentExternalId = (telegramPaymentChargeId: string): string =>
  `telegram-stars:${telegramPaymentChargeId}`;

export const starRate = (config: BotConfig): string => `1 Star = ${formatUsd(config.nanoPerStar)} of credit`;
export const topUpBounds = (config: BotConfig): string => `${config.minStars} to ${config.maxStars} Stars`;

export const validStars = (config: BotConfig, n: number): boolean =>
  Number.isSafeInteger(n) && n >= config.minStars && n <= config.maxStars;

// Invoice payload: what the credit is for and the rate shown, so the credit is exactly what the
// user saw. t1: a key of the payer's own account (as before organisations); o1: an organisation.
const PAYLOAD = /^(t1|o1):((?:key|acct)_[0-9A-Za-z]+):([1-9]\d{0,17})$/;
export type InvoiceFor = { keyId: string } | { organisationId: string };
export const invoicePayload = (to: InvoiceFor, nanoPerStar: bigint): string =>
  'keyId' in to ? `t1:${to.keyId}:${nanoPerStar}` : `o1:${to.organisationId}:${nanoPerStar}`;
export function parseInvoicePayload(payload: string): (InvoiceFor & { nanoPerStar: bigint }) | undefined {
  const m = PAYLOAD.exec(payload);
  if (!m) return undefined;
  const [kind, id, rate] = [m[1]!, m[2]!, BigInt(m[3]!)];
  if (kind === 't1' && id.startsWith('key_')) return { keyId: id, nanoPerStar: rate };
  if (kind === 'o1' && id.startsWith('acct_')) return { organisationId: id, nanoPerStar: rate };
  return undefined;
}
