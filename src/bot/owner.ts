// Whose keys these are: a Telegram user owns the accounts they create, and the bot only ever
// names a key to the service together with its owner.
import type { Context } from 'grammy';
import type { KeyInfo } from '../gen/gateway/v1/billing_pb.js';
import type { BotContext } from './context.ts';

/** Owner string of a Telegram user's accounts. */
export const ownerOf = (userId: number): string => `telegram:${userId}`;

export const NO_KEY = 'You have no key yet. /newkey creates one.';
export const NOT_YOURS = 'That key is not one of your active keys.';

export function requireOwner(ctx: Context): string {
  if (!ctx.from) throw new Error('update without a sender');
  return ownerOf(ctx.from.id);
}

export const liveKeys = async (ctx: BotContext, owner: string): Promise<KeyInfo[]> =>
  (await ctx.billing.listKeys({ owner })).keys;

/** The caller's live key with this id, or undefined (not theirs, or no longer live). */
export async function ownedKey(ctx: BotContext, keyId: string): Promise<KeyInfo | undefined> {
  return (await liveKeys(ctx, requireOwner(ctx))).find((k) => k.keyId === keyId);
}
