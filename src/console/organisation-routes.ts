// An organisation's pages' routes (docs/console.md#api): its summary and name, spend by team,
// member, key, model or day, members (roles, removal, sign-in links), invitations, teams and their
// members, keys (whose each is; create, rotate, revoke), budgets (budget-routes.ts) and the audit
// log (and its CSV).
//
// Every route is a call to OrganisationService, made as the session's member or as the operator
// (the ACTOR context value): the service's one access check decides what each role may do and
// answers another organisation's ids as no ids at all; the console decides nothing of it. The
// same routes serve two scopes:
//
// - a member's session, under /org: their own organisation, always the session's (no request
//   names it);
// - the operator's, under /admin/organisations/:org (with the organisation's money routes too,
//   which a member reaches at the account routes of holder-routes.ts), and the list of every
//   organisation at /admin/organisations.
//
// Each answers a shape of web/wire-types.ts, the page's own.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { API, access, actorOf, asActor, type RouteKit } from './kit.ts';
import {
  AUDIT_CSV_HEADER,
  auditCsvLine,
  auditRow,
  invitationRow,
  memberRow,
  organisation,
  orgKeyRow,
  roleOf,
  SPEND_BY,
  spendRow,
  teamRow,
} from './org-wire.ts';
import {
  type OrgAsk,
  orgDailyUsage,
  orgLedgerPage,
  orgRequestsPage,
  sendOrgRequestsCsv,
  sendPagedCsv,
} from './org-money.ts';
import { registerBudgets } from './budget-routes.ts';
import { sessionCookieOf } from './sessions.ts';
import { addDays, endOfUtcDay, intParam, invalid, iso, jsonObject, param, type Query } from './wire.ts';
import type {
  AuditRow,
  InvitationRequest,
  InvitationRow,
  MemberRow,
  NewInvitation,
  NewKeyRequest,
  NewOrgKey,
  Organisation,
  OrgKeyRow,
  Page,
  RemoveMemberAnswer,
  RemoveMemberRequest,
  RenameRequest,
  RevokedKey,
  SetRoleRequest,
  SignInLink,
  SpendBy,
  SpendReport,
  TeamMemberRequest,
  TeamNameRequest,
  TeamRow,
} from './web/wire-types.ts';

/** Where an organisation's routes are, who may call them, and which organisation a request names. */
interface Scope {
  prefix: string;
  access: ReturnType<typeof access>;
  ask: (req: FastifyRequest) => OrgAsk;
}

type Params = { Params: { org?: string; id: string; member: string } };

export function registerOrganisationRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { orgs, sessionOf } = kit;
  const askOf =
    (organisationOf: (req: FastifyRequest) => string) =>
    (req: FastifyRequest): OrgAsk => ({
      organisationId: organisationOf(req),
      as: asActor(actorOf(req, sessionOf(req))),
    });
  const member: Scope = {
    prefix: `${API}/org`,
    access: access('member'),
    ask: askOf((req) => sessionOf(req).accountId),
  };
  const operator: Scope = {
    prefix: `${API}/admin/organisations/:org`,
    access: access('operator'),
    ask: askOf((req) => (req.params as { org: string }).org),
  };
  for (const scope of [member, operator]) {
    registerSummary(app, kit, scope);
    registerMembers(app, kit, scope);
    registerInvitations(app, kit, scope);
    registerTeams(app, kit, scope);
    registerKeys(app, kit, scope);
    registerBudgets(app, kit, scope);
  }

  // The operator: every organisation (an id, or text in the name), newest first.
  app.get(`${API}/admin/organisations`, access('operator'), async (req): Promise<Page<Organisation>> => {
    const q = req.query as Query;
    const r = await orgs.listOrganisations(
      {
        query: param(q, 'q') ?? '',
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      asActor(actorOf(req, sessionOf(req))),
    );
    return { rows: r.organisations.map(organisation), next_cursor: r.nextCursor };
  });
  // The operator's view of an organisation's money (a member's is at the account routes).
  const { prefix, ask } = operator;
  app.get(`${prefix}/usage/daily`, operator.access, async (req) => orgDailyUsage(orgs, ask(req), req.query as Query));
  app.get(`${prefix}/requests`, operator.access, async (req) => orgRequestsPage(orgs, ask(req), req.query as Query));
  app.get(`${prefix}/requests.csv`, operator.access, async (req, reply) =>
    sendOrgRequestsCsv(orgs, reply, ask(req), req.query as Query),
  );
  app.get(`${prefix}/ledger`, operator.access, async (req) => orgLedgerPage(orgs, ask(req), req.query as Query));
}

/** A text field of a body: a string of at most `max` characters ('' when absent and not required). */
function text(body: Record<string, unknown>, name: string, max = 1000, required = false): string {
  const v = body[name];
  if (v === undefined || v === null) {
    if (required) throw invalid(name, 'required');
    return '';
  }
  if (typeof v !== 'string' || v.length > max) throw invalid(name, `a string of at most ${max} characters`);
  return v;
}

/** An id the address names (Fastify has decoded it; the service answers one not of the organisation with 404). */
const idOf = (req: FastifyRequest, name: 'id' | 'member' = 'id'): string => (req.params as Params['Params'])[name];

function registerSummary(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: Scope): void {
  const { orgs } = kit;
  app.get(prefix, access, async (req): Promise<Organisation> => {
    const a = ask(req);
    return organisation((await orgs.getOrganisation({ organisationId: a.organisationId }, a.as)).organisation!);
  });

  app.post(`${prefix}/rename`, access, async (req): Promise<Organisation> => {
    const body = jsonObject<RenameRequest>(req.body);
    const a = ask(req);
    const r = await orgs.renameOrganisation({ organisationId: a.organisationId, name: text(body, 'name') }, a.as);
    return organisation(r.organisation!);
  });

  // Spend over the last `days` UTC days (today included), grouped (as the role may see it).
  app.get(`${prefix}/spend`, access, async (req): Promise<SpendReport> => {
    const q = req.query as Query;
    const by = (param(q, 'by', 10) ?? 'member') as SpendBy;
    if (!Object.hasOwn(SPEND_BY, by)) throw invalid('by', 'team, member, key, model or day');
    const days = intParam(q, 'days', 30, 1, 366);
    const to = endOfUtcDay();
    const from = addDays(to, -days);
    const a = ask(req);
    const r = await orgs.getSpend(
      { organisationId: a.organisationId, from: timestampFromDate(from), to: timestampFromDate(to), by: SPEND_BY[by] },
      a.as,
    );
    return {
      from: from.toISOString(),
      to: to.toISOString(),
      by,
      rows: r.rows.map(spendRow),
      total: r.total ? spendRow(r.total) : null,
    };
  });

  app.get(`${prefix}/audit`, access, async (req): Promise<Page<AuditRow>> => {
    const a = ask(req);
    const q = req.query as Query;
    const r = await orgs.listAuditLog(
      {
        organisationId: a.organisationId,
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      a.as,
    );
    return { rows: r.entries.map(auditRow), next_cursor: r.nextCursor };
  });

  app.get(`${prefix}/audit.csv`, access, async (req, reply) => {
    const a = ask(req);
    return sendPagedCsv(reply, 'audit.csv', AUDIT_CSV_HEADER, auditCsvLine, async (cursor) => {
      const r = await orgs.listAuditLog({ organisationId: a.organisationId, cursor, pageSize: 500 }, a.as);
      return { rows: r.entries, next: r.nextCursor };
    });
  });
}

function registerMembers(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: Scope): void {
  const { orgs } = kit;
  app.get(`${prefix}/members`, access, async (req): Promise<Page<MemberRow>> => {
    const a = ask(req);
    const q = req.query as Query;
    const r = await orgs.listMembers(
      {
        organisationId: a.organisationId,
        query: param(q, 'q') ?? '',
        teamId: param(q, 'team_id', 100) ?? '',
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      a.as,
    );
    return { rows: r.members.map(memberRow), next_cursor: r.nextCursor };
  });

  app.post(`${prefix}/members/:id/role`, access, async (req): Promise<MemberRow> => {
    const body = jsonObject<SetRoleRequest>(req.body);
    const a = ask(req);
    const r = await orgs.setMemberRole(
      { organisationId: a.organisationId, memberId: idOf(req), role: roleOf(body.role) },
      a.as,
    );
    return memberRow(r.member!);
  });

  // Removal: the member's keys are revoked, or handed to one other member or team (the admin's choice).
  app.post(`${prefix}/members/:id/remove`, access, async (req): Promise<RemoveMemberAnswer> => {
    const body = jsonObject<RemoveMemberRequest>(req.body);
    const a = ask(req);
    const r = await orgs.removeMember(
      {
        organisationId: a.organisationId,
        memberId: idOf(req),
        handKeysToMemberId: text(body, 'hand_keys_to_member_id', 100),
        handKeysToTeamId: text(body, 'hand_keys_to_team_id', 100),
      },
      a.as,
    );
    return { keys_revoked: r.keysRevoked, keys_handed_over: r.keysHandedOver, sessions_ended: r.sessionsEnded };
  });

  app.post(`${prefix}/members/:id/sign-in-link`, access, async (req): Promise<SignInLink> => {
    const a = ask(req);
    const r = await orgs.createMemberSignInLink({ organisationId: a.organisationId, memberId: idOf(req) }, a.as);
    return { token: r.token, expires_at: iso(r.expiresAt) };
  });
}

function registerInvitations(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: Scope): void {
  const { orgs } = kit;
  app.get(`${prefix}/invitations`, access, async (req): Promise<Page<InvitationRow>> => {
    const a = ask(req);
    const q = req.query as Query;
    const r = await orgs.listInvitations(
      {
        organisationId: a.organisationId,
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      a.as,
    );
    return { rows: r.invitations.map(invitationRow), next_cursor: r.nextCursor };
  });

  // The token is shown once: the page makes the link (/console/#invite=<token>) from its own address.
  app.post(`${prefix}/invitations`, access, async (req): Promise<NewInvitation> => {
    const body = jsonObject<InvitationRequest>(req.body);
    const hours = body.valid_hours ?? 0;
    if (typeof hours !== 'number' || !Number.isInteger(hours) || hours < 0)
      throw invalid('valid_hours', 'a whole number of hours (72 when 0 or absent, at most 720)');
    const a = ask(req);
    const r = await orgs.createInvitation(
      {
        organisationId: a.organisationId,
        role: roleOf(body.role),
        teamId: text(body, 'team_id', 100),
        note: text(body, 'note'),
        validHours: hours,
      },
      a.as,
    );
    return { invitation: invitationRow(r.invitation!), token: r.token };
  });

  app.post(`${prefix}/invitations/:id/revoke`, access, async (req): Promise<InvitationRow> => {
    const a = ask(req);
    const r = await orgs.revokeInvitation({ organisationId: a.organisationId, invitationId: idOf(req) }, a.as);
    return invitationRow(r.invitation!);
  });
}

function registerTeams(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: Scope): void {
  const { orgs } = kit;
  app.get(`${prefix}/teams`, access, async (req): Promise<Page<TeamRow>> => {
    const a = ask(req);
    const q = req.query as Query;
    const r = await orgs.listTeams(
      {
        organisationId: a.organisationId,
        query: param(q, 'q') ?? '',
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      a.as,
    );
    return { rows: r.teams.map(teamRow), next_cursor: r.nextCursor };
  });

  app.post(`${prefix}/teams`, access, async (req): Promise<TeamRow> => {
    const body = jsonObject<TeamNameRequest>(req.body);
    const a = ask(req);
    return teamRow((await orgs.createTeam({ organisationId: a.organisationId, name: text(body, 'name') }, a.as)).team!);
  });

  app.post(`${prefix}/teams/:id/rename`, access, async (req): Promise<TeamRow> => {
    const body = jsonObject<TeamNameRequest>(req.body);
    const a = ask(req);
    const r = await orgs.renameTeam(
      { organisationId: a.organisationId, teamId: idOf(req), name: text(body, 'name') },
      a.as,
    );
    return teamRow(r.team!);
  });

  app.post(`${prefix}/teams/:id/delete`, access, async (req): Promise<{ deleted: boolean }> => {
    const a = ask(req);
    return { deleted: (await orgs.deleteTeam({ organisationId: a.organisationId, teamId: idOf(req) }, a.as)).deleted };
  });

  app.post(`${prefix}/teams/:id/members`, access, async (req): Promise<{ added: boolean }> => {
    const body = jsonObject<TeamMemberRequest>(req.body);
    const a = ask(req);
    const r = await orgs.addTeamMember(
      { organisationId: a.organisationId, teamId: idOf(req), memberId: text(body, 'member_id', 100, true) },
      a.as,
    );
    return { added: r.added };
  });

  app.post(`${prefix}/teams/:id/members/:member/remove`, access, async (req): Promise<{ removed: boolean }> => {
    const a = ask(req);
    const r = await orgs.removeTeamMember(
      { organisationId: a.organisationId, teamId: idOf(req), memberId: idOf(req, 'member') },
      a.as,
    );
    return { removed: r.removed };
  });
}

function registerKeys(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: Scope): void {
  const { orgs, sessionOf } = kit;
  // `mine=1`: the session's member's own keys (what every role may list); else the organisation's (keys.read).
  app.get(`${prefix}/keys`, access, async (req): Promise<Page<OrgKeyRow>> => {
    const a = ask(req);
    const q = req.query as Query;
    const mine = param(q, 'mine', 1) === '1';
    const r = await orgs.listOrganisationKeys(
      {
        organisationId: a.organisationId,
        memberId: mine ? sessionOf(req).memberId : (param(q, 'member_id', 100) ?? ''),
        teamId: param(q, 'team_id', 100) ?? '',
        includeRevoked: param(q, 'revoked', 1) === '1',
        cursor: param(q, 'cursor', 400) ?? '',
        pageSize: intParam(q, 'limit', 50, 1, 200),
      },
      a.as,
    );
    return { rows: r.keys.map(orgKeyRow), next_cursor: r.nextCursor };
  });

  app.post(`${prefix}/keys`, access, async (req): Promise<NewOrgKey> => {
    const body = jsonObject<NewKeyRequest>(req.body);
    const a = ask(req);
    const r = await orgs.createOrganisationKey(
      {
        organisationId: a.organisationId,
        memberId: text(body, 'member_id', 100),
        teamId: text(body, 'team_id', 100),
        name: text(body, 'name'),
      },
      a.as,
    );
    return { key: orgKeyRow(r.key!), api_key: r.apiKey };
  });

  app.post(`${prefix}/keys/:id/revoke`, access, async (req): Promise<RevokedKey> => {
    const a = ask(req);
    const r = await orgs.revokeOrganisationKey({ organisationId: a.organisationId, keyId: idOf(req) }, a.as);
    return { revoked: r.revoked };
  });

  app.post(`${prefix}/keys/:id/rotate`, access, async (req): Promise<NewOrgKey> => {
    const a = ask(req);
    const r = await orgs.rotateOrganisationKey({ organisationId: a.organisationId, keyId: idOf(req) }, a.as);
    // The session's own key: the session goes on with the new one, as a rotation on the Key page does.
    const s = sessionOf(req);
    if (s.keyId && s.keyId === r.revokedKeyId) await kit.deps.sessions.moveToKey(sessionCookieOf(req)!, r.key!.keyId);
    return { key: orgKeyRow(r.key!), api_key: r.apiKey };
  });
}
