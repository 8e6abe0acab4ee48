// Every action of OrganisationService tried by every role (docs/organisations.md#roles): what the
// table below allows succeeds, what it does not is refused with 403 not_allowed and writes nothing
// (the audit log, which every change appends to in its own transaction, is unchanged). The table
// is the policy stated a second time, apart from the code's (src/organisations/roles.ts), so a
// change to either that the other does not share fails here. Reading spend is allowed to every
// role, and what each reads is checked too: the whole organisation's with `spend.read`, else only
// the caller's own (`spend.read_own`). A top-up (`billing.top_up`) is no OrganisationService call:
// it is paid in the bot, where every role tries it (bot-organisations.test.ts).
import { beforeAll, describe, expect, it } from 'vitest';
import { Role, SpendGrouping } from '../../src/gen/gateway/v1/organisations_pb.js';
import { ACTIONS, PERMISSIONS, may } from '../../src/organisations/roles.ts';
import { db, openai, waitForUsage } from '../support/context.ts';
import {
  budgetSpec,
  newOrganisation,
  orgs,
  refused,
  ROLE_NAMES,
  type RoleName,
  type TestOrg,
} from '../support/organisations.ts';

const all: RoleName[] = ['owner', 'admin', 'billing', 'member'];
const managers: RoleName[] = ['owner', 'admin'];
const readers: RoleName[] = ['owner', 'admin', 'billing'];

/** Each call as a role makes it: the organisation, the role's own member and key, and the owner to set things up. */
interface Ctx {
  org: TestOrg;
  as: RoleName;
}

/** A new member of the organisation to act on, made by the owner (so removing or demoting one harms no one). */
async function someoneNew(org: TestOrg): Promise<string> {
  const inv = await org.people.owner.client.createInvitation({ organisationId: org.id, role: Role.MEMBER });
  return (await orgs().redeemInvitation({ token: inv.token, name: 'Target' })).memberId;
}
const ownerOf = (org: TestOrg) => org.people.owner.client;
const clientOf = (c: Ctx) => c.org.people[c.as].client;
const selfOf = (c: Ctx) => c.org.people[c.as].memberId;

/** Whether the role reads the whole organisation's spend (else only the caller's own). */
const readsAll = (c: Ctx) => may(c.as, 'spend.read');
/** The members whose spend the role sees: the four who made requests (beforeAll), or only the caller. */
const spendersSeen = (c: Ctx) => (readsAll(c) ? ROLE_NAMES.map((r) => c.org.people[r].memberId).sort() : [selfOf(c)]);

/** A budget of the organisation, made by the owner, to act on. */
const aBudget = async (org: TestOrg) =>
  (await ownerOf(org).setBudget({ organisationId: org.id, spec: budgetSpec() })).budget!.budgetId;

/** `prepare` sets up what the action needs (as the owner) and returns the call the role makes. */
type Prepared = () => Promise<unknown>;
const ACTIONS_TRIED: { action: string; allowed: RoleName[]; prepare: (c: Ctx) => Promise<Prepared> }[] = [
  {
    action: 'read the organisation',
    allowed: all,
    prepare: async (c) => () => clientOf(c).getOrganisation({ organisationId: c.org.id }),
  },
  {
    action: 'rename it',
    allowed: managers,
    prepare: async (c) => () =>
      clientOf(c).renameOrganisation({ organisationId: c.org.id, name: `Renamed by ${c.as}` }),
  },
  {
    action: 'list members',
    allowed: readers,
    prepare: async (c) => () => clientOf(c).listMembers({ organisationId: c.org.id }),
  },
  {
    action: "change someone's role",
    allowed: managers,
    prepare: async (c) => {
      const target = await someoneNew(c.org);
      return () => clientOf(c).setMemberRole({ organisationId: c.org.id, memberId: target, role: Role.BILLING });
    },
  },
  {
    action: 'remove a member',
    allowed: managers,
    prepare: async (c) => {
      const target = await someoneNew(c.org);
      return () => clientOf(c).removeMember({ organisationId: c.org.id, memberId: target });
    },
  },
  {
    action: 'invite',
    allowed: managers,
    prepare: async (c) => () => clientOf(c).createInvitation({ organisationId: c.org.id, role: Role.MEMBER }),
  },
  {
    action: 'list invitations',
    allowed: managers,
    prepare: async (c) => () => clientOf(c).listInvitations({ organisationId: c.org.id }),
  },
  {
    action: 'revoke an invitation',
    allowed: managers,
    prepare: async (c) => {
      const inv = await ownerOf(c.org).createInvitation({ organisationId: c.org.id, role: Role.MEMBER });
      return () => clientOf(c).revokeInvitation({ organisationId: c.org.id, invitationId: inv.invitation!.id });
    },
  },
  {
    action: 'list teams',
    allowed: all,
    prepare: async (c) => () => clientOf(c).listTeams({ organisationId: c.org.id }),
  },
  {
    action: 'create a team',
    allowed: managers,
    prepare: async (c) => () => clientOf(c).createTeam({ organisationId: c.org.id, name: `Team of ${c.as}` }),
  },
  {
    action: 'rename a team',
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `To rename ${c.as}` });
      return () =>
        clientOf(c).renameTeam({ organisationId: c.org.id, teamId: t.team!.teamId, name: `Renamed ${c.as}` });
    },
  },
  {
    action: 'delete a team',
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `To delete ${c.as}` });
      return () => clientOf(c).deleteTeam({ organisationId: c.org.id, teamId: t.team!.teamId });
    },
  },
  {
    action: 'add a team member',
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `To add to ${c.as}` });
      return () => clientOf(c).addTeamMember({ organisationId: c.org.id, teamId: t.team!.teamId, memberId: selfOf(c) });
    },
  },
  {
    action: 'remove a team member',
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `To leave ${c.as}` });
      await ownerOf(c.org).addTeamMember({ organisationId: c.org.id, teamId: t.team!.teamId, memberId: selfOf(c) });
      return () =>
        clientOf(c).removeTeamMember({ organisationId: c.org.id, teamId: t.team!.teamId, memberId: selfOf(c) });
    },
  },
  {
    action: 'make a key of their own',
    allowed: all,
    prepare: async (c) => () => clientOf(c).createOrganisationKey({ organisationId: c.org.id, name: 'mine' }),
  },
  {
    action: 'make a key for someone else',
    allowed: managers,
    prepare: async (c) => {
      const target = await someoneNew(c.org);
      return () => clientOf(c).createOrganisationKey({ organisationId: c.org.id, memberId: target });
    },
  },
  {
    action: 'make a team key',
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `Keyed ${c.as}` });
      return () => clientOf(c).createOrganisationKey({ organisationId: c.org.id, teamId: t.team!.teamId });
    },
  },
  {
    action: 'list their own keys',
    allowed: all,
    prepare: async (c) => () => clientOf(c).listOrganisationKeys({ organisationId: c.org.id, memberId: selfOf(c) }),
  },
  {
    action: 'list every key',
    allowed: readers,
    prepare: async (c) => () => clientOf(c).listOrganisationKeys({ organisationId: c.org.id }),
  },
  {
    action: 'revoke a key of their own',
    allowed: all,
    prepare: async (c) => {
      const k = await ownerOf(c.org).createOrganisationKey({ organisationId: c.org.id, memberId: selfOf(c) });
      return () => clientOf(c).revokeOrganisationKey({ organisationId: c.org.id, keyId: k.key!.keyId });
    },
  },
  {
    action: "revoke someone else's key",
    allowed: managers,
    prepare: async (c) => {
      const k = await ownerOf(c.org).createOrganisationKey({
        organisationId: c.org.id,
        memberId: await someoneNew(c.org),
      });
      return () => clientOf(c).revokeOrganisationKey({ organisationId: c.org.id, keyId: k.key!.keyId });
    },
  },
  {
    action: 'rotate a key of their own',
    allowed: all,
    prepare: async (c) => {
      const k = await ownerOf(c.org).createOrganisationKey({ organisationId: c.org.id, memberId: selfOf(c) });
      return () => clientOf(c).rotateOrganisationKey({ organisationId: c.org.id, keyId: k.key!.keyId });
    },
  },
  {
    action: "rotate someone else's key",
    allowed: managers,
    prepare: async (c) => {
      const k = await ownerOf(c.org).createOrganisationKey({
        organisationId: c.org.id,
        memberId: await someoneNew(c.org),
      });
      return () => clientOf(c).rotateOrganisationKey({ organisationId: c.org.id, keyId: k.key!.keyId });
    },
  },
  {
    action: 'read the audit log',
    allowed: managers,
    prepare: async (c) => () => clientOf(c).listAuditLog({ organisationId: c.org.id }),
  },
  {
    action: 'read the spend by team, member, key, model and day (a `member`: only their own)',
    allowed: all,
    prepare: async (c) => async () => {
      for (const by of [SpendGrouping.TEAM, SpendGrouping.KEY, SpendGrouping.MODEL, SpendGrouping.DAY])
        await clientOf(c).getSpend({ organisationId: c.org.id, by });
      const r = await clientOf(c).getSpend({ organisationId: c.org.id, by: SpendGrouping.MEMBER });
      expect(r.rows.map((row) => row.key).sort()).toEqual(spendersSeen(c));
    },
  },
  {
    action: 'list the requests (a `member`: only their own, whoever they ask for)',
    allowed: all,
    prepare: async (c) => async () => {
      const r = await clientOf(c).listOrganisationUsage({ organisationId: c.org.id });
      expect([...new Set(r.records.map((u) => u.memberId))].sort()).toEqual(spendersSeen(c));
      const owner = c.org.people.owner.memberId;
      const asked = await clientOf(c).listOrganisationUsage({ organisationId: c.org.id, memberId: owner });
      expect([...new Set(asked.records.map((u) => u.memberId))]).toEqual([readsAll(c) ? owner : selfOf(c)]);
    },
  },
  {
    action: 'read the ledger',
    allowed: readers,
    prepare: async (c) => () => clientOf(c).listOrganisationLedger({ organisationId: c.org.id }),
  },
  {
    action: "set the budget alerts' webhook",
    allowed: managers,
    prepare: async (c) => () =>
      clientOf(c).setAlertWebhook({ organisationId: c.org.id, url: `https://example.com/alerts/${c.as}` }),
  },
  {
    action: "remove the budget alerts' webhook",
    allowed: managers,
    prepare: async (c) => {
      await ownerOf(c.org).setAlertWebhook({ organisationId: c.org.id, url: 'https://example.com/alerts' });
      return () => clientOf(c).setAlertWebhook({ organisationId: c.org.id, url: '' });
    },
  },
  {
    action: "list the budget alerts' deliveries",
    allowed: readers,
    prepare: async (c) => () => clientOf(c).listAlertDeliveries({ organisationId: c.org.id }),
  },
  {
    action: 'get a sign-in link for themselves',
    allowed: all,
    prepare: async (c) => () => clientOf(c).createMemberSignInLink({ organisationId: c.org.id }),
  },
  {
    action: 'get a sign-in link for someone else',
    allowed: managers,
    prepare: async (c) => {
      const target = await someoneNew(c.org);
      return () => clientOf(c).createMemberSignInLink({ organisationId: c.org.id, memberId: target });
    },
  },
  {
    action: 'set the models a key may call',
    allowed: managers,
    prepare: async (c) => {
      const k = await ownerOf(c.org).createOrganisationKey({ organisationId: c.org.id });
      return () => clientOf(c).setKeyModels({ organisationId: c.org.id, keyId: k.key!.keyId, models: ['gpt-4o-mini'] });
    },
  },
  {
    action: "bound a team's requests in flight",
    allowed: managers,
    prepare: async (c) => {
      const t = await ownerOf(c.org).createTeam({ organisationId: c.org.id, name: `Bounded ${c.as}` });
      return () =>
        clientOf(c).setInFlightBound({
          organisationId: c.org.id,
          scope: 'team',
          scopeId: t.team!.teamId,
          maxInFlight: 4,
        });
    },
  },
  {
    action: 'set a budget',
    allowed: managers,
    prepare: async (c) => () =>
      clientOf(c).setBudget({ organisationId: c.org.id, spec: budgetSpec({ name: `Set by ${c.as}` }) }),
  },
  {
    action: 'change a budget',
    allowed: managers,
    prepare: async (c) => {
      const id = await aBudget(c.org);
      return () =>
        clientOf(c).setBudget({ organisationId: c.org.id, budgetId: id, spec: budgetSpec({ amountUsd: '9' }) });
    },
  },
  {
    action: 'list the budgets (a `member`: those over their own requests)',
    allowed: all,
    prepare: async (c) => () => clientOf(c).listBudgets({ organisationId: c.org.id }),
  },
  {
    action: 'list the budgets over their own requests',
    allowed: all,
    prepare: async (c) => () => clientOf(c).listBudgets({ organisationId: c.org.id, applyingToMe: true }),
  },
  {
    action: 'delete a budget',
    allowed: managers,
    prepare: async (c) => {
      const id = await aBudget(c.org);
      return () => clientOf(c).deleteBudget({ organisationId: c.org.id, budgetId: id });
    },
  },
  {
    action: "raise a budget's window",
    allowed: managers,
    prepare: async (c) => {
      const id = await aBudget(c.org);
      return () => clientOf(c).raiseBudget({ organisationId: c.org.id, budgetId: id, raiseUsd: '5' });
    },
  },
  {
    action: "reset a budget's spend",
    allowed: managers,
    prepare: async (c) => {
      const id = await aBudget(c.org);
      return () => clientOf(c).resetBudgetSpend({ organisationId: c.org.id, budgetId: id });
    },
  },
];

const auditCount = async (orgId: string) =>
  Number((await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [orgId])).rows[0].n);

let org: TestOrg;
beforeAll(async () => {
  org = await newOrganisation('1');
  // One request by each member, so each role's reading of the spend shows whose it sees.
  for (const role of ROLE_NAMES) {
    const r = await openai(org.people[role].apiKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] })
      .withResponse();
    await waitForUsage(r.response.headers.get('x-request-id')!);
  }
});

describe('what each role may do: every action tried with every role', () => {
  for (const tried of ACTIONS_TRIED)
    for (const role of ROLE_NAMES) {
      const allowed = tried.allowed.includes(role);
      it(`${role}: ${tried.action} — ${allowed ? 'allowed' : 'refused, nothing written'}`, async () => {
        const call = await tried.prepare({ org, as: role });
        if (allowed) {
          await call();
          return;
        }
        const before = await auditCount(org.id);
        const refusal = await refused(call());
        expect(refusal).toMatchObject({ status: 403, code: 'not_allowed' });
        expect(await auditCount(org.id)).toBe(before);
      });
    }
});

describe('the table in code', () => {
  it('names every action once and gives owners all of them', () => {
    expect(new Set(ACTIONS).size).toBe(ACTIONS.length);
    for (const a of ACTIONS) expect(PERMISSIONS[a]).toContain('owner');
  });

  it('is what a member is told they may do', async () => {
    for (const role of ROLE_NAMES) {
      const o = await org.people[role].client.getOrganisation({ organisationId: org.id });
      expect(o.organisation?.allowedActions).toEqual(
        ACTIONS.filter((a) => (PERMISSIONS[a] as readonly string[]).includes(role)),
      );
    }
  });
});
