// Keys and balances are private: every update is refused outside the sender's own private chat
// with the bot (commands, button presses, inline queries, anything), before any billing call, so
// nothing of an account is ever read, changed or posted in a group.
import type { Context, NextFunction } from 'grammy';
import type { BotContext } from './context.ts';

/** The sender's own private chat with the bot (in a private chat, its id is the user's). */
export function inPrivateChat(ctx: Context): boolean {
  return ctx.chat?.type === 'private' && ctx.from !== undefined && ctx.chat.id === ctx.from.id;
}

const paymentMessage = (ctx: Context) =>
  ctx.message?.successful_payment !== undefined || ctx.message?.refunded_payment !== undefined;

/** A short refusal where the update allows one, and nothing else: no billing call. */
async function refuseOutsidePrivateChat(ctx: Context): Promise<void> {
  const text = 'Please talk to me in a private chat: keys and balances are not for groups.';
  if (ctx.callbackQuery) return void (await ctx.answerCallbackQuery({ text, show_alert: true }).catch(() => undefined));
  if (ctx.inlineQuery)
    return void (await ctx.answerInlineQuery([], { cache_time: 0, is_personal: true }).catch(() => undefined));
  // In a group, answer commands only: replying to every message there would be noise.
  if (ctx.message?.text?.startsWith('/') && ctx.chat) await ctx.reply(text).catch(() => undefined);
}

/**
 * The first middleware: refuses what is not in the sender's private chat, and answers a failed
 * update with an apology. Two exceptions, both Telegram's own record of money, never a user's:
 * the pre-checkout query (it has no chat; it only checks the payer holds the key) and the payment
 * service messages (the Stars were taken: they are credited, and answered in the payer's private
 * chat only).
 */
export async function privateChatOnly(ctx: BotContext, next: NextFunction): Promise<void> {
  if (!inPrivateChat(ctx) && !ctx.preCheckoutQuery && !paymentMessage(ctx)) return refuseOutsidePrivateChat(ctx);
  try {
    await next();
  } catch (err) {
    ctx.log.error({ err, update: ctx.update.update_id }, 'telegram update failed');
    if (inPrivateChat(ctx))
      await ctx.reply('Sorry, something went wrong on our side. Please try again in a moment.').catch(() => undefined);
  }
}

/** Where to answer a payment message: the payer's private chat, wherever the message came. */
const payerChat = (ctx: Context) => (inPrivateChat(ctx) ? ctx.chat!.id : ctx.from!.id);
export const tellPayer = (ctx: Context, text: string) => ctx.api.sendMessage(payerChat(ctx), text);
