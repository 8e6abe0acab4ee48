// The money rules of docs/design.md (Money) at the ledger and through the gateway, concurrent ones
// included, against the real PostgreSQL server.
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { openDb } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { flushStatement, type LeasedCharge } from '../../src/billing/leases.ts';
import { newId } from '../../src/billing/ids.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, type TokenPrices } from '../../src/billing/pricing.ts';
import { inputTokensUpperBound } from '../../src/inference/tokens.ts';
import { accountActivity, balanceOf, billing, checkInvariants, db, newKey, openai } from '../support/context.ts';

const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 30 });
const ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
afterAll(() => knex.destroy());

const settleInput = (requestId: string, costNano: bigint) => ({
  requestId,
  costNano,
  model: 'gpt-4o-mini',
  route: 'test',
  inputTokens: 1n,
  outputTokens: 1n,
  cachedTokens: 0n,
  cacheWriteTokens: 0n,
  usageEstimated: false,
  status: 'ok',
  httpStatus: 200,
  latencyMs: 1,
});

describe('ledger rules', () => {
  it('the same top-up external id applied 20 times concurrently credits once', async () => {
    const key = await newKey('1');
    const externalId = newId('pay');
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        billing().topUp({
          key: { ref: { case: 'keyId', value: key.keyId } },
          amountNano: 2_000_000_000n,
          externalId,
          cause: 'test',
        }),
      ),
    );
    expect(results.filter((r) => r.applied)).toHaveLength(1);
    expect((await balanceOf(key.accountId)).balance).toBe(3_000_000_000n);
    const rows = await db().query("SELECT count(*)::int AS n FROM ledger WHERE external_id = $1 AND kind = 'topup'", [
      externalId,
    ]);
    expect(rows.rows[0].n).toBe(1);
    await checkInvariants(key.accountId);
  });

  it('a request settles exactly once, charging min(cost, hold), even when settled concurrently', async () => {
    const key = await newKey('1');
    const requestId = newId('req');
    const hold = await ledger.placeHold({
      apiKeyHash: ledger.hash(key.apiKey),
      requestId,
      minNano: 10n,
      maxNano: 1000n,
      ttlSeconds: 60,
    });
    expect(hold).toMatchObject({ kind: 'held', amountNano: 1000n });
    expect((await balanceOf(key.accountId)).held).toBe(1000n);

    const results = await Promise.all(Array.from({ length: 10 }, () => ledger.settle(settleInput(requestId, 700n))));
    expect(results.filter((r) => r.firstSettle)).toHaveLength(1);
    expect(results.every((r) => r.chargedNano === 700n)).toBe(true);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 1_000_000_000n - 700n, held: 0n });

    // A cost above the hold is capped at the hold; the excess is recorded, not charged.
    const r2 = newId('req');
    await ledger.placeHold({
      apiKeyHash: ledger.hash(key.apiKey),
      requestId: r2,
      minNano: 1n,
      maxNano: 500n,
      ttlSeconds: 60,
    });
    expect((await ledger.settle(settleInput(r2, 900n))).chargedNano).toBe(500n);
    const u = await db().query(
      'SELECT cost_nano::text, uncovered_nano::text FROM usage_records WHERE request_id = $1',
      [r2],
    );
    expect(u.rows[0]).toEqual({ cost_nano: '500', uncovered_nano: '400' });
    await checkInvariants(key.accountId);
  });

  it('a usage row keeps the trace id it is given, and stores NULL for none or for anything but a trace id', async () => {
    const key = await newKey('1');
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const cases: [string | undefined, string | null][] = [
      [traceId, traceId],
      ['', null],
      [undefined, null],
      [traceId.toUpperCase(), null],
      ['not a trace id', null],
    ];
    for (const [given, stored] of cases) {
      const requestId = newId('req');
      await ledger.placeHold({
        apiKeyHash: ledger.hash(key.apiKey),
        requestId,
        minNano: 1n,
        maxNano: 5n,
        ttlSeconds: 60,
      });
      const settled = await ledger.settle({
        ...settleInput(requestId, 3n),
        ...(given === undefined ? {} : { traceId: given }),
      });
      expect(settled).toEqual({ chargedNano: 3n, firstSettle: true });
      const u = await db().query('SELECT trace_id FROM usage_records WHERE request_id = $1', [requestId]);
      expect(u.rows, String(given)).toEqual([{ trace_id: stored }]);
    }
    await checkInvariants(key.accountId);
  });

  it('a request id can hold only once', async () => {
    const key = await newKey('1');
    const requestId = newId('req');
    await ledger.placeHold({
      apiKeyHash: ledger.hash(key.apiKey),
      requestId,
      minNano: 1n,
      maxNano: 5n,
      ttlSeconds: 60,
    });
    await expect(
      ledger.placeHold({ apiKeyHash: ledger.hash(key.apiKey), requestId, minNano: 1n, maxNano: 5n, ttlSeconds: 60 }),
    ).rejects.toThrow(/already used/);
  });

  it('a lease batch naming a request already charged is refused whole: nothing of it is written, the balance unchanged', async () => {
    const key = await newKey('1');
    const lease = { id: newId('lease'), accountId: key.accountId };
    await knex.raw(
      `WITH h AS (INSERT INTO holds (request_id, account_id, key_id, amount_nano, expires_at)
         VALUES (?, ?, ?, 100000, now() + interval '1 hour') RETURNING amount_nano)
       UPDATE accounts SET held_nano = held_nano + (SELECT amount_nano FROM h) WHERE id = ?`,
      [lease.id, key.accountId, key.keyId, key.accountId],
    );
    const charge = (requestId: string): LeasedCharge => ({
      requestId,
      keyId: key.keyId,
      memberId: '',
      teamId: '',
      model: 'gpt-4o-mini',
      requestedModel: 'gpt-4o-mini',
      priceVersion: 0n,
      providerCostNano: 900n,
      markupVersion: 0n,
      deployment: '',
      route: '/v1/chat/completions',
      inputTokens: 1n,
      outputTokens: 1n,
      cachedTokens: 0n,
      cacheWriteTokens: 0n,
      usageEstimated: false,
      costNano: 1_000n,
      uncoveredNano: 0n,
      status: 'ok',
      httpStatus: 200,
      latencyMs: 1,
      units: 0n,
      unit: '',
    });
    const first = newId('req');
    expect(await flushStatement(knex, [charge(first)], lease, new Map())).toEqual({ applied: true, alertDue: false });
    const after = await balanceOf(key.accountId);
    expect(after.balance).toBe(1_000_000_000n - 1_000n);
    // The same request again, beside a new one: nothing of the batch is written.
    const other = newId('req');
    await expect(flushStatement(knex, [charge(other), charge(first)], lease, new Map())).rejects.toThrow(
      /duplicate key/,
    );
    expect(await balanceOf(key.accountId)).toEqual(after);
    const rows = async (table: string, id: string) =>
      Number((await db().query(`SELECT count(*)::int AS n FROM ${table} WHERE request_id = $1`, [id])).rows[0].n);
    expect([await rows('ledger', first), await rows('usage_records', first)]).toEqual([1, 1]);
    expect([await rows('ledger', other), await rows('usage_records', other)]).toEqual([0, 0]);
    await checkInvariants(key.accountId);
  });

  it('holds left by a crashed process expire and are released by the sweeper; a late settle charges nothing', async () => {
    const key = await newKey('1');
    const requestId = newId('req');
    await ledger.placeHold({
      apiKeyHash: ledger.hash(key.apiKey),
      requestId,
      minNano: 1n,
      maxNano: 12345n,
      ttlSeconds: 0,
    });
    expect((await balanceOf(key.accountId)).held).toBe(12345n);
    await new Promise((r) => setTimeout(r, 20));
    // Two sweepers at once (two instances) release it once: expired, held back to 0, the balance
    // whole. (A test gateway's own sweeper on this shared database may be first: the same result.)
    await Promise.all([ledger.expireHolds(), ledger.expireHolds()]);
    const released = await db().query('SELECT status FROM holds WHERE request_id = $1', [requestId]);
    expect(released.rows.map((r) => r.status)).toEqual(['expired']);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 1_000_000_000n, held: 0n });
    const late = await ledger.settle(settleInput(requestId, 100n));
    expect(late).toEqual({ chargedNano: 0n, firstSettle: false });
    expect((await balanceOf(key.accountId)).balance).toBe(1_000_000_000n);
    await checkInvariants(key.accountId);
  });

  it('the database itself refuses a negative balance, holds above the balance and ledger edits', async () => {
    const key = await newKey('1');
    await expect(db().query('UPDATE accounts SET balance_nano = -1 WHERE id = $1', [key.accountId])).rejects.toThrow(
      /check constraint/,
    );
    await expect(
      db().query('UPDATE accounts SET held_nano = balance_nano + 1 WHERE id = $1', [key.accountId]),
    ).rejects.toThrow(/check constraint/);
    await expect(
      db().query('UPDATE ledger SET amount_nano = 1 WHERE account_id = $1', [key.accountId]),
    ).rejects.toThrow(/append-only/);
    await expect(db().query('DELETE FROM ledger WHERE account_id = $1', [key.accountId])).rejects.toThrow(
      /append-only/,
    );
  });
});

describe('concurrent requests against a small balance', () => {
  it('a balance covering exactly 10 requests, 50 at once: 10 succeed, 40 get 402, nothing left held', async () => {
    const model = 'gpt-4o-mini';
    const prices = MODELS.find((m) => m.id === model)!.prices as unknown as TokenPrices;
    // Same bytes in every request, so every worst case is the same; the slow upstream keeps
    // every hold open until all 50 have asked.
    const body = {
      model,
      max_tokens: 100,
      messages: [{ role: 'user' as const, content: 'concurrency [sim tokens=100 delay=1500]' }],
    };
    const worstCase = tokenCostNano(prices, {
      inputTokens: BigInt(inputTokensUpperBound(body)),
      outputTokens: 100n,
      cachedTokens: 0n,
      cacheWriteTokens: 0n,
    });
    const key = await newKey(10n * worstCase);
    const client = openai(key.apiKey, { timeout: 20_000 });

    const results = await Promise.allSettled(Array.from({ length: 50 }, () => client.chat.completions.create(body)));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(ok).toHaveLength(10);
    expect(refused).toHaveLength(40);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(OpenAI.APIError);
      expect((r.reason as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    }
    const { balance, held } = await balanceOf(key.accountId);
    expect(held).toBe(0n);
    expect(balance).toBeGreaterThanOrEqual(0n);
    expect(await accountActivity(key.accountId)).toMatchObject({ holds: 10, usage: 10, charges: 10 });
    await checkInvariants(key.accountId);
  });
});
