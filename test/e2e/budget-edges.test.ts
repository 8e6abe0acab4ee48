// Budgets at their edges (docs/budgets.md): a window boundary in Tokyo, two instances racing
// across a boundary, a budget lowered below what is held, a budget changed while a request runs
// (its settle charges the windows its hold was placed in), and an output cap lowered to what the
// tightest budget affords rather than a refusal.
import { describe, expect, inject, it } from 'vitest';
import type { Knex } from 'knex';
import { usdToNano } from '../../src/money/money.ts';
import { openDb } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { BudgetBook } from '../../src/budgets/budget-book.ts';
import { db, openai, uniqueMarker, upstreamRequests } from '../support/context.ts';
import { budgetSpec, newOrganisation, type TestOrg } from '../support/organisations.ts';

const spec = budgetSpec;

/** A Ledger and a BudgetBook on a pool of their own: an instance, as far as the money is concerned. */
async function instance(): Promise<{ ledger: Ledger; book: BudgetBook; knex: Knex }> {
  const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 4 });
  return { knex, ledger: new Ledger(knex, await Ledger.loadSecret(knex, undefined)), book: new BudgetBook(knex) };
}

const settle = (ledger: Ledger, requestId: string, costNano: bigint) =>
  ledger.settle({
    requestId,
    costNano,
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

async function windows(org: TestOrg) {
  const r = await db().query(
    `SELECT w.window_start, w.spent_nano::text AS spent, w.held_nano::text AS held FROM budget_windows w
     JOIN budgets b ON b.id = w.budget_id WHERE b.account_id = $1 ORDER BY w.window_start`,
    [org.id],
  );
  return r.rows.map((x: { window_start: Date; spent: string; held: string }) => ({
    start: x.window_start.toISOString(),
    spent: x.spent,
    held: x.held,
  }));
}

describe('window boundaries', () => {
  it('in Tokyo: a hold at 23:59:59 JST takes that day’s window, one at 00:00:01 the next (midnight JST is 15:00 UTC)', async () => {
    const org = await newOrganisation('5');
    const a = await instance();
    try {
      const unit = usdToNano('0.000001');
      await org.people.admin.client.setBudget({
        organisationId: org.id,
        spec: spec({ amountUsd: '0.000001', timeZone: 'Asia/Tokyo' }),
      });
      const caller = { accountId: org.id, keyId: 'key_x', memberId: '', teamId: '' } as never;
      const hold = async (at: string, n: number) =>
        a.ledger.placeBudgetedHold({
          apiKeyHash: a.ledger.hash(org.people.member.apiKey),
          requestId: `req_tokyo_${org.id}_${n}`,
          minNano: unit,
          maxNano: unit,
          ttlSeconds: 60,
          windows: await a.book.windowsFor(caller, () => '', Date.parse(at)),
        });
      expect((await hold('2026-12-02T14:59:59Z', 1)).kind).toBe('held');
      expect((await hold('2026-12-02T14:59:59.900Z', 2)).kind).toBe('insufficient');
      const next = await a.book.windowsFor(caller, () => '', Date.parse('2026-12-02T15:00:01Z'));
      expect(new Date(next[0]!.windowStart).toISOString()).toBe('2026-12-02T15:00:00.000Z');
      expect(next[0]!.windowEnd - next[0]!.windowStart).toBe(24 * 3_600_000);
      expect((await hold('2026-12-02T15:00:01Z', 3)).kind).toBe('held');
      for (const n of [1, 3]) await settle(a.ledger, `req_tokyo_${org.id}_${n}`, unit);
      expect(await windows(org)).toEqual([
        { start: '2026-12-01T15:00:00.000Z', spent: String(unit), held: '0' },
        { start: '2026-12-02T15:00:00.000Z', spent: String(unit), held: '0' },
      ]);
    } finally {
      await a.knex.destroy();
    }
  });

  it('two instances racing across a boundary: exactly as many holds as each window allows, each in the window of its clock', async () => {
    const org = await newOrganisation('5');
    const [a, b] = await Promise.all([instance(), instance()]);
    try {
      const unit = usdToNano('0.000001');
      await org.people.admin.client.setBudget({
        organisationId: org.id,
        spec: spec({ amountUsd: '0.000005', timeZone: 'America/New_York' }),
      });
      const caller = { accountId: org.id, keyId: 'key_x', memberId: '', teamId: '' } as never;
      const keyHash = a.ledger.hash(org.people.member.apiKey);
      // 11:59:59.9 pm and 00:00:00.1 am in New York on 2 December (05:00 UTC is midnight).
      const times = ['2026-12-03T04:59:59.900Z', '2026-12-03T05:00:00.100Z'];
      const results = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          const at = times[i % 2]!;
          const inst = i % 4 < 2 ? a : b;
          const r = await inst.ledger.placeBudgetedHold({
            apiKeyHash: keyHash,
            requestId: `req_race_${org.id}_${i}`,
            minNano: unit,
            maxNano: unit,
            ttlSeconds: 60,
            windows: await inst.book.windowsFor(caller, () => '', Date.parse(at)),
          });
          return { at, kind: r.kind, id: `req_race_${org.id}_${i}` };
        }),
      );
      for (const at of times) expect(results.filter((r) => r.at === at && r.kind === 'held')).toHaveLength(5);
      for (const r of results.filter((x) => x.kind === 'held')) await settle(a.ledger, r.id, unit);
      expect(await windows(org)).toEqual([
        { start: '2026-12-02T05:00:00.000Z', spent: String(5n * unit), held: '0' },
        { start: '2026-12-03T05:00:00.000Z', spent: String(5n * unit), held: '0' },
      ]);
    } finally {
      await Promise.all([a.knex.destroy(), b.knex.destroy()]);
    }
  });
});

describe('budgets changed while requests run', () => {
  it('a budget lowered below what is held refuses new holds; the holds already placed settle as placed', async () => {
    const org = await newOrganisation('5');
    const a = await instance();
    try {
      const set = await org.people.admin.client.setBudget({
        organisationId: org.id,
        spec: spec({ amountUsd: '0.00001' }),
      });
      const caller = { accountId: org.id, keyId: 'key_x', memberId: '', teamId: '' } as never;
      const hold = async (n: number, nano: bigint) =>
        a.ledger.placeBudgetedHold({
          apiKeyHash: a.ledger.hash(org.people.member.apiKey),
          requestId: `req_low_${org.id}_${n}`,
          minNano: nano,
          maxNano: nano,
          ttlSeconds: 60,
          windows: await a.book.windowsFor(caller, () => '', Date.now()),
        });
      expect((await hold(1, 8_000n)).kind).toBe('held');
      await org.people.admin.client.setBudget({
        organisationId: org.id,
        budgetId: set.budget!.budgetId,
        spec: spec({ amountUsd: '0.000005' }),
      });
      a.book.forget(org.id);
      const refused = await hold(2, 1n);
      expect(refused).toMatchObject({ kind: 'insufficient', availableNano: 0n });
      expect((refused as { budget?: { roomNano: bigint } }).budget?.roomNano).toBe(0n);
      await settle(a.ledger, `req_low_${org.id}_1`, 7_000n);
      const [w] = await windows(org);
      expect(w).toMatchObject({ spent: '7000', held: '0' });
      // Spent past the lowered amount by what was already held, and no further: still refused.
      expect((await hold(3, 1n)).kind).toBe('insufficient');
    } finally {
      await a.knex.destroy();
    }
  });

  it('a budget deleted while its request runs: the request settles into the window its hold took, the next one is under it no more', async () => {
    const org = await newOrganisation('5');
    const set = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '0.01' }),
    });
    const slow = openai(org.people.member.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'slow [sim tokens=4 delay=1500]' }],
    });
    await new Promise((r) => setTimeout(r, 400));
    await org.people.admin.client.deleteBudget({ organisationId: org.id, budgetId: set.budget!.budgetId });
    await slow;
    const charged = await db().query(
      `SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE account_id = $1`,
      [org.id],
    );
    const [w] = await windows(org);
    expect(w).toMatchObject({ spent: charged.rows[0].c, held: '0' });
    expect(BigInt(w!.spent)).toBeGreaterThan(0n);
    await openai(org.people.member.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'after [sim tokens=4]' }],
    });
    expect(await windows(org)).toEqual([w]);
  });
});

describe('lowered, not refused', () => {
  it('where the tightest budget covers the input but not the output cap, the cap sent upstream is lowered to what fits and the charge stays within the budget', async () => {
    const org = await newOrganisation('5');
    // gpt-4o-mini: $0.15 / $0.60 per million tokens in and out. Room for the input and about
    // 100 output tokens, not the 4,000 asked.
    await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'key', scopeId: org.people.member.keyId, amountUsd: '0.00007', period: 'lifetime' }),
    });
    const marker = uniqueMarker('lower');
    const r = await openai(org.people.member.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 4000,
      messages: [{ role: 'user', content: `${marker} [sim tokens=5]` }],
    });
    expect(r.choices[0]!.message.content).toBeTruthy();
    const [sent] = await upstreamRequests(marker);
    const cap = Number(sent!.body!.max_tokens ?? sent!.body!.max_completion_tokens);
    expect(cap).toBeGreaterThan(0);
    expect(cap).toBeLessThan(4000);
    const charged = await db().query(
      `SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE account_id = $1`,
      [org.id],
    );
    expect(BigInt(charged.rows[0].c)).toBeLessThanOrEqual(usdToNano('0.00007'));
  });
});
