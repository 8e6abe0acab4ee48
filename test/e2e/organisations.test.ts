// Organisations over OrganisationService (docs/organisations.md): one balance for many people,
// members in roles, teams, personal and team keys, invitations, removal, isolation and the audit
// log. Members call with their own gateway keys, as their programs would; the operator calls from
// this machine.
import { describe, expect, it } from 'vitest';
import { Role, SpendGrouping } from '../../src/gen/gateway/v1/organisations_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { billing, db, openai, uniqueMarker, waitForUsage } from '../support/context.ts';
import { newOrganisation, orgs, refused, ROLE, type Orgs, type TestOrg } from '../support/organisations.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { ConsoleClient } from '../support/console-api.ts';

const auditCount = async (orgId: string) =>
  Number((await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [orgId])).rows[0].n);

/** A request with `apiKey` and its usage row, once written. */
async function chargedRow(apiKey: string, tokens = 2): Promise<Record<string, string>> {
  const r = await openai(apiKey)
    .chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: `hi ${uniqueMarker()} [sim tokens=${tokens}]` }],
    })
    .withResponse();
  return waitForUsage(r.response.headers.get('x-request-id')!);
}

/** One page of one of an organisation's paged listings: the ids it holds and the next page's cursor. */
type Lister = (
  client: Orgs,
  organisationId: string,
  cursor: string,
  pageSize: number,
) => Promise<{ ids: string[]; next: string }>;
const LISTINGS: Record<string, Lister> = {
  members: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listMembers({ organisationId, cursor, pageSize });
    return { ids: r.members.map((m) => m.memberId), next: r.nextCursor };
  },
  teams: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listTeams({ organisationId, cursor, pageSize });
    return { ids: r.teams.map((t) => t.teamId), next: r.nextCursor };
  },
  keys: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listOrganisationKeys({ organisationId, cursor, pageSize, includeRevoked: true });
    return { ids: r.keys.map((k) => k.keyId), next: r.nextCursor };
  },
  invitations: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listInvitations({ organisationId, cursor, pageSize });
    return { ids: r.invitations.map((i) => i.id), next: r.nextCursor };
  },
  usage: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listOrganisationUsage({ organisationId, cursor, pageSize });
    return { ids: r.records.map((u) => u.requestId), next: r.nextCursor };
  },
  ledger: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listOrganisationLedger({ organisationId, cursor, pageSize });
    return { ids: r.entries.map((e) => e.id), next: r.nextCursor };
  },
  audit: async (cl, organisationId, cursor, pageSize) => {
    const r = await cl.listAuditLog({ organisationId, cursor, pageSize });
    return { ids: r.entries.map((e) => e.id), next: r.nextCursor };
  },
};

/** Every id of a listing, page after page, as the operator reads it. */
async function everyId(list: Lister, organisationId: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let cursor = '';
  for (let pages = 0; pages < 100; pages++) {
    const r = await list(orgs(), organisationId, cursor, 200);
    for (const id of r.ids) ids.add(id);
    if (!r.next) return ids;
    cursor = r.next;
  }
  throw new Error('more than 100 pages');
}

describe('an organisation: one balance, many people', () => {
  it('every member calls with their own key from the one balance, and each usage row names the member who made it', async () => {
    const org = await newOrganisation('10');
    const before = await billing().getBalance({ key: { ref: { case: 'apiKey', value: org.people.member.apiKey } } });
    expect(before.accountId).toBe(org.id);
    const marker = uniqueMarker('org');
    const calls = await Promise.all(
      (['owner', 'member'] as const).map((role) =>
        openai(org.people[role].apiKey).chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `hi ${marker} [sim tokens=3]` }],
        }),
      ),
    );
    expect(calls).toHaveLength(2);
    const rows = await db().query(
      `SELECT member_id, team_id, cost_nano::text AS cost FROM usage_records WHERE account_id = $1 AND status = 'ok'`,
      [org.id],
    );
    expect(rows.rows.map((r) => r.member_id).sort()).toEqual(
      [org.people.owner.memberId, org.people.member.memberId].sort(),
    );
    const spend = await org.people.billing.client.getSpend({ organisationId: org.id, by: SpendGrouping.MEMBER });
    const total = rows.rows.reduce((s, r) => s + BigInt(r.cost), 0n);
    expect(spend.total?.costNano).toBe(total);
    expect(spend.rows.find((r) => r.key === org.people.member.memberId)?.label).toBe('Pat member');
    // A member sees the balance left, and only their own spend.
    const own = await org.people.member.client.getSpend({ organisationId: org.id, by: SpendGrouping.MEMBER });
    expect(own.rows.map((r) => r.key)).toEqual([org.people.member.memberId]);
    const summary = await org.people.member.client.getOrganisation({ organisationId: org.id });
    expect(summary.organisation?.balanceNano).toBe(usdToNano('10') - total);
    expect(summary.organisation?.myRole).toBe(Role.MEMBER);
  });

  it("a team's key bills the team and the member rows stay empty; a team with live keys is not deleted", async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    const team = (await admin.createTeam({ organisationId: org.id, name: 'Backend' })).team!;
    const key = await admin.createOrganisationKey({
      organisationId: org.id,
      teamId: team.teamId,
      name: 'backend prod',
    });
    expect(key.key?.teamName).toBe('Backend');
    const r = await openai(key.apiKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] })
      .withResponse();
    const row = await waitForUsage(r.response.headers.get('x-request-id')!);
    expect(row.team_id).toBe(team.teamId);
    expect(row.member_id).toBeNull();
    const refusal = await refused(admin.deleteTeam({ organisationId: org.id, teamId: team.teamId }));
    expect(refusal.code).toBe('team_has_keys');
    await admin.revokeOrganisationKey({ organisationId: org.id, keyId: key.key!.keyId });
    await admin.deleteTeam({ organisationId: org.id, teamId: team.teamId });
    expect((await admin.listTeams({ organisationId: org.id })).teams).toEqual([]);
    // A team's key acts for no member on OrganisationService.
    const teamKey = await admin.createOrganisationKey({
      organisationId: org.id,
      teamId: (await admin.createTeam({ organisationId: org.id, name: 'Ops' })).team!.teamId,
    });
    expect((await refused(orgs(teamKey.apiKey).listTeams({ organisationId: org.id }))).code).toBe('team_key');
  });
});

describe('the last owner and role changes', () => {
  it('the last owner can be neither demoted nor removed; with a second owner, both work', async () => {
    const org = await newOrganisation('0');
    const owner = org.people.owner;
    const op = orgs();
    expect(
      (await refused(op.setMemberRole({ organisationId: org.id, memberId: owner.memberId, role: Role.ADMIN }))).code,
    ).toBe('last_owner');
    expect((await refused(op.removeMember({ organisationId: org.id, memberId: owner.memberId }))).code).toBe(
      'last_owner',
    );
    await owner.client.setMemberRole({ organisationId: org.id, memberId: org.people.admin.memberId, role: Role.OWNER });
    await op.setMemberRole({ organisationId: org.id, memberId: owner.memberId, role: Role.MEMBER });
    const members = (await op.listMembers({ organisationId: org.id })).members;
    expect(members.filter((m) => m.role === Role.OWNER).map((m) => m.memberId)).toEqual([org.people.admin.memberId]);
  });

  it('a member cannot raise their own role, and an admin cannot make an owner; nothing is written', async () => {
    const org = await newOrganisation('0');
    const before = await auditCount(org.id);
    const self = await refused(
      org.people.member.client.setMemberRole({
        organisationId: org.id,
        memberId: org.people.member.memberId,
        role: Role.ADMIN,
      }),
    );
    expect(self).toMatchObject({ status: 403, code: 'not_allowed' });
    const promote = await refused(
      org.people.admin.client.setMemberRole({
        organisationId: org.id,
        memberId: org.people.member.memberId,
        role: Role.OWNER,
      }),
    );
    expect(promote).toMatchObject({ status: 403, code: 'not_allowed' });
    const ownInvite = await refused(
      org.people.admin.client.createInvitation({ organisationId: org.id, role: ROLE.owner }),
    );
    expect(ownInvite.code).toBe('not_allowed');
    const othersKey = await refused(
      org.people.member.client.createOrganisationKey({ organisationId: org.id, memberId: org.people.billing.memberId }),
    );
    expect(othersKey.code).toBe('not_allowed');
    expect(await auditCount(org.id)).toBe(before);
  });
});

describe('invitations', () => {
  it('are used once: a second try, 6 concurrent tries, an expired and a revoked link are all refused alike', async () => {
    const org = await newOrganisation('0');
    const admin = org.people.admin.client;
    const once = await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER });
    await orgs().redeemInvitation({ token: once.token, name: 'First' });
    expect((await refused(orgs().redeemInvitation({ token: once.token, name: 'Second' }))).code).toBe(
      'invitation_not_usable',
    );

    const raced = await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER });
    const tries = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => orgs().redeemInvitation({ token: raced.token, name: `Racer ${i}` })),
    );
    expect(tries.filter((t) => t.status === 'fulfilled')).toHaveLength(1);
    const racers = (await admin.listMembers({ organisationId: org.id, query: 'Racer' })).members;
    expect(racers).toHaveLength(1);

    const expired = await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER });
    await db().query(`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1`, [
      expired.invitation!.id,
    ]);
    const revoked = await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER });
    await admin.revokeInvitation({ organisationId: org.id, invitationId: revoked.invitation!.id });
    for (const token of [expired.token, revoked.token, `${once.token.slice(0, -1)}x`, 'inv-nope'])
      expect(await refused(orgs().redeemInvitation({ token, name: 'Late' }))).toMatchObject({
        status: 404,
        code: 'invitation_not_usable',
      });
    const states = new Map(
      (await admin.listInvitations({ organisationId: org.id })).invitations.map((i) => [i.id, i.state]),
    );
    expect([once, raced, expired, revoked].map((i) => states.get(i.invitation!.id))).toEqual([
      'used',
      'used',
      'expired',
      'revoked',
    ]);
  });
});

describe('removing a member', () => {
  it('ends their keys at once (or hands them over), and a request they had in flight finishes and is charged once', async () => {
    const org = await newOrganisation('5');
    const leaver = org.people.member;
    const stream = await openai(leaver.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'hi [sim tokens=30 delay=40]' }],
    });
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const c of stream) chunks.push(c.choices[0]?.delta?.content ?? '');
    })();
    const r = await org.people.admin.client.removeMember({ organisationId: org.id, memberId: leaver.memberId });
    expect(r.keysRevoked).toBe(1);
    const after = await openai(leaver.apiKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => 'served',
        (e: { status?: number }) => e.status,
      );
    expect(after).toBe(401);
    await reading;
    expect(chunks.join('').length).toBeGreaterThan(0);
    const charges = await db().query(
      `SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1 AND member_id = $2 AND status = 'ok'`,
      [org.id, leaver.memberId],
    );
    expect(charges.rows[0].n).toBe(1);
    // They can no longer act on the organisation either.
    expect((await refused(leaver.client.getOrganisation({ organisationId: org.id }))).status).toBe(401);

    const heir = org.people.billing;
    const handed = await org.people.owner.client.removeMember({
      organisationId: org.id,
      memberId: org.people.admin.memberId,
      handKeysToMemberId: heir.memberId,
    });
    expect(handed.keysHandedOver).toBe(1);
    const keys = (
      await org.people.owner.client.listOrganisationKeys({ organisationId: org.id, memberId: heir.memberId })
    ).keys;
    expect(keys.map((k) => k.memberName)).toEqual(['Pat billing', 'Pat billing']);
  });
});

describe("a leaver's past spend", () => {
  it("stays theirs after their keys are handed over to a team: its old usage rows still name the member (and no team), the key's new ones the team", async () => {
    const org = await newOrganisation('5');
    const owner = org.people.owner.client;
    const leaver = org.people.member;
    const team = (await owner.createTeam({ organisationId: org.id, name: `Heirs ${uniqueMarker()}` })).team!;
    await owner.addTeamMember({ organisationId: org.id, teamId: team.teamId, memberId: leaver.memberId });
    const old = await chargedRow(leaver.apiKey, 3);
    expect([old.member_id, old.team_id]).toEqual([leaver.memberId, null]);

    const r = await owner.removeMember({
      organisationId: org.id,
      memberId: leaver.memberId,
      handKeysToTeamId: team.teamId,
    });
    expect([r.keysHandedOver, r.keysRevoked]).toEqual([1, 0]);
    const keys = (await owner.listOrganisationKeys({ organisationId: org.id, teamId: team.teamId })).keys;
    expect(keys.map((k) => [k.keyId, k.teamName, k.memberId])).toEqual([[leaver.keyId, team.name, '']]);
    // The same key, now the team's: its new rows are the team's, its old row is still the leaver's.
    const later = await chargedRow(leaver.apiKey, 2);
    expect([later.member_id, later.team_id]).toEqual([null, team.teamId]);
    const rows = await db().query(
      `SELECT request_id, member_id, team_id FROM usage_records WHERE account_id = $1 AND key_id = $2 ORDER BY created_at`,
      [org.id, leaver.keyId],
    );
    expect(rows.rows).toEqual([
      { request_id: old.request_id, member_id: leaver.memberId, team_id: null },
      { request_id: later.request_id, member_id: null, team_id: team.teamId },
    ]);
    // And so the spend and the request listing say.
    const byMember = await owner.getSpend({ organisationId: org.id, by: SpendGrouping.MEMBER });
    expect(byMember.rows.find((x) => x.key === leaver.memberId)).toMatchObject({
      requests: 1n,
      costNano: BigInt(old.cost_nano!),
    });
    const byTeam = await owner.getSpend({ organisationId: org.id, by: SpendGrouping.TEAM });
    expect(byTeam.rows.find((x) => x.key === team.teamId)).toMatchObject({
      requests: 1n,
      costNano: BigInt(later.cost_nano!),
    });
    const listed = new Map(
      (await owner.listOrganisationUsage({ organisationId: org.id, keyId: leaver.keyId })).records.map((u) => [
        u.requestId,
        [u.memberId, u.teamId],
      ]),
    );
    expect(listed.get(old.request_id!)).toEqual([leaver.memberId, '']);
    expect(listed.get(later.request_id!)).toEqual(['', team.teamId]);
  });
});

describe('isolation between organisations', () => {
  it("a member of A reaches nothing of B by id: B's organisation, members, teams, keys, invitations and usage are not found", async () => {
    const [a, b] = await Promise.all([newOrganisation('0'), newOrganisation('0')]);
    const bTeam = (await b.people.owner.client.createTeam({ organisationId: b.id, name: 'Secret' })).team!;
    const aOwner = a.people.owner.client;
    const calls: (() => Promise<unknown>)[] = [
      () => aOwner.getOrganisation({ organisationId: b.id }),
      () => aOwner.listMembers({ organisationId: b.id }),
      () => aOwner.listTeams({ organisationId: b.id }),
      () => aOwner.listOrganisationKeys({ organisationId: b.id }),
      () => aOwner.listInvitations({ organisationId: b.id }),
      () => aOwner.listAuditLog({ organisationId: b.id }),
      () => aOwner.getSpend({ organisationId: b.id }),
      () => aOwner.listOrganisationUsage({ organisationId: b.id }),
      () => aOwner.createInvitation({ organisationId: b.id, role: Role.OWNER }),
      () => aOwner.removeMember({ organisationId: b.id, memberId: b.people.owner.memberId }),
    ];
    for (const call of calls)
      expect(await refused(call())).toMatchObject({ status: 404, code: 'organisation_not_found' });
    // B's ids under A's own organisation are no ids at all.
    const aTeam = (await aOwner.createTeam({ organisationId: a.id, name: 'T' })).team!;
    const underA: (() => Promise<unknown>)[] = [
      () => aOwner.revokeOrganisationKey({ organisationId: a.id, keyId: b.people.member.keyId }),
      () => aOwner.addTeamMember({ organisationId: a.id, teamId: bTeam.teamId, memberId: a.people.member.memberId }),
      () =>
        aOwner.addTeamMember({
          organisationId: a.id,
          teamId: aTeam.teamId,
          memberId: b.people.member.memberId,
        }),
      () => aOwner.removeMember({ organisationId: a.id, memberId: b.people.member.memberId }),
      () => aOwner.createOrganisationKey({ organisationId: a.id, memberId: b.people.member.memberId }),
    ];
    for (const call of underA) expect((await refused(call())).status).toBe(404);
    const bMembers = (await orgs().listMembers({ organisationId: b.id })).members;
    expect(bMembers).toHaveLength(4);
    const bKey = await billing().getBalance({ key: { ref: { case: 'apiKey', value: b.people.member.apiKey } } });
    expect(bKey.accountId).toBe(b.id);
  });
});

describe('isolation by cursor', () => {
  it("a member of A passing a cursor from B's listings gets nothing of B: members, teams, keys, invitations, usage, ledger, audit log, organisations", async () => {
    const a = await newOrganisation('1');
    const b = await newOrganisation('1');
    // The two made in turns, so B's cursors fall between A's rows as well as after them.
    const both: TestOrg[] = [a, b];
    for (const name of ['One', 'Two'])
      for (const o of both) {
        const owner = o.people.owner.client;
        await owner.createTeam({ organisationId: o.id, name });
        await owner.createInvitation({ organisationId: o.id, role: Role.MEMBER });
        await chargedRow(o.people.member.apiKey);
        await chargedRow(o.people.billing.apiKey);
      }
    let ofAGot = 0;
    for (const [name, list] of Object.entries(LISTINGS)) {
      const first = await list(b.people.owner.client, b.id, '', 1);
      expect(first.next, `${name}: B has a second page`).not.toBe('');
      const second = await list(b.people.owner.client, b.id, first.next, 1);
      // B's cursors as A's owner pages A's list.
      const got: string[] = [];
      for (const cursor of [first.next, second.next].filter(Boolean))
        got.push(...(await list(a.people.owner.client, a.id, cursor, 200)).ids);
      // Read after, so a row written meanwhile is in them: what A's owner got is A's rows only, or none.
      const [ofA, ofB] = await Promise.all([everyId(list, a.id), everyId(list, b.id)]);
      for (const id of got) {
        expect(ofB.has(id), `${name}: ${id} is B's`).toBe(false);
        expect(ofA.has(id), `${name}: ${id} is A's`).toBe(true);
      }
      ofAGot += got.length;
    }
    expect(ofAGot).toBeGreaterThan(0); // the cursors positioned within A's lists; they were not merely refused
    // A `member` of A with B's usage cursor reads their own requests only.
    const usageOfB = await LISTINGS.usage!(b.people.owner.client, b.id, '', 1);
    const own = await a.people.member.client.listOrganisationUsage({ organisationId: a.id, cursor: usageOfB.next });
    expect(new Set(own.records.map((u) => u.memberId))).toEqual(new Set([a.people.member.memberId]));
    // A cursor of the operator's list of every organisation, passed by A's owner: A alone, or nothing.
    const opPage = await orgs().listOrganisations({ pageSize: 1 });
    expect(opPage.nextCursor).not.toBe('');
    const mine = await a.people.owner.client.listOrganisations({ cursor: opPage.nextCursor, pageSize: 200 });
    expect(mine.organisations.every((o) => o.id === a.id)).toBe(true);
  });
});

describe('names', () => {
  it('are kept as text, markup and all; a 1 MB name, an empty one and one with control characters are refused and nothing is written', async () => {
    const org = await newOrganisation('0');
    const admin = org.people.admin.client;
    const markup = '<img src=x onerror=alert(1)> & "Team"';
    const t = await admin.createTeam({ organisationId: org.id, name: markup });
    expect(t.team?.name).toBe(markup);
    const before = await auditCount(org.id);
    for (const name of ['x'.repeat(1_000_000), '   ', 'bad\u0000name', 'evil\u202eeman'])
      expect((await refused(admin.createTeam({ organisationId: org.id, name }))).status).toBe(400);
    expect(await auditCount(org.id)).toBe(before);
  });
});

describe('names of organisations, members and keys', () => {
  it("are checked as a team's are: markup kept as text; 1 MB, control characters and direction overrides refused with a clear error, nothing written", async () => {
    const org = await newOrganisation('0');
    const admin = org.people.admin.client;
    const markup = `<b onclick="x()">Acme</b> & 'Co' ${uniqueMarker()}`;
    expect((await admin.renameOrganisation({ organisationId: org.id, name: markup })).organisation?.name).toBe(markup);
    expect((await admin.createOrganisationKey({ organisationId: org.id, name: markup })).key?.name).toBe(markup);
    const joined = await orgs().redeemInvitation({
      token: (await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER })).token,
      name: markup,
    });
    const members = (await admin.listMembers({ organisationId: org.id, pageSize: 200 })).members;
    expect(members.find((m) => m.memberId === joined.memberId)?.name).toBe(markup);

    const open = await admin.createInvitation({ organisationId: org.id, role: Role.MEMBER });
    const owner = `Olive ${uniqueMarker()}`;
    const counts = async () =>
      (
        await db().query(
          `SELECT (SELECT count(*) FROM audit_log WHERE account_id = $1)::int AS audit,
                  (SELECT count(*) FROM api_keys WHERE account_id = $1)::int AS keys,
                  (SELECT count(*) FROM memberships WHERE account_id = $1)::int AS members,
                  (SELECT count(*) FROM members WHERE name = $2)::int AS owners`,
          [org.id, owner],
        )
      ).rows[0];
    const before = await counts();
    const bad: [string, string][] = [
      ['x'.repeat(1_000_000), 'is far longer than 200 characters'],
      ['y'.repeat(201), 'is longer than 200 characters'],
      ['bad\u0000name', 'contains a control or invisible formatting character'],
      ['two\nlines', 'contains a control or invisible formatting character'],
      ['evil\u202eeman', 'contains a control or invisible formatting character'], // right-to-left override
      ['\u2067isolated\u2069', 'contains a control or invisible formatting character'], // right-to-left isolate
      ['zero\u200bwidth', 'contains a control or invisible formatting character'],
    ];
    for (const [name, says] of bad) {
      const tries: [string, () => Promise<unknown>][] = [
        ['name', () => orgs().createOrganisation({ name, ownerName: owner })],
        ['owner_name', () => orgs().createOrganisation({ name: 'Fine', ownerName: name })],
        ['name', () => admin.renameOrganisation({ organisationId: org.id, name })],
        ['name', () => orgs().redeemInvitation({ token: open.token, name, createKey: true })],
        ['name', () => admin.createOrganisationKey({ organisationId: org.id, name })],
        ['name', () => admin.createOrganisationKey({ organisationId: org.id, memberId: joined.memberId, name })],
      ];
      for (const [param, call] of tries) {
        const r = await refused(call());
        expect(r, `${param} ${JSON.stringify(name.slice(0, 20))}`).toMatchObject({
          status: 400,
          code: 'invalid_value',
        });
        expect(r.message).toBe(`${param} ${says}${says.startsWith('contains') ? '; use plain text' : ''}`);
      }
    }
    expect(await counts()).toEqual(before);
    expect((await admin.getOrganisation({ organisationId: org.id })).organisation?.name).toBe(markup);
    const invitations = (await admin.listInvitations({ organisationId: org.id })).invitations;
    expect(invitations.find((i) => i.id === open.invitation!.id)?.state).toBe('open');
  });
});

describe('a removal on every instance', () => {
  const gatewayB = gatewayForFile('orgs-b', {});

  it("refuses the removed member's key on another instance within a second, and their console session there", async () => {
    const b = await gatewayB();
    const org = await newOrganisation('5');
    const leaver = org.people.member;
    const onB = openai(leaver.apiKey, { baseURL: `${b.httpUrl}/v1` });
    const ask = () =>
      onB.chat.completions
        .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sim tokens=1]' }] })
        .then(
          () => 200,
          (e: { status?: number }) => e.status ?? 0,
        );
    // B knows the key (its cache holds it) before the removal, and the member is signed in to B's console.
    expect(await ask()).toBe(200);
    expect(await ask()).toBe(200);
    const session = await new ConsoleClient(b.httpUrl).signedIn({ key: leaver.apiKey });
    expect((await session.get('/me')).status).toBe(200);
    const removed = await org.people.owner.client.removeMember({ organisationId: org.id, memberId: leaver.memberId });
    expect(removed.sessionsEnded).toBe(1);
    const removedAt = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - removedAt < 1000) status = await ask();
    expect(status).toBe(401);
    let signedIn = 200;
    while (signedIn === 200 && Date.now() - removedAt < 1000) signedIn = (await session.get('/me')).status;
    expect(signedIn).toBe(401);
    const me = await session.get<{ error: { code: string } }>('/me');
    expect([me.status, me.body.error.code]).toEqual([401, 'no_session']);
    const rows = await db().query(
      `SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1 AND member_id = $2 AND created_at > to_timestamp($3 / 1000.0)`,
      [org.id, leaver.memberId, removedAt + 1000],
    );
    expect(rows.rows[0].n).toBe(0);
  });
});

describe('paging', () => {
  it('holds over 10,000 members and 10,000 teams: every one listed once, in order, page after page', {
    timeout: 120_000,
  }, async () => {
    const org = await newOrganisation('0');
    // Made in bulk in the database: 10,000 invitations redeemed one by one would test nothing more.
    await db().query(
      `WITH m AS (
         INSERT INTO members (id, name) SELECT 'mem_bulk' || g || '_' || $2, 'Bulk ' || g FROM generate_series(1, 10000) g RETURNING id
       )
       INSERT INTO memberships (account_id, member_id, role, created_at)
       SELECT $1, id, 'member', now() + (substr(id, 9, position('_' in substr(id, 9)) - 1)::int * interval '1 microsecond') FROM m`,
      [org.id, org.id.slice(-6)],
    );
    await db().query(
      `INSERT INTO teams (id, account_id, name) SELECT 'team_bulk' || g || '_' || $2, $1, 'Team ' || g FROM generate_series(1, 10000) g`,
      [org.id, org.id.slice(-6)],
    );
    const admin = org.people.admin.client;
    const seen: string[] = [];
    const times: number[] = [];
    for (let cursor = '', pages = 0; pages < 100; pages++) {
      const t = performance.now();
      const r = await admin.listMembers({ organisationId: org.id, pageSize: 200, cursor });
      times.push(performance.now() - t);
      seen.push(...r.members.map((m) => m.memberId));
      if (!r.nextCursor) break;
      cursor = r.nextCursor;
    }
    expect(seen).toHaveLength(10_004);
    expect(new Set(seen).size).toBe(10_004);
    const teams: string[] = [];
    for (let cursor = '', pages = 0; pages < 100; pages++) {
      const t = performance.now();
      const r = await admin.listTeams({ organisationId: org.id, pageSize: 200, cursor });
      times.push(performance.now() - t);
      teams.push(...r.teams.map((x) => x.teamId));
      if (!r.nextCursor) break;
      cursor = r.nextCursor;
    }
    expect(new Set(teams).size).toBe(10_000);
    // A figure for the note, not a timed assertion (docs/benchmark.md measures speed).
    console.log(
      `organisation paging: ${times.length} pages of 200, slowest ${Math.max(...times).toFixed(1)} ms: ${times.map((t) => t.toFixed(0)).join(' ')}`,
    );
  });
});
