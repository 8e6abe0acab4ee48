// /invite [role]: an owner or admin makes a one-time invitation to one of their organisations
// (docs/organisations.md#members-and-invitations), as two links to the same token: a Telegram deep
// link to this bot (`t.me/<bot>?start=<token>`, which join.ts redeems) and the console's
// (`<PUBLIC_BASE_URL>/console/#invite=<token>`). With several organisations where they may invite,
// pick one first: the button inv:<organisation>:<role> makes it. The service decides who may.
import { Composer, InlineKeyboard } from 'grammy';
import type { Role } from '../gen/gateway/v1/organisations_pb.js';
import {
  NOT_YOUR_ORGANISATION,
  NO_ORGANISATION,
  ROLE_NAMES,
  ROLES_BY_NAME,
  asUser,
  organisationsFor,
  refusedHere,
  shortName,
} from './acting.ts';
import { isNotFound, isRefusal } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, formatTime } from './format.ts';

const USAGE =
  'usage: /invite [member|billing|admin|owner]: a one-time link that adds one person to your organisation in that role (member when not said).';

/** Makes the invitation and answers with its links; a refusal is the service's own words. */
async function invite(ctx: BotContext, organisationId: string, role: Role): Promise<string | undefined> {
  let made;
  try {
    made = await ctx.organisations.createInvitation({ organisationId, role }, asUser(ctx));
  } catch (err) {
    if (!isRefusal(err)) throw err;
    return isNotFound(err) ? NOT_YOUR_ORGANISATION : err.rawMessage;
  }
  const org = (await ctx.organisations.getOrganisation({ organisationId }, asUser(ctx))).organisation!;
  const telegram = `https://t.me/${ctx.me.username}?start=${made.token}`;
  const browser = `${ctx.config.publicBaseUrl}/console/#invite=${made.token}`;
  const link = (url: string) => `<a href="${escapeHtml(url)}">${escapeHtml(url)}</a>`;
  await ctx.reply(
    [
      `Invitation to <b>${escapeHtml(org.name)}</b> as <b>${ROLE_NAMES[role]}</b>. It works <b>once</b>, until ${formatTime(made.invitation?.expiresAt)}.`,
      '',
      `In Telegram: ${link(telegram)}`,
      `In the browser: ${link(browser)}`,
      '',
      'Whoever opens it first joins: send it to the one person you invite, privately.',
    ].join('\n'),
    HTML,
  );
  ctx.log.info({ organisationId, invitation: made.invitation?.id, role: ROLE_NAMES[role] }, 'invitation made');
  return undefined;
}

export const inviting = new Composer<BotContext>();

inviting.command('invite', async (ctx) => {
  const roleName = ctx.match.trim().toLowerCase() || 'member';
  const role = ROLES_BY_NAME.get(roleName);
  if (role === undefined) return void (await ctx.reply(USAGE));
  const { allowed, refused } = await organisationsFor(ctx, 'invitations.create');
  if (allowed.length === 0)
    return void (await ctx.reply(refused.length === 0 ? NO_ORGANISATION : refusedHere(refused, 'invitations.create')));
  if (allowed.length === 1) {
    const problem = await invite(ctx, allowed[0]!.id, role);
    if (problem) await ctx.reply(problem);
    return;
  }
  const kb = new InlineKeyboard();
  for (const o of allowed) kb.text(shortName(o.name), `inv:${o.id}:${roleName}`).row();
  await ctx.reply(`Which organisation is the invitation (as ${roleName}) to?`, { reply_markup: kb });
});

inviting.callbackQuery(/^inv:(acct_[0-9A-Za-z]+):(owner|admin|billing|member)$/, async (ctx) => {
  await ctx.answerCallbackQuery();
  const problem = await invite(ctx, ctx.match[1]!, ROLES_BY_NAME.get(ctx.match[2]!)!);
  if (problem) await ctx.reply(problem);
});
