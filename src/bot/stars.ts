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

// Invoice payload: key id and the rate shown, so the credit is exactly what the user saw.
const PAYLOAD = /^t1:(key_[0-9A-Za-z]+):([1-9]\d{0,17})$/;
export const invoicePayload = (keyId: string, nanoPerStar: bigint): string => `t1:${keyId}:${nanoPerStar}`;
export function parseInvoicePayload(payload: string): { keyId: string; nanoPerStar: bigint } | undefined {
  const m = PAYLOAD.exec(payload);
  return m ? { keyId: m[1]!, nanoPerStar: BigInt(m[2]!) } : undefined;
}
