// The console's JSON API for organisations (docs/console.md#api) over real HTTP against real
// gateways: a member signs in with their own key or a one-time link and gets a member's session in
// their organisation; a team's key gets a holder's session that sees that key alone; the account
// routes answer each role as OrganisationService scopes it (the whole organisation with whom each
// request was charged to, or a `member`'s own); every organisation page's routes for each role (one
// allowed and one refused action at least: the full table is organisation-roles.test.ts's); a member
// of A reaching nothing of B by id, cursor or CSV; a removed member signed out on every instance;
// forged cross-site requests refused; an invitation redeemed through its link. The shared gateway
// (no ADMIN_TOKEN) and one of this file's own with ADMIN_TOKEN, on the same database.
import { beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { billing, db, gatewayUrl, uniqueMarker } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { ConsoleClient, sessionIdOf } from '../support/console-api.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { newOrganisation, ROLE, type RoleName, type TestOrg } from '../support/organisations.ts';

const ADMIN_TOKEN = `console-orgs-${'o'.repeat(24)}`;
const adminGatewayOf = gatewayForFile('console-orgs', { ADMIN_TOKEN });
let adminGw: GatewayProcess;

type Row = Record<string, unknown>;
interface Page<T = Row> {
  rows: T[];
  next_cursor: string;
}

const chat = (apiKey: string, text: string, tokens = 4) =>
  new OpenAI({ apiKey, baseURL: `${gatewayUrl()}/v1`, maxRetries: 0 }).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `${text} ${uniqueMarker()} [sim tokens=${tokens}]` }],
  });

/** A console session of a member of `org`, signed in with their own key. */
const consoleOf = (org: TestOrg, role: RoleName, url = gatewayUrl()) =>
  new ConsoleClient(url).signedIn({ key: org.people[role].apiKey });

/** Every page of a paged console answer, following next_cursor. */
async function allPages(client: ConsoleClient, path: string): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor = '';
  for (let i = 0; i < 200; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await client.get<Page>(`${path}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(r.status, `${path}: ${r.text}`).toBe(200);
    rows.push(...r.body.rows);
    cursor = r.body.next_cursor;
    if (!cursor) return rows;
  }
  throw new Error('more than 200 pages');
}

/** The organisation's usage rows, newest first, with whom each was charged to (the request log's fields). */
async function usageOf(accountId: string, where = '', params: unknown[] = []): Promise<Row[]> {
  const r = await db().query(
    `SELECT u.request_id, COALESCE(u.member_id, '') AS member_id, COALESCE(u.team_id, '') AS team_id, k.prefix AS key_prefix,
            u.cost_nano::text AS cost_nano
     FROM usage_records u JOIN api_keys k ON k.id = u.key_id
     WHERE u.account_id = $1 ${where} ORDER BY u.created_at DESC, u.request_id`,
    [accountId, ...params],
  );
  return r.rows;
}

const auditCount = async (accountId: string) =>
  Number((await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [accountId])).rows[0].n);

/** An organisation with a team and its service key, and requests by the owner, the member, billing and the team's key. */
let org: TestOrg;
let team: { id: string; apiKey: string; keyId: string };

beforeAll(async () => {
  adminGw = await adminGatewayOf();
  org = await newOrganisation('10');
  const owner = org.people.owner.client;
  const t = await owner.createTeam({ organisationId: org.id, name: `Backend ${uniqueMarker()}` });
  const k = await owner.createOrganisationKey({ organisationId: org.id, teamId: t.team!.teamId, name: 'service' });
  team = { id: t.team!.teamId, apiKey: k.apiKey, keyId: k.key!.keyId };
  for (const role of ['owner', 'member', 'billing'] as const) await chat(org.people[role].apiKey, role, 5);
  await chat(org.people.member.apiKey, 'member again', 7);
  for (let i = 0; i < 3; i++) await chat(team.apiKey, `team ${i}`, 3);
});

describe('signing in as a member', () => {
  it("a member's own key opens a member session in their organisation, for their role, that keeps the key", async () => {
    const c = await consoleOf(org, 'member');
    const me = await c.get('/me');
    expect(me.body).toMatchObject({
      role: 'member',
      account_id: org.id,
      member_id: org.people.member.memberId,
      member_name: 'Pat member',
      key_id: org.people.member.keyId,
      key_prefix: org.people.member.apiKey.slice(0, 10),
      organisation: { id: org.id, name: org.name, role: 'member' },
    });
    // What the role may do, as the service lists it: a member's own keys and usage, not the members.
    const allowed = (me.body.organisation as { allowed_actions: string[] }).allowed_actions;
    expect(allowed).toEqual(expect.arrayContaining(['keys.manage_own', 'spend.read_own', 'teams.read']));
    expect(allowed).not.toContain('members.read');
    expect(allowed).not.toContain('spend.read');
    const row = await db().query('SELECT role, account_id, member_id, key_id FROM console_sessions WHERE id = $1', [
      sessionIdOf(c.cookie),
    ]);
    expect(row.rows[0]).toEqual({
      role: 'member',
      account_id: org.id,
      member_id: org.people.member.memberId,
      key_id: org.people.member.keyId,
    });
  });

  it('a one-time member link (CreateMemberSignInLink) signs its member in once, with no key; a key link of a member key signs in its member', async () => {
    const link = await org.people.admin.client.createMemberSignInLink({
      organisationId: org.id,
      memberId: org.people.billing.memberId,
    });
    const c = new ConsoleClient(gatewayUrl());
    expect((await c.signIn({ link: link.token })).body).toMatchObject({ role: 'member' });
    expect((await c.get('/me')).body).toMatchObject({
      member_id: org.people.billing.memberId,
      key_id: '',
      organisation: { id: org.id, role: 'billing' },
    });
    const again = await new ConsoleClient(gatewayUrl()).signIn({ link: link.token });
    expect([again.status, (again.body as { error: Row }).error.code]).toEqual([401, 'invalid_link']);
    // Rotating "this key" needs a key: a link's session has none.
    const rotate = await c.post('/key/rotate', { confirm: true });
    expect([rotate.status, (rotate.body as { error: Row }).error.code]).toEqual([409, 'no_session_key']);

    const keyLink = await billing().createConsoleLink({
      key: { ref: { case: 'keyId', value: org.people.admin.keyId } },
    });
    const k = new ConsoleClient(gatewayUrl());
    expect((await k.signIn({ link: keyLink.token })).body).toMatchObject({ role: 'member' });
    expect((await k.get('/me')).body).toMatchObject({
      member_id: org.people.admin.memberId,
      key_id: org.people.admin.keyId,
      organisation: { role: 'admin' },
    });
  });

  it("a team's key opens a holder session that sees that key alone: its own requests, spend and CSV, no ledger and no organisation pages", async () => {
    const c = await new ConsoleClient(gatewayUrl()).signedIn({ key: team.apiKey });
    expect((await c.get('/me')).body).toMatchObject({ role: 'holder', key_id: team.keyId, organisation: null });
    const rows = await allPages(c, '/requests?limit=2');
    const own = await usageOf(org.id, 'AND u.key_id = $2', [team.keyId]);
    expect(rows.map((r) => r.request_id)).toEqual(own.map((r) => r.request_id));
    expect(rows).toHaveLength(3);
    // The organisation has more requests than these: none of the others is shown.
    expect((await usageOf(org.id)).length).toBeGreaterThan(rows.length);
    const daily = await c.get<{ rows: Row[] }>('/usage/daily');
    expect(daily.body.rows.reduce((n, r) => n + Number(r.requests), 0)).toBe(3);
    const csv = (await c.get('/requests.csv')).text.trimEnd().split('\n');
    expect(csv.slice(1).map((l) => l.split(',')[1])).toEqual(own.map((r) => r.request_id));
    for (const path of ['/ledger', '/org', '/org/members', '/org/keys', '/org/spend']) {
      const r = await c.get(path);
      expect([r.status, (r.body as { error: Row }).error.code], path).toEqual([403, 'wrong_role']);
    }
    const balance = await c.get('/balance');
    const rpc = await billing().getBalance({ key: { ref: { case: 'keyId', value: team.keyId } } });
    expect(balance.body).toMatchObject({ balance_nano: rpc.balanceNano.toString() });
  });
});

describe("the request log, spend and CSV follow the member's role", () => {
  it("a `member` sees only their own requests, spend and CSV, and the organisation's balance left", async () => {
    const c = await consoleOf(org, 'member');
    const own = await usageOf(org.id, 'AND u.member_id = $2', [org.people.member.memberId]);
    expect(own).toHaveLength(2);
    const rows = await allPages(c, '/requests?limit=1');
    expect(rows.map((r) => r.request_id)).toEqual(own.map((r) => r.request_id));
    for (const r of rows) expect(r).toMatchObject({ member_id: org.people.member.memberId, member_name: 'Pat member' });
    const csv = (await c.get('/requests.csv')).text.trimEnd().split('\n');
    expect(csv.slice(1).map((l) => l.split(',')[1])).toEqual(own.map((r) => r.request_id));
    const spend = await c.get<{ rows: Row[]; total: Row }>('/org/spend?by=member');
    expect(spend.body.rows.map((r) => r.key)).toEqual([org.people.member.memberId]);
    expect(spend.body.total.cost_nano).toBe(String(own.reduce((n, r) => n + BigInt(String(r.cost_nano)), 0n)));
    const daily = await c.get<{ rows: Row[] }>('/usage/daily');
    expect(daily.body.rows.reduce((n, r) => n + Number(r.requests), 0)).toBe(2);
    const balance = await c.get('/balance');
    const account = await db().query('SELECT balance_nano::text AS b FROM accounts WHERE id = $1', [org.id]);
    expect(balance.body.balance_nano).toBe(account.rows[0].b);
  });

  it('owners, admins and billing members see every request of the organisation with whom each was charged to', async () => {
    const every = await usageOf(org.id);
    for (const role of ['owner', 'admin', 'billing'] as const) {
      const c = await consoleOf(org, role);
      const rows = await allPages(c, '/requests?limit=3');
      expect(
        rows.map((r) => [r.request_id, r.member_id, r.team_id, r.key_prefix]),
        role,
      ).toEqual(every.map((r) => [r.request_id, r.member_id, r.team_id, r.key_prefix]));
    }
    const c = await consoleOf(org, 'billing');
    const teamRow = (await c.get<Page>('/requests?limit=200')).body.rows.find((r) => r.team_id === team.id)!;
    expect(teamRow).toMatchObject({ member_id: '', team_name: expect.stringMatching(/^Backend /) });
    const csv = (await c.get('/requests.csv')).text.trimEnd().split('\n');
    expect(csv[0]!.endsWith(',member_id,member_name,team_id,team_name')).toBe(true);
    expect(csv).toHaveLength(every.length + 1);
    const byTeam = await c.get<{ rows: Row[] }>('/org/spend?by=team');
    expect(byTeam.body.rows.find((r) => r.key === team.id)).toMatchObject({ requests: 3 });
  });
});

describe("each role's organisation pages", () => {
  it('the owner renames the organisation and makes a team; the last owner cannot demote or remove themselves', async () => {
    const o = await newOrganisation('1');
    const c = await consoleOf(o, 'owner');
    const renamed = await c.post('/org/rename', { name: `${o.name} Ltd` });
    expect([renamed.status, renamed.body.name]).toEqual([200, `${o.name} Ltd`]);
    const made = await c.post('/org/teams', { name: 'Research' });
    expect(made.status, made.text).toBe(200);
    const before = await auditCount(o.id);
    const demote = await c.post(`/org/members/${o.people.owner.memberId}/role`, { role: 'admin' });
    expect([demote.status, (demote.body as { error: Row }).error.code]).toEqual([400, 'last_owner']);
    const leave = await c.post(`/org/members/${o.people.owner.memberId}/remove`, {});
    expect([leave.status, (leave.body as { error: Row }).error.code]).toEqual([400, 'last_owner']);
    expect(await auditCount(o.id)).toBe(before);
  });

  it('an admin invites, lists and revokes invitations and manages teams; they may not invite an owner or remove one', async () => {
    const c = await consoleOf(org, 'admin');
    const inv = await c.post<{ invitation: Row; token: string }>('/org/invitations', { role: 'member', note: 'Quinn' });
    expect(inv.status, inv.text).toBe(200);
    expect(inv.body.token).toMatch(/^inv-/);
    const listed = await allPages(c, '/org/invitations');
    expect(listed.find((i) => i.id === inv.body.invitation.id)).toMatchObject({ state: 'open', note: 'Quinn' });
    const revoked = await c.post(`/org/invitations/${inv.body.invitation.id}/revoke`, {});
    expect(revoked.body).toMatchObject({ state: 'revoked' });
    const before = await auditCount(org.id);
    const owner = await c.post('/org/invitations', { role: 'owner' });
    expect([owner.status, (owner.body as { error: Row }).error.code]).toEqual([403, 'not_allowed']);
    const remove = await c.post(`/org/members/${org.people.owner.memberId}/remove`, {});
    expect([remove.status, (remove.body as { error: Row }).error.code]).toEqual([403, 'not_allowed']);
    expect(await auditCount(org.id)).toBe(before);
    expect((await c.get('/org/audit')).status).toBe(200);
  });

  it('a billing member reads the ledger, spend and members; they may not change a role, invite or manage teams', async () => {
    const c = await consoleOf(org, 'billing');
    const ledger = await c.get<Page>('/ledger?kind=topup,refund');
    expect(ledger.status).toBe(200);
    expect(ledger.body.rows[0]).toMatchObject({ kind: 'topup' });
    expect((await c.get('/org/members')).status).toBe(200);
    const before = await auditCount(org.id);
    for (const [path, body] of [
      [`/org/members/${org.people.member.memberId}/role`, { role: 'admin' }],
      ['/org/invitations', { role: 'member' }],
      ['/org/teams', { name: 'Not allowed' }],
    ] as const) {
      const r = await c.post(path, body);
      expect([r.status, (r.body as { error: Row }).error.code], path).toEqual([403, 'not_allowed']);
    }
    expect((await c.get('/org/audit')).status).toBe(403);
    expect(await auditCount(org.id)).toBe(before);
  });

  it('a member makes, rotates and revokes their own keys and sees the teams; they may not list members, raise their role or make a key for someone else', async () => {
    const c = await consoleOf(org, 'member');
    const made = await c.post<{ key: Row; api_key: string }>('/org/keys', { name: 'laptop' });
    expect(made.status, made.text).toBe(200);
    expect(made.body.key).toMatchObject({ member_id: org.people.member.memberId, name: 'laptop' });
    await chat(made.body.api_key, 'the new key works');
    const mine = await allPages(c, '/org/keys?mine=1');
    expect(mine.map((k) => k.key_id)).toContain(made.body.key.key_id);
    const rotated = await c.post<{ key: Row; api_key: string }>(`/org/keys/${made.body.key.key_id}/rotate`, {});
    expect(rotated.status).toBe(200);
    await expect(chat(made.body.api_key, 'old')).rejects.toMatchObject({ status: 401 });
    expect((await c.post(`/org/keys/${rotated.body.key.key_id}/revoke`, {})).body).toEqual({ revoked: true });
    expect((await c.get('/org/teams')).status).toBe(200);
    const before = await auditCount(org.id);
    const refusals: [string, string, Row?][] = [
      ['GET', '/org/members'],
      ['GET', '/org/keys'],
      ['GET', '/ledger'],
      ['GET', '/org/audit'],
      ['POST', `/org/members/${org.people.member.memberId}/role`, { role: 'admin' }],
      ['POST', '/org/keys', { member_id: org.people.billing.memberId }],
      ['POST', `/org/keys/${org.people.billing.keyId}/revoke`, {}],
    ];
    for (const [method, path, body] of refusals) {
      const r = await c.request(method, path, body ? { body } : {});
      expect([r.status, (r.body as { error: Row }).error.code], path).toEqual([403, 'not_allowed']);
    }
    expect(await auditCount(org.id)).toBe(before);
    await chat(org.people.billing.apiKey, "billing's key still works");
  });
});

describe('isolation between organisations', () => {
  it("a member of A reaches nothing of B through the console: by id in the address or body, by B's cursors, nor in a CSV", async () => {
    const [a, b] = [await newOrganisation('2'), await newOrganisation('2')];
    const bTeam = await b.people.owner.client.createTeam({ organisationId: b.id, name: 'B team' });
    const bInv = await b.people.owner.client.createInvitation({ organisationId: b.id, role: ROLE.admin });
    for (const o of [a, b]) for (let i = 0; i < 3; i++) await chat(o.people.member.apiKey, `iso ${i}`);
    const sa = await consoleOf(a, 'owner');
    const sb = await consoleOf(b, 'owner');
    const bCursor = String((await sb.get('/requests?limit=1')).body.next_cursor);
    const bMembersCursor = String((await sb.get('/org/members?limit=1')).body.next_cursor);
    expect(bCursor).not.toBe('');
    const before = await auditCount(b.id);
    const bMember = b.people.member.memberId;
    const bTeamId = bTeam.team!.teamId;
    const posts: [string, Row][] = [
      [`/org/members/${bMember}/role`, { role: 'admin' }],
      [`/org/members/${bMember}/remove`, {}],
      [`/org/members/${bMember}/sign-in-link`, {}],
      [`/org/teams/${bTeamId}/rename`, { name: 'mine now' }],
      [`/org/teams/${bTeamId}/delete`, {}],
      [`/org/teams/${bTeamId}/members`, { member_id: a.people.member.memberId }],
      [`/org/keys/${b.people.member.keyId}/revoke`, {}],
      [`/org/keys/${b.people.member.keyId}/rotate`, {}],
      [`/org/invitations/${bInv.invitation!.id}/revoke`, {}],
      ['/org/keys', { member_id: bMember }],
      ['/org/keys', { team_id: bTeamId }],
      ['/org/invitations', { role: 'member', team_id: bTeamId }],
    ];
    for (const [path, body] of posts) {
      const r = await sa.post(path, body);
      expect(r.status, `${path}: ${r.text}`).toBe(404);
    }
    // Lists and CSVs with B's ids and cursors show A's own or nothing.
    const marks = [b.id, bMember, bTeamId, b.people.member.keyId, b.people.member.apiKey.slice(0, 10)];
    for (const path of [
      `/org/members?team_id=${bTeamId}`,
      `/org/keys?member_id=${bMember}`,
      `/org/keys?team_id=${bTeamId}`,
      `/org/members?limit=1&cursor=${encodeURIComponent(bMembersCursor)}`,
      `/requests?limit=1&cursor=${encodeURIComponent(bCursor)}`,
      `/requests.csv?account_id=${b.id}&member_id=${bMember}`,
      `/org/spend?by=member&organisation_id=${b.id}`,
      `/org/audit.csv?organisation_id=${b.id}`,
      `/org?organisation_id=${b.id}`,
    ]) {
      const r = await sa.get(path);
      expect(r.status, path).toBe(200);
      for (const mark of marks) expect(r.text, `${path} shows ${mark}`).not.toContain(mark);
    }
    expect((await sa.get(`/admin/organisations/${b.id}/members`)).status).toBe(403);
    expect(await auditCount(b.id)).toBe(before);
    await chat(b.people.member.apiKey, "B's member's key still works");
  });
});

describe('a removed member', () => {
  it('is signed out at once on every instance, their key link and member link sessions included', async () => {
    const o = await newOrganisation('1');
    const here = await consoleOf(o, 'member');
    const there = await consoleOf(o, 'member', adminGw.httpUrl);
    const link = await o.people.owner.client.createMemberSignInLink({
      organisationId: o.id,
      memberId: o.people.member.memberId,
    });
    const byLink = await new ConsoleClient(adminGw.httpUrl).signedIn({ link: link.token });
    for (const s of [here, there, byLink]) expect((await s.get('/me')).status).toBe(200);
    const admin = await consoleOf(o, 'admin');
    const removed = await admin.post(`/org/members/${o.people.member.memberId}/remove`, {});
    expect(removed.body).toEqual({ keys_revoked: 1, keys_handed_over: 0, sessions_ended: 3 });
    for (const s of [here, there, byLink]) {
      const r = await s.get('/me');
      expect([r.status, (r.body as { error: Row }).error.code]).toEqual([401, 'no_session']);
    }
    await expect(chat(o.people.member.apiKey, 'gone')).rejects.toMatchObject({ status: 401 });
  });
});

describe('forged cross-site requests', () => {
  it('a change to an organisation from another origin, without the CSRF token or not as JSON is refused and changes nothing', async () => {
    const c = await consoleOf(org, 'owner');
    const inv = await org.people.owner.client.createInvitation({ organisationId: org.id, role: ROLE.member });
    const before = await auditCount(org.id);
    const tries: [Record<string, string>, number, string][] = [
      [{ origin: 'https://evil.example' }, 403, 'csrf_failed'],
      [{ 'sec-fetch-site': 'cross-site' }, 403, 'csrf_failed'],
      [{ 'x-csrf-token': '' }, 403, 'csrf_failed'],
      [{ 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
    ];
    for (const [headers, status, code] of tries) {
      for (const [path, body] of [
        ['/org/teams', { name: 'Forged' }],
        [`/org/members/${org.people.member.memberId}/remove`, {}],
        ['/org/invitations', { role: 'admin' }],
        [`/org/keys/${org.people.member.keyId}/revoke`, {}],
      ] as const) {
        const r = await c.post(path, body, headers);
        expect([r.status, (r.body as { error: Row }).error.code], `${path} ${JSON.stringify(headers)}`).toEqual([
          status,
          code,
        ]);
      }
    }
    // An invitation cannot be redeemed from another site either.
    const forged = await new ConsoleClient(gatewayUrl()).request('POST', '/invitation', {
      body: { token: inv.token, name: 'Mallory' },
      headers: { origin: 'https://evil.example' },
    });
    expect(forged.status).toBe(403);
    expect(forged.headers.get('set-cookie')).toBeNull();
    expect(await auditCount(org.id)).toBe(before);
    await chat(org.people.member.apiKey, 'still a member');
  });
});

describe('an invitation link', () => {
  it('makes a new member signed in at once, with their first key shown once; the link works once', async () => {
    const inv = await org.people.admin.client.createInvitation({
      organisationId: org.id,
      role: ROLE.member,
      teamId: team.id,
    });
    const c = new ConsoleClient(gatewayUrl());
    const r = await c.request('POST', '/invitation', {
      body: { token: inv.token, name: 'Robin <b>New</b>', create_key: true },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ role: 'member', organisation_id: org.id, org_role: 'member' });
    expect(String(r.body.api_key)).toMatch(/^prx-/);
    c.cookie = r.headers.get('set-cookie')!.split(';')[0]!;
    c.csrf = String(r.body.csrf);
    expect((await c.get('/me')).body).toMatchObject({
      role: 'member',
      member_name: 'Robin <b>New</b>',
      key_id: r.body.key_id,
      organisation: { id: org.id, role: 'member' },
    });
    await chat(String(r.body.api_key), 'first call');
    // Audited as the new member, through the console.
    const audit = await db().query(
      `SELECT actor, via, action FROM audit_log WHERE account_id = $1 AND actor = $2 ORDER BY id`,
      [org.id, `member:${r.body.member_id}`],
    );
    expect(audit.rows).toEqual([
      { actor: `member:${r.body.member_id}`, via: 'console', action: 'member.added' },
      { actor: `member:${r.body.member_id}`, via: 'console', action: 'key.created' },
    ]);
    const again = await new ConsoleClient(gatewayUrl()).request('POST', '/invitation', {
      body: { token: inv.token, name: 'Someone else' },
    });
    expect([again.status, (again.body as { error: Row }).error.code]).toEqual([404, 'invitation_not_usable']);
    expect(again.headers.get('set-cookie')).toBeNull();
  });
});

describe('the operator', () => {
  it("lists organisations, opens one's members, teams, keys, requests and audit, and acts on it with every permission, audited as the operator", async () => {
    const op = await new ConsoleClient(adminGw.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
    const found = await op.get<Page>(`/admin/organisations?q=${encodeURIComponent(org.name)}`);
    expect(found.body.rows.map((o) => o.id)).toEqual([org.id]);
    expect(found.body.rows[0]).toMatchObject({ members: expect.any(Number), teams: 1, my_role: '' });
    const at = `/admin/organisations/${org.id}`;
    expect((await op.get(at)).body).toMatchObject({ id: org.id, name: org.name });
    const members = await allPages(op, `${at}/members`);
    expect(members.map((m) => m.member_id)).toEqual(
      expect.arrayContaining(Object.values(org.people).map((p) => p.memberId)),
    );
    expect((await allPages(op, `${at}/teams`)).map((t) => t.team_id)).toEqual([team.id]);
    expect((await allPages(op, `${at}/keys`)).map((k) => k.key_id)).toContain(team.keyId);
    const requests = await allPages(op, `${at}/requests`);
    expect(requests.map((r) => r.request_id)).toEqual((await usageOf(org.id)).map((r) => r.request_id));
    const made = await op.post(`${at}/teams`, { name: `Ops ${uniqueMarker()}` });
    expect(made.status, made.text).toBe(200);
    const audit = await op.get<Page>(`${at}/audit`);
    expect(audit.body.rows[0]).toMatchObject({ actor: 'operator', via: 'console', action: 'team.created' });
    const csv = (await op.get(`${at}/audit.csv`)).text.split('\n');
    expect(csv[0]).toBe('at,id,actor,via,from_address,action,target,before,after');
    expect(csv[1]).toContain(',operator,console,');
    // A member's session is not the operator's.
    const member = await consoleOf(org, 'owner', adminGw.httpUrl);
    expect((await member.get(`${at}/members`)).status).toBe(403);
    expect((await op.get('/org/members')).status).toBe(403);
  });
});
