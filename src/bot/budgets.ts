// /budget: the budgets over the user's own requests in each of their organisations (theirs, their
// keys', their teams', the organisation's; docs/budgets.md), with what was spent in the current
// window, what is left and when it resets, as OrganisationService answers for them: the same
// figures as the console's Budgets page. Whatever their role, the bot shows only what applies to
// them; owners and admins set budgets in the console or the CLI.
import { Composer } from 'grammy';
import type { BudgetState, OrganisationSummary } from '../gen/gateway/v1/organisations_pb.js';
import { formatUsd } from '../money/format.ts';
import { NO_ORGANISATION, asUser, shortName } from './acting.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, formatTime } from './format.ts';

/** One message per organisation, at most this many; names are cut to 40 characters, so 10 budgets fit its 4096. */
const ORGANISATIONS = 5;
const BUDGETS_EACH = 10;

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

function periodWords(b: BudgetState): string {
  const s = b.spec!;
  switch (s.period) {
    case 'week':
      return `weekly from ${WEEKDAYS[s.startDay]} (${s.timeZone})`;
    case 'month':
      return `monthly from day ${s.startDay} (${s.timeZone})`;
    case 'rolling':
      return `the last ${s.rollingHours} h`;
    case 'lifetime':
      return 'lifetime';
    default:
      return `daily (${s.timeZone})`;
  }
}

function overWords(b: BudgetState): string {
  const name = escapeHtml(shortName(b.scopeName || b.spec!.scopeId));
  switch (b.spec!.scope) {
    case 'organisation':
      return 'the whole organisation';
    case 'member':
      return 'you';
    case 'team':
      return `the keys of team ${name}`;
    case 'key':
      return `your key ${name}`;
    default:
      return 'end customers';
  }
}

/** One budget in two lines: whom and what period, then spent, held, left and the reset. */
function budgetLines(b: BudgetState): string {
  const s = b.spec!;
  const amount = b.amountNano + b.raiseNano;
  const name = s.name ? ` <i>${escapeHtml(shortName(s.name))}</i>` : '';
  const held = b.heldNano > 0n ? ` · ${formatUsd(b.heldNano)} held` : '';
  // A rolling budget never resets: its oldest hour drops out at the end of the current one.
  const resets = !b.windowEnd
    ? 'never resets'
    : s.period === 'rolling'
      ? `its oldest hour drops out ${formatTime(b.windowEnd)}`
      : `resets ${formatTime(b.windowEnd)}`;
  return [
    `•${name} ${formatUsd(b.amountNano)} ${periodWords(b)} for ${overWords(b)}${s.mode === 'soft' ? ' (soft: alerts only)' : ''}`,
    `  ${formatUsd(b.spentNano)} spent of ${formatUsd(amount)}${b.raiseNano > 0n ? ` (raised ${formatUsd(b.raiseNano)})` : ''}${held} · <b>${formatUsd(b.remainingNano)} left</b> · ${resets}`,
  ].join('\n');
}

async function organisationBudgets(ctx: BotContext, o: OrganisationSummary): Promise<string> {
  const { budgets } = await ctx.organisations.listBudgets({ organisationId: o.id, applyingToMe: true }, asUser(ctx));
  const head = `<b>${escapeHtml(shortName(o.name))}</b>: the budgets over your requests`;
  if (budgets.length === 0) return `${head}\nNo budget applies to you here.`;
  const more = budgets.length - BUDGETS_EACH;
  return [
    head,
    ...budgets.slice(0, BUDGETS_EACH).map(budgetLines),
    ...(more > 0 ? [`… and ${more} more: /console opens the Budgets page with them all.`] : []),
  ].join('\n');
}

export const budgets = new Composer<BotContext>();

budgets.command('budget', async (ctx) => {
  const page = await ctx.organisations.listOrganisations({ pageSize: ORGANISATIONS }, asUser(ctx));
  if (page.organisations.length === 0) return void (await ctx.reply(NO_ORGANISATION));
  for (const o of page.organisations) await ctx.reply(await organisationBudgets(ctx, o), HTML);
  if (page.nextCursor) await ctx.reply(`These are your first ${ORGANISATIONS} organisations; /org lists them all.`);
});
