// The BillingService RPCs the console added (docs/rpc.md), over gRPC on the RPC port as any
// internal client calls them: ListUsage's filters and cursor, ListLedger by account and kind,
// TopUp by account, GetUsageSummary, ListAccounts, GetAccount, CreateConsoleLink and
// ListVideoJobs. Figures checked against the database; usage made through the openai SDK.
import { beforeAll, describe, expect, it } from 'vitest';
import { Code, ConnectError } from '@connectrpc/connect';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { usdToNano } from '../../src/money/money.ts';
import { billing, db, newKey, openai, uniqueMarker, type TestKey } from '../support/context.ts';

const byKeyId = (keyId: string) => ({ ref: { case: 'keyId' as const, value: keyId } });

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

let key: TestKey;
let requestIds: string[];

beforeAll(async () => {
  key = await newKey('4');
  const chat = (model: string, directive: string) =>
    openai(key.apiKey).chat.completions.create({
      model,
      messages: [{ role: 'user', content: `rpc ${uniqueMarker()} [sim ${directive}]` }],
    });
  for (let i = 0; i < 4; i++) await chat('gpt-4o-mini', `tokens=${3 + i}`);
  await chat('gpt-5.4-mini', 'tokens=2');
  await expect(chat('gpt-4o-mini', 'fault=400')).rejects.toThrow();
  requestIds = (
    await db().query(
      'SELECT request_id FROM usage_records WHERE account_id = $1 ORDER BY created_at DESC, request_id',
      [key.accountId],
    )
  ).rows.map((r) => r.request_id as string);
});

describe('BillingService.ListUsage', () => {
  it('pages an account by cursor, newest first, every row once, by key or by account id alike', async () => {
    const seen: string[] = [];
    let cursor = '';
    do {
      const page = await billing().listUsage({ accountId: key.accountId, limit: 2, cursor });
      expect(page.records.length).toBeLessThanOrEqual(2);
      seen.push(...page.records.map((r) => r.requestId));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(requestIds);
    const byKey = await billing().listUsage({ key: byKeyId(key.keyId), limit: 100 });
    expect(byKey.records.map((r) => r.requestId)).toEqual(requestIds);
    expect(byKey.records[0]!.keyPrefix).toBe(key.apiKey.slice(0, 10));
    expect(byKey.nextCursor).toBe('');
  });

  it('keeps created_at to the microsecond, so a cursor never skips or repeats rows of the same millisecond', async () => {
    const page = await billing().listUsage({ accountId: key.accountId, limit: 1 });
    const db1 = await db().query(
      `SELECT (extract(epoch FROM created_at) * 1000000)::bigint::text AS us FROM usage_records WHERE request_id = $1`,
      [page.records[0]!.requestId],
    );
    const ts = page.records[0]!.createdAt!;
    expect(ts.seconds * 1_000_000n + BigInt(ts.nanos / 1000)).toBe(BigInt(db1.rows[0].us));
  });

  it('filters by model, status and time range', async () => {
    const mini = await billing().listUsage({ accountId: key.accountId, model: 'gpt-5.4-mini', limit: 100 });
    expect(mini.records.map((r) => r.model)).toEqual(['gpt-5.4-mini']);
    const errors = await billing().listUsage({ accountId: key.accountId, status: 'error', limit: 100 });
    expect(errors.records).toHaveLength(1);
    expect(errors.records[0]).toMatchObject({ httpStatus: 400, costNano: 0n });
    const ok = await billing().listUsage({ accountId: key.accountId, status: 'ok', limit: 100 });
    expect(ok.records).toHaveLength(5);
    const at400 = await billing().listUsage({ accountId: key.accountId, status: '400', limit: 100 });
    expect(at400.records.map((r) => r.requestId)).toEqual(errors.records.map((r) => r.requestId));
    const future = await billing().listUsage({
      accountId: key.accountId,
      from: timestampFromDate(new Date(Date.now() + 60_000)),
      limit: 100,
    });
    expect(future.records).toEqual([]);
  });

  it('refuses a bad cursor or status, both key and account id, and an unknown account', async () => {
    expect((await refusal(billing().listUsage({ accountId: key.accountId, cursor: 'bm9wZQ' }))).code).toBe(
      Code.InvalidArgument,
    );
    expect((await refusal(billing().listUsage({ accountId: key.accountId, status: 'sometimes' }))).code).toBe(
      Code.InvalidArgument,
    );
    expect((await refusal(billing().listUsage({ accountId: key.accountId, key: byKeyId(key.keyId) }))).code).toBe(
      Code.InvalidArgument,
    );
    expect((await refusal(billing().listUsage({ accountId: 'acct_nosuchaccount' }))).code).toBe(Code.NotFound);
  });
});

describe('BillingService.GetUsageSummary', () => {
  it("sums an account's requests, tokens and charges per UTC day and model", async () => {
    const to = new Date(Date.now() + 86_400_000);
    const from = new Date(Date.now() - 86_400_000);
    const r = await billing().getUsageSummary({
      accountId: key.accountId,
      from: timestampFromDate(from),
      to: timestampFromDate(to),
    });
    const expected = await db().query(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, model, count(*)::text AS n,
              sum(input_tokens)::text AS i, sum(output_tokens)::text AS o, sum(cost_nano)::text AS cost
       FROM usage_records WHERE account_id = $1 GROUP BY 1, 2 ORDER BY 1, model COLLATE "C"`,
      [key.accountId],
    );
    expect(r.rows.map((x) => [x.day, x.model, x.requests, x.inputTokens, x.outputTokens, x.costNano])).toEqual(
      expected.rows.map((e) => [e.day, e.model, BigInt(e.n), BigInt(e.i), BigInt(e.o), BigInt(e.cost)]),
    );
    const tooLong = refusal(
      billing().getUsageSummary({
        accountId: key.accountId,
        from: timestampFromDate(new Date('2000-01-01')),
        to: timestampFromDate(new Date('2002-01-01')),
      }),
    );
    expect((await tooLong).code).toBe(Code.InvalidArgument);
  });
});

describe('BillingService.ListLedger and TopUp by account', () => {
  it('tops up an account by its id and lists its top-ups alone with kinds', async () => {
    const externalId = `rpc-${uniqueMarker()}`;
    const r = await billing().topUp({ accountId: key.accountId, amountNano: usdToNano('0.5'), externalId });
    expect(r.applied).toBe(true);
    const credits = await billing().listLedger({ accountId: key.accountId, kinds: ['topup', 'refund'] });
    expect(credits.entries.map((e) => [e.kind, e.amountNano])).toEqual([
      ['topup', usdToNano('0.5')],
      ['topup', usdToNano('4')],
    ]);
    const charges = await billing().listLedger({ accountId: key.accountId, kinds: ['charge'], pageSize: 200 });
    expect(charges.entries).toHaveLength(5);
    expect((await refusal(billing().listLedger({ accountId: key.accountId, kinds: ['gift'] }))).code).toBe(
      Code.InvalidArgument,
    );
  });
});

describe('BillingService.ListAccounts and GetAccount', () => {
  it('lists accounts newest first with their figures, found by label or key prefix, paged by cursor', async () => {
    const label = `rpc-accounts-${uniqueMarker()}`;
    const made: TestKey[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await billing().createKey({ creditsNano: usdToNano(String(i + 1)), label });
      made.push({ apiKey: r.apiKey, keyId: r.keyId, accountId: r.accountId });
    }
    const first = await billing().listAccounts({ query: label, pageSize: 2 });
    const second = await billing().listAccounts({ query: label, pageSize: 2, cursor: first.nextCursor });
    expect(second.nextCursor).toBe('');
    expect([...first.accounts, ...second.accounts].map((a) => a.accountId)).toEqual(
      made.map((m) => m.accountId).reverse(),
    );
    expect(first.accounts[0]).toMatchObject({
      label,
      balanceNano: usdToNano('3'),
      heldNano: 0n,
      availableNano: usdToNano('3'),
      spend30dNano: 0n,
      liveKeys: 1,
    });
    expect(first.accounts[0]!.lastUsedAt).toBeUndefined();
    const byPrefix = await billing().listAccounts({ query: made[1]!.apiKey.slice(0, 10) });
    expect(byPrefix.accounts.map((a) => a.accountId)).toEqual([made[1]!.accountId]);
    // A whole key is matched by its visible prefix only.
    const byWholeKey = await billing().listAccounts({ query: made[1]!.apiKey });
    expect(byWholeKey.accounts.map((a) => a.accountId)).toEqual([made[1]!.accountId]);
  });

  it("gives one account's figures and its keys with their limits, revoked keys included", async () => {
    await billing().setRateLimits({ key: byKeyId(key.keyId), requestsPerMinute: 77, tokensPerMinute: 5000n });
    const r = await billing().getAccount({ accountId: key.accountId });
    const spend = await db().query('SELECT sum(cost_nano)::text AS s FROM usage_records WHERE account_id = $1', [
      key.accountId,
    ]);
    expect(r.account).toMatchObject({ accountId: key.accountId, spend30dNano: BigInt(spend.rows[0].s), liveKeys: 1 });
    expect(timestampDate(r.account!.lastUsedAt!).getTime()).toBeGreaterThan(Date.now() - 120_000);
    expect(r.keys).toEqual([
      expect.objectContaining({
        keyId: key.keyId,
        prefix: key.apiKey.slice(0, 10),
        requestsPerMinute: 77,
        tokensPerMinute: 5000n,
      }),
    ]);
    expect((await refusal(billing().getAccount({ accountId: 'acct_nosuchaccount' }))).code).toBe(Code.NotFound);
  });
});

describe('BillingService.CreateConsoleLink', () => {
  it("makes a token for a live key, refused for another owner's key and for a revoked one", async () => {
    const owned = await billing().createKey({ creditsNano: 0n, label: 'linked', owner: `telegram:${Date.now()}` });
    const link = await billing()
      .createConsoleLink({
        key: { ...byKeyId(owned.keyId), owner: `telegram:${Date.now() - 1}x` },
      })
      .catch((err: unknown) => ConnectError.from(err));
    expect(link).toBeInstanceOf(ConnectError);
    expect((link as ConnectError).code).toBe(Code.NotFound);
    const ok = await billing().createConsoleLink({ key: byKeyId(owned.keyId) });
    expect(ok.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const lasts = timestampDate(ok.expiresAt!).getTime() - Date.now();
    expect(lasts).toBeGreaterThan(9 * 60_000);
    expect(lasts).toBeLessThanOrEqual(10 * 60_000 + 5_000);
    await billing().revokeKey({ key: byKeyId(owned.keyId) });
    expect((await refusal(billing().createConsoleLink({ key: byKeyId(owned.keyId) }))).code).toBe(Code.NotFound);
  });
});

describe('BillingService.ListVideoJobs', () => {
  it('lists video jobs of every account or of one, newest first, deleted ones marked, paged by cursor', async () => {
    const owner = await newKey('1');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = `video_${uniqueMarker().replace(/[^a-z0-9]/g, '')}${i}`;
      ids.push(id);
      await db().query(
        `INSERT INTO video_jobs (id, request_id, account_id, key_id, model, prompt, seconds, size, hold_nano, status, created_at, deleted_at)
         VALUES ($1, $2, $3, $4, 'sora-2', 'p', 4, '720x1280', 0, 'queued', now() - make_interval(secs => $5), $6)`,
        [id, `req_${id}`, owner.accountId, owner.keyId, 10 - i, i === 0 ? new Date() : null],
      );
    }
    const first = await billing().listVideoJobs({ accountId: owner.accountId, pageSize: 2 });
    const second = await billing().listVideoJobs({ accountId: owner.accountId, pageSize: 2, cursor: first.nextCursor });
    const jobs = [...first.jobs, ...second.jobs];
    expect(jobs.map((j) => j.id)).toEqual([...ids].reverse());
    expect(second.nextCursor).toBe('');
    expect(jobs.map((j) => j.deleted)).toEqual([false, false, true]);
    expect(jobs[0]).toMatchObject({
      accountId: owner.accountId,
      keyId: owner.keyId,
      model: 'sora-2',
      seconds: 4,
      workflowId: ids[2],
    });
    const every = await billing().listVideoJobs({ pageSize: 200 });
    expect(every.jobs.map((j) => j.id)).toEqual(expect.arrayContaining(ids));
  });
});
