// Telegram Stars payments: the pre-checkout answer refuses an invoice that is not ours, whose
// rate is no longer current, out of bounds, for a key the payer does not hold, or for an
// organisation the payer may not top up (any more); a successful payment credits Stars x the
// invoice's rate to the key's account or the organisation, once per Telegram payment id, the
// ledger row's cause naming the payer (whom a refund gives the Stars back to).
import { Composer } from 'grammy';
import type { PreCheckoutQuery } from 'grammy/types';
import { formatUsd } from '../money/format.ts';
import { keyRef, paymentCause, withRetries } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { organisationWhere } from './acting.ts';
import { ownedKey, requireOwner } from './owner.ts';
import { tellPayer } from './private-chat.ts';
import { parseInvoicePayload, paymentExternalId, starRate, topUpBounds, validStars } from './stars.ts';

export const payments = new Composer<BotContext>();

/** Why this invoice must not be paid, or undefined when it may. */
async function checkoutProblem(ctx: BotContext, q: PreCheckoutQuery): Promise<string | undefined> {
  const { config } = ctx;
  const p = parseInvoicePayload(q.invoice_payload);
  if (q.currency !== 'XTR' || !p) return 'This invoice is not one of ours. Send /topup for a fresh one.';
  if (p.nanoPerStar !== config.nanoPerStar)
    return `The exchange rate has changed (now ${starRate(config)}). Send /topup for a fresh invoice.`;
  if (!validStars(config, q.total_amount)) return `Top-ups are from ${topUpBounds(config)}.`;
  try {
    if ('keyId' in p)
      return (await ownedKey(ctx, p.keyId))
        ? undefined
        : 'This invoice is for a key you do not hold (any more). Send /topup for a fresh one.';
    // The user's role is read again now: a member removed or demoted since the invoice pays nothing.
    const found = await organisationWhere(ctx, p.organisationId, 'billing.top_up');
    return 'problem' in found ? found.problem : undefined;
  } catch (err) {
    ctx.log.error({ err }, 'pre-checkout: billing unavailable');
    return 'Payments are briefly unavailable. Please try again in a minute.';
  }
}

// Telegram asks before taking the Stars; answering within 10 s is required, so no retries here.
payments.on('pre_checkout_query', async (ctx) => {
  const q = ctx.preCheckoutQuery;
  const problem = await checkoutProblem(ctx, q);
  if (problem) ctx.log.warn({ from: q.from.id, total: q.total_amount, problem }, 'pre-checkout refused');
  await (problem ? ctx.answerPreCheckoutQuery(false, { error_message: problem }) : ctx.answerPreCheckoutQuery(true));
});

// The Stars are taken: credit once per charge id (a redelivered update finds it applied). An
// organisation's invoice credits the organisation it names: its pre-checkout found the payer
// allowed a moment ago, and the Stars cannot be left uncredited.
payments.on('message:successful_payment', async (ctx) => {
  const pay = ctx.message.successful_payment;
  const owner = requireOwner(ctx);
  const charge = pay.telegram_payment_charge_id;
  const p = parseInvoicePayload(pay.invoice_payload);
  if (pay.currency !== 'XTR' || !p) {
    ctx.log.error(
      { charge, owner, currency: pay.currency },
      'successful payment with an unknown invoice; not credited',
    );
    return void (await tellPayer(
      ctx,
      `We could not match this payment to a key. Please send /paysupport with payment id ${charge}.`,
    ));
  }
  const amountNano = BigInt(pay.total_amount) * p.nanoPerStar;
  try {
    const r = await withRetries(() =>
      ctx.billing.topUp({
        ...('keyId' in p ? { key: keyRef(p.keyId, owner) } : { accountId: p.organisationId }),
        amountNano,
        externalId: paymentExternalId(charge),
        cause: paymentCause(owner),
      }),
    );
    ctx.log.info(
      {
        charge,
        owner,
        to: 'keyId' in p ? p.keyId : p.organisationId,
        stars: pay.total_amount,
        amountNano: amountNano.toString(),
        applied: r.applied,
      },
      'stars payment',
    );
    await tellPayer(
      ctx,
      r.applied
        ? `Thank you! ${pay.total_amount} Stars: ${formatUsd(amountNano)} credited. Balance: ${formatUsd(r.balanceNano)}. Payment id: ${charge}`
        : `This payment (${pay.total_amount} Stars) was already credited. Balance: ${formatUsd(r.balanceNano)}.`,
    );
  } catch (err) {
    // Paid but not credited: loud in the log with the charge id, so an operator can reconcile.
    ctx.log.error({ err, charge, owner, stars: pay.total_amount }, 'stars payment NOT credited');
    await tellPayer(
      ctx,
      `Your payment arrived but crediting it failed. Please send /paysupport with payment id ${charge}.`,
    );
  }
});
