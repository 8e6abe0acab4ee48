// /history: an account's ledger page by page (top-ups, charges, refunds and their causes), the
// buttons carrying the key and the cursor of the page they open.
import { Composer, InlineKeyboard } from 'grammy';
import { formatSignedUsd, formatUsd } from '../money/format.ts';
import { isNotFound, keyRef } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, formatTime, keyName } from './format.ts';
import { NO_KEY, NOT_YOURS, liveKeys, requireOwner } from './owner.ts';

const KIND: Record<string, string> = { topup: 'top-up', charge: 'request', refund: 'refund' };

async function historyPage(
  ctx: BotContext,
  owner: string,
  keyId: string,
  cursor: string,
): Promise<{ text: string; kb: InlineKeyboard }> {
  const page = await ctx.billing.listLedger({ key: keyRef(keyId, owner), pageSize: ctx.historyPageSize, cursor });
  const lines = page.entries.map(
    (e) =>
      `${formatTime(e.createdAt)} · ${formatSignedUsd(e.amountNano)} ${KIND[e.kind] ?? e.kind} (${escapeHtml(e.cause)}) → ${formatUsd(e.balanceAfterNano)}`,
  );
  const kb = new InlineKeyboard();
  if (cursor) kb.text('« Newest', `hist:${keyId}:`);
  if (page.nextCursor) kb.text('Older ›', `hist:${keyId}:${page.nextCursor}`);
  return { text: `${cursor ? 'Earlier' : 'Latest'} account history:\n${lines.join('\n') || 'nothing yet'}`, kb };
}

export const history = new Composer<BotContext>();

history.command('history', async (ctx) => {
  const owner = requireOwner(ctx);
  const owned = await liveKeys(ctx, owner);
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  for (const k of owned) {
    const { text, kb } = await historyPage(ctx, owner, k.keyId, '');
    await ctx.reply(`Key ${keyName(k.prefix)}\n${text}`, { ...HTML, reply_markup: kb });
  }
});

history.callbackQuery(/^hist:(key_[0-9A-Za-z]+):(\d*)$/, async (ctx) => {
  let page;
  try {
    page = await historyPage(ctx, requireOwner(ctx), ctx.match[1]!, ctx.match[2]!);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    return void (await ctx.answerCallbackQuery({ text: NOT_YOURS, show_alert: true }));
  }
  await ctx.answerCallbackQuery();
  await ctx.editMessageText(page.text, { ...HTML, reply_markup: page.kb });
});
