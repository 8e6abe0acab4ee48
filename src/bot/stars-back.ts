// Giving a Stars payment back, for the operator's /refund <user id> <charge id> (refunds.ts) and
// an organisation's /refund <charge id> (org-refunds.ts): Telegram returns the Stars to the one
// who paid, then RefundTopUp takes back what the payment credited, once, never more than the
// account has not spent.
import { GrammyError } from 'grammy';
import { withRetries } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { paymentExternalId } from './stars.ts';

/** Telegram gives the payment's Stars back to `payer`: undefined when they are back (now or before), else why not. */
export async function starsBack(ctx: BotContext, payer: number, charge: string): Promise<string | undefined> {
  try {
    await ctx.api.refundStarPayment(payer, charge);
  } catch (err) {
    const already = err instanceof GrammyError && /ALREADY_REFUNDED/i.test(err.description);
    if (!already) return `Telegram refused the refund: ${err instanceof GrammyError ? err.description : String(err)}`;
  }
  return undefined;
}

/** RefundTopUp of the payment `charge`: the credit it bought taken back, once, never more than is not spent. */
export const creditBack = (ctx: BotContext, charge: string, cause: string) =>
  withRetries(() => ctx.billing.refundTopUp({ externalId: paymentExternalId(charge), cause }));
