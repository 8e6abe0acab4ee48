// /topup [stars]: the rate and bounds, then a Telegram Stars invoice. With one key straight to the
// amount (or the invoice); with several, pick the key first. Buttons: tk:<key> opens the amounts
// of a key, ta:<key>:<stars> sends its invoice.
import { Composer, InlineKeyboard } from 'grammy';
import type { KeyInfo } from '../gen/gateway/v1/billing_pb.js';
import { formatUsd } from '../money/format.ts';
import type { BotContext } from './context.ts';
import { HTML, keyName } from './format.ts';
import { NO_KEY, NOT_YOURS, liveKeys, ownedKey, requireOwner } from './owner.ts';
import { invoicePayload, starRate, topUpBounds, validStars } from './stars.ts';

/** Amounts offered as buttons, where the bounds allow them (the minimum always). */
const PRESET_STARS = [100, 250, 500, 1000, 2500, 5000];

async function amountMenu(ctx: BotContext, key: KeyInfo): Promise<void> {
  const { config } = ctx;
  const presets = [
    ...new Set([config.minStars, ...PRESET_STARS].filter((s) => s >= config.minStars && s <= config.maxStars)),
  ];
  const kb = new InlineKeyboard();
  presets.forEach((s, i) => {
    kb.text(`${s} ⭐ → ${formatUsd(BigInt(s) * config.nanoPerStar)}`, `ta:${key.keyId}:${s}`);
    if (i % 2 === 1) kb.row();
  });
  await ctx.reply(
    `Top up key ${keyName(key.prefix)}\nRate: ${starRate(config)}.\nAmounts from ${topUpBounds(config)}. Pick one, or send /topup &lt;stars&gt;.`,
    { ...HTML, reply_markup: kb },
  );
}

async function sendInvoice(ctx: BotContext, key: KeyInfo, stars: number): Promise<void> {
  const { config } = ctx;
  const credit = formatUsd(BigInt(stars) * config.nanoPerStar);
  await ctx.replyWithInvoice(
    `API credit ${credit}`,
    `${stars} Stars buy ${credit} of gateway credit for key ${key.prefix}… (${starRate(config)}).`,
    invoicePayload(key.keyId, config.nanoPerStar),
    'XTR',
    [{ label: `${credit} of credit`, amount: stars }],
    // Stars: no payment provider. A start parameter makes forwarded copies of the invoice a
    // link to this bot instead of a Pay button, so an invoice is paid in the private chat only.
    { provider_token: '', start_parameter: 'topup' },
  );
}

export const topUp = new Composer<BotContext>();

topUp.command('topup', async (ctx) => {
  const { config } = ctx;
  const owner = requireOwner(ctx);
  const arg = ctx.match.trim();
  let stars: number | undefined;
  if (arg) {
    stars = /^\d+$/.test(arg) ? Number(arg) : NaN;
    if (!validStars(config, stars))
      return void (await ctx.reply(
        `Top-ups are whole numbers of Stars from ${topUpBounds(config)} (${starRate(config)}).`,
      ));
  }
  const owned = await liveKeys(ctx, owner);
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  if (owned.length === 1) return stars === undefined ? amountMenu(ctx, owned[0]!) : sendInvoice(ctx, owned[0]!, stars);
  const kb = new InlineKeyboard();
  for (const k of owned)
    kb.text(`${k.prefix}…`, stars === undefined ? `tk:${k.keyId}` : `ta:${k.keyId}:${stars}`).row();
  await ctx.reply('Which key should the credit go to?', { reply_markup: kb });
});

topUp.callbackQuery(/^tk:(key_[0-9A-Za-z]+)$/, async (ctx) => {
  const key = await ownedKey(ctx, ctx.match[1]!);
  if (!key) return void (await ctx.answerCallbackQuery({ text: NOT_YOURS, show_alert: true }));
  await ctx.answerCallbackQuery();
  await amountMenu(ctx, key);
});

topUp.callbackQuery(/^ta:(key_[0-9A-Za-z]+):(\d+)$/, async (ctx) => {
  const stars = Number(ctx.match[2]);
  const key = await ownedKey(ctx, ctx.match[1]!);
  if (!key) return void (await ctx.answerCallbackQuery({ text: NOT_YOURS, show_alert: true }));
  if (!validStars(ctx.config, stars))
    return void (await ctx.answerCallbackQuery({
      text: `Top-ups are from ${topUpBounds(ctx.config)}.`,
      show_alert: true,
    }));
  await ctx.answerCallbackQuery();
  await sendInvoice(ctx, key, stars);
});
