// The margin report (docs/billing.md#the-margin-report): revenue, provider cost and margin over
// the usage rows created in [from, to), by model, UTC day or account. On a database of this
// file's own, so the rows it adds up are exactly the ones this test made: real requests through
// the official openai SDK, and rows written here with known provider costs (one from before the
// provider cost was recorded, whose cost is cost_nano + uncovered_nano).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { BillingService, MarginGrouping } from '../../src/gen/gateway/v1/billing_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { nanoToUsd, usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { createDatabase } from '../support/postgres.ts';
import { uniqueMarker } from '../support/context.ts';

const DAY_MS = 86_400_000;
let gateway: GatewayProcess;
let knex: Db;
let billing: ReturnType<typeof createClient<typeof BillingService>>;
/** The range every report below covers unless it says otherwise: the last 3 days and a minute ahead. */
let from: Date;
let to: Date;

beforeAll(async () => {
  const name = `margin_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  gateway = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `margin-report-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: url.toString(),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
    },
  });
  knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
  billing = createClient(BillingService, createGrpcTransport({ baseUrl: gateway.rpcUrl }));

  // Real requests: several models, two accounts.
  const [alice, bob] = await Promise.all(
    ['alice', 'bob'].map((label) => billing.createKey({ creditsNano: usdToNano('5'), label })),
  );
  const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gateway.httpUrl}/v1`, maxRetries: 0 });
  const chat = (apiKey: string, model: string, tokens: number) =>
    sdk(apiKey).chat.completions.create({
      model,
      messages: [{ role: 'user', content: `margin ${uniqueMarker()} [sim tokens=${tokens}]` }],
    });
  await chat(alice!.apiKey, 'gpt-4o-mini', 5);
  await chat(alice!.apiKey, 'gpt-4o-mini', 9);
  await chat(alice!.apiKey, 'gpt-5.4-mini', 3);
  await sdk(alice!.apiKey).embeddings.create({ model: 'text-embedding-3-small', input: 'margin report' });
  await chat(bob!.apiKey, 'gpt-4o-mini', 4);
  await chat(bob!.apiKey, 'gpt-5.4-mini', 6);
  // Each request's usage row is written as it settles, which may be just after its answer.
  for (const until = Date.now() + 10_000; ; ) {
    if (
      Number((await knex.raw("SELECT count(*) AS n FROM usage_records WHERE status <> 'lease_returned'")).rows[0].n) ===
      6
    )
      break;
    if (Date.now() > until) throw new Error('the six requests were not all settled');
    await new Promise((r) => setTimeout(r, 50));
  }

  // Rows with known figures, on the accounts above.
  const row = (o: {
    id: string;
    key: typeof alice;
    model: string;
    cost: bigint;
    uncovered?: bigint;
    provider: bigint | null;
    ago: string;
  }) =>
    knex.raw(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, uncovered_nano, provider_cost_nano,
         status, http_status, latency_ms, created_at)
       VALUES (?, ?, ?, ?, '/v1/chat/completions', ?, ?, ?, 'ok', 200, 1, now() - CAST(? AS interval))`,
      [
        o.id,
        o.key!.accountId,
        o.key!.keyId,
        o.model,
        String(o.cost),
        String(o.uncovered ?? 0n),
        o.provider === null ? null : String(o.provider),
        o.ago,
      ],
    );
  await row({ id: 'req_marked_up', key: alice, model: 'gpt-4o-mini', cost: 1500n, provider: 1000n, ago: '1 minute' });
  await row({ id: 'req_below_cost', key: bob, model: 'gpt-5.4-mini', cost: 700n, provider: 900n, ago: '2 minutes' });
  // From before provider costs were recorded: charged 2000, 300 more went uncovered (capped at the hold).
  await row({
    id: 'req_old',
    key: alice,
    model: 'legacy-model',
    cost: 2000n,
    uncovered: 300n,
    provider: null,
    ago: '1 hour',
  });
  await row({ id: 'req_two_days', key: bob, model: 'gpt-4o-mini', cost: 5000n, provider: 4000n, ago: '2 days' });
  await row({ id: 'req_ten_days', key: alice, model: 'gpt-4o-mini', cost: 8000n, provider: 6000n, ago: '10 days' });
  // The row a returned credit lease's own hold writes: the gateway's reservation, not a request.
  await knex.raw(
    `INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, status, http_status, latency_ms)
     VALUES ('lease_test_returned', ?, ?, '', '', 0, 'lease_returned', 0, 0)`,
    [alice!.accountId, alice!.keyId],
  );

  from = new Date(Date.now() - 3 * DAY_MS);
  to = new Date(Date.now() + 60_000);
});

afterAll(async () => {
  await gateway?.stop();
  await knex?.destroy();
});

interface Figures {
  key: string;
  requests: bigint;
  revenueNano: bigint;
  providerCostNano: bigint;
  marginNano: bigint;
}

/** The report worked out here from the usage rows themselves. */
async function expectedReport(range: { from: Date; to: Date }, by: 'model' | 'day' | 'account' | 'deployment') {
  const rows = (
    await knex.raw(
      `SELECT model, deployment, account_id, created_at, cost_nano::text AS cost, uncovered_nano::text AS uncovered,
              provider_cost_nano::text AS provider
       FROM usage_records WHERE created_at >= ? AND created_at < ? AND status <> 'lease_returned'`,
      [range.from, range.to],
    )
  ).rows as {
    model: string;
    deployment: string | null;
    account_id: string;
    created_at: Date;
    cost: string;
    uncovered: string;
    provider: string | null;
  }[];
  const groups = new Map<string, Figures>();
  const total: Figures = { key: '', requests: 0n, revenueNano: 0n, providerCostNano: 0n, marginNano: 0n };
  for (const r of rows) {
    const key =
      by === 'model'
        ? r.model
        : by === 'account'
          ? r.account_id
          : by === 'deployment'
            ? (r.deployment ?? r.model)
            : r.created_at.toISOString().slice(0, 10);
    const revenue = BigInt(r.cost);
    const provider = r.provider === null ? BigInt(r.cost) + BigInt(r.uncovered) : BigInt(r.provider);
    if (!groups.has(key)) groups.set(key, { key, requests: 0n, revenueNano: 0n, providerCostNano: 0n, marginNano: 0n });
    for (const f of [groups.get(key)!, total]) {
      f.requests += 1n;
      f.revenueNano += revenue;
      f.providerCostNano += provider;
      f.marginNano += revenue - provider;
    }
  }
  return { rows: [...groups.values()].sort((a, b) => (a.key < b.key ? -1 : 1)), total, count: rows.length };
}

const figuresOf = (f: Figures | undefined) =>
  f && {
    key: f.key,
    requests: f.requests,
    revenueNano: f.revenueNano,
    providerCostNano: f.providerCostNano,
    marginNano: f.marginNano,
  };

async function report(range: { from: Date; to: Date }, by: MarginGrouping) {
  const r = await billing.getMarginReport({ from: timestampFromDate(range.from), to: timestampFromDate(range.to), by });
  return { rows: r.rows.map(figuresOf), total: figuresOf(r.total) };
}

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => {
      const err = ConnectError.from(e);
      return { code: err.code, detail: err.findDetails(GatewayErrorSchema)[0] };
    },
  );

describe('the margin report', () => {
  it('by model, by UTC day and by account it equals the sums of the usage rows in the range, and the total is their sum', async () => {
    const model = await report({ from, to }, MarginGrouping.MODEL);
    const expected = await expectedReport({ from, to }, 'model');
    // The six requests and four of the rows written here; the ten-day-old row is outside.
    expect(expected.count).toBe(10);
    expect(model).toEqual({ rows: expected.rows, total: { ...expected.total, key: '' } });
    // (No '' row: a returned lease's own row is not a request, in the report or the usage listing.)
    expect(model.rows.map((r) => r!.key)).toEqual([
      'gpt-4o-mini',
      'gpt-5.4-mini',
      'legacy-model',
      'text-embedding-3-small',
    ]);
    const aliceKey = (await knex.raw(`SELECT key_id FROM usage_records WHERE request_id = 'req_marked_up'`)).rows[0]
      .key_id as string;
    const listed = await billing.listUsage({ key: { ref: { case: 'keyId', value: aliceKey } }, limit: 1000 });
    expect(listed.records.map((r) => r.requestId)).not.toContain('lease_test_returned');
    expect(listed.records.map((r) => r.requestId)).toContain('req_marked_up');
    // The row from before provider costs: its provider cost is what it was charged plus what went uncovered.
    expect(model.rows.find((r) => r!.key === 'legacy-model')).toEqual({
      key: 'legacy-model',
      requests: 1n,
      revenueNano: 2000n,
      providerCostNano: 2300n,
      marginNano: -300n,
    });
    // Unspecified grouping is by model.
    expect(await report({ from, to }, MarginGrouping.UNSPECIFIED)).toEqual(model);

    const day = await report({ from, to }, MarginGrouping.DAY);
    const byDay = await expectedReport({ from, to }, 'day');
    expect(day).toEqual({ rows: byDay.rows, total: model.total });
    const twoDaysAgo = (await knex.raw(`SELECT created_at FROM usage_records WHERE request_id = 'req_two_days'`))
      .rows[0].created_at as Date;
    expect(day.rows.find((r) => r!.key === twoDaysAgo.toISOString().slice(0, 10))).toMatchObject({
      requests: 1n,
      revenueNano: 5000n,
      providerCostNano: 4000n,
      marginNano: 1000n,
    });

    const account = await report({ from, to }, MarginGrouping.ACCOUNT);
    const byAccount = await expectedReport({ from, to }, 'account');
    expect(account).toEqual({ rows: byAccount.rows, total: model.total });
    expect(account.rows).toHaveLength(2);

    // By the deployment that answered; rows from before deployments (as these are) under their model.
    const deployment = await report({ from, to }, MarginGrouping.DEPLOYMENT);
    expect(deployment).toEqual({ rows: (await expectedReport({ from, to }, 'deployment')).rows, total: model.total });
  });

  it('a range that excludes rows leaves them out, and a range with none is empty with a zero total', async () => {
    const old = { from: new Date(Date.now() - 11 * DAY_MS), to: new Date(Date.now() - 9 * DAY_MS) };
    expect(await report(old, MarginGrouping.MODEL)).toEqual({
      rows: [{ key: 'gpt-4o-mini', requests: 1n, revenueNano: 8000n, providerCostNano: 6000n, marginNano: 2000n }],
      total: { key: '', requests: 1n, revenueNano: 8000n, providerCostNano: 6000n, marginNano: 2000n },
    });
    const ahead = { from: new Date(Date.now() + DAY_MS), to: new Date(Date.now() + 2 * DAY_MS) };
    expect(await report(ahead, MarginGrouping.ACCOUNT)).toEqual({
      rows: [],
      total: { key: '', requests: 0n, revenueNano: 0n, providerCostNano: 0n, marginNano: 0n },
    });
    // [from, to): a row created exactly at `to` is not in it, one at `from` is.
    const at = (await knex.raw(`SELECT created_at FROM usage_records WHERE request_id = 'req_ten_days'`)).rows[0]
      .created_at as Date;
    expect((await report({ from: new Date(at.getTime() - 1000), to: at }, MarginGrouping.MODEL)).rows).toEqual([]);
    expect((await report({ from: at, to: new Date(at.getTime() + 1000) }, MarginGrouping.MODEL)).rows).toHaveLength(1);
  });

  it('a range that does not end after it starts, spans over 366 days or lacks an end is refused with a 400 naming it', async () => {
    const now = new Date();
    const cases: [Parameters<typeof billing.getMarginReport>[0], string][] = [
      [{ from: timestampFromDate(now), to: timestampFromDate(now) }, 'to'],
      [{ from: timestampFromDate(now), to: timestampFromDate(new Date(now.getTime() - 1000)) }, 'to'],
      [{ from: timestampFromDate(new Date(now.getTime() - 367 * DAY_MS)), to: timestampFromDate(now) }, 'to'],
      [{ to: timestampFromDate(now) }, 'from'],
      [{ from: timestampFromDate(now) }, 'to'],
    ];
    for (const [req, param] of cases) {
      const r = await refusal(billing.getMarginReport(req));
      expect(r?.code).toBe(Code.InvalidArgument);
      expect(r?.detail).toMatchObject({ httpStatus: 400, param });
    }
    // 366 days exactly is allowed.
    const year = await billing.getMarginReport({
      from: timestampFromDate(new Date(now.getTime() - 366 * DAY_MS)),
      to: timestampFromDate(now),
    });
    expect(year.total?.requests).toBeGreaterThan(0n);
  });

  it('the operator CLI report margin prints the same figures, in exact dollars, and as JSON', async () => {
    const run = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['src/cli/main.ts', 'report', 'margin', ...args], {
        cwd: path.resolve(import.meta.dirname, '..', '..'),
        env: { ...process.env, GATEWAY_RPC_URL: gateway.rpcUrl, ADMIN_TOKEN: '' },
      });
    const cli = (...args: string[]) => run('--from', from.toISOString(), '--to', to.toISOString(), ...args);
    for (const [by, grouping, header] of [
      ['model', MarginGrouping.MODEL, 'MODEL'],
      ['day', MarginGrouping.DAY, 'DAY (UTC)'],
      ['account', MarginGrouping.ACCOUNT, 'ORGANISATION'],
      ['deployment', MarginGrouping.DEPLOYMENT, 'DEPLOYMENT'],
      ['team', MarginGrouping.TEAM, 'TEAM'],
      ['member', MarginGrouping.MEMBER, 'MEMBER'],
      ['key', MarginGrouping.KEY, 'KEY'],
    ] as const) {
      const rpc = await report({ from, to }, grouping);
      const { stdout } = await cli('--by', by);
      const [head, ...lines] = stdout.trimEnd().split('\n');
      expect(head).toMatch(
        new RegExp(`^${header.replace(/[()]/g, '\\$&')} +REQUESTS +REVENUE USD +PROVIDER COST USD +MARGIN USD$`),
      );
      const dollars = (f: Figures) => [
        f.requests.toString(),
        nanoToUsd(f.revenueNano),
        nanoToUsd(f.providerCostNano),
        nanoToUsd(f.marginNano),
      ];
      expect(lines.map((l) => l.trim().split(/\s+/))).toEqual([
        ...rpc.rows.map((f) => [f!.key || '(none)', ...dollars(f!)]),
        ['TOTAL', ...dollars(rpc.total!)],
      ]);
      const json = JSON.parse((await cli('--by', by, '--json')).stdout) as {
        rows: {
          key: string;
          requests: string;
          revenue_nano: string;
          provider_cost_nano: string;
          margin_nano: string;
        }[];
        total: { requests: string; revenue_nano: string; provider_cost_nano: string; margin_nano: string };
      };
      const nanos = (f: Figures) => ({
        requests: f.requests.toString(),
        revenue_nano: f.revenueNano.toString(),
        provider_cost_nano: f.providerCostNano.toString(),
        margin_nano: f.marginNano.toString(),
      });
      expect(json.rows).toEqual(rpc.rows.map((f) => ({ key: f!.key, ...nanos(f!) })));
      expect(json.total).toEqual(nanos(rpc.total!));
    }
    // The default grouping is by model.
    expect((await cli()).stdout.split('\n')[0]).toMatch(/^MODEL /);
    // Without --from and --to, the last 30 days (as the console's margin page).
    const last30 = JSON.parse((await run('--json')).stdout) as { from: string; to: string };
    expect(Date.parse(last30.to) - Date.parse(last30.from)).toBe(30 * DAY_MS);
    expect(Math.abs(Date.parse(last30.to) - Date.now())).toBeLessThan(60_000);
    // A date alone is that day's UTC midnight.
    const day = new Date(from.getTime() + DAY_MS).toISOString().slice(0, 10);
    const next = new Date(Date.parse(day) + DAY_MS).toISOString().slice(0, 10);
    const oneDay = JSON.parse((await run('--from', day, '--to', next, '--by', 'day', '--json')).stdout);
    expect(oneDay.from).toBe(`${day}T00:00:00.000Z`);
    const expected = await expectedReport(
      { from: new Date(`${day}T00:00:00Z`), to: new Date(`${next}T00:00:00Z`) },
      'day',
    );
    expect(oneDay.rows.map((r: { key: string }) => r.key)).toEqual(expected.rows.map((r) => r.key));
    expect(oneDay.total.revenue_nano).toBe(expected.total.revenueNano.toString());
    const bad = await cli('--by', 'week').then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(bad?.code).toBe(2);
    expect(bad?.stderr.trim()).toBe(
      'error: --by must be model, day, account, deployment, team, member or key; see npm run cli -- --help',
    );
    // Each grouping is a CLI process of its own, twice: a loaded machine starts them slowly.
  }, 120_000);
});
