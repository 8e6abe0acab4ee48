// Refunds: the Stars go back (by an operator's /refund <user id> <payment id>, an organisation's
// owner or billing member's /refund <payment id> (org-refunds.ts), or any refund Telegram reports
// with a refunded_payment message), and RefundTopUp takes back what that payment credited, once,
// never more than the customer has not spent.
import { Composer } from 'grammy';
import { formatUsd } from '../money/format.ts';
import { CAUSES, isNotFound, isTransient } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { organisationRefund } from './org-refunds.ts';
import { tellPayer } from './private-chat.ts';
import { creditBack, starsBack } from './stars-back.ts';

export const refunds = new Composer<BotContext>();

const takeBack = (ctx: BotContext, charge: string) => creditBack(ctx, charge, CAUSES.refund);

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

const MEMBERS_REFUND =
  "usage: /refund <payment id>: an owner or billing member of an organisation refunds a Stars top-up that credited it (the payment id is in the payment's receipt). Any other refund is made by the gateway's operators.";

// /refund <payment id>: anyone, refunded when their role in the organisation the payment
// credited allows it. /refund <user id> <payment id>: operators only, any payment. Stars first;
// the credit follows (also via refunded_payment).
refunds.command('refund', async (ctx) => {
  const args = ctx.match
    .trim()
    .split(/\s+/)
    .filter((a) => a !== '');
  if (args.length === 1) return organisationRefund(ctx, args[0]!);
  if (!ctx.from || !ctx.config.adminIds.has(ctx.from.id))
    return void (await ctx.reply(`${MEMBERS_REFUND} ${ctx.config.supportText}`));
  const m = /^(\d+)\s+(\S+)$/.exec(ctx.match.trim());
  if (!m) return void (await ctx.reply('usage: /refund <user id> <telegram payment charge id>'));
  await operatorRefund(ctx, Number(m[1]), m[2]!);
});

async function operatorRefund(ctx: BotContext, userId: number, charge: string): Promise<void> {
  const by = ctx.from!.id;
  const problem = await starsBack(ctx, userId, charge);
  if (problem) return void (await ctx.reply(problem));
  try {
    const r = await takeBack(ctx, charge);
    ctx.log.info(
      { charge, by, applied: r.applied, refundedNano: r.refundedNano.toString() },
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
    ctx.log.error({ err, charge, by }, 'stars refunded but the credit NOT taken back yet');
    await ctx.reply(
      `Stars refunded for ${charge}, but the credit could not be taken back yet: ${err.rawMessage} Send /refund ${userId} ${charge} again in a minute.`,
    );
  }
}
