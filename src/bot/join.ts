// /start inv-…: an invitation opened in Telegram (the deep link /invite makes) joins its user:
// RedeemInvitation as their Telegram user, which makes them a member tied to that user (or adds
// the member they already are). The answer names the organisation and the role, and offers a
// first key there (the button okey:<organisation>, a personal key made as the user). Any other
// /start goes on to the welcome (help.ts).
import { Composer, InlineKeyboard } from 'grammy';
import type { User } from 'grammy/types';
import { cleanName } from '../organisations/names.ts';
import { NOT_YOUR_ORGANISATION, ROLE_NAMES, asUser } from './acting.ts';
import { isNotFound, isRefusal } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml } from './format.ts';

/** The name a new member goes by: theirs in Telegram, or their username when that is not plain text. */
function memberName(from: User): string {
  try {
    return cleanName([from.first_name, from.last_name ?? ''].join(' '), 'name');
  } catch {
    return from.username ? `@${from.username}` : `Telegram user ${from.id}`;
  }
}

/** What the role lets them do from here, in the bot's commands. */
function nextSteps(actions: string[]): string {
  const steps = ['/org shows it, your role and the balance left'];
  if (actions.includes('billing.top_up')) steps.push('/topup adds credit to it');
  if (actions.includes('invitations.create')) steps.push('/invite brings in others');
  return `${steps.join('; ')}.`;
}

export const joining = new Composer<BotContext>();

joining.command('start', async (ctx, next) => {
  const token = ctx.match.trim();
  if (!token.startsWith('inv-')) return next();
  const before = await ctx.organisations.whoAmI({}, asUser(ctx));
  let r;
  try {
    r = await ctx.organisations.redeemInvitation({ token, name: memberName(ctx.from!) }, asUser(ctx));
  } catch (err) {
    if (!isRefusal(err)) throw err;
    return void (await ctx.reply(err.rawMessage));
  }
  const name = `<b>${escapeHtml(r.organisationName)}</b>`;
  const role = `<b>${ROLE_NAMES[r.role]}</b>`;
  ctx.log.info(
    { organisationId: r.organisationId, memberId: r.memberId, role: ROLE_NAMES[r.role] },
    'invitation redeemed',
  );
  const org = (await ctx.organisations.getOrganisation({ organisationId: r.organisationId }, asUser(ctx))).organisation;
  const steps = nextSteps(org?.allowedActions ?? []);
  if (before.memberships.some((m) => m.organisationId === r.organisationId))
    return void (await ctx.reply(`You were already in ${name}, as ${role}: nothing changed. ${steps}`, HTML));
  await ctx.reply(`Welcome! You joined ${name} as ${role}. ${steps}`, {
    ...HTML,
    reply_markup: new InlineKeyboard().text('Make my API key there', `okey:${r.organisationId}`),
  });
});

// A personal key of the user's in that organisation, on its balance: shown once.
joining.callbackQuery(/^okey:(acct_[0-9A-Za-z]+)$/, async (ctx) => {
  const organisationId = ctx.match[1]!;
  let made;
  try {
    made = await ctx.organisations.createOrganisationKey({ organisationId, name: 'telegram' }, asUser(ctx));
  } catch (err) {
    if (!isRefusal(err)) throw err;
    const text = isNotFound(err) ? NOT_YOUR_ORGANISATION : err.rawMessage.slice(0, 200);
    return void (await ctx.answerCallbackQuery({ text, show_alert: true }));
  }
  ctx.log.info({ organisationId, keyId: made.key?.keyId }, 'organisation key made');
  await ctx.answerCallbackQuery({ text: 'Key made' });
  await ctx.editMessageReplyMarkup(); // one key from one button
  const base = ctx.config.publicBaseUrl;
  await ctx.reply(
    [
      'Your API key there. It is shown <b>only this once</b>: copy it now (tap to copy).',
      '',
      `<code>${escapeHtml(made.apiKey)}</code>`,
      '',
      "It spends the organisation's balance; /org shows what is left.",
      `Use it as the API key with base URL <code>${escapeHtml(base)}/v1</code> (OpenAI) or <code>${escapeHtml(base)}</code> (Anthropic).`,
    ].join('\n'),
    HTML,
  );
});
