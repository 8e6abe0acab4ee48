// Raising a budget's window and resetting its spend (docs/budgets.md#seeing-and-managing-them),
// through OrganisationService as an organisation's admin, against the real gateway: a raise lets
// requests through that the budget alone refused, lives on the window's row (so the next window
// does not have it), and "0" takes it back; a reset forgives one member's spend in the window and
// leaves everyone else's; each is in the audit log. And the attacks: bad amounts, a subject where
// none belongs, a member acting on their own budget, an admin acting on another organisation's
// budget or scope: each refused in the RPC's error shape, with nothing written.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, inject, it } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { openDb } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { BudgetBook } from '../../src/budgets/budget-book.ts';
import { db, openai } from '../support/context.ts';
import { budgetSpec, newOrganisation, refused, type TestOrg } from '../support/organisations.ts';

const ask = (apiKey: string, tokens = 8) =>
  openai(apiKey)
    .chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 64,
      messages: [{ role: 'user', content: `hi [sim tokens=${tokens}]` }],
    })
    .then(
      () => ({ status: 200, code: '' }),
      (e: { status?: number; code?: string }) => ({ status: e.status ?? 0, code: e.code ?? '' }),
    );

const spec = budgetSpec;

/** Every window row of the organisation's budgets, and its audit log's length: what "nothing written" compares. */
async function writtenFor(orgId: string) {
  const windows = await db().query(
    `SELECT w.budget_id, w.subject, w.window_start, w.spent_nano::text, w.held_nano::text, w.raise_nano::text, w.forgiven_nano::text
     FROM budget_windows w JOIN budgets b ON b.id = w.budget_id WHERE b.account_id = $1 ORDER BY 1, 2, 3`,
    [orgId],
  );
  const audit = await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [orgId]);
  return { windows: windows.rows, audit: audit.rows[0].n as number };
}

async function lastAudit(orgId: string) {
  const r = await db().query(
    'SELECT actor, via, action, target, before, after FROM audit_log WHERE account_id = $1 ORDER BY id DESC LIMIT 1',
    [orgId],
  );
  return r.rows[0];
}

/** The member's usage rows' cost today (UTC), all their keys. */
async function spentToday(memberId: string): Promise<bigint> {
  const r = await db().query(
    `SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE member_id = $1 AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`,
    [memberId],
  );
  return BigInt(r.rows[0].c);
}

async function memberBudget(org: TestOrg, role: 'member' | 'billing', amountUsd: string) {
  const r = await org.people.admin.client.setBudget({
    organisationId: org.id,
    spec: spec({ scope: 'member', scopeId: org.people[role].memberId, amountUsd }),
  });
  return r.budget!.budgetId;
}

describe('raising a window', () => {
  it('lets through what the budget alone refused, until "0" takes it back; the window row holds it and the audit log says who', async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    const budgetId = await memberBudget(org, 'member', '0');
    expect(await ask(org.people.member.apiKey)).toEqual({ status: 402, code: 'budget_exceeded' });

    const raised = await admin.raiseBudget({ organisationId: org.id, budgetId, raiseUsd: '1' });
    expect(raised.budget).toMatchObject({ raiseNano: usdToNano('1'), amountNano: 0n, subject: '' });
    expect(raised.budget!.remainingNano).toBe(usdToNano('1'));
    expect(raised.budget!.scopeName).toBe('Pat member');
    expect(await ask(org.people.member.apiKey)).toEqual({ status: 200, code: '' });

    const rows = await db().query(
      `SELECT window_start, raise_nano::text AS raise, spent_nano::text AS spent FROM budget_windows WHERE budget_id = $1`,
      [budgetId],
    );
    expect(rows.rows).toHaveLength(1);
    // Today's window, UTC midnight: the raise ends with it.
    const midnight = new Date();
    midnight.setUTCHours(0, 0, 0, 0);
    expect(rows.rows[0].window_start.toISOString()).toBe(midnight.toISOString());
    expect(rows.rows[0].raise).toBe(usdToNano('1').toString());
    expect(BigInt(rows.rows[0].spent)).toBe(await spentToday(org.people.member.memberId));
    expect(await lastAudit(org.id)).toMatchObject({
      actor: `member:${org.people.admin.memberId}`,
      via: 'rpc',
      action: 'budget.raised',
      target: budgetId,
      before: { subject: '', raise_nano: '0', window_start: midnight.toISOString() },
      after: { subject: '', raise_nano: '1000000000', window_start: midnight.toISOString() },
    });

    // A new raise replaces the last; "0" takes it back.
    const back = await admin.raiseBudget({ organisationId: org.id, budgetId, raiseUsd: '0' });
    expect(back.budget!.raiseNano).toBe(0n);
    expect(await ask(org.people.member.apiKey)).toEqual({ status: 402, code: 'budget_exceeded' });
    const listed = (await admin.listBudgets({ organisationId: org.id })).budgets[0]!;
    expect(listed.raiseNano).toBe(0n);
    expect(listed.spentNano).toBe(await spentToday(org.people.member.memberId));
  });

  it("ends with its window: a hold in today's window has the raise, one in tomorrow's does not", async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    const { budget } = await admin.setBudget({
      organisationId: org.id,
      spec: spec({ amountUsd: '0.000001', timeZone: 'Asia/Tokyo' }),
    });
    await admin.raiseBudget({ organisationId: org.id, budgetId: budget!.budgetId, raiseUsd: '1' });
    const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 2 });
    try {
      const ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
      const book = new BudgetBook(knex);
      const caller = { accountId: org.id, keyId: 'key_x', memberId: '', teamId: '' } as never;
      const hold = async (at: number, n: number) =>
        ledger.placeBudgetedHold({
          apiKeyHash: ledger.hash(org.people.member.apiKey),
          requestId: `req_raise_${org.id}_${n}`,
          minNano: usdToNano('0.5'),
          maxNano: usdToNano('0.5'),
          ttlSeconds: 60,
          windows: await book.windowsFor(caller, () => '', at),
        });
      expect((await hold(Date.now(), 1)).kind).toBe('held');
      const tomorrow = await hold(timestampDate(budget!.windowEnd!).getTime() + 1000, 2);
      expect(tomorrow).toMatchObject({ kind: 'insufficient' });
      // Settled at nothing: the organisation's balance and the window are as they were.
      await ledger.settle({
        requestId: `req_raise_${org.id}_1`,
        costNano: 0n,
        model: 'gpt-4o-mini',
        route: '/v1/chat/completions',
        inputTokens: 0n,
        outputTokens: 0n,
        cachedTokens: 0n,
        cacheWriteTokens: 0n,
        usageEstimated: false,
        status: 'test',
        httpStatus: 200,
        latencyMs: 0,
      });
    } finally {
      await knex.destroy();
    }
  });
});

describe('resetting spend', () => {
  it("forgives one member's spend in the window, which lets them through again; another member's budget keeps its spend", async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    // Room for a request or two: the member spends until refused.
    const mine = await memberBudget(org, 'member', '0.00002');
    const theirs = await memberBudget(org, 'billing', '1');
    expect((await ask(org.people.billing.apiKey)).status).toBe(200);
    let r = await ask(org.people.member.apiKey);
    for (let i = 0; i < 20 && r.status === 200; i++) r = await ask(org.people.member.apiKey);
    expect(r).toEqual({ status: 402, code: 'budget_exceeded' });
    const spent = await spentToday(org.people.member.memberId);
    expect(spent).toBeGreaterThan(0n);

    const reset = await admin.resetBudgetSpend({ organisationId: org.id, budgetId: mine });
    expect(reset.forgivenNano).toBe(spent);
    expect(reset.budget).toMatchObject({ spentNano: 0n, forgivenNano: spent, heldNano: 0n });
    expect(reset.budget!.remainingNano).toBe(usdToNano('0.00002'));
    expect(await ask(org.people.member.apiKey)).toEqual({ status: 200, code: '' });
    const after = await spentToday(org.people.member.memberId);
    const listed = (await admin.listBudgets({ organisationId: org.id })).budgets;
    const byId = Object.fromEntries(listed.map((b) => [b.budgetId, b]));
    // The window counts what was spent since the reset only; the row keeps both figures.
    expect(byId[mine]!.spentNano).toBe(after - spent);
    expect(byId[theirs]!.spentNano).toBe(await spentToday(org.people.billing.memberId));
    expect(byId[theirs]!.forgivenNano).toBe(0n);
    const row = await db().query(
      'SELECT spent_nano::text AS s, forgiven_nano::text AS f FROM budget_windows WHERE budget_id = $1',
      [mine],
    );
    expect(row.rows).toEqual([{ s: after.toString(), f: spent.toString() }]);
    expect(await lastAudit(org.id)).toMatchObject({
      action: 'budget.spend_reset',
      target: mine,
      before: { spent_nano: spent.toString() },
      after: { spent_nano: '0', forgiven_nano: spent.toString() },
    });
  });

  it('while requests are in flight loses no charge: every settle after it counts, the row is never below what it forgave', async () => {
    const org = await newOrganisation('5');
    const budgetId = await memberBudget(org, 'member', '1');
    const resets = Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        new Promise((r) => setTimeout(r, i * 15)).then(() =>
          org.people.admin.client.resetBudgetSpend({ organisationId: org.id, budgetId }),
        ),
      ),
    );
    const answers = await Promise.all(Array.from({ length: 12 }, () => ask(org.people.member.apiKey, 4)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const forgiven = (await resets).reduce((sum, r) => sum + r.forgivenNano, 0n);
    const row = await db().query(
      'SELECT spent_nano::text AS s, held_nano::text AS h, forgiven_nano::text AS f FROM budget_windows WHERE budget_id = $1',
      [budgetId],
    );
    // Every charge is in spent; what the resets forgave, in all, is what forgiven says.
    expect(BigInt(row.rows[0].s)).toBe(await spentToday(org.people.member.memberId));
    expect(BigInt(row.rows[0].f)).toBe(forgiven);
    expect(BigInt(row.rows[0].f)).toBeLessThanOrEqual(BigInt(row.rows[0].s));
    expect(row.rows[0].h).toBe('0');
  });

  it('of a window nobody has used yet makes its row and forgives nothing', async () => {
    const org = await newOrganisation('0');
    const { budget } = await org.people.owner.client.setBudget({
      organisationId: org.id,
      spec: spec({ period: 'rolling', rollingHours: 24 }),
    });
    const r = await org.people.owner.client.resetBudgetSpend({ organisationId: org.id, budgetId: budget!.budgetId });
    expect(r.forgivenNano).toBe(0n);
    expect((await writtenFor(org.id)).windows).toHaveLength(1);
  });
});

describe('bad input and attacks, each refused with nothing written', () => {
  it('a raise of a negative, NaN, 1e400 or 30-digit amount is 400 invalid_value naming raise_usd', async () => {
    const org = await newOrganisation('0');
    const budgetId = await memberBudget(org, 'member', '1');
    const before = await writtenFor(org.id);
    for (const raiseUsd of ['-1', 'NaN', '1e400', '123456789012345678901234567890', '', '1000001', '0.0000000001']) {
      const r = await refused(org.people.admin.client.raiseBudget({ organisationId: org.id, budgetId, raiseUsd }));
      expect(r, raiseUsd).toMatchObject({ status: 400, code: 'invalid_value' });
      expect(r.message, raiseUsd).toContain('raise_usd');
    }
    expect(await writtenFor(org.id)).toEqual(before);
  });

  it('a subject on a budget that has none, or none on a customer budget, is 400 naming subject', async () => {
    const org = await newOrganisation('0');
    const admin = org.people.admin.client;
    const budgetId = await memberBudget(org, 'member', '1');
    const customers = (
      await admin.setBudget({ organisationId: org.id, spec: spec({ scope: 'customer', amountUsd: '1' }) })
    ).budget!.budgetId;
    const before = await writtenFor(org.id);
    for (const [id, subject] of [
      [budgetId, 'cust_1'],
      [customers, ''],
      [customers, 'a\u0000b'],
      [customers, 'x'.repeat(257)],
    ] as const) {
      const raise = await refused(admin.raiseBudget({ organisationId: org.id, budgetId: id, subject, raiseUsd: '1' }));
      const reset = await refused(admin.resetBudgetSpend({ organisationId: org.id, budgetId: id, subject }));
      for (const r of [raise, reset]) {
        expect(r, JSON.stringify(subject)).toMatchObject({ status: 400, code: 'invalid_value' });
        expect(r.message).toContain('subject');
      }
    }
    expect(await writtenFor(org.id)).toEqual(before);
    // An end customer's window of a customer budget is raised on its own row.
    const ok = await admin.raiseBudget({
      organisationId: org.id,
      budgetId: customers,
      subject: 'cust_42',
      raiseUsd: '2',
    });
    expect(ok.budget).toMatchObject({ subject: 'cust_42', raiseNano: usdToNano('2'), remainingNano: usdToNano('3') });
  });

  it('a member raising, resetting or setting their own budget is 403 not_allowed', async () => {
    const org = await newOrganisation('0');
    const budgetId = await memberBudget(org, 'member', '1');
    const before = await writtenFor(org.id);
    const me = org.people.member.client;
    for (const call of [
      () => me.raiseBudget({ organisationId: org.id, budgetId, raiseUsd: '100' }),
      () => me.resetBudgetSpend({ organisationId: org.id, budgetId }),
      () =>
        me.setBudget({
          organisationId: org.id,
          budgetId,
          spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '1000' }),
        }),
      () =>
        me.setBudget({
          organisationId: org.id,
          spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '1000' }),
        }),
      () => me.deleteBudget({ organisationId: org.id, budgetId }),
      () => org.people.billing.client.raiseBudget({ organisationId: org.id, budgetId, raiseUsd: '1' }),
    ])
      expect(await refused(call())).toMatchObject({ status: 403, code: 'not_allowed' });
    expect(await writtenFor(org.id)).toEqual(before);
  });

  it("an admin raising, resetting, changing or deleting another organisation's budget gets 404, and neither organisation has anything written", async () => {
    const [mine, theirs] = [await newOrganisation('1'), await newOrganisation('1')];
    const target = await memberBudget(theirs, 'member', '1');
    await theirs.people.admin.client.raiseBudget({ organisationId: theirs.id, budgetId: target, raiseUsd: '1' });
    const before = [await writtenFor(mine.id), await writtenFor(theirs.id)];
    const admin = mine.people.admin.client;
    for (const call of [
      () => admin.raiseBudget({ organisationId: mine.id, budgetId: target, raiseUsd: '500' }),
      () => admin.resetBudgetSpend({ organisationId: mine.id, budgetId: target }),
      () => admin.setBudget({ organisationId: mine.id, budgetId: target, spec: spec({ amountUsd: '500' }) }),
      () => admin.deleteBudget({ organisationId: mine.id, budgetId: target }),
    ])
      expect(await refused(call())).toMatchObject({ status: 404, code: 'budget_not_found' });
    // Naming the other organisation itself: it is not theirs to act on.
    expect(
      await refused(admin.raiseBudget({ organisationId: theirs.id, budgetId: target, raiseUsd: '500' })),
    ).toMatchObject({ status: 404, code: 'organisation_not_found' });
    // A budget on the other organisation's member, team or key.
    const theirTeam = (await theirs.people.owner.client.createTeam({ organisationId: theirs.id, name: 'Theirs' }))
      .team!;
    for (const [scope, scopeId] of [
      ['member', theirs.people.member.memberId],
      ['key', theirs.people.member.keyId],
      ['team', theirTeam.teamId],
      ['customer', `team:${theirTeam.teamId}`],
    ])
      expect(
        await refused(admin.setBudget({ organisationId: mine.id, spec: spec({ scope, scopeId }) })),
        scope,
      ).toMatchObject({ status: 404 });
    expect([await writtenFor(mine.id), (await writtenFor(theirs.id)).windows]).toEqual([before[0], before[1]!.windows]);
    expect((await mine.people.admin.client.listBudgets({ organisationId: mine.id })).budgets).toEqual([]);
  });
});

describe('who sees which budgets', () => {
  it("a member sees theirs, their keys', their teams' and the organisation's; `applying_to_me` narrows an admin's list the same way", async () => {
    const org = await newOrganisation('0');
    const owner = org.people.owner.client;
    const [ours, other] = await Promise.all([
      owner.createTeam({ organisationId: org.id, name: 'Ours' }),
      owner.createTeam({ organisationId: org.id, name: 'Other' }),
    ]);
    await owner.addTeamMember({
      organisationId: org.id,
      teamId: ours.team!.teamId,
      memberId: org.people.member.memberId,
    });
    await owner.addTeamMember({
      organisationId: org.id,
      teamId: ours.team!.teamId,
      memberId: org.people.admin.memberId,
    });
    const set = async (scope: string, scopeId: string, name: string) =>
      (await owner.setBudget({ organisationId: org.id, spec: spec({ scope, scopeId, name }) })).budget!.budgetId;
    const applying = [
      await set('organisation', '', 'all of us'),
      await set('member', org.people.member.memberId, 'mine'),
      await set('key', org.people.member.keyId, 'my key'),
      await set('team', ours.team!.teamId, 'our team'),
    ];
    await set('member', org.people.billing.memberId, 'billing person');
    await set('team', other.team!.teamId, 'other team');
    await set('key', org.people.admin.keyId, 'admin key');
    await set('customer', '', 'each customer');
    const seen = (await org.people.member.client.listBudgets({ organisationId: org.id })).budgets;
    expect(seen.map((b) => b.budgetId).sort()).toEqual([...applying].sort());
    expect(Object.fromEntries(seen.map((b) => [b.spec!.name, b.scopeName]))).toEqual({
      'all of us': '',
      mine: 'Pat member',
      'my key': expect.stringMatching(/prx-\w+…/),
      'our team': 'Ours',
    });
    expect((await org.people.admin.client.listBudgets({ organisationId: org.id })).budgets).toHaveLength(8);
    const adminsOwn = await org.people.admin.client.listBudgets({ organisationId: org.id, applyingToMe: true });
    expect(adminsOwn.budgets.map((b) => b.spec!.name).sort()).toEqual(['admin key', 'all of us', 'our team']);
  });
});
