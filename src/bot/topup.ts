// /topup [stars]: the rate and bounds, then a Telegram Stars invoice for credit on an
// organisation's balance. The credit may go to the user's own accounts (named by their keys, as
// /newkey made them) and to the organisations where their role may top up (owner or billing:
// `billing.top_up` among the service's allowed_actions for them). With one place, straight to the
// amount (or the invoice); with several, pick one first. Buttons: tk:<key> and to:<organisation>
// open the amounts, ta:<key>:<stars> and oa:<organisation>:<stars> send the invoice.
import { Composer, InlineKeyboard } from 'grammy';
import type { KeyInfo } from '../gen/gateway/v1/billing_pb.js';
import type { OrganisationSummary } from '../gen/gateway/v1/organisations_pb.js';
import { formatUsd } from '../money/format.ts';
import { organisationWhere, organisationsFor, refusedHere, shortName } from './acting.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, keyName } from './format.ts';
import { NO_KEY, NOT_YOURS, liveKeys, ownedKey, requireOwner } from './owner.ts';
import { invoicePayload, starRate, topUpBounds, validStars } from './stars.ts';

/** Amounts offered as buttons, where the bounds allow them (the minimum always). */
const PRESET_STARS = [100, 250, 500, 1000, 2500, 5000];

/** Where a top-up's credit goes: the account of one of the user's own keys, or an organisation. */
type Target = { key: KeyInfo } | { org: OrganisationSummary };

const targetText = (t: Target) =>
  'key' in t ? `key ${keyName(t.key.prefix)}` : `the organisation <b>${escapeHtml(t.org.name)}</b>`;
const targetData = (t: Target) => ('key' in t ? t.key.keyId : t.org.id);
const amountData = (t: Target, stars: number) => `${'key' in t ? 'ta' : 'oa'}:${targetData(t)}:${stars}`;

async function amountMenu(ctx: BotContext, t: Target): Promise<void> {
  const { config } = ctx;
  const presets = [
    ...new Set([config.minStars, ...PRESET_STARS].filter((s) => s >= config.minStars && s <= config.maxStars)),
  ];
  const kb = new InlineKeyboard();
  presets.forEach((s, i) => {
    kb.text(`${s} ⭐ → ${formatUsd(BigInt(s) * config.nanoPerStar)}`, amountData(t, s));
    if (i % 2 === 1) kb.row();
  });
  await ctx.reply(
    `Top up ${targetText(t)}\nRate: ${starRate(config)}.\nAmounts from ${topUpBounds(config)}. Pick one, or send /topup &lt;stars&gt;.`,
    { ...HTML, reply_markup: kb },
  );
}

async function sendInvoice(ctx: BotContext, t: Target, stars: number): Promise<void> {
  const { config } = ctx;
  const credit = formatUsd(BigInt(stars) * config.nanoPerStar);
  // An invoice's description is at most 255 characters: a long name is cut short.
  const what = 'key' in t ? `key ${t.key.prefix}…` : `the organisation "${shortName(t.org.name)}"`;
  await ctx.replyWithInvoice(
    `API credit ${credit}`,
    `${stars} Stars buy ${credit} of gateway credit for ${what} (${starRate(config)}).`,
    invoicePayload('key' in t ? { keyId: t.key.keyId } : { organisationId: t.org.id }, config.nanoPerStar),
    'XTR',
    [{ label: `${credit} of credit`, amount: stars }],
    // Stars: no payment provider. A start parameter makes forwarded copies of the invoice a
    // link to this bot instead of a Pay button, so an invoice is paid in the private chat only.
    { provider_token: '', start_parameter: 'topup' },
  );
}

/**
 * Where the user may send credit: their own accounts (one key each; an organisation of one is
 * named by its key, as before organisations), then the other organisations where they may top
 * up. `refused`: organisations where their role may not.
 */
async function targets(ctx: BotContext): Promise<{ targets: Target[]; refused: OrganisationSummary[] }> {
  const [owned, { allowed, refused }] = await Promise.all([
    liveKeys(ctx, requireOwner(ctx)),
    organisationsFor(ctx, 'billing.top_up'),
  ]);
  const accounts = new Set<string>();
  const keys = owned.filter((k) => !accounts.has(k.accountId) && accounts.add(k.accountId));
  return {
    targets: [...keys.map((key) => ({ key })), ...allowed.filter((o) => !accounts.has(o.id)).map((org) => ({ org }))],
    refused: refused.filter((o) => !accounts.has(o.id)),
  };
}

export const topUp = new Composer<BotContext>();

topUp.command('topup', async (ctx) => {
  const { config } = ctx;
  const arg = ctx.match.trim();
  let stars: number | undefined;
  if (arg) {
    stars = /^\d+$/.test(arg) ? Number(arg) : NaN;
    if (!validStars(config, stars))
      return void (await ctx.reply(
        `Top-ups are whole numbers of Stars from ${topUpBounds(config)} (${starRate(config)}).`,
      ));
  }
  const found = await targets(ctx);
  const places = found.targets;
  if (places.length === 0)
    return void (await ctx.reply(found.refused.length === 0 ? NO_KEY : refusedHere(found.refused, 'billing.top_up')));
  if (places.length === 1)
    return stars === undefined ? amountMenu(ctx, places[0]!) : sendInvoice(ctx, places[0]!, stars);
  const kb = new InlineKeyboard();
  for (const t of places) {
    const label = 'key' in t ? `${t.key.prefix}…` : shortName(t.org.name);
    kb.text(label, stars === undefined ? `${'key' in t ? 'tk' : 'to'}:${targetData(t)}` : amountData(t, stars)).row();
  }
  const keysOnly = places.every((t) => 'key' in t);
  await ctx.reply(keysOnly ? 'Which key should the credit go to?' : 'Where should the credit go?', {
    reply_markup: kb,
  });
});

/** The target a button names, or the alert that refuses it. */
async function buttonTarget(ctx: BotContext, kind: 'key' | 'org', id: string): Promise<Target | undefined> {
  if (kind === 'key') {
    const key = await ownedKey(ctx, id);
    if (key) return { key };
    return void (await ctx.answerCallbackQuery({ text: NOT_YOURS, show_alert: true }));
  }
  const found = await organisationWhere(ctx, id, 'billing.top_up');
  if ('org' in found) return { org: found.org };
  return void (await ctx.answerCallbackQuery({ text: found.problem, show_alert: true }));
}

topUp.callbackQuery(/^(tk|to):((?:key|acct)_[0-9A-Za-z]+)$/, async (ctx) => {
  const t = await buttonTarget(ctx, ctx.match[1] === 'tk' ? 'key' : 'org', ctx.match[2]!);
  if (!t) return;
  await ctx.answerCallbackQuery();
  await amountMenu(ctx, t);
});

topUp.callbackQuery(/^(ta|oa):((?:key|acct)_[0-9A-Za-z]+):(\d+)$/, async (ctx) => {
  const stars = Number(ctx.match[3]);
  const t = await buttonTarget(ctx, ctx.match[1] === 'ta' ? 'key' : 'org', ctx.match[2]!);
  if (!t) return;
  if (!validStars(ctx.config, stars))
    return void (await ctx.answerCallbackQuery({
      text: `Top-ups are from ${topUpBounds(ctx.config)}.`,
      show_alert: true,
    }));
  await ctx.answerCallbackQuery();
  await sendInvoice(ctx, t, stars);
});
