// Who acts on an organisation, carried with the call as a Connect context value, as the caller of
// an inference call is (src/billing/caller.ts): the RPC port sets it from the admin token or the
// caller's key before the message is read, the console from the session, the bot from the
// Telegram user. OrganisationService reads it and nothing else to decide what the call may do.
import { createContextKey, type HandlerContext } from '@connectrpc/connect';
import { unauthorized } from '../errors/errors.ts';

/** Through what a change was made, as the audit log records it. */
export type Via = 'console' | 'cli' | 'rpc' | 'bot';

export type Actor =
  /** The operator: the admin token on the RPC port or the console, the CLI. */
  | { kind: 'operator'; via: Via; from: string }
  /** A member: by their key on the RPC port, their console session, or the bot with their Telegram user tied. */
  | { kind: 'member'; memberId: string; via: Via; from: string }
  /** A Telegram user through the bot, a member or not yet (they may redeem an invitation). */
  | { kind: 'telegram'; telegramUser: string; via: 'bot'; from: string }
  /** A team's key: it acts for no member. */
  | { kind: 'team_key'; keyId: string; accountId: string; via: Via; from: string }
  /** Someone with an invitation link and nothing else (the console's invitation page): they may only redeem it. */
  | { kind: 'invitee'; via: Via; from: string };

/**
 * The header by which the bot, calling over the RPC port with the operator's credentials (the
 * admin token, or this machine when none is set), names the Telegram user it acts for: the call
 * is then that user's, never the operator's (src/rpc/server.ts). In process the bot sets ACTOR.
 */
export const TELEGRAM_USER_HEADER = 'x-gateway-telegram-user';

/** A Telegram user as members.telegram_user names one: "telegram:<user id>". */
export const isTelegramUser = (v: string): boolean => /^telegram:[0-9]{1,20}$/.test(v);

export const ACTOR = createContextKey<Actor | undefined>(undefined, {
  description: 'who acts on an organisation',
});

/** The call's actor; 401 for a call that reached OrganisationService without one (never from the edges). */
export function actorOf(ctx: HandlerContext): Actor {
  const actor = ctx.values.get(ACTOR);
  if (!actor) throw unauthorized();
  return actor;
}
