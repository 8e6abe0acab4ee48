// OrganisationService (docs/organisations.md): organisations, members, roles, teams, keys,
// invitations, spend and the audit log, in groups of methods. Every method starts with the one
// access check of organisation-access.ts.
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { type OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { badRequest, gatewayError } from '../errors/errors.ts';
import { type Actor, actorOf, isTelegramUser } from '../organisations/actor.ts';
import { notAllowed, type Role } from '../organisations/roles.ts';
import { cleanName } from '../organisations/names.ts';
import {
  createOrganisation,
  figures,
  listOrganisations,
  memberName,
  membershipsOf,
  renameOrganisation,
} from '../organisations/organisations.ts';
import { listMembers, memberOf, removeMember, setRole } from '../organisations/members.ts';
import {
  addTeamMember,
  createTeam,
  deleteTeam,
  listTeams,
  removeTeamMember,
  renameTeam,
  teamOf,
} from '../organisations/teams.ts';
import { createInvitation, listInvitations, redeemInvitation, revokeInvitation } from '../organisations/invitations.ts';
import { createOrgKey, listOrgKeys, revokeOrgKey, rotateOrgKey } from '../organisations/org-keys.ts';
import { organisationUsage, spend, spendWindow } from '../organisations/spend.ts';
import { listAudit } from '../organisations/audit.ts';
import { createMemberLink } from '../billing/console-sessions.ts';
import { timestampFromMicros } from '../billing/usage-log.ts';
import { ledgerPage } from './ledger-page.ts';
import {
  accessChecks,
  dateOf,
  invitationMessage,
  keyMessage,
  memberMessage,
  operatorOnly,
  ROLE_TO_ENUM,
  roleFrom,
  SPEND_BY,
  summary,
  teamMessage,
  type AccessChecks,
  type OrganisationDeps,
} from './organisation-access.ts';
import { budgetMethods } from './organisation-budgets.ts';
import { limitMethods } from './organisation-limits.ts';

export function organisationService(deps: OrganisationDeps): ServiceImpl<typeof OrganisationService> {
  const c = accessChecks(deps);
  return {
    ...organisationMethods(deps, c),
    ...memberMethods(deps, c),
    ...invitationMethods(deps, c),
    ...teamMethods(deps, c),
    ...keyMethods(deps, c),
    ...spendMethods(deps, c),
    ...budgetMethods(deps, c),
    ...limitMethods(deps, c),
  };
}

function organisationMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'whoAmI' | 'createOrganisation' | 'listOrganisations' | 'getOrganisation' | 'renameOrganisation'
> {
  const { actingMember, access } = c;
  const { db } = deps;
  return {
    async whoAmI(_req, ctx) {
      const actor = actorOf(ctx);
      if (actor.kind === 'operator') return { operator: true };
      if (actor.kind === 'team_key') return { teamKeyId: actor.keyId };
      const memberId = await actingMember(actor);
      if (!memberId) return {};
      const memberships = await membershipsOf(db, memberId);
      return {
        memberId,
        memberName: (await memberName(db, memberId)) ?? '',
        memberships: memberships.map((m) => ({
          organisationId: m.accountId,
          organisationName: m.name,
          role: ROLE_TO_ENUM[m.role],
        })),
      };
    },

    async createOrganisation(req, ctx) {
      const actor = actorOf(ctx);
      if (actor.kind !== 'operator') throw operatorOnly();
      const name = cleanName(req.name, 'name');
      const ownerTelegram = req.ownerTelegramUser.trim();
      if (ownerTelegram && !isTelegramUser(ownerTelegram))
        throw badRequest('owner_telegram_user is "telegram:<user id>"', 'invalid_value', 'owner_telegram_user');
      const ownerName = cleanName(req.ownerName, 'owner_name', { optional: Boolean(ownerTelegram) });
      const made = await createOrganisation(db, actor, { name, ownerName, ownerTelegram });
      let ownerApiKey = '';
      if (req.createOwnerKey)
        ownerApiKey = (await createOrgKey(db, deps.ledger, actor, made.accountId, { memberId: made.ownerMemberId }, ''))
          .apiKey;
      return {
        organisation: summary(await figures(db, made.accountId)),
        ownerMemberId: made.ownerMemberId,
        ownerApiKey,
      };
    },

    async listOrganisations(req, ctx) {
      const actor = actorOf(ctx);
      const memberId = await actingMember(actor);
      if (actor.kind !== 'operator' && !memberId) return { organisations: [], nextCursor: '' };
      const r = await listOrganisations(db, {
        ...(actor.kind === 'operator' ? {} : { memberId }),
        query: actor.kind === 'operator' ? req.query : '',
        pageSize: req.pageSize,
        cursor: req.cursor,
      });
      return { organisations: r.organisations.map(summary), nextCursor: r.nextCursor };
    },

    async getOrganisation(req, ctx) {
      const a = await access(ctx, req.organisationId, 'organisation.read');
      return { organisation: summary(await figures(db, a.accountId, a.memberId)) };
    },

    async renameOrganisation(req, ctx) {
      const a = await access(ctx, req.organisationId, 'organisation.rename');
      await renameOrganisation(db, a.actor, a.accountId, cleanName(req.name, 'name'));
      return { organisation: summary(await figures(db, a.accountId, a.memberId)) };
    },
  };
}

function memberMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'listMembers' | 'setMemberRole' | 'removeMember' | 'createMemberSignInLink'
> {
  const { actingMember, access, accessFor, keyChanged } = c;
  const { db } = deps;
  return {
    async listMembers(req, ctx) {
      const a = await access(ctx, req.organisationId, 'members.read');
      const r = await listMembers(db, a.accountId, {
        query: req.query,
        pageSize: req.pageSize,
        cursor: req.cursor,
        teamId: req.teamId,
      });
      return { members: r.members.map(memberMessage), nextCursor: r.nextCursor };
    },

    async setMemberRole(req, ctx) {
      const a = await access(ctx, req.organisationId, 'members.set_role');
      const role = roleFrom(req.role);
      if (a.memberId && req.memberId === a.memberId && a.role !== 'owner')
        throw notAllowed('members.set_role', a.role as Role);
      await setRole(db, a.actor, a.role, a.accountId, req.memberId, role);
      return { member: memberMessage(await memberOf(db, a.accountId, req.memberId)) };
    },

    async removeMember(req, ctx) {
      const a = await access(ctx, req.organisationId, 'members.remove');
      const r = await removeMember(db, a.actor, a.role, a.accountId, req.memberId, {
        memberId: req.handKeysToMemberId,
        teamId: req.handKeysToTeamId,
      });
      for (const k of r.keyIds) keyChanged(k);
      return { keysRevoked: r.keysRevoked, keysHandedOver: r.keysHandedOver, sessionsEnded: r.sessionsEnded };
    },

    async createMemberSignInLink(req, ctx) {
      const self = await actingMember(actorOf(ctx));
      const target = req.memberId || self;
      if (!target) throw badRequest('member_id is required', 'missing_required_parameter', 'member_id');
      const a = await accessFor(ctx, req.organisationId, 'organisation.read', 'members.sign_in_link', target);
      await memberOf(db, a.accountId, target);
      const link = await createMemberLink(db, { accountId: a.accountId, memberId: target });
      return { token: link.token, expiresAt: timestampFromDate(link.expiresAt) };
    },
  };
}

function invitationMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'createInvitation' | 'listInvitations' | 'revokeInvitation' | 'redeemInvitation'
> {
  const { actingMember, access } = c;
  const { db } = deps;
  return {
    async createInvitation(req, ctx) {
      const a = await access(ctx, req.organisationId, 'invitations.create');
      const role = roleFrom(req.role);
      if (role === 'owner' && a.role !== 'owner' && a.role !== 'operator')
        throw gatewayError({
          httpStatus: 403,
          type: 'permission_error',
          code: 'not_allowed',
          message: 'Not allowed: only an owner may invite an owner.',
        });
      const r = await createInvitation(db, a.actor, a.accountId, {
        role,
        teamId: req.teamId,
        note: cleanName(req.note, 'note', { optional: true }),
        validHours: req.validHours,
        createdBy: a.memberId ? `member:${a.memberId}` : 'operator',
      });
      return { invitation: invitationMessage(r.invitation), token: r.token };
    },

    async listInvitations(req, ctx) {
      const a = await access(ctx, req.organisationId, 'invitations.read');
      const r = await listInvitations(db, a.accountId, { pageSize: req.pageSize, cursor: req.cursor });
      return { invitations: r.invitations.map(invitationMessage), nextCursor: r.nextCursor };
    },

    async revokeInvitation(req, ctx) {
      const a = await access(ctx, req.organisationId, 'invitations.revoke');
      return { invitation: invitationMessage(await revokeInvitation(db, a.actor, a.accountId, req.invitationId)) };
    },

    async redeemInvitation(req, ctx) {
      const actor = actorOf(ctx);
      if (actor.kind === 'team_key') await actingMember(actor);
      const who =
        actor.kind === 'member'
          ? { memberId: actor.memberId, name: '' }
          : actor.kind === 'telegram'
            ? { telegramUser: actor.telegramUser, name: cleanName(req.name, 'name', { optional: true }) }
            : { name: cleanName(req.name, 'name') };
      const r = await redeemInvitation(db, actor, req.token.trim(), who);
      let apiKey = '';
      let keyId = '';
      if (req.createKey) {
        // Someone who was nobody until now makes their first key as the member they became.
        const maker: Actor = actor.kind === 'invitee' ? { ...actor, kind: 'member', memberId: r.memberId } : actor;
        const made = await createOrgKey(db, deps.ledger, maker, r.accountId, { memberId: r.memberId }, '');
        apiKey = made.apiKey;
        keyId = made.key.keyId;
      }
      return {
        organisationId: r.accountId,
        organisationName: r.organisationName,
        memberId: r.memberId,
        role: ROLE_TO_ENUM[r.role],
        apiKey,
        keyId,
      };
    },
  };
}

function teamMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'createTeam' | 'renameTeam' | 'deleteTeam' | 'listTeams' | 'addTeamMember' | 'removeTeamMember'
> {
  const { access } = c;
  const { db } = deps;
  return {
    async createTeam(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.manage');
      const id = await createTeam(db, a.actor, a.accountId, cleanName(req.name, 'name'));
      return { team: teamMessage(await teamOf(db, a.accountId, id)) };
    },

    async renameTeam(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.manage');
      await renameTeam(db, a.actor, a.accountId, req.teamId, cleanName(req.name, 'name'));
      return { team: teamMessage(await teamOf(db, a.accountId, req.teamId)) };
    },

    async deleteTeam(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.manage');
      await deleteTeam(db, a.actor, a.accountId, req.teamId);
      return { deleted: true };
    },

    async listTeams(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.read');
      const r = await listTeams(db, a.accountId, { query: req.query, pageSize: req.pageSize, cursor: req.cursor });
      return { teams: r.teams.map(teamMessage), nextCursor: r.nextCursor };
    },

    async addTeamMember(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.manage');
      return { added: await addTeamMember(db, a.actor, a.accountId, req.teamId, req.memberId) };
    },

    async removeTeamMember(req, ctx) {
      const a = await access(ctx, req.organisationId, 'teams.manage');
      return { removed: await removeTeamMember(db, a.actor, a.accountId, req.teamId, req.memberId) };
    },
  };
}

function keyMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'createOrganisationKey' | 'listOrganisationKeys' | 'revokeOrganisationKey' | 'rotateOrganisationKey'
> {
  const { actingMember, access, accessFor, keyAccess, keyChanged } = c;
  const { db } = deps;
  return {
    async createOrganisationKey(req, ctx) {
      if (req.memberId && req.teamId)
        throw badRequest('a key belongs to a member or to a team, not both', 'invalid_value', 'team_id');
      const self = await actingMember(actorOf(ctx));
      const target = req.teamId ? '' : req.memberId || self;
      if (!req.teamId && !target)
        throw badRequest('name the key holder: member_id or team_id', 'missing_required_parameter', 'member_id');
      const a = await accessFor(ctx, req.organisationId, 'keys.manage_own', 'keys.manage', target);
      const holder = req.teamId ? { teamId: req.teamId } : { memberId: target };
      const r = await createOrgKey(
        db,
        deps.ledger,
        a.actor,
        a.accountId,
        holder,
        cleanName(req.name, 'name', { optional: true }),
      );
      return { key: keyMessage(r.key), apiKey: r.apiKey };
    },

    async listOrganisationKeys(req, ctx) {
      const self = await actingMember(actorOf(ctx));
      const ownOnly = self !== '' && req.memberId === self && !req.teamId;
      const a = await access(ctx, req.organisationId, ownOnly ? 'keys.manage_own' : 'keys.read');
      const r = await listOrgKeys(db, a.accountId, {
        memberId: req.memberId,
        teamId: req.teamId,
        includeRevoked: req.includeRevoked,
        pageSize: req.pageSize,
        cursor: req.cursor,
      });
      return { keys: r.keys.map(keyMessage), nextCursor: r.nextCursor };
    },

    async revokeOrganisationKey(req, ctx) {
      const a = await keyAccess(ctx, req.organisationId, req.keyId);
      const revoked = await revokeOrgKey(db, a.actor, a.accountId, req.keyId);
      if (revoked) keyChanged(req.keyId);
      return { revoked };
    },

    async rotateOrganisationKey(req, ctx) {
      const a = await keyAccess(ctx, req.organisationId, req.keyId);
      const r = await rotateOrgKey(db, deps.ledger, a.actor, a.accountId, req.keyId);
      keyChanged(req.keyId);
      return { key: keyMessage(r.key), apiKey: r.apiKey, revokedKeyId: req.keyId };
    },
  };
}

function spendMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'getSpend' | 'listOrganisationUsage' | 'listOrganisationLedger' | 'listAuditLog'
> {
  const { access, accessOwnOr } = c;
  const { db } = deps;
  return {
    async getSpend(req, ctx) {
      const by = SPEND_BY[req.by];
      if (!by) throw badRequest('by is not a known grouping', 'invalid_value', 'by');
      const a = await accessOwnOr(ctx, req.organisationId, 'spend.read');
      const window = spendWindow(dateOf(req.from), dateOf(req.to));
      const r = await spend(db, a.accountId, { ...window, by, ...(a.ownOnly ? { memberId: a.memberId } : {}) });
      return { rows: r.rows, total: r.total };
    },

    async listOrganisationUsage(req, ctx) {
      const a = await accessOwnOr(ctx, req.organisationId, 'spend.read');
      const from = dateOf(req.from);
      const to = dateOf(req.to);
      const r = await organisationUsage(db, a.accountId, {
        memberId: a.ownOnly ? a.memberId : req.memberId,
        teamId: req.teamId,
        keyId: req.keyId,
        model: req.model,
        route: req.route,
        status: req.status,
        ...(from ? { from } : {}),
        ...(to ? { to } : {}),
        pageSize: req.pageSize,
        cursor: req.cursor,
      });
      return {
        records: r.records.map((u) => ({ ...u, createdAt: timestampFromMicros(BigInt(u.atMicros)) })),
        nextCursor: r.nextCursor,
      };
    },

    async listOrganisationLedger(req, ctx) {
      const a = await access(ctx, req.organisationId, 'spend.read');
      return ledgerPage(deps.ledger, a.accountId, req);
    },

    async listAuditLog(req, ctx) {
      const a = await access(ctx, req.organisationId, 'audit.read');
      const r = await listAudit(db, a.accountId, { pageSize: req.pageSize, cursor: req.cursor });
      return { entries: r.entries.map((e) => ({ ...e, at: timestampFromDate(e.at) })), nextCursor: r.nextCursor };
    },
  };
}
