// How the bot calls OrganisationService: always as the update's Telegram user, never as the
// operator whose credentials it holds. Each call carries the user as its ACTOR context value,
// which the service reads when the bot runs inside the gateway; over the network the transport
// (start.ts) turns it into TELEGRAM_USER_HEADER, which the RPC port takes only together with the
// operator's credentials (src/rpc/server.ts). The service then decides, from the user's roles.
import { Code, ConnectError, createContextValues, type CallOptions, type Interceptor } from '@connectrpc/connect';
import type { Context } from 'grammy';
import { OrganisationService, Role, type OrganisationSummary } from '../gen/gateway/v1/organisations_pb.js';
import { ACTOR, TELEGRAM_USER_HEADER } from '../organisations/actor.ts';
import { isNotFound } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { requireOwner } from './owner.ts';

/** Call options of an OrganisationService call made for the update's Telegram user. */
export function asUser(ctx: Context): CallOptions {
  return {
    contextValues: createContextValues().set(ACTOR, {
      kind: 'telegram',
      telegramUser: requireOwner(ctx),
      via: 'bot',
      from: '',
    }),
  };
}

/**
 * For the network transport: an OrganisationService call names its Telegram user in a header;
 * one made without a user is stopped here, so the bot never acts there as the operator.
 */
export const telegramUserHeader: Interceptor = (next) => (req) => {
  if (req.service.typeName !== OrganisationService.typeName) return next(req);
  const actor = req.contextValues.get(ACTOR);
  if (actor?.kind !== 'telegram')
    throw new ConnectError('the bot calls OrganisationService only for a Telegram user', Code.Internal);
  req.header.set(TELEGRAM_USER_HEADER, actor.telegramUser);
  return next(req);
};

/** A role as the bot names it. */
export const ROLE_NAMES: Record<Role, string> = {
  [Role.UNSPECIFIED]: 'operator',
  [Role.OWNER]: 'owner',
  [Role.ADMIN]: 'admin',
  [Role.BILLING]: 'billing',
  [Role.MEMBER]: 'member',
};

/** The roles a user may name (a Map: no inherited names such as "constructor"). */
export const ROLES_BY_NAME: ReadonlyMap<string, Role> = new Map([
  ['owner', Role.OWNER],
  ['admin', Role.ADMIN],
  ['billing', Role.BILLING],
  ['member', Role.MEMBER],
]);

/** What the bot asks the service to allow, and who may, in the user's words. */
export type BotAction = 'billing.top_up' | 'billing.refund' | 'invitations.create';
const WHO_MAY: Record<BotAction, string> = {
  'billing.top_up': 'Only owners and billing members may top up',
  'billing.refund': 'Only owners and billing members may refund top-ups of',
  'invitations.create': 'Only owners and admins may invite people to',
};

/** A name cut short for the places Telegram bounds (button alerts, pre-checkout errors). */
export const shortName = (name: string): string =>
  [...name].length > 40 ? `${[...name].slice(0, 39).join('')}…` : name;

/** Why the user may not take `action` in `org`: plain text, for a message, an alert or a pre-checkout answer. */
export const notAllowedHere = (org: OrganisationSummary, action: BotAction): string =>
  `${WHO_MAY[action]} "${shortName(org.name)}"; your role there is ${ROLE_NAMES[org.myRole]}.`;

/** Organisations a command offers as buttons at most (Telegram bounds a keyboard): the first page of the user's. */
const LISTED = 50;

/** The user's organisations where their role allows `action` (the service's allowed_actions), and the others. */
export async function organisationsFor(
  ctx: BotContext,
  action: BotAction,
): Promise<{ allowed: OrganisationSummary[]; refused: OrganisationSummary[] }> {
  const { organisations } = await ctx.organisations.listOrganisations({ pageSize: LISTED }, asUser(ctx));
  const allowed = organisations.filter((o) => o.allowedActions.includes(action));
  return { allowed, refused: organisations.filter((o) => !o.allowedActions.includes(action)) };
}

/** The user's organisation `id` when their role there allows `action`, or a sentence saying why not. */
export async function organisationWhere(
  ctx: BotContext,
  id: string,
  action: BotAction,
): Promise<{ org: OrganisationSummary } | { problem: string }> {
  let org: OrganisationSummary | undefined;
  try {
    org = (await ctx.organisations.getOrganisation({ organisationId: id }, asUser(ctx))).organisation;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (!org) return { problem: NOT_YOUR_ORGANISATION };
  return org.allowedActions.includes(action) ? { org } : { problem: notAllowedHere(org, action) };
}

/** The refusals of a command where the user may do it nowhere: a few lines, a message holds 4096 characters. */
export const refusedHere = (refused: OrganisationSummary[], action: BotAction): string =>
  [
    ...refused.slice(0, 5).map((o) => notAllowedHere(o, action)),
    ...(refused.length > 5 ? [`… and ${refused.length - 5} more.`] : []),
  ].join('\n');

export const NOT_YOUR_ORGANISATION = 'That organisation is not one of yours (any more).';
export const NO_ORGANISATION =
  'You belong to no organisation yet. /newkey makes your own; an invitation link from an admin adds you to theirs.';
