// OrganisationService's one access check and its wire mappers (docs/organisations.md#roles): who
// acts (the call's Actor), whether they belong to the organisation named (another's is answered
// NOT_FOUND, as a made-up id is), and whether their role allows the action (roles.ts). Nothing
// else in the gateway decides what a member may do.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { HandlerContext } from '@connectrpc/connect';
import {
  Role as RoleEnum,
  SpendGrouping,
  type InvitationSchema,
  type MemberSchema,
  type OrganisationKeySchema,
  type OrganisationSummarySchema,
  type TeamSchema,
} from '../gen/gateway/v1/organisations_pb.js';
import type { Db } from '../db/db.ts';
import type { Ledger } from '../billing/ledger.ts';
import type { KeyCheck } from '../billing/key-check.ts';
import type { RateLimiter } from '../billing/rate-limits.ts';
import { badRequest, gatewayError, notFound } from '../errors/errors.ts';
import { actorOf, type Actor } from '../organisations/actor.ts';
import { ACTIONS, may, notAllowed, type Action, type Role } from '../organisations/roles.ts';
import {
  memberByTelegram,
  organisationExists,
  roleOf,
  type OrganisationFigures,
} from '../organisations/organisations.ts';
import { type MemberRow } from '../organisations/members.ts';
import { type TeamRow } from '../organisations/teams.ts';
import { type InvitationRow } from '../organisations/invitations.ts';
import { orgKey, type OrgKeyRow } from '../organisations/org-keys.ts';
import { type SpendBy } from '../organisations/spend.ts';

export interface OrganisationDeps {
  db: Db;
  ledger: Ledger;
  keys: KeyCheck;
  limiter: RateLimiter;
  /** An organisation's budgets changed here: this instance's budget book forgets them now (others by notice). */
  budgetsChanged?: (accountId: string) => void;
  /** ALERT_WEBHOOK_ALLOW_PRIVATE: an organisation's webhook may be at a private address (and http). */
  alertWebhooksAllowPrivate?: boolean;
}

/** Who may act on one organisation, as the access check found them. */
export interface Access {
  actor: Actor;
  accountId: string;
  /** 'operator' for the operator. */
  role: Role | 'operator';
  /** The acting member ('' for the operator). */
  memberId: string;
}

export const organisationNotFound = () => notFound('organisation_not_found', 'No organisation has this id.');

export const operatorOnly = () =>
  gatewayError({
    httpStatus: 403,
    type: 'permission_error',
    code: 'operator_only',
    message: 'Only the operator may do this.',
  });

export const ROLE_TO_ENUM: Record<Role, RoleEnum> = {
  owner: RoleEnum.OWNER,
  admin: RoleEnum.ADMIN,
  billing: RoleEnum.BILLING,
  member: RoleEnum.MEMBER,
};

export function roleFrom(v: RoleEnum, param = 'role'): Role {
  const found = (Object.entries(ROLE_TO_ENUM) as [Role, RoleEnum][]).find(([, e]) => e === v);
  if (!found) throw badRequest(`${param} must be owner, admin, billing or member`, 'invalid_value', param);
  return found[0];
}

export const SPEND_BY: Partial<Record<SpendGrouping, SpendBy>> = {
  [SpendGrouping.UNSPECIFIED]: 'member',
  [SpendGrouping.TEAM]: 'team',
  [SpendGrouping.MEMBER]: 'member',
  [SpendGrouping.KEY]: 'key',
  [SpendGrouping.MODEL]: 'model',
  [SpendGrouping.DAY]: 'day',
  [SpendGrouping.DAY_AND_MODEL]: 'day_and_model',
};

export const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);
export const dateOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : undefined);

export function summary(o: OrganisationFigures): MessageInitShape<typeof OrganisationSummarySchema> {
  return {
    id: o.id,
    name: o.name,
    balanceNano: o.balanceNano,
    heldNano: o.heldNano,
    availableNano: o.balanceNano - o.heldNano,
    members: o.members,
    teams: o.teams,
    liveKeys: o.liveKeys,
    createdAt: timestampFromDate(o.createdAt),
    myRole: o.role ? ROLE_TO_ENUM[o.role] : RoleEnum.UNSPECIFIED,
    // A member's figures carry their role; the operator's none, and the operator may do everything.
    allowedActions: o.role ? ACTIONS.filter((a) => may(o.role!, a)) : [...ACTIONS],
  };
}

export const memberMessage = (m: MemberRow): MessageInitShape<typeof MemberSchema> => ({
  memberId: m.memberId,
  name: m.name,
  role: ROLE_TO_ENUM[m.role],
  teamIds: m.teamIds,
  liveKeys: m.liveKeys,
  joinedAt: timestampFromDate(m.joinedAt),
  telegram: m.telegram,
});

export const teamMessage = (t: TeamRow): MessageInitShape<typeof TeamSchema> => ({
  teamId: t.teamId,
  name: t.name,
  members: t.members,
  liveKeys: t.liveKeys,
  createdAt: timestampFromDate(t.createdAt),
});

export const invitationMessage = (i: InvitationRow): MessageInitShape<typeof InvitationSchema> => ({
  id: i.id,
  role: ROLE_TO_ENUM[i.role],
  teamId: i.teamId,
  note: i.note,
  createdBy: i.createdBy,
  createdAt: timestampFromDate(i.createdAt),
  expiresAt: timestampFromDate(i.expiresAt),
  state: i.state,
  usedByMemberId: i.usedBy,
});

export const keyMessage = (k: OrgKeyRow): MessageInitShape<typeof OrganisationKeySchema> => ({
  keyId: k.keyId,
  prefix: k.prefix,
  name: k.name,
  memberId: k.memberId,
  memberName: k.memberName,
  teamId: k.teamId,
  teamName: k.teamName,
  createdAt: timestampFromDate(k.createdAt),
  revokedAt: ts(k.revokedAt),
});

/** The access checks every method starts with (docs/organisations.md#roles). */
export function accessChecks(deps: OrganisationDeps) {
  const { db } = deps;

  /** The member the actor is ('' for the operator), or a refusal for a team key. */
  async function actingMember(actor: Actor): Promise<string> {
    switch (actor.kind) {
      case 'operator':
        return '';
      case 'member':
        return actor.memberId;
      case 'telegram':
        return (await memberByTelegram(db, actor.telegramUser)) ?? '';
      case 'team_key':
        throw gatewayError({
          httpStatus: 403,
          type: 'permission_error',
          code: 'team_key',
          message: "A team's key acts for no member: call with a member's own key.",
        });
      case 'invitee':
        throw gatewayError({
          httpStatus: 403,
          type: 'permission_error',
          code: 'not_a_member',
          message: 'Only a member may do this: redeem the invitation first.',
        });
    }
  }

  /** The one access check: the organisation exists and is the actor's, and their role allows `action`. */
  async function access(ctx: HandlerContext, accountId: string, action: Action): Promise<Access> {
    const actor = actorOf(ctx);
    if (!accountId) throw badRequest('organisation_id is required', 'missing_required_parameter', 'organisation_id');
    const memberId = await actingMember(actor);
    if (actor.kind === 'operator') {
      if (!(await organisationExists(db, accountId))) throw organisationNotFound();
      return { actor, accountId, role: 'operator', memberId: '' };
    }
    const role = memberId ? await roleOf(db, accountId, memberId) : undefined;
    if (!role) throw organisationNotFound();
    if (!may(role, action)) throw notAllowed(action, role);
    return { actor, accountId, role, memberId };
  }

  /** An action on the caller's own things, or on anyone's: `own` when the target is the caller. */
  async function accessFor(ctx: HandlerContext, accountId: string, own: Action, any: Action, targetMember: string) {
    const actor = actorOf(ctx);
    const self = await actingMember(actor);
    return access(ctx, accountId, self !== '' && targetMember === self ? own : any);
  }

  /** After a key changed here: this instance forgets it at once (others by the key row's notice). */
  const keyChanged = (keyId: string) => {
    deps.keys.forget(keyId);
    deps.limiter.keyChanged(keyId);
  };

  /** A key action: on the caller's own personal key, or (keys.manage) on any key of the organisation. */
  async function keyAccess(ctx: HandlerContext, accountId: string, keyId: string): Promise<Access> {
    const self = await actingMember(actorOf(ctx));
    // Reading the key before the role check tells nothing: a key of another organisation is 404 either way.
    const a0 = await access(ctx, accountId, 'organisation.read');
    const key = await orgKey(db, a0.accountId, keyId);
    return access(ctx, accountId, self !== '' && key.memberId === self ? 'keys.manage_own' : 'keys.manage');
  }

  /** Spend: the whole organisation's for roles that may read it, else the caller's own. */
  async function accessOwnOr(ctx: HandlerContext, accountId: string, action: Action) {
    const a = await access(ctx, accountId, 'organisation.read');
    if (a.role === 'operator' || may(a.role, action)) return { ...a, ownOnly: false };
    return { ...(await access(ctx, accountId, 'spend.read_own')), ownOnly: true };
  }

  return { actingMember, access, accessFor, keyAccess, accessOwnOr, keyChanged };
}

export type AccessChecks = ReturnType<typeof accessChecks>;
