// Budgets held like money (docs/budgets.md): a request's hold checks the balance and every budget
// over it in one transaction, so no budget is exceeded by a nano-dollar whatever the concurrency or
// the number of instances; the tightest refuses with 402 budget_exceeded naming it; a soft budget
// only counts; budgets are set by owners and admins, checked field by field.
import { describe, expect, inject, it } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { openDb } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { BudgetBook } from '../../src/budgets/budget-book.ts';
import { db, openai } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { budgetSpec, newOrganisation, refused, type TestOrg } from '../support/organisations.ts';

const MODEL = 'gpt-4o-mini';
const ask = (apiKey: string, baseURL?: string, tokens = 8) =>
  openai(apiKey, baseURL ? { baseURL } : {})
    .chat.completions.create({
      model: MODEL,
      max_tokens: 64,
      messages: [{ role: 'user', content: `hi [sim tokens=${tokens}]` }],
    })
    .then(
      () => ({ status: 200, code: '', message: '' }),
      (e: { status?: number; code?: string; message?: string }) => ({
        status: e.status ?? 0,
        code: e.code ?? '',
        message: e.message ?? '',
      }),
    );

const spec = (over: Record<string, unknown>) => budgetSpec({ scope: 'key', ...over });

async function keyOf(org: TestOrg, role: 'owner' | 'member'): Promise<string> {
  const keys = await org.people.owner.client.listOrganisationKeys({
    organisationId: org.id,
    memberId: org.people[role].memberId,
  });
  return keys.keys[0]!.keyId;
}

/** What the key's usage rows charged, in all. */
async function chargedTo(keyId: string): Promise<bigint> {
  const r = await db().query('SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE key_id = $1', [
    keyId,
  ]);
  return BigInt(r.rows[0].c);
}

describe('a budget held like money', () => {
  const b = gatewayForFile('budgets-b', {});
  const c = gatewayForFile('budgets-c', { BILLING_MODE: 'hold' });

  it('50 concurrent requests over three instances (leases and holds) never charge a key more than its budget; the rest are 402 budget_exceeded', {
    timeout: 120_000,
  }, async () => {
    const [gb, gc] = await Promise.all([b(), c()]);
    const org = await newOrganisation('50');
    const keyId = await keyOf(org, 'member');
    // A budget that about a dozen of these requests fit in.
    const budget = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'key', scopeId: keyId, amountUsd: '0.0001', name: 'intern' }),
    });
    const bases = [undefined, `${gb.httpUrl}/v1`, `${gc.httpUrl}/v1`];
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => ask(org.people.member.apiKey, bases[i % 3], 8)),
    );
    const ok = results.filter((r) => r.status === 200).length;
    expect(results.filter((r) => r.status !== 200 && r.code !== 'budget_exceeded')).toEqual([]);
    const refusedBudget = results.filter((r) => r.status === 402 && r.code === 'budget_exceeded');
    expect(ok).toBeGreaterThan(0);
    expect(ok + refusedBudget.length).toBe(50);
    expect(refusedBudget[0]!.message).toContain(budget.budget!.budgetId);
    const charged = await chargedTo(keyId);
    expect(charged).toBeLessThanOrEqual(usdToNano('0.0001'));
    // The window says the same: what its requests were charged, nothing still held.
    const listed = (await org.people.admin.client.listBudgets({ organisationId: org.id })).budgets;
    expect(listed).toHaveLength(1);
    expect(listed[0]!.spentNano).toBe(charged);
    expect(listed[0]!.heldNano).toBe(0n);
    expect(listed[0]!.remainingNano).toBe(usdToNano('0.0001') - charged);
  });

  it('the tightest budget over a request refuses it: a member budget under a roomy organisation one', async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    await admin.setBudget({ organisationId: org.id, spec: spec({ scope: 'organisation', amountUsd: '100' }) });
    const member = await admin.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '0' }),
    });
    const r = await ask(org.people.member.apiKey);
    expect(r).toMatchObject({ status: 402, code: 'budget_exceeded' });
    expect(r.message).toContain(member.budget!.budgetId);
    expect(r.message).toMatch(/resets at \d{4}-\d\d-\d\dT/);
    // Another member of the organisation is not under it.
    expect((await ask(org.people.billing.apiKey)).status).toBe(200);
    // And its balance is untouched by the refusal.
    expect(await chargedTo(await keyOf(org, 'member'))).toBe(0n);
  });

  it('a soft budget only counts: spent past it, nothing refused', async () => {
    const org = await newOrganisation('5');
    await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'organisation', amountUsd: '0', mode: 'soft' }),
    });
    expect((await ask(org.people.member.apiKey)).status).toBe(200);
    const [budget] = (await org.people.admin.client.listBudgets({ organisationId: org.id })).budgets;
    expect(budget!.spentNano).toBeGreaterThan(0n);
    expect(budget!.remainingNano).toBe(0n);
  });

  it("a budget set during the day counts the day's spend so far", async () => {
    const org = await newOrganisation('5');
    expect((await ask(org.people.member.apiKey)).status).toBe(200);
    const before = await chargedTo(await keyOf(org, 'member'));
    const set = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '1' }),
    });
    expect(set.budget!.spentNano).toBe(before);
  });
});

describe('setting budgets', () => {
  it('is for owners and admins; a member sees the budgets over their own requests only', async () => {
    const org = await newOrganisation('0');
    await org.people.admin.client.setBudget({ organisationId: org.id, spec: spec({ scope: 'organisation' }) });
    await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'member', scopeId: org.people.billing.memberId }),
    });
    const own = await refused(
      org.people.member.client.setBudget({
        organisationId: org.id,
        spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '1000' }),
      }),
    );
    expect(own).toMatchObject({ status: 403, code: 'not_allowed' });
    const seen = (await org.people.member.client.listBudgets({ organisationId: org.id })).budgets;
    expect(seen.map((x) => x.spec?.scope)).toEqual(['organisation']);
    expect((await org.people.billing.client.listBudgets({ organisationId: org.id })).budgets).toHaveLength(2);
  });

  it("refuses bad amounts, periods, zones and another organisation's scope, naming the field, and writes nothing", async () => {
    const [org, other] = await Promise.all([newOrganisation('0'), newOrganisation('0')]);
    const otherTeam = (await other.people.owner.client.createTeam({ organisationId: other.id, name: 'Theirs' })).team!;
    const admin = org.people.admin.client;
    const cases: [Record<string, unknown>, string][] = [
      [{ amountUsd: '-1' }, 'amount_usd'],
      [{ amountUsd: 'NaN' }, 'amount_usd'],
      [{ amountUsd: '1e400' }, 'amount_usd'],
      [{ amountUsd: '123456789012345678901234567890' }, 'amount_usd'],
      [{ amountUsd: '0.0000000001' }, 'amount_usd'],
      [{ amountUsd: '1000001' }, 'amount_usd'],
      [{ period: 'fortnight' }, 'period'],
      [{ timeZone: 'Mars/Olympus_Mons' }, 'time_zone'],
      [{ period: 'rolling', rollingHours: 0 }, 'rolling_hours'],
      [{ period: 'month', startDay: 31 }, 'start_day'],
      [{ mode: 'maybe' }, 'mode'],
      [{ scope: 'galaxy' }, 'scope'],
    ];
    for (const [over, param] of cases) {
      const r = await refused(
        admin.setBudget({ organisationId: org.id, spec: spec({ scope: 'organisation', ...over }) }),
      );
      expect(r.status, JSON.stringify(over)).toBe(400);
      expect(r.message, JSON.stringify(over)).toContain(param);
    }
    const foreign = await refused(
      admin.setBudget({ organisationId: org.id, spec: spec({ scope: 'team', scopeId: otherTeam.teamId }) }),
    );
    expect(foreign.status).toBe(404);
    expect((await admin.listBudgets({ organisationId: org.id })).budgets).toEqual([]);
  });
});

describe('windows on the clock', () => {
  it("in New York across the spring change: a hold at 23:59:59 takes its day's window, one at 00:00:01 the next, each against its own amount", async () => {
    const org = await newOrganisation('5');
    const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 2 });
    try {
      const ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
      const book = new BudgetBook(knex);
      const amount = usdToNano('0.000001');
      await org.people.admin.client.setBudget({
        organisationId: org.id,
        spec: spec({ scope: 'organisation', amountUsd: '0.000001', timeZone: 'America/New_York' }),
      });
      const caller = { accountId: org.id, keyId: 'key_x', memberId: '', teamId: '' } as never;
      const hold = async (at: string, n: number) =>
        ledger.placeBudgetedHold({
          apiKeyHash: ledger.hash(org.people.member.apiKey),
          requestId: `req_dst_${org.id}_${n}`,
          minNano: amount,
          maxNano: amount,
          ttlSeconds: 60,
          windows: await book.windowsFor(caller, () => '', Date.parse(at)),
        });
      // 23:59:59 EST on 7 March fills that day's window; a second hold there does not fit.
      expect((await hold('2026-03-08T04:59:59Z', 1)).kind).toBe('held');
      const second = await hold('2026-03-08T04:59:59.500Z', 2);
      expect(second).toMatchObject({ kind: 'insufficient', availableNano: 0n });
      // 00:00:01 EST on 8 March (the day clocks go forward, 23 hours long) is a new window.
      const next = await book.windowsFor(caller, () => '', Date.parse('2026-03-08T05:00:01Z'));
      expect(new Date(next[0]!.windowStart).toISOString()).toBe('2026-03-08T05:00:00.000Z');
      expect(next[0]!.windowEnd - next[0]!.windowStart).toBe(23 * 3_600_000);
      expect((await hold('2026-03-08T05:00:01Z', 3)).kind).toBe('held');
      // Settled at nothing, both windows end as they began: nothing spent, nothing held.
      for (const n of [1, 3])
        await ledger.settle({
          requestId: `req_dst_${org.id}_${n}`,
          costNano: 0n,
          model: MODEL,
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
      const rows = await knex.raw(
        `SELECT w.window_start, w.spent_nano::text AS spent, w.held_nano::text AS held FROM budget_windows w
         JOIN budgets b ON b.id = w.budget_id WHERE b.account_id = ? ORDER BY w.window_start`,
        [org.id],
      );
      expect(rows.rows.map((r: { spent: string; held: string }) => [r.spent, r.held])).toEqual([
        ['0', '0'],
        ['0', '0'],
      ]);
    } finally {
      await knex.destroy();
    }
  });
});
