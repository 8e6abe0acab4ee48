// What each role of an organisation may do (docs/organisations.md#roles): one table, checked in
// one place (`authorize`, called by every OrganisationService method) whoever calls — the
// console, the bot, the CLI or another service over the RPC port. The operator may do
// everything; a member what their role in the organisation allows, read from the database on
// every call, so a change of role or a removal holds from the next call on every instance.
import { Code } from '@connectrpc/connect';
import { gatewayError } from '../errors/errors.ts';

export const ROLES = ['owner', 'admin', 'billing', 'member'] as const;
export type Role = (typeof ROLES)[number];

const EVERYONE: readonly Role[] = ROLES;
const MANAGERS: readonly Role[] = ['owner', 'admin'];
const MONEY: readonly Role[] = ['owner', 'billing'];
const READERS: readonly Role[] = ['owner', 'admin', 'billing'];

/**
 * Every action on an organisation and the roles that may take it. `own` actions concern the
 * caller's own things (their keys, their usage); the others any of the organisation's.
 */
export const PERMISSIONS = {
  /** The organisation's name, balance left, the caller's own role. */
  'organisation.read': EVERYONE,
  'organisation.rename': MANAGERS,
  /** Spend by team, member, key, model and day; every request's usage row; CSV. */
  'spend.read': READERS,
  /** The caller's own usage and spend. */
  'spend.read_own': EVERYONE,
  'members.read': READERS,
  'members.set_role': MANAGERS,
  'members.remove': MANAGERS,
  'invitations.create': MANAGERS,
  'invitations.read': MANAGERS,
  'invitations.revoke': MANAGERS,
  'teams.read': EVERYONE,
  'teams.manage': MANAGERS,
  /** Create, rotate and revoke the caller's own personal keys. */
  'keys.manage_own': EVERYONE,
  /** Every key of the organisation: others' and the teams'. */
  'keys.manage': MANAGERS,
  'keys.read': READERS,
  'billing.top_up': MONEY,
  'billing.refund': MONEY,
  'audit.read': MANAGERS,
  /** A sign-in link for another member. */
  'members.sign_in_link': MANAGERS,
  /** Every budget of the organisation (docs/budgets.md). */
  'budgets.read': READERS,
  /** The budgets over the caller's own requests. */
  'budgets.read_own': EVERYONE,
  /** Set, change and delete budgets; raise a window and reset its spend (RaiseBudget, ResetBudgetSpend). */
  'budgets.manage': MANAGERS,
} as const satisfies Record<string, readonly Role[]>;

export type Action = keyof typeof PERMISSIONS;
export const ACTIONS = Object.keys(PERMISSIONS) as Action[];

/** Whether `role` may take `action`. */
export function may(role: Role, action: Action): boolean {
  return (PERMISSIONS[action] as readonly Role[]).includes(role);
}

export const isRole = (v: string): v is Role => (ROLES as readonly string[]).includes(v);

/** 403: the caller's role does not allow the action (they are a member, so the organisation is no secret to them). */
export const notAllowed = (action: Action, role: Role) =>
  gatewayError({
    httpStatus: 403,
    type: 'permission_error',
    code: 'not_allowed',
    message: `A member with the role '${role}' may not do this (${action}); docs/organisations.md#roles lists what each role may do.`,
  });

/**
 * The rules of role changes beyond the table, for a manager (owner or admin) changing `target`'s
 * role from `from` to `to`: only an owner grants `owner` or changes an owner's role. (That an
 * organisation keeps an owner is the database's rule: migration 023.) Undefined when allowed.
 */
export function roleChangeRefusal(actorRole: Role | 'operator', from: Role, to: Role): string | undefined {
  if (actorRole === 'operator' || actorRole === 'owner') return undefined;
  if (to === 'owner') return 'only an owner may make someone an owner';
  if (from === 'owner') return "only an owner may change an owner's role";
  return undefined;
}

/** Whether a manager may remove a member of role `target` (an admin may not remove an owner). */
export function removalRefusal(actorRole: Role | 'operator', target: Role): string | undefined {
  if (actorRole === 'operator' || actorRole === 'owner') return undefined;
  return target === 'owner' ? 'only an owner may remove an owner' : undefined;
}

/** 400 with FAILED_PRECONDITION: the change would break a rule of the organisation. */
export const ruleBroken = (code: string, message: string) =>
  gatewayError({ httpStatus: 400, type: 'invalid_request_error', code, message, rpcCode: Code.FailedPrecondition });
