// Providers and deployments as price-book data (src/catalogue/providers.ts), routed by
// src/inference/routing/ and src/inference/upstream/upstream-calls.ts: three simulator instances stand for
// three deployments (a plain OpenAI endpoint, an Azure OpenAI resource, an OpenAI-compatible third
// party), each a provider of the book with its credential named by an environment variable of a
// gateway of this file's own. The gateway runs on a database of this file's own: providers added to
// the shared book would show in the startup summary of every gateway other files start on it
// (terminal.test.ts checks that list). Each scenario has a model of its own, so the passive health
// of one scenario's deployments never leaks into another's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { gatewayUrl, newKey as newMainKey, uniqueMarker } from '../support/context.ts';
import { inPool, nameCredentials, ownDatabase, until } from '../support/deployments.ts';
import { chatCostNano } from '../support/prices.ts';

const COOLDOWN_MS = 1500;
const AZURE_API_VERSION = '2024-10-21';
const AZURE_DEPLOYMENT = 'my-azure-deployment';
const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`deployments_${RUN}`);
const DATABASE_URL = DB.url;
const M = {
  weighted: `routed-weighted-${RUN}`,
  cheapest: `routed-cheapest-${RUN}`,
  fastest: `routed-fastest-${RUN}`,
  failover: `routed-failover-${RUN}`,
  retry: `routed-retry-after-${RUN}`,
  cooling: `routed-cooling-${RUN}`,
  lastLeft: `routed-last-left-${RUN}`,
  kill: `routed-kill-${RUN}`,
  stream: `routed-stream-${RUN}`,
  named5xx: `named-5xx-${RUN}`,
  named429: `named-429-${RUN}`,
  namedMixed: `named-mixed-${RUN}`,
  namedNone: `named-none-${RUN}`,
  namedStream: `named-stream-${RUN}`,
  redirect: `routed-redirect-${RUN}`,
};
/** The third party's own prices on routed-cheapest: half the model's. */
const THIRD_PRICES = { input_per_mtok: '0.075', output_per_mtok: '0.30' };

const gatewayOf = gatewayForFile('deployments', {
  DATABASE_URL,
  SIM_A_KEY: 'key-a',
  SIM_AZ_KEY: 'key-az',
  SIM_THIRD_KEY: 'key-third',
  DEPLOYMENT_COOLDOWN_MS: String(COOLDOWN_MS),
  // This gateway names the deployment that served each unary answer; the main test gateway does not.
  DEPLOYMENT_HEADER: '1',
  UPSTREAM_RETRY_BASE_MS: '20',
  UPSTREAM_RETRY_MAX_WAIT_MS: '100',
  PRICE_BOOK_REFRESH_MS: '200',
  // The weighted run sends 2,000 requests on one key.
  RATE_LIMIT_RPM: '1000000',
  RATE_LIMIT_TPM: '1000000000',
});

let gw: GatewayProcess;
let knex: Db;
let plain: Simulator;
let azure: Simulator;
let third: Simulator;
/** The model's prices (copied from gpt-4o-mini), what customers are charged on every new model. */
let modelPrices: Record<string, string>;
let catalogue: ReturnType<typeof createClient<typeof CatalogueService>>;
let billing: ReturnType<typeof createClient<typeof BillingService>>;
/** A book model entry like gpt-4o-mini's, on sim-plain, with `extra` over it. */
let newModel: (id: string, extra: Record<string, unknown>) => DocModel;

interface DocModel {
  id: string;
  prices: Record<string, string>;
  [field: string]: unknown;
}
interface Doc {
  providers?: Record<string, unknown>[];
  models: DocModel[];
  aliases: Record<string, string>;
  markups: Record<string, string>[];
}

beforeAll(async () => {
  [plain, azure, third] = await Promise.all([
    startSimulator({ apiKey: 'key-a', name: 'plain' }),
    startSimulator({ apiKey: 'key-az', name: 'azure', azure: { apiVersion: AZURE_API_VERSION } }),
    startSimulator({ apiKey: 'key-third', name: 'third' }),
  ]);
  await DB.create();
  gw = await gatewayOf();
  knex = await openDb({ databaseUrl: DATABASE_URL, poolMax: 4 });
  billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  await nameCredentials(
    knex,
    { 'sim-plain': 'SIM_A_KEY', 'sim-azure': 'SIM_AZ_KEY', 'sim-third': 'SIM_THIRD_KEY' },
    'deployments test',
  );

  catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document) as Doc;
  expect(doc.providers?.some((p) => p.id === 'openai')).toBe(true);
  const template = doc.models.find((m) => m.id === 'gpt-4o-mini')!;
  modelPrices = { ...template.prices };
  newModel = (id, extra) => ({
    ...structuredClone(template),
    id,
    provider: 'sim-plain',
    upstreamId: 'gpt-4o-mini',
    enabled: true,
    ...extra,
  });
  doc.providers = [
    ...doc.providers!,
    { id: 'sim-plain', dialect: 'openai', baseUrl: `${plain.url}/v1` },
    { id: 'sim-azure', dialect: 'azure-openai', baseUrl: azure.url, apiVersion: AZURE_API_VERSION },
    { id: 'sim-third', dialect: 'openai', baseUrl: `${third.url}/v1` },
  ];
  const P = { id: 'plain', provider: 'sim-plain' };
  const A = { id: 'azure', provider: 'sim-azure', upstreamId: AZURE_DEPLOYMENT };
  const T = { id: 'third', provider: 'sim-third' };
  const primaryThenThird = [
    { ...P, priority: 0 },
    { ...T, priority: 1 },
  ];
  const models: [string, Record<string, unknown>][] = [
    [
      M.weighted,
      {
        deployments: [
          { ...P, weight: 3 },
          { ...A, weight: 1 },
          { ...T, weight: 0 },
        ],
      },
    ],
    [M.fastest, { routing: 'fastest', deployments: [P, A] }],
    [M.failover, { deployments: primaryThenThird }],
    [M.retry, { deployments: primaryThenThird }],
    [M.cooling, { deployments: [P, T] }],
    [M.lastLeft, { deployments: primaryThenThird }],
    [M.kill, { deployments: primaryThenThird }],
    [M.stream, { deployments: primaryThenThird }],
    [M.named5xx, { deployments: primaryThenThird }],
    [M.named429, { deployments: primaryThenThird }],
    [M.namedMixed, { deployments: primaryThenThird }],
    [M.namedNone, { deployments: primaryThenThird }],
    [M.namedStream, { deployments: primaryThenThird }],
    [M.redirect, { deployments: primaryThenThird }],
  ];
  for (const [id, extra] of models) {
    doc.models.push(newModel(id, extra));
  }
  const applied = await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'deployments test' });
  expect(applied.applied).toBe(true);
  // Served once this gateway has read the credentials (PRICE_BOOK_REFRESH_MS).
  for (const [id] of models) await availableHere(id);
});

/** Waits until this file's gateway serves `id`. */
const availableHere = (id: string) =>
  until(`${id} available`, async () => ((await catalogue.getModel({ id })).model?.available ? true : undefined));

afterAll(async () => {
  for (const s of [plain, azure, third]) {
    if (!s) continue;
    s.clearMode();
    await s.close();
  }
  await knex?.destroy();
});

/** One query on this file's database. */
async function query<T = Record<string, unknown>>(sql: string, bindings: unknown[] = []): Promise<T[]> {
  return (await knex.raw(sql, bindings as never)).rows as T[];
}

async function newKey(creditsUsd: string): Promise<{ apiKey: string; accountId: string }> {
  const r = await billing.createKey({ creditsNano: usdToNano(creditsUsd), label: 'deployments' });
  return { apiKey: r.apiKey, accountId: r.accountId };
}

async function balanceOf(accountId: string): Promise<{ balance: bigint; held: bigint }> {
  const [r] = await query<{ b: string; h: string }>(
    'SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = ?',
    [accountId],
  );
  return { balance: BigInt(r!.b), held: BigInt(r!.h) };
}

/** The rows a request left: holds, ledger entries, usage rows. */
async function rowsForRequest(requestId: string): Promise<{ holds: number; ledger: number; usage: number }> {
  const n = async (table: string) =>
    (await query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE request_id = ?`, [requestId]))[0]!.n;
  return { holds: await n('holds'), ledger: await n('ledger'), usage: await n('usage_records') };
}

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });

interface Served {
  requestId: string;
  costHeader: string | null;
  data: OpenAI.ChatCompletion;
}

/** A small unstreamed chat request; throws what the SDK throws. */
async function chat(model: string, apiKey: string, tokens = 2): Promise<Served> {
  const { data, response } = await client(apiKey)
    .chat.completions.create({
      model,
      messages: [{ role: 'user', content: `hi ${uniqueMarker()} [sim tokens=${tokens}]` }],
      max_tokens: 8,
    })
    .withResponse();
  return {
    requestId: response.headers.get('x-request-id')!,
    costHeader: response.headers.get('x-gateway-cost-nano-usd'),
    data,
  };
}

/** The chat request's error (the test fails if it succeeds). */
async function chatError(model: string, apiKey: string): Promise<InstanceType<typeof OpenAI.APIError>> {
  const e = await chat(model, apiKey).then(
    () => {
      throw new Error(`expected ${model} to fail`);
    },
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(OpenAI.APIError);
  return e as InstanceType<typeof OpenAI.APIError>;
}

interface UsageRow {
  deployment: string | null;
  provider_cost_nano: string;
  cost_nano: string;
  input_tokens: string;
  output_tokens: string;
  cached_tokens: string;
  status: string;
}

/** The request's usage row, waited for (a stream settles just after its last byte). */
function usageOf(requestId: string): Promise<UsageRow> {
  return until(`the usage row of ${requestId}`, async () => {
    const [row] = await query<UsageRow>(
      `SELECT deployment, provider_cost_nano::text, cost_nano::text, input_tokens::text, output_tokens::text,
              cached_tokens::text, status FROM usage_records WHERE request_id = ?`,
      [requestId],
    );
    return row;
  });
}

/** Usage rows of `model` by the deployment they name. */
async function servedBy(model: string): Promise<Record<string, number>> {
  const rows = await query<{ deployment: string | null; n: number }>(
    'SELECT deployment, count(*)::int AS n FROM usage_records WHERE model = ? GROUP BY deployment',
    [model],
  );
  return Object.fromEntries(rows.map((x) => [String(x.deployment), x.n]));
}

/** The request was charged exactly once, at the model's prices for the tokens its row records. */
async function expectChargedOnce(s: { requestId: string; costHeader?: string | null }, row: UsageRow) {
  expect(await rowsForRequest(s.requestId)).toEqual({ holds: 1, ledger: 1, usage: 1 });
  const [charge] = await query<{ a: string }>(
    "SELECT amount_nano::text AS a FROM ledger WHERE request_id = ? AND kind = 'charge'",
    [s.requestId],
  );
  expect(row.cached_tokens).toBe('0');
  const expected = chatCostNano(modelPrices, BigInt(row.input_tokens), BigInt(row.output_tokens));
  expect(expected).toBeGreaterThan(0n);
  expect(BigInt(row.cost_nano)).toBe(expected);
  expect(BigInt(charge!.a)).toBe(-expected);
  if (s.costHeader !== undefined) expect(s.costHeader).toBe(row.cost_nano);
}

const received = (s: Simulator) => s.counts().received;

describe('deployments of a model', () => {
  it('weighted: 2,000 requests split 3:1 between plain and azure (±0.04), the weight-0 third party gets none', async () => {
    const N = 2000;
    const key = await newKey('5');
    const before = { plain: received(plain), azure: received(azure), third: received(third) };
    const started = Date.now();
    await inPool(N, 16, () => chat(M.weighted, key.apiKey, 1));
    const took = Date.now() - started;
    const got = {
      plain: received(plain) - before.plain,
      azure: received(azure) - before.azure,
      third: received(third) - before.third,
    };
    expect(got.third).toBe(0);
    expect(got.plain + got.azure).toBe(N);
    // 3 sigma of the binomial share at p = 0.75, n = 2000 is 3 * sqrt(0.75 * 0.25 / 2000) = 0.029;
    // ±0.04 is 4.1 sigma: a false alarm about once in 25,000 runs.
    const share = got.plain / N;
    expect(Math.abs(share - 0.75), `plain's share ${share} (${took} ms for ${N} requests)`).toBeLessThanOrEqual(0.04);
    // The usage rows name the deployment that answered, and agree with what the instances received.
    expect(
      await until('every usage row', async () => {
        const rows = await servedBy(M.weighted);
        return Object.values(rows).reduce((a, b) => a + b, 0) >= N ? rows : undefined;
      }),
    ).toEqual({ [`${M.weighted}/plain`]: got.plain, [`${M.weighted}/azure`]: got.azure });
  }, 90_000);

  it("the azure deployment is called Azure's way: its deployment in the path, api-version, an api-key header and no bearer", () => {
    const calls = azure.requests.filter((r) => r.path.startsWith('/openai/'));
    expect(calls.length).toBeGreaterThan(0);
    for (const r of calls) {
      expect(r.path).toBe(`/openai/deployments/${AZURE_DEPLOYMENT}/chat/completions`);
      expect(new URL(r.url!, 'http://x').searchParams.get('api-version')).toBe(AZURE_API_VERSION);
      expect(r.headers['api-key']).toBe('key-az');
      expect(r.headers.authorization).toBeUndefined();
      expect((r.body as { model?: string }).model).toBe(AZURE_DEPLOYMENT);
    }
    // And the plain one OpenAI's way, with its own key.
    const plainCalls = plain.requests.filter((r) => r.path === '/v1/chat/completions');
    expect(plainCalls.length).toBeGreaterThan(0);
    for (const r of plainCalls) {
      expect(r.headers.authorization).toBe('Bearer key-a');
      expect(r.headers['api-key']).toBeUndefined();
    }
  });

  it("cheapest: every request goes to the deployment with the lower prices; the operator's cost is at its prices, the charge at the model's", async () => {
    // Added on its own, so a refusal of deployment prices fails this test alone.
    await catalogue.upsertModel({
      modelJson: JSON.stringify(
        newModel(M.cheapest, {
          routing: 'cheapest',
          deployments: [
            { id: 'plain', provider: 'sim-plain' },
            { id: 'third', provider: 'sim-third', prices: THIRD_PRICES },
          ],
        }),
      ),
      reason: 'deployments test',
    });
    await availableHere(M.cheapest);
    const key = await newKey('1');
    const p0 = received(plain);
    const t0 = received(third);
    const served = await inPool(10, 4, () => chat(M.cheapest, key.apiKey, 5));
    expect(received(plain) - p0).toBe(0);
    expect(received(third) - t0).toBe(10);
    for (const s of served) {
      const row = await usageOf(s.requestId);
      expect(row.deployment).toBe(`${M.cheapest}/third`);
      await expectChargedOnce(s, row);
      const input = BigInt(row.input_tokens);
      const output = BigInt(row.output_tokens);
      expect(BigInt(row.provider_cost_nano)).toBe(chatCostNano({ ...modelPrices, ...THIRD_PRICES }, input, output));
      expect(BigInt(row.provider_cost_nano)).toBeLessThan(BigInt(row.cost_nano));
    }
  });

  it('fastest: with plain 200 ms slower, the large majority go to azure once both are measured', async () => {
    const key = await newKey('1');
    plain.setMode({ delayMs: 200 });
    try {
      // Warm-up: a deployment never measured counts as fastest, so each gets measured in turn.
      await until(
        'both deployments measured',
        async () => {
          await chat(M.fastest, key.apiKey);
          const rows = await servedBy(M.fastest);
          return rows[`${M.fastest}/plain`] && rows[`${M.fastest}/azure`] ? true : undefined;
        },
        15_000,
        0,
      );
      const before = await servedBy(M.fastest);
      const a0 = received(azure);
      for (let i = 0; i < 20; i++) await chat(M.fastest, key.apiKey);
      const after = await servedBy(M.fastest);
      const toAzure = (after[`${M.fastest}/azure`] ?? 0) - (before[`${M.fastest}/azure`] ?? 0);
      const toPlain = (after[`${M.fastest}/plain`] ?? 0) - (before[`${M.fastest}/plain`] ?? 0);
      expect(toAzure + toPlain).toBe(20);
      expect(received(azure) - a0).toBe(toAzure);
      expect(toAzure).toBeGreaterThanOrEqual(18);
    } finally {
      plain.clearMode();
    }
  });

  it('failover: plain answering 500 -> served by the third party, charged once; plain cools down, takes exactly one trial after the cooldown, then recovers', async () => {
    const key = await newKey('1');
    plain.setMode({ status: 500 });
    try {
      const p0 = plain.requests.length;
      const t0 = third.requests.length;
      const first: Served[] = [];
      // DEPLOYMENT_ALLOWED_FAILS (3) failures in a row cool plain down.
      for (let i = 0; i < 3; i++) first.push(await chat(M.failover, key.apiKey));
      expect(plain.requests.length - p0).toBe(3);
      expect(third.requests.length - t0).toBe(3);
      for (const s of first) {
        const row = await usageOf(s.requestId);
        expect(row.deployment).toBe(`${M.failover}/third`);
        await expectChargedOnce(s, row);
      }
      for (const r of third.requests.slice(t0)) {
        expect(r.path).toBe('/v1/chat/completions');
        expect(r.headers.authorization).toBe('Bearer key-third');
      }
      // Plain cooled down after its third failure, so not before that request reached it.
      const cooledAfter = plain.requests.at(-1)!.at;

      // Bursts of 4 concurrent requests until plain gets one: nothing reaches it while it cools,
      // then exactly one trial (which fails: plain still answers 500, and cools again).
      let burstsWhileCooling = 0;
      let trialAt = 0;
      await until(
        'the trial request after the cooldown',
        async () => {
          const n = plain.requests.length;
          const sentAt = Date.now();
          const burst = await Promise.all(Array.from({ length: 4 }, () => chat(M.failover, key.apiKey)));
          const reached = plain.requests.length - n;
          if (reached === 0) {
            if (Date.now() < cooledAfter + COOLDOWN_MS) burstsWhileCooling++;
            return undefined;
          }
          expect(reached, 'requests that reached plain in the burst after the cooldown').toBe(1);
          trialAt = plain.requests.at(-1)!.at;
          expect(trialAt).toBeGreaterThanOrEqual(sentAt);
          for (const s of burst) expect((await usageOf(s.requestId)).deployment).toBe(`${M.failover}/third`);
          return true;
        },
        COOLDOWN_MS + 5_000,
        100,
      );
      expect(burstsWhileCooling).toBeGreaterThanOrEqual(3);
      expect(trialAt - cooledAfter).toBeGreaterThanOrEqual(COOLDOWN_MS);

      // Recovery: plain serves again; the failed trial doubled its cooldown.
      plain.clearMode();
      let recovered: Served | undefined;
      await until(
        'plain serving again',
        async () => {
          const n = plain.requests.length;
          const s = await chat(M.failover, key.apiKey);
          if (plain.requests.length === n) return undefined;
          recovered = s;
          return true;
        },
        2 * COOLDOWN_MS + 5_000,
        100,
      );
      const secondTrialAt = plain.requests.at(-1)!.at;
      expect(secondTrialAt - trialAt).toBeGreaterThanOrEqual(2 * COOLDOWN_MS);
      expect((await usageOf(recovered!.requestId)).deployment).toBe(`${M.failover}/plain`);
      const after: Served[] = [];
      for (let i = 0; i < 5; i++) after.push(await chat(M.failover, key.apiKey));
      for (const s of after) expect((await usageOf(s.requestId)).deployment).toBe(`${M.failover}/plain`);
    } finally {
      plain.clearMode();
    }
  }, 30_000);

  it("a redirect is the deployment's failure: plain answering 307 -> served by the third party at once, charged once, and counted against plain", async () => {
    const key = await newKey('1');
    plain.setMode({ status: 307, count: 1 });
    try {
      const p0 = plain.requests.length;
      const served = await chat(M.redirect, key.apiKey);
      expect(plain.requests.length - p0).toBe(1);
      const row = await usageOf(served.requestId);
      expect(row.deployment).toBe(`${M.redirect}/third`);
      await expectChargedOnce(served, row);
      const text = await (await fetch(`${gw.httpUrl}/metrics`)).text();
      expect(text).toMatch(
        new RegExp(
          `^gateway_deployment_requests_total\\{deployment="${M.redirect}/plain",provider="sim-plain",outcome="307"\\} 1$`,
          'm',
        ),
      );
      // One failure is under DEPLOYMENT_ALLOWED_FAILS: plain serves the next request.
      const next = await chat(M.redirect, key.apiKey);
      expect((await usageOf(next.requestId)).deployment).toBe(`${M.redirect}/plain`);
    } finally {
      plain.clearMode();
    }
  });

  it("retry-after: plain's one 429 with retry-after 2 is answered by the other deployment, and plain gets nothing for 2 s, then serves again", async () => {
    const key = await newKey('1');
    plain.setMode({ status: 429, retryAfter: '2', count: 1 });
    try {
      const n0 = plain.requests.length;
      const first = await chat(M.retry, key.apiKey);
      expect(plain.requests.length - n0).toBe(1);
      expect(plain.counts().faulted).toBeGreaterThanOrEqual(1);
      expect((await usageOf(first.requestId)).deployment).toBe(`${M.retry}/third`);
      const limitedAt = plain.requests[n0]!.at;
      const meanwhile: Served[] = [];
      let back: Served | undefined;
      await until(
        'plain taking requests again',
        async () => {
          const s = await chat(M.retry, key.apiKey);
          if (plain.requests.length === n0 + 1) {
            meanwhile.push(s);
            return undefined;
          }
          back = s;
          return true;
        },
        6_000,
        100,
      );
      const againAt = plain.requests[n0 + 1]!.at;
      // Exactly the retry-after: not sooner, and not much later than the polling's step.
      expect(againAt - limitedAt).toBeGreaterThanOrEqual(2000);
      expect(againAt - limitedAt).toBeLessThan(3500);
      expect(meanwhile.length).toBeGreaterThanOrEqual(5);
      for (const s of meanwhile) expect((await usageOf(s.requestId)).deployment).toBe(`${M.retry}/third`);
      expect((await usageOf(back!.requestId)).deployment).toBe(`${M.retry}/plain`);
    } finally {
      plain.clearMode();
    }
  });

  it('all deployments cooling: 503 deployments_cooling with retry-after, and nothing charged', async () => {
    const key = await newKey('1');
    const start = await balanceOf(key.accountId);
    plain.setMode({ status: 500 });
    third.setMode({ status: 500 });
    try {
      const failures: number[] = [];
      let cooling: InstanceType<typeof OpenAI.APIError> | undefined;
      for (let i = 0; i < 10 && !cooling; i++) {
        const e = await chatError(M.cooling, key.apiKey);
        if (e.status === 503 && e.code === 'deployments_cooling') cooling = e;
        else failures.push(e.status ?? 0);
      }
      expect(cooling, `no 503 deployments_cooling after ${failures.join(', ')}`).toBeDefined();
      // Three failures of each (DEPLOYMENT_ALLOWED_FAILS), three attempts a request: two requests at least.
      expect(failures.length).toBeGreaterThanOrEqual(2);
      expect(new Set(failures)).toEqual(new Set([500]));
      const retryAfter = cooling!.headers?.get('retry-after');
      expect(retryAfter).toMatch(/^\d+$/);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(retryAfter)).toBeLessThanOrEqual(Math.ceil(COOLDOWN_MS / 1000));
      expect(cooling!.headers?.get('x-gateway-cost-nano-usd')).toBe('0');
      const requestId = cooling!.headers?.get('x-request-id')!;
      expect(requestId).toMatch(/^req_/);
      expect(await rowsForRequest(requestId)).toMatchObject({ ledger: 0 });
      expect(await balanceOf(key.accountId)).toEqual({ balance: start.balance, held: 0n });
    } finally {
      plain.clearMode();
      third.clearMode();
    }
  });

  it('a deployment that cooled down is not called again while it cools, even as the last one able to serve', async () => {
    // plain (priority 0) and third (priority 1) both answering 500: plain cools in the second
    // request; the third request has third alone to try. Each should get exactly
    // DEPLOYMENT_ALLOWED_FAILS (3) requests before the model answers deployments_cooling.
    const key = await newKey('1');
    const p0 = received(plain);
    const t0 = received(third);
    plain.setMode({ status: 500 });
    third.setMode({ status: 500 });
    try {
      const statuses: string[] = [];
      for (let i = 0; i < 8; i++) {
        const e = await chatError(M.lastLeft, key.apiKey);
        statuses.push(`${e.status} ${e.code ?? ''}`.trim());
        if (e.code === 'deployments_cooling') break;
      }
      expect(statuses.at(-1)).toBe('503 deployments_cooling');
      expect(received(plain) - p0).toBe(3);
      // The third request has third alone to try: once third cools there (its third failure), the
      // request's remaining attempts must not call it again (each such call also doubles its cooldown).
      expect(received(third) - t0, `requests third received; the model answered ${statuses.join(', ')}`).toBe(3);
    } finally {
      plain.clearMode();
      third.clearMode();
    }
  });

  it('a deployment that refuses connections (killed): requests fail over with no error seen, and it serves again once revived', async () => {
    const key = await newKey('1');
    await plain.kill();
    try {
      for (let i = 0; i < 5; i++) {
        const s = await chat(M.kill, key.apiKey);
        const row = await usageOf(s.requestId);
        expect(row.deployment).toBe(`${M.kill}/third`);
        await expectChargedOnce(s, row);
      }
    } finally {
      await plain.revive();
    }
    await until(
      'plain serving again after revive',
      async () => {
        const s = await chat(M.kill, key.apiKey);
        return (await usageOf(s.requestId)).deployment === `${M.kill}/plain` ? true : undefined;
      },
      COOLDOWN_MS + 6_000,
      100,
    );
  });

  it('streamed: plain answering 500 before the first byte -> the stream is served by the third party, charged once', async () => {
    const key = await newKey('1');
    plain.setMode({ status: 500 });
    try {
      const p0 = received(plain);
      const t0 = received(third);
      const { data: stream, response } = await client(key.apiKey)
        .chat.completions.create({
          model: M.stream,
          messages: [{ role: 'user', content: `stream ${uniqueMarker()} [sim tokens=5]` }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      expect(text).toBe('w1 w2 w3 w4 w5');
      expect(usage?.completion_tokens).toBe(5);
      // The stream's headers name the deployment that answered, not the one tried first.
      expect(response.headers.get('x-gateway-deployment')).toBe(`${M.stream}/third`);
      expect(received(plain) - p0).toBe(1);
      expect(received(third) - t0).toBe(1);
      const requestId = response.headers.get('x-request-id')!;
      const row = await usageOf(requestId);
      expect(row.deployment).toBe(`${M.stream}/third`);
      expect(row.input_tokens).toBe(String(usage!.prompt_tokens));
      expect(row.output_tokens).toBe('5');
      await expectChargedOnce({ requestId }, row);
    } finally {
      plain.clearMode();
    }
  });

  it("after the first byte reached the caller, a stream is never moved: a break is the caller's, charged for what came, at the deployment that sent it", async () => {
    const key = await newKey('1');
    const marker = uniqueMarker();
    const t0 = received(third);
    const { data: stream, response } = await client(key.apiKey)
      .chat.completions.create({
        model: M.stream,
        messages: [{ role: 'user', content: `cut ${marker} [sim tokens=8 fault=reset after=3]` }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    let text = '';
    let broke: unknown;
    try {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    } catch (err) {
      broke = err;
    }
    // The caller got the first words, then the break (an error event or a cut stream), never a second answer.
    expect(text.startsWith('w1 w2 w3')).toBe(true);
    expect(text).not.toContain('w8');
    expect(broke ?? text.length < 'w1 w2 w3 w4 w5 w6 w7 w8'.length).toBeTruthy();
    expect(received(third) - t0).toBe(0);
    expect(third.requests.some((r) => JSON.stringify(r.body).includes(marker))).toBe(false);
    const requestId = response.headers.get('x-request-id')!;
    const row = await usageOf(requestId);
    expect(row.deployment).toBe(`${M.stream}/plain`);
    expect(await rowsForRequest(requestId)).toMatchObject({ holds: 1, usage: 1 });
  });

  it('names the deployment in x-gateway-deployment where the operator turned it on (DEPLOYMENT_HEADER), and nowhere else', async () => {
    const key = await newKey('1');
    const { response } = await client(key.apiKey)
      .chat.completions.create({
        model: M.stream,
        messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
        max_tokens: 8,
      })
      .withResponse();
    expect(response.headers.get('x-gateway-deployment')).toBe(`${M.stream}/plain`);
    // The main test gateway runs with the default: its answers do not tell callers the operator's suppliers.
    const mainKey = await newMainKey('1');
    const main = await fetch(`${gatewayUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${mainKey.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] }),
    });
    expect(main.status).toBe(200);
    expect(main.headers.get('x-gateway-model')).toBe('gpt-4o-mini');
    expect(main.headers.get('x-gateway-deployment')).toBeNull();
    await main.body?.cancel();
  });

  it('/metrics has the per-deployment series: attempts by outcome, latency and cooldowns', async () => {
    const text = await (await fetch(`${gw.httpUrl}/metrics`)).text();
    const series = (name: string, labels: Record<string, string>) =>
      new RegExp(
        `^${name}\\{${Object.entries(labels)
          .map(([k, v]) => `${k}="${v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`)
          .join(',')}\\} (\\d+)`,
        'm',
      );
    const ok = series('gateway_deployment_requests_total', {
      deployment: `${M.failover}/third`,
      provider: 'sim-third',
      outcome: 'ok',
    }).exec(text);
    expect(Number(ok?.[1])).toBeGreaterThan(0);
    const failed = series('gateway_deployment_requests_total', {
      deployment: `${M.failover}/plain`,
      provider: 'sim-plain',
      outcome: '500',
    }).exec(text);
    expect(Number(failed?.[1])).toBeGreaterThan(0);
    expect(
      Number(series('gateway_deployment_cooldowns_total', { deployment: `${M.failover}/plain` }).exec(text)?.[1]),
    ).toBeGreaterThan(0);
    expect(text).toMatch(
      new RegExp(`^gateway_deployment_latency_seconds_count\\{deployment="${M.failover}/third"\\} \\d+`, 'm'),
    );
  });
});

/** A failed chat request carrying `marker`: its request id, status and error code. */
async function failedChat(model: string, apiKey: string, marker: string, stream = false) {
  const messages = [{ role: 'user' as const, content: `fail ${marker} [sim tokens=2]` }];
  const err = await (stream
    ? client(apiKey).chat.completions.create({ model, messages, stream: true })
    : client(apiKey).chat.completions.create({ model, messages })
  ).then(
    () => {
      throw new Error(`expected ${model} to fail`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  const e = err as InstanceType<typeof OpenAI.APIError>;
  return { requestId: e.headers!.get('x-request-id')!, status: e.status, code: e.code ?? '' };
}

/**
 * The deployment of `model` that gave the last HTTP answer to the request carrying `marker` ('' when
 * none did): a killed instance records nothing, and each instance answers 20 ms after it received
 * (delayMs), so the later arrival is the later answer.
 */
function lastToAnswer(model: string, marker: string): string {
  const arrivals = (
    [
      ['plain', plain],
      ['third', third],
    ] as const
  ).flatMap(([id, s]) =>
    s.requests.filter((r) => JSON.stringify(r.body).includes(marker)).map((r) => ({ id, at: r.at })),
  );
  arrivals.sort((a, b) => a.at - b.at);
  return arrivals.length ? `${model}/${arrivals.at(-1)!.id}` : '';
}

describe("the deployment a failed request's usage row names: the last one that gave an HTTP answer, none only when none answered", () => {
  /** Requests one after another until every deployment of `model` is cooling; each one's row checked against the rule. */
  async function untilCooling(model: string, stream = false): Promise<string[]> {
    const key = await newKey('1');
    const sent: (Awaited<ReturnType<typeof failedChat>> & { marker: string })[] = [];
    for (let i = 0; i < 8 && sent.at(-1)?.code !== 'deployments_cooling'; i++) {
      const marker = uniqueMarker();
      sent.push({ ...(await failedChat(model, key.apiKey, marker, stream)), marker });
    }
    const named: string[] = [];
    for (const [i, f] of sent.entries()) {
      const row = await usageOf(f.requestId);
      expect(row.deployment ?? '', `request ${i}: ${f.status} ${f.code}`).toBe(lastToAnswer(model, f.marker));
      expect(row.cost_nano).toBe('0');
      named.push(`${f.status} ${row.deployment ?? ''}`);
    }
    expect(named.at(-1)).toBe('503 ');
    return named;
  }

  it('every deployment answered 500: each row names the last that answered, then none once every one is cooling', async () => {
    plain.setMode({ status: 500, delayMs: 20 });
    third.setMode({ status: 500, delayMs: 20 });
    try {
      const named = await untilCooling(M.named5xx);
      // The first request's last attempt was plain's; then plain cooled, and third answered last.
      expect(named.slice(0, 2)).toEqual([`500 ${M.named5xx}/plain`, `500 ${M.named5xx}/third`]);
    } finally {
      plain.clearMode();
      third.clearMode();
    }
  });

  it('every deployment answered 429 with retry-after: the row names the last that answered', async () => {
    plain.setMode({ status: 429, retryAfter: '5', delayMs: 20 });
    third.setMode({ status: 429, retryAfter: '5', delayMs: 20 });
    try {
      expect(await untilCooling(M.named429)).toEqual([`429 ${M.named429}/third`, '503 ']);
    } finally {
      plain.clearMode();
      third.clearMode();
    }
  });

  it('streamed, every deployment answered 500 before the first byte: the same rows', async () => {
    plain.setMode({ status: 500, delayMs: 20 });
    third.setMode({ status: 500, delayMs: 20 });
    try {
      const named = await untilCooling(M.namedStream, true);
      expect(named.slice(0, 2)).toEqual([`500 ${M.namedStream}/plain`, `500 ${M.namedStream}/third`]);
    } finally {
      plain.clearMode();
      third.clearMode();
    }
  });

  it('one deployment answered 500 and the other refused the connection last: the row names the one that answered', async () => {
    const key = await newKey('1');
    third.setMode({ status: 500, delayMs: 20 });
    await plain.kill();
    try {
      const marker = uniqueMarker();
      const f = await failedChat(M.namedMixed, key.apiKey, marker);
      // plain, third, plain again: the caller gets the last failure (plain's refused connection).
      expect(f.status).toBe(502);
      expect((await usageOf(f.requestId)).deployment).toBe(`${M.namedMixed}/third`);
      expect(lastToAnswer(M.namedMixed, marker)).toBe(`${M.namedMixed}/third`);
    } finally {
      third.clearMode();
      await plain.revive();
    }
  });

  it('no deployment answered (every one refused the connection): the row names none', async () => {
    const key = await newKey('1');
    await Promise.all([plain.kill(), third.kill()]);
    try {
      const f = await failedChat(M.namedNone, key.apiKey, uniqueMarker());
      expect(f.status).toBe(502);
      expect((await usageOf(f.requestId)).deployment).toBeNull();
    } finally {
      await Promise.all([plain.revive(), third.revive()]);
    }
  });
});
