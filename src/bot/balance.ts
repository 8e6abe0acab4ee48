// /balance and /usage: per key the balance, what running requests hold, and the last requests.
import { Composer } from 'grammy';
import { formatUsd } from '../money/format.ts';
import { keyRef } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, formatTime, keyName } from './format.ts';
import { NO_KEY, liveKeys, requireOwner } from './owner.ts';

/** Requests /usage lists per key. */
const USAGE_LIMIT = 10;

export const balance = new Composer<BotContext>();

balance.command('balance', async (ctx) => {
  const owner = requireOwner(ctx);
  const owned = await liveKeys(ctx, owner);
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  const parts: string[] = [];
  for (const k of owned) {
    const b = await ctx.billing.getBalance({ key: keyRef(k.keyId, owner) });
    parts.push(
      `Key ${keyName(k.prefix)}\nBalance: ${formatUsd(b.balanceNano)}\nHeld by running requests: ${formatUsd(b.heldNano)}\nAvailable: ${formatUsd(b.availableNano)}`,
    );
  }
  await ctx.reply(parts.join('\n\n'), HTML);
});

balance.command('usage', async (ctx) => {
  const owner = requireOwner(ctx);
  const owned = await liveKeys(ctx, owner);
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  const parts: string[] = [];
  for (const k of owned) {
    const u = await ctx.billing.listUsage({ key: keyRef(k.keyId, owner), limit: USAGE_LIMIT });
    const lines = u.records.map(
      (r) =>
        `${formatTime(r.createdAt)} · ${escapeHtml(r.model)} · ${escapeHtml(r.route)} · ${formatUsd(r.costNano)}${r.status === 'ok' ? '' : ` (${escapeHtml(r.status)})`}`,
    );
    parts.push(`Last requests on key ${keyName(k.prefix)}:\n${lines.join('\n') || 'none yet'}`);
  }
  await ctx.reply(parts.join('\n\n'), HTML);
});
