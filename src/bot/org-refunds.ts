// /refund <payment id>: an owner or billing member of an organisation gives back a Stars top-up
// that credited it (docs/bot.md#refunds). The bot decides none of who may: the top-up is looked
// for in the ledgers of the user's organisations where the service's allowed_actions list
// `billing.refund` (read as the user), their role there is asked again just before anything is
// done, and then, as the operator's /refund does, the Stars go back to the one who paid (named by
// the payment's ledger row) and RefundTopUp takes back the credit, once. Only while the
// organisation's balance still holds all the payment credited: Stars go back whole, so a refund
// whose credit was spent is the operator's to decide.
import type { LedgerEntry } from '../gen/gateway/v1/billing_pb.js';
import type { OrganisationSummary } from '../gen/gateway/v1/organisations_pb.js';
import { formatUsd } from '../money/format.ts';
import { asUser, organisationWhere, organisationsFor, refusedHere } from './acting.ts';
import { isRefusal, isTransient, memberRefundCause, payerOf } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { requireOwner } from './owner.ts';
import { creditBack, starsBack } from './stars-back.ts';
import { paymentExternalId } from './stars.ts';

/** Ledger pages read per organisation at most (top-ups and refunds only, newest first): 5,000 entries. */
const PAGES = 25;
const PAGE_SIZE = 200;

interface Found {
  org: OrganisationSummary;
  topup: LedgerEntry;
  refunded: boolean;
}

/** The top-up `externalId` in one organisation's ledger, and whether a refund of it is there (newer, so read first). */
async function inLedger(ctx: BotContext, organisationId: string, externalId: string) {
  let refunded = false;
  let cursor = '';
  for (let page = 0; page < PAGES; page++) {
    const r = await ctx.organisations.listOrganisationLedger(
      { organisationId, kinds: ['topup', 'refund'], pageSize: PAGE_SIZE, cursor },
      asUser(ctx),
    );
    for (const e of r.entries) {
      if (e.externalId !== externalId) continue;
      if (e.kind === 'topup') return { topup: e, refunded };
      refunded = true;
    }
    if (!r.nextCursor) return undefined;
    cursor = r.nextCursor;
  }
  return undefined;
}

/** The organisation among `orgs` whose ledger has the top-up, as the user reads it. */
async function findTopUp(ctx: BotContext, orgs: OrganisationSummary[], externalId: string): Promise<Found | undefined> {
  for (const org of orgs) {
    try {
      const found = await inLedger(ctx, org.id, externalId);
      if (found) return { org, ...found };
    } catch (err) {
      // Removed or demoted since the list: not theirs to look at any more.
      if (!isRefusal(err)) throw err;
    }
  }
  return undefined;
}

/** Why this top-up is not the user's to refund now, or the organisation (as the service answers now) when it is. */
async function refusal(ctx: BotContext, charge: string, found: Found): Promise<string | { org: OrganisationSummary }> {
  if (found.refunded) return `The payment ${charge} was already refunded; nothing more was done.`;
  if (payerOf(found.topup.cause) === undefined)
    return `The top-up ${charge} does not name who paid it (it was paid before the bot recorded payers): the gateway's operators refund it. ${ctx.config.supportText}`;
  // The one access check, asked again just before anything is done: a member demoted or removed
  // since the list refunds nothing.
  const where = await organisationWhere(ctx, found.org.id, 'billing.refund');
  if ('problem' in where) return where.problem;
  const credited = found.topup.amountNano;
  if (where.org.balanceNano < credited)
    return `Of the ${formatUsd(credited)} the payment ${charge} credited, ${formatUsd(where.org.balanceNano)} is left on the balance; the rest has been spent. Telegram gives Stars back whole, so only the gateway's operators refund it now. ${ctx.config.supportText}`;
  return { org: where.org };
}

const notFound = (charge: string, refused: OrganisationSummary[]) =>
  [
    `No Stars top-up with the payment id ${charge} credited an organisation where you may refund (owners and billing members refund their organisation's top-ups). The payment id is in the payment's receipt.`,
    ...(refused.length > 0 ? [refusedHere(refused, 'billing.refund')] : []),
  ].join('\n');

/** Takes back the credit once the Stars are back, and says what was done. */
async function takeBack(ctx: BotContext, charge: string, found: Found): Promise<void> {
  const by = requireOwner(ctx);
  try {
    const r = await creditBack(ctx, charge, memberRefundCause(by));
    ctx.log.info(
      { charge, by, organisation: found.org.id, applied: r.applied, refundedNano: r.refundedNano.toString() },
      'stars refund by a member',
    );
    const taken = `${formatUsd(r.refundedNano)} of the ${formatUsd(r.topupNano)} it credited`;
    await ctx.reply(
      r.applied
        ? `Refunded: the Stars of payment ${charge} went back to the one who paid, and ${taken} was taken back from "${found.org.name}". Balance: ${formatUsd(r.balanceNano)}.`
        : `The payment ${charge} had already been refunded: ${taken} was taken back then. Balance: ${formatUsd(r.balanceNano)}.`,
    );
  } catch (err) {
    if (!isTransient(err)) throw err;
    // Nothing was taken back nor recorded: asking again repeats it (Telegram answers the Stars are back already).
    ctx.log.error({ err, charge, by }, 'stars refunded but the credit NOT taken back yet');
    await ctx.reply(
      `The Stars of payment ${charge} went back, but the credit could not be taken back yet: ${err.rawMessage} Send /refund ${charge} again in a minute.`,
    );
  }
}

/** /refund <payment id>, by anyone: refunded when the payment credited an organisation where their role may refund. */
export async function organisationRefund(ctx: BotContext, arg: string): Promise<void> {
  // The console's ledger shows the top-up's external id: take that too.
  const charge = arg.startsWith(paymentExternalId('')) ? arg.slice(paymentExternalId('').length) : arg;
  const { allowed, refused } = await organisationsFor(ctx, 'billing.refund');
  const found = await findTopUp(ctx, allowed, paymentExternalId(charge));
  if (!found) return void (await ctx.reply(notFound(charge, refused)));
  const answer = await refusal(ctx, charge, found);
  if (typeof answer === 'string') return void (await ctx.reply(answer));
  const problem = await starsBack(ctx, payerOf(found.topup.cause)!, charge);
  if (problem) return void (await ctx.reply(problem));
  await takeBack(ctx, charge, { ...found, org: answer.org });
}
