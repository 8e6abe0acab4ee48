// The console's JSON API (docs/console.md#api) against a real gateway over HTTP, its figures
// checked against the ledger: real requests made through the official openai SDK against the
// simulator, then every holder and operator answer compared with the usage rows, the ledger and
// the RPCs that own the figures (GetBalance, GetMarginReport, the price book's). A gateway of this
// file's own with ADMIN_TOKEN (operator sign-in needs one), on the shared database.
import { beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { MarginGrouping } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { nanoToUsd, usdToNano } from '../../src/money/money.ts';
import { billing, db, newKey, uniqueMarker, type TestKey } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { ConsoleClient } from '../support/console-api.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';

const ADMIN_TOKEN = `console-api-${'t'.repeat(24)}`;
const gatewayOf = gatewayForFile('console-api', { ADMIN_TOKEN });
let gw: GatewayProcess;
/** The holder whose figures are checked: requests on three routes, two models, an alias, errors. */
let alice: TestKey;
let aliceConsole: ConsoleClient;
let operator: ConsoleClient;
/** This gateway's CatalogueService (its providers are the simulator's OpenAI and Anthropic only). */
const catalogue = () =>
  createClient(
    CatalogueService,
    createGrpcTransport({
      baseUrl: gw.rpcUrl,
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${ADMIN_TOKEN}`);
          return next(req);
        },
      ],
    }),
  );

const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
const chat = (apiKey: string, model: string, directive: string) =>
  sdk(apiKey).chat.completions.create({
    model,
    messages: [{ role: 'user', content: `console ${uniqueMarker()} [sim ${directive}]` }],
  });

type Row = Record<string, unknown>;
interface Page<T = Row> {
  rows: T[];
  next_cursor: string;
}

/**
 * The account's usage rows as the database has them, newest first (the console's order), each
 * with whom it was charged to (the member and team of its key then, their names now): a key's
 * holder is its organisation's member, whose request log says so.
 */
async function usageRowsOf(accountId: string, where = '', params: unknown[] = []): Promise<Row[]> {
  const r = await db().query(
    `SELECT u.request_id, u.route, u.model, u.requested_model, u.input_tokens::int AS input_tokens,
            u.output_tokens::int AS output_tokens, u.cached_tokens::int AS cached_tokens, u.cost_nano::text AS cost_nano,
            u.status, u.http_status, u.latency_ms, k.prefix AS key_prefix, u.created_at,
            COALESCE(u.member_id, '') AS member_id, COALESCE(p.name, '') AS member_name,
            COALESCE(u.team_id, '') AS team_id, COALESCE(t.name, '') AS team_name
     FROM usage_records u JOIN api_keys k ON k.id = u.key_id
       LEFT JOIN members p ON p.id = u.member_id LEFT JOIN teams t ON t.id = u.team_id
     WHERE u.account_id = $1 ${where} ORDER BY u.created_at DESC, u.request_id`,
    [accountId, ...params],
  );
  return r.rows.map((x) => ({
    ...x,
    requested_model: x.requested_model == null || x.requested_model === x.model ? '' : x.requested_model,
    created_at: (x.created_at as Date).toISOString(),
  }));
}

/** Every page of a paged console answer, following next_cursor. */
async function allPages(client: ConsoleClient, path: string): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await client.get<Page>(`${path}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(r.status, r.text).toBe(200);
    rows.push(...r.body.rows);
    cursor = r.body.next_cursor;
    if (!cursor) return rows;
  }
  throw new Error('more than 100 pages');
}

beforeAll(async () => {
  gw = await gatewayOf();
  alice = await newKey('5');
  await chat(alice.apiKey, 'gpt-4o-mini', 'tokens=5');
  await chat(alice.apiKey, 'gpt-4o-mini', 'tokens=9');
  await chat(alice.apiKey, 'gpt-5.4-mini', 'tokens=3');
  // An alias: served by claude-haiku-4-5, asked for by the name Claude Code uses.
  await chat(alice.apiKey, 'claude-haiku-5-5', 'tokens=4');
  await sdk(alice.apiKey).embeddings.create({ model: 'text-embedding-3-small', input: 'console embeddings' });
  // Two requests the provider refused (400): charged nothing, recorded with their status.
  for (let i = 0; i < 2; i++) await expect(chat(alice.apiKey, 'gpt-4o-mini', 'fault=400')).rejects.toThrow();
  // Two rows on an older day: in the 90-day view, not the 30-day one.
  await chat(alice.apiKey, 'gpt-4o-mini', 'tokens=7');
  await chat(alice.apiKey, 'gpt-4o-mini', 'tokens=2');
  await db().query(
    `UPDATE usage_records SET created_at = created_at - INTERVAL '40 days'
     WHERE request_id IN (SELECT request_id FROM usage_records WHERE account_id = $1 ORDER BY created_at DESC LIMIT 2)`,
    [alice.accountId],
  );
  aliceConsole = await new ConsoleClient(gw.httpUrl).signedIn({ key: alice.apiKey });
  operator = await new ConsoleClient(gw.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
});

/** Fields of the request log's rows an organisation's log adds (whom each was charged to). */
const withoutChargedTo = ({ member_id, member_name, team_id, team_name, ...row }: Row) => row;

describe('the console API for a key holder (the owner of an organisation of one)', () => {
  it('/me names the session: a member, their organisation and role, account, key, prefix and group, with the CSRF token and the expiry', async () => {
    const r = await aliceConsole.get('/me');
    expect(r.status).toBe(200);
    const owner = await db().query('SELECT member_id FROM memberships WHERE account_id = $1', [alice.accountId]);
    expect(r.body).toMatchObject({
      role: 'member',
      account_id: alice.accountId,
      key_id: alice.keyId,
      key_prefix: alice.apiKey.slice(0, 10),
      group: '',
      csrf: aliceConsole.csrf,
      member_id: owner.rows[0].member_id,
      member_name: 'test',
      organisation: { id: alice.accountId, name: 'test', role: 'owner', allowed_actions: expect.any(Array) },
    });
    // The owner may do everything their organisation offers.
    expect((r.body.organisation as { allowed_actions: string[] }).allowed_actions).toEqual(
      expect.arrayContaining(['spend.read', 'members.remove', 'keys.manage', 'audit.read']),
    );
    const expires = Date.parse(String(r.body.expires_at));
    expect(expires - Date.now()).toBeGreaterThan(11 * 3_600_000);
    expect(expires - Date.now()).toBeLessThanOrEqual(12 * 3_600_000);
  });

  it("the balance is GetBalance's, and the ledger's sum", async () => {
    const r = await aliceConsole.get('/balance');
    const rpc = await billing().getBalance({ key: { ref: { case: 'keyId', value: alice.keyId } } });
    const ledger = await db().query('SELECT sum(amount_nano)::text AS s FROM ledger WHERE account_id = $1', [
      alice.accountId,
    ]);
    expect(r.body).toEqual({
      balance_nano: rpc.balanceNano.toString(),
      held_nano: rpc.heldNano.toString(),
      available_nano: rpc.availableNano.toString(),
    });
    expect(r.body.balance_nano).toBe(ledger.rows[0].s);
    expect(BigInt(String(r.body.balance_nano))).toBeLessThan(usdToNano('5'));
  });

  it("spend and tokens per UTC day and model are the sums of the account's usage rows, over 30 or 90 days", async () => {
    const sums = async (days: number) =>
      (
        await db().query(
          `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, model, count(*)::int AS requests,
                sum(input_tokens)::int AS input_tokens, sum(output_tokens)::int AS output_tokens,
                sum(cached_tokens)::int AS cached_tokens, sum(cost_nano)::text AS cost_nano
         FROM usage_records WHERE account_id = $1
           AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - make_interval(days => $2 - 1)
         GROUP BY 1, 2 ORDER BY 1, model COLLATE "C"`,
          [alice.accountId, days],
        )
      ).rows;
    const d30 = await aliceConsole.get<{ from: string; to: string; rows: Row[] }>('/usage/daily?days=30');
    const d90 = await aliceConsole.get<{ from: string; to: string; rows: Row[] }>('/usage/daily?days=90');
    expect(d30.status, d30.text).toBe(200);
    const today = new Date().toISOString().slice(0, 10);
    expect(d30.body.to).toBe(today);
    expect(d30.body.from).toBe(new Date(Date.parse(today) - 29 * 86_400_000).toISOString().slice(0, 10));
    expect(d30.body.rows).toEqual(await sums(30));
    expect(d90.body.rows).toEqual(await sums(90));
    // The two backdated requests are in the 90-day view only.
    const requests = (rows: Row[]) => rows.reduce((n, r) => n + Number(r.requests), 0);
    expect(requests(d90.body.rows) - requests(d30.body.rows)).toBe(2);
    // Every model the account used, the alias's served model included.
    expect(new Set(d30.body.rows.map((r) => r.model))).toEqual(
      new Set(['gpt-4o-mini', 'gpt-5.4-mini', 'claude-haiku-4-5', 'text-embedding-3-small']),
    );
  });

  it('the request log pages through every row of the account, newest first, as the usage rows have them', async () => {
    const rows = await allPages(aliceConsole, '/requests?limit=3');
    const expected = await usageRowsOf(alice.accountId);
    expect(rows).toHaveLength(expected.length);
    expect(rows.length).toBeGreaterThanOrEqual(9);
    expect(rows).toEqual(expected);
    const alias = rows.find((r) => r.model === 'claude-haiku-4-5');
    expect(alias).toMatchObject({ requested_model: 'claude-haiku-5-5', route: '/v1/chat/completions', status: 'ok' });
  });

  it('filters by model, route, status and date select exactly the matching rows', async () => {
    const cases: [string, string, unknown[]][] = [
      ['model=gpt-4o-mini', `AND (u.model = $2 OR u.requested_model = $2)`, ['gpt-4o-mini']],
      ['model=claude-haiku-5-5', `AND (u.model = $2 OR u.requested_model = $2)`, ['claude-haiku-5-5']],
      ['route=%2Fv1%2Fembeddings', 'AND u.route = $2', ['/v1/embeddings']],
      ['status=ok', `AND u.status = 'ok'`, []],
      ['status=error', `AND u.status <> 'ok'`, []],
      ['status=400', 'AND u.http_status = $2', [400]],
      [
        `from=${new Date(Date.now() - 10 * 86_400_000).toISOString()}`,
        `AND u.created_at >= now() - INTERVAL '10 days'`,
        [],
      ],
      [
        `to=${new Date(Date.now() - 20 * 86_400_000).toISOString().slice(0, 10)}`,
        `AND u.created_at < now() - INTERVAL '19 days'`,
        [],
      ],
      ['model=gpt-4o-mini&status=error', `AND u.model = $2 AND u.status <> 'ok'`, ['gpt-4o-mini']],
    ];
    for (const [query, where, params] of cases) {
      const rows = await allPages(aliceConsole, `/requests?limit=2&${query}`);
      const expected = await usageRowsOf(alice.accountId, where, params);
      expect(rows, query).toEqual(expected);
      expect(rows.length, `${query} selects something`).toBeGreaterThan(0);
    }
    const bad = await aliceConsole.get('/requests?status=maybe');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'invalid_value' } });
  });

  it('the CSV of a filter is every row the filter selects, in nano-USD and USD', async () => {
    const r = await aliceConsole.get('/requests.csv?model=gpt-4o-mini&limit=1');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(r.headers.get('content-disposition')).toBe('attachment; filename="requests.csv"');
    const [header, ...lines] = r.text.trimEnd().split('\n');
    expect(header).toBe(
      'created_at,request_id,route,model,requested_model,input_tokens,output_tokens,cached_tokens,cost_nano,cost_usd,status,http_status,latency_ms,key_prefix,member_id,member_name,team_id,team_name',
    );
    const expected = await usageRowsOf(alice.accountId, 'AND (u.model = $2 OR u.requested_model = $2)', [
      'gpt-4o-mini',
    ]);
    expect(lines.map((l) => l.split(','))).toEqual(
      expected.map((e) => [
        e.created_at,
        e.request_id,
        e.route,
        e.model,
        e.requested_model,
        String(e.input_tokens),
        String(e.output_tokens),
        String(e.cached_tokens),
        e.cost_nano,
        nanoToUsd(BigInt(String(e.cost_nano))),
        e.status,
        String(e.http_status),
        String(e.latency_ms),
        e.key_prefix,
        e.member_id,
        e.member_name,
        e.team_id,
        e.team_name,
      ]),
    );
    // The page with the same filter lists the same requests.
    const page = await allPages(aliceConsole, '/requests?model=gpt-4o-mini');
    expect(lines.map((l) => l.split(',')[1])).toEqual(page.map((p) => p.request_id));
  });

  it("the ledger lists the account's top-ups and charges newest first; kind=topup,refund leaves the charges out", async () => {
    await billing().topUp({
      key: { ref: { case: 'keyId', value: alice.keyId } },
      amountNano: usdToNano('1.25'),
      externalId: `console-${uniqueMarker()}`,
    });
    const all = await allPages(aliceConsole, '/ledger');
    const expected = await db().query(
      `SELECT id::text, kind, amount_nano::text, balance_after_nano::text, cause FROM ledger WHERE account_id = $1 ORDER BY ledger.id DESC`,
      [alice.accountId],
    );
    expect(all.map((r) => [r.id, r.kind, r.amount_nano, r.balance_after_nano, r.cause])).toEqual(
      expected.rows.map((e) => [e.id, e.kind, e.amount_nano, e.balance_after_nano, e.cause]),
    );
    const credits = (await aliceConsole.get<Page>('/ledger?kind=topup,refund')).body.rows;
    expect(credits.map((r) => r.kind)).toEqual(['topup', 'topup']);
    expect(credits[0]).toMatchObject({ amount_nano: usdToNano('1.25').toString() });
  });

  it("the models are the available ones at the customer prices of the session's account group", async () => {
    const r = await aliceConsole.get<{ models: Row[] }>('/models');
    const { models } = await catalogue().listModels({ availableOnly: true, accountGroup: '' });
    expect(r.body.models.map((m) => m.id)).toEqual(models.map((m) => m.id));
    const mini = r.body.models.find((m) => m.id === 'gpt-4o-mini')!;
    expect(mini).toMatchObject({ kind: 'chat', provider: 'openai' });
    expect(mini.pricing).toEqual({ ...models.find((m) => m.id === 'gpt-4o-mini')!.customerPrices });
    const haiku = r.body.models.find((m) => m.id === 'claude-haiku-4-5')!;
    expect(haiku.aliases).toContain('claude-haiku-5-5');
  });

  it('rotating the key needs a confirmation, shows the new key once, stops the old one, and keeps the session on the new key', async () => {
    const bob = await newKey('1');
    const bobConsole = await new ConsoleClient(gw.httpUrl).signedIn({ key: bob.apiKey });
    const unconfirmed = await bobConsole.post('/key/rotate', {});
    expect(unconfirmed.status).toBe(400);
    expect(unconfirmed.body).toMatchObject({ error: { code: 'confirmation_required' } });
    const r = await bobConsole.post<{ api_key: string; key_prefix: string; key_id: string }>('/key/rotate', {
      confirm: true,
    });
    expect(r.status).toBe(200);
    expect(r.body.api_key).toMatch(/^prx-[0-9A-Za-z]{38}$/);
    expect(r.body.key_prefix).toBe(r.body.api_key.slice(0, 10));
    await expect(chat(bob.apiKey, 'gpt-4o-mini', 'tokens=1')).rejects.toMatchObject({ status: 401 });
    await chat(r.body.api_key, 'gpt-4o-mini', 'tokens=1');
    const me = await bobConsole.get('/me');
    expect(me.body).toMatchObject({ key_id: r.body.key_id, key_prefix: r.body.key_prefix, account_id: bob.accountId });
    // The new key's request is in the same account's log, under the new prefix.
    const rows = (await bobConsole.get<Page>('/requests')).body.rows;
    expect(rows[0]).toMatchObject({ key_prefix: r.body.key_prefix });
  });
});

describe('the console API for the operator', () => {
  it('lists accounts with balance, held, 30-day spend, last use and live keys, found by search and paged', async () => {
    const label = `console-accounts-${uniqueMarker()}`;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await billing().createKey({ creditsNano: usdToNano('2'), label }));
    await chat(made[1]!.apiKey, 'gpt-4o-mini', 'tokens=6');
    const rows = await allPages(operator, `/admin/accounts?q=${label}&limit=2`);
    expect(rows.map((r) => r.account_id)).toEqual(made.map((m) => m.accountId).reverse());
    for (const row of rows) {
      const figures = await db().query(
        `SELECT a.balance_nano::text AS balance, a.label, COALESCE(a.owner, '') AS owner,
                (SELECT COALESCE(sum(cost_nano), 0)::text FROM usage_records u WHERE u.account_id = a.id) AS spend,
                (SELECT max(created_at) FROM usage_records u WHERE u.account_id = a.id) AS last_used
         FROM accounts a WHERE a.id = $1`,
        [row.account_id],
      );
      const f = figures.rows[0];
      expect(row).toMatchObject({
        label,
        owner: f.owner,
        group: '',
        balance_nano: f.balance,
        held_nano: '0',
        spend_30d_nano: f.spend,
        last_used_at: f.last_used ? (f.last_used as Date).toISOString() : null,
        keys: 1,
      });
    }
    expect(rows[1]!.spend_30d_nano).not.toBe('0');
    // By a key's visible prefix and by an account id.
    const byPrefix = await operator.get<Page>(`/admin/accounts?q=${made[2]!.prefix}`);
    expect(byPrefix.body.rows.map((r) => r.account_id)).toEqual([made[2]!.accountId]);
    const byId = await operator.get<Page>(`/admin/accounts?q=${made[0]!.accountId}`);
    expect(byId.body.rows.map((r) => r.account_id)).toEqual([made[0]!.accountId]);
  });

  it("an account's page has its keys with their limits; limits, revoke, top-up and refund change what the RPCs change", async () => {
    const key = await newKey('3');
    const acct = `/admin/accounts/${key.accountId}`;
    const limits = await operator.post(`/admin/keys/${key.keyId}/limits`, { rpm: 120, tpm: null, max_in_flight: 9 });
    expect(limits.body).toEqual({ updated: true });
    const page = await operator.get<Row & { keys_list: Row[] }>(acct);
    expect(page.body).toMatchObject({
      account_id: key.accountId,
      label: 'test',
      balance_nano: usdToNano('3').toString(),
    });
    expect(page.body.keys_list).toEqual([
      expect.objectContaining({
        key_id: key.keyId,
        prefix: key.apiKey.slice(0, 10),
        rpm: 120,
        tpm: null,
        max_in_flight: 9,
        revoked_at: null,
      }),
    ]);
    const limitRow = await db().query('SELECT rpm_limit, tpm_limit, max_in_flight FROM api_keys WHERE id = $1', [
      key.keyId,
    ]);
    expect(limitRow.rows[0]).toEqual({ rpm_limit: 120, tpm_limit: null, max_in_flight: 9 });

    const externalId = `console-topup-${uniqueMarker()}`;
    const topup = await operator.post(`${acct}/topup`, { amount_usd: '2.50', external_id: externalId });
    expect(topup.body).toEqual({ applied: true, balance_nano: usdToNano('5.50').toString() });
    const again = await operator.post(`${acct}/topup`, { amount_usd: '2.50', external_id: externalId });
    expect(again.body).toEqual({ applied: false, balance_nano: usdToNano('5.50').toString() });
    const cause = await db().query('SELECT cause FROM ledger WHERE external_id = $1', [externalId]);
    expect(cause.rows).toEqual([{ cause: 'console:operator' }]);
    const float = await operator.post(`${acct}/topup`, { amount_usd: 2.5, external_id: `${externalId}-2` });
    expect(float.status).toBe(400);

    const refund = await operator.post('/admin/refunds', { external_id: externalId });
    expect(refund.body).toEqual({
      applied: true,
      account_id: key.accountId,
      topup_nano: usdToNano('2.50').toString(),
      refunded_nano: usdToNano('2.50').toString(),
      balance_nano: usdToNano('3').toString(),
    });

    const revoke = await operator.post(`/admin/keys/${key.keyId}/revoke`, {});
    expect(revoke.body).toEqual({ revoked: true });
    await expect(chat(key.apiKey, 'gpt-4o-mini', 'tokens=1')).rejects.toMatchObject({ status: 401 });
    const after = await operator.get<Row & { keys_list: Row[] }>(acct);
    expect(after.body.keys).toBe(0);
    expect(after.body.keys_list[0]!.revoked_at).not.toBeNull();

    const missing = await operator.get('/admin/accounts/acct_doesnotexist');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: { code: 'account_not_found' } });
  });

  it("an account's ledger, request log, CSV and daily usage for the operator are the holder's own", async () => {
    const acct = `/admin/accounts/${alice.accountId}`;
    // The operator's rows add the request's trace (none here, where tracing is off:
    // console-api-traces.test.ts) and where it was served and what it earned (request-log.test.ts).
    const operatorRows = await allPages(operator, `${acct}/requests?limit=4`);
    const operatorOnly = ['trace_id', 'trace_url', 'deployment', 'attempts', 'attempts_omitted'];
    const holderPart = (r: Row) =>
      Object.fromEntries(
        Object.entries(r).filter(
          ([k]) => !operatorOnly.includes(k) && k !== 'provider_cost_nano' && k !== 'margin_nano',
        ),
      );
    // The member's rows (their organisation's log) add whom each request was charged to.
    expect(operatorRows.map(holderPart)).toEqual((await allPages(aliceConsole, '/requests')).map(withoutChargedTo));
    expect(new Set(operatorRows.map((r) => `${r.trace_id}|${r.trace_url}`))).toEqual(new Set(['|']));
    const usage = (
      await db().query(
        `SELECT request_id, COALESCE(deployment, '') AS deployment, COALESCE(attempts, '') AS attempts,
                cost_nano::text AS cost, COALESCE(provider_cost_nano, cost_nano + uncovered_nano)::text AS provider_cost
           FROM usage_records WHERE account_id = $1`,
        [alice.accountId],
      )
    ).rows as Record<string, string>[];
    for (const r of operatorRows) {
      const u = usage.find((x) => x.request_id === r.request_id)!;
      const attempts = r.attempts as { deployment: string; outcome: string }[];
      expect([r.deployment, attempts.map((a) => `${a.deployment}=${a.outcome}`).join(' '), r.attempts_omitted]).toEqual(
        [u.deployment, u.attempts, 0],
      );
      expect([r.provider_cost_nano, r.margin_nano]).toEqual([
        u.provider_cost,
        (BigInt(u.cost!) - BigInt(u.provider_cost!)).toString(),
      ]);
    }
    expect(await allPages(operator, `${acct}/ledger`)).toEqual(await allPages(aliceConsole, '/ledger'));
    const firstColumns = (csv: string) =>
      csv
        .trimEnd()
        .split('\n')
        .map((l) => l.split(',').slice(0, 14).join(','));
    const operatorCsv = (await operator.get(`${acct}/requests.csv?status=error`)).text;
    expect(firstColumns(operatorCsv)).toEqual(
      firstColumns((await aliceConsole.get('/requests.csv?status=error')).text),
    );
    expect(operatorCsv.split('\n')[0]!.split(',').slice(14)).toEqual([
      'deployment',
      'attempts',
      'provider_cost_nano',
      'provider_cost_usd',
      'margin_nano',
      'margin_usd',
      'trace_id',
    ]);
    expect(operatorCsv.trimEnd().split('\n').length).toBeGreaterThan(1);
    expect((await operator.get(`${acct}/usage/daily?days=90`)).body).toEqual(
      (await aliceConsole.get('/usage/daily?days=90')).body,
    );
  });

  it("the margin report by day, model, account, deployment, team, member and key is GetMarginReport's", async () => {
    // On a closed range of the past, so requests of tests running meanwhile do not move it.
    const key = await newKey('2');
    await chat(key.apiKey, 'gpt-4o-mini', 'tokens=5');
    await chat(key.apiKey, 'gpt-5.4-mini', 'tokens=8');
    const day = '2001-02-03';
    await db().query(
      `UPDATE usage_records SET created_at = $2::timestamptz + INTERVAL '5 hours' WHERE account_id = $1`,
      [key.accountId, day],
    );
    for (const [by, grouping] of [
      ['day', MarginGrouping.DAY],
      ['model', MarginGrouping.MODEL],
      ['account', MarginGrouping.ACCOUNT],
      ['deployment', MarginGrouping.DEPLOYMENT],
      ['team', MarginGrouping.TEAM],
      ['member', MarginGrouping.MEMBER],
      ['key', MarginGrouping.KEY],
    ] as const) {
      const r = await operator.get<{ rows: Row[]; total: Row; from: string; to: string }>(
        `/admin/margin?from=${day}&to=${day}&by=${by}`,
      );
      expect(r.body.from).toBe(`${day}T00:00:00.000Z`);
      expect(r.body.to).toBe('2001-02-04T00:00:00.000Z');
      const rpc = await billing().getMarginReport({
        from: timestampFromDate(new Date(`${day}T00:00:00Z`)),
        to: timestampFromDate(new Date('2001-02-04T00:00:00Z')),
        by: grouping,
      });
      const figures = (m: {
        key: string;
        requests: bigint;
        revenueNano: bigint;
        providerCostNano: bigint;
        marginNano: bigint;
      }) => ({
        key: m.key,
        requests: Number(m.requests),
        revenue_nano: m.revenueNano.toString(),
        provider_cost_nano: m.providerCostNano.toString(),
        margin_nano: m.marginNano.toString(),
      });
      expect(r.body.rows).toEqual(rpc.rows.map(figures));
      expect(r.body.total).toEqual(figures(rpc.total!));
      expect(r.body.total.requests).toBeGreaterThanOrEqual(2);
    }
  });

  it("the price book, a model's history, a preview and a dry-run apply are the catalogue's", async () => {
    const book = await operator.get<{
      document: string;
      version: string;
      markups: { in_force: Row[]; scheduled: Row[] };
    }>('/admin/book');
    const exported = await catalogue().exportBook({});
    expect(JSON.parse(book.body.document)).toEqual(JSON.parse(exported.document));
    expect(book.body.version).toMatch(/^[0-9a-f]{16}$/);
    const markups = await catalogue().listMarkups({});
    expect(book.body.markups.in_force.map((m) => m.id)).toEqual(markups.inForce.map((m) => Number(m.id)));

    const history = await operator.get<{ versions: Row[]; definitions: Row[] }>('/admin/models/gpt-4o-mini/history');
    const rpc = await catalogue().getPriceHistory({ modelId: 'gpt-4o-mini' });
    expect(history.body.versions.map((v) => [v.id, v.prices])).toEqual(
      rpc.versions.map((v) => [Number(v.id), { ...v.prices }]),
    );
    expect(history.body.definitions.length).toBe(rpc.definitions.length);

    const dry = await operator.post('/admin/book/apply', { document: book.body.document, dry_run: true });
    // The version the dry run saw (the shared database's book may move on meanwhile: its form only).
    expect(dry.body).toEqual({
      applied: false,
      changes: [],
      warnings: [],
      version: expect.stringMatching(/^[0-9a-f]{16}$/),
    });

    const preview = await operator.post<{ rows: Row[]; total: Row }>('/admin/book/preview', {
      document: book.body.document,
      days: 400,
    });
    expect(preview.status).toBe(400);
    // The console's preview is the catalogue's. Other files write usage (and change groups and
    // markups) on this shared database meanwhile: compared when two console answers around the
    // RPC's agree, so nothing changed in between (book-preview.test.ts checks the figures themselves).
    const asConsole = (r: Awaited<ReturnType<ReturnType<typeof catalogue>['previewBook']>>) =>
      r.rows.map((x) => ({
        model_id: x.modelId,
        requests: Number(x.requests),
        revenue_nano: x.revenueNano.toString(),
        provider_cost_nano: x.providerCostNano.toString(),
        proposed_revenue_nano: x.proposedRevenueNano.toString(),
        proposed_provider_cost_nano: x.proposedProviderCostNano.toString(),
        inexact_requests: Number(x.inexactRequests),
      }));
    let compared = false;
    for (let attempt = 0; attempt < 5 && !compared; attempt++) {
      const ask = () =>
        operator.post<{ rows: Row[]; total: Row }>('/admin/book/preview', { document: book.body.document, days: 7 });
      const before = await ask();
      expect(before.status, before.text).toBe(200);
      const rpcPreview = await catalogue().previewBook({ document: book.body.document, days: 7 });
      const after = await ask();
      // (The window's ends move with the clock; its rows are what must not have changed.)
      if (JSON.stringify(before.body.rows) !== JSON.stringify(after.body.rows)) continue;
      expect(before.body.rows.length).toBeGreaterThan(0);
      expect(before.body.rows).toEqual(asConsole(rpcPreview));
      compared = true;
    }
    expect(compared, 'the usage kept changing under five previews in a row').toBe(true);
    const bad = await operator.post('/admin/book/apply', { document: '{"models": 3}', dry_run: true });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'invalid_book' } });
  });

  it("video jobs of every account are listed for the operator, each with its workflow's Temporal UI link where the gateway knows the UI", async () => {
    const key = await newKey('1');
    const id = `video_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    await db().query(
      `INSERT INTO video_jobs (id, request_id, account_id, key_id, model, prompt, seconds, size, hold_nano, status, cost_nano)
       VALUES ($1, $2, $3, $4, 'sora-2', 'a console test', 4, '720x1280', 0, 'completed', 400000000)`,
      [id, `req_${id}`, key.accountId, key.keyId],
    );
    const r = await operator.get<Page>(`/admin/videos?account_id=${key.accountId}`);
    expect(r.body.rows).toEqual([
      expect.objectContaining({
        id,
        account_id: key.accountId,
        key_id: key.keyId,
        model: 'sora-2',
        status: 'completed',
        seconds: 4,
        cost_nano: '400000000',
        deleted: false,
        // This gateway's Temporal is none of its own (the tests' cluster, or none): no UI address to link.
        temporal_url: '',
      }),
    ]);
    const every = await operator.get<Page>('/admin/videos?limit=200');
    expect(every.body.rows.map((v) => v.id)).toContain(id);
  });
});
