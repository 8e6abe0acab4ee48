// Refunds: the Stars go back (by an operator's /refund, or any refund Telegram reports with a
// refunded_payment message), and RefundTopUp takes back what that payment credited, once, never
// more than the customer has not spent.
import { Composer, GrammyError } from 'grammy';
import { formatUsd } from '../money/format.ts';
import { CAUSES, isNotFound, isTransient, withRetries } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { tellPayer } from './private-chat.ts';
import { paymentExternalId } from './stars.ts';

export const refunds = new Composer<BotContext>();

const takeBack = (ctx: BotContext, charge: string) =>
  withRetries(() => ctx.billing.refundTopUp({ externalId: paymentExternalId(charge), cause: CAUSES.refund }));

// Telegram tells both sides when Stars go back (our /refund or otherwise): take back that payment's credit, once.
refunds.on('message:refunded_payment', async (ctx) => {
  const rp = ctx.message.refunded_payment;
  try {
    const r = await takeBack(ctx, rp.telegram_payment_charge_id);
    ctx.log.info(
      { charge: rp.telegram_payment_charge_id, applied: r.applied, refundedNano: r.refundedNano.toString() },
      'stars refund',
    );
    if (r.applied) await tellPayer(ctx, refundText(rp.total_amount, r.topupNano, r.refundedNano, r.balanceNano));
  } catch (err) {
    if (isNotFound(err))
      return void ctx.log.warn(
        { charge: rp.telegram_payment_charge_id },
        'refund of a payment that was never credited',
      );
    // Nothing was taken back (nor recorded): an operator's /refund of the same payment repeats it.
    ctx.log.error(
      { err, charge: rp.telegram_payment_charge_id, user: ctx.from?.id },
      'stars refunded but the credit NOT taken back; /refund repeats it',
    );
    throw err;
  }
});

function refundText(stars: number, topupNano: bigint, refundedNano: bigint, balanceNano: bigint): string {
  const spent =
    refundedNano < topupNano ? ` of the ${formatUsd(topupNano)} it bought (the rest had already been used)` : '';
  return `Your payment of ${stars} Stars was refunded: ${formatUsd(refundedNano)} of credit taken back${spent}. Balance: ${formatUsd(balanceNano)}.`;
}

// /refund <user id> <payment id>: operators only. Stars first; the credit follows (also via refunded_payment).
refunds.command('refund', async (ctx) => {
  if (!ctx.from || !ctx.config.adminIds.has(ctx.from.id))
    return void (await ctx.reply(`Refunds are made by the gateway's operators. ${ctx.config.supportText}`));
  const m = /^(\d+)\s+(\S+)$/.exec(ctx.match.trim());
  if (!m) return void (await ctx.reply('usage: /refund <user id> <telegram payment charge id>'));
  const [userId, charge] = [Number(m[1]), m[2]!];
  try {
    await ctx.api.refundStarPayment(userId, charge);
  } catch (err) {
    const already = err instanceof GrammyError && /ALREADY_REFUNDED/i.test(err.description);
    if (!already)
      return void (await ctx.reply(
        `Telegram refused the refund: ${err instanceof GrammyError ? err.description : String(err)}`,
      ));
  }
  try {
    const r = await takeBack(ctx, charge);
    ctx.log.info(
      { charge, by: ctx.from.id, applied: r.applied, refundedNano: r.refundedNano.toString() },
      'stars refund by operator',
    );
    await ctx.reply(
      `Stars refunded for ${charge}. ${r.applied ? 'Took back' : 'Had already taken back'} ${formatUsd(r.refundedNano)} of the ${formatUsd(r.topupNano)} credited; account ${r.accountId} balance ${formatUsd(r.balanceNano)}.`,
    );
  } catch (err) {
    if (isNotFound(err))
      return void (await ctx.reply(`Stars refunded for ${charge}; no credit had been applied for this payment.`));
    if (!isTransient(err)) throw err;
    // Nothing was taken back nor recorded (e.g. a lease held by an instance that did not answer): asking again repeats it.
    ctx.log.error({ err, charge, by: ctx.from.id }, 'stars refunded but the credit NOT taken back yet');
    await ctx.reply(
      `Stars refunded for ${charge}, but the credit could not be taken back yet: ${err.rawMessage} Send /refund ${userId} ${charge} again in a minute.`,
    );
  }
});
