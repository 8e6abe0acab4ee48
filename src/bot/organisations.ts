// /org: the organisations the user belongs to, their role in each, the balance left and what
// the bot lets them do there, as OrganisationService answers for them (docs/organisations.md).
// A page at a time; the "More" button carries the next page's cursor.
import { Composer, InlineKeyboard } from 'grammy';
import type { OrganisationSummary } from '../gen/gateway/v1/organisations_pb.js';
import { formatUsd } from '../money/format.ts';
import { NO_ORGANISATION, ROLE_NAMES, asUser } from './acting.ts';
import { isRefusal } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml } from './format.ts';

/** Organisations per message: names are up to 200 characters, a message at most 4096. */
const PAGE_SIZE = 10;

function organisationLines(o: OrganisationSummary): string {
  const may = [
    ...(o.allowedActions.includes('billing.top_up') ? ['/topup adds credit'] : []),
    ...(o.allowedActions.includes('invitations.create') ? ['/invite makes an invitation link'] : []),
  ];
  return [
    `<b>${escapeHtml(o.name)}</b> · ${ROLE_NAMES[o.myRole]}`,
    `Balance: ${formatUsd(o.balanceNano)} · available: ${formatUsd(o.availableNano)}`,
    `${o.members} ${o.members === 1 ? 'member' : 'members'} · ${o.liveKeys} live ${o.liveKeys === 1 ? 'key' : 'keys'}`,
    ...(may.length > 0 ? [`Here ${may.join('; ')}.`] : []),
  ].join('\n');
}

async function organisationPage(ctx: BotContext, cursor: string): Promise<{ text: string; kb: InlineKeyboard }> {
  const page = await ctx.organisations.listOrganisations({ pageSize: PAGE_SIZE, cursor }, asUser(ctx));
  const kb = new InlineKeyboard();
  if (cursor) kb.text('« First', 'org:');
  // Telegram carries at most 64 bytes of button data; a longer cursor gets no button.
  if (page.nextCursor && `org:${page.nextCursor}`.length <= 64) kb.text('More ›', `org:${page.nextCursor}`);
  if (page.organisations.length === 0) return { text: cursor ? 'No more organisations.' : NO_ORGANISATION, kb };
  const head = cursor ? 'More of your organisations:' : 'Your organisations, with your role in each:';
  return { text: [head, ...page.organisations.map(organisationLines)].join('\n\n'), kb };
}

export const organisations = new Composer<BotContext>();

organisations.command('org', async (ctx) => {
  const { text, kb } = await organisationPage(ctx, '');
  await ctx.reply(text, { ...HTML, reply_markup: kb });
});

organisations.callbackQuery(/^org:([A-Za-z0-9_-]*)$/, async (ctx) => {
  let page;
  try {
    page = await organisationPage(ctx, ctx.match[1]!);
  } catch (err) {
    if (!isRefusal(err)) throw err;
    return void (await ctx.answerCallbackQuery({ text: 'This button has expired.' }));
  }
  const { text, kb } = page;
  await ctx.answerCallbackQuery();
  await ctx.editMessageText(text, { ...HTML, reply_markup: kb });
});
