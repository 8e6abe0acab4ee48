// PreviewBook (src/catalogue/usage-preview.ts): the recorded usage of the last N days, as charged
// and as a proposed book document would charge it, per model. Real requests through the official
// SDK on a gateway with a database of its own, then the RPC over gRPC.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService, type PreviewRow } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import type { BookDocument } from '../../src/catalogue/book-document.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { createDatabase } from '../support/postgres.ts';
import { uniqueMarker } from '../support/context.ts';

const CHAT = 'gpt-4o-mini';
const OTHER_PROVIDER = 'deepseek-chat';
const EMBEDDING = 'text-embedding-3-small';
const SPEECH = 'gpt-4o-mini-tts';
/** Served once at the priority tier: a charge its recorded tokens do not explain. */
const TIERED = 'gpt-4o';
const DAY_MS = 86_400_000;

interface UsageRow {
  model: string;
  account_id: string;
  input_tokens: string;
  cached_tokens: string;
  output_tokens: string;
  units: string;
  cost_nano: string;
  provider_cost_nano: string;
  price_version_id: string;
}

let gateway: GatewayProcess;
let knex: Db;
let catalogue: Client<typeof CatalogueService>;
let exported: string;
/** The first key's account, and a second account the tests put in the price group `vip`. */
let accountId: string;
let vipAccountId: string;
let usage: UsageRow[];

/** A decimal USD price string times two, exactly. */
function doubled(price: string): string {
  const [whole, frac = ''] = price.split('.');
  const n = (BigInt(whole! + frac) * 2n).toString().padStart(frac.length + 1, '0');
  return frac.length ? `${n.slice(0, -frac.length)}.${n.slice(-frac.length)}` : n;
}

/** A decimal USD string per million tokens as nano-USD per million tokens (exact: at most 9 decimals). */
function nanoPerMtok(price: string): bigint {
  const [whole, frac = ''] = price.split('.');
  return BigInt(whole!) * 1_000_000_000n + BigInt(frac.padEnd(9, '0'));
}

/** A chat row's exact cost at list token prices, in millionths of a nano-USD. */
function chatCostMicroNano(prices: Record<string, string>, r: UsageRow): bigint {
  const cached = BigInt(r.cached_tokens);
  return (
    (BigInt(r.input_tokens) - cached) * nanoPerMtok(prices.input_per_mtok!) +
    cached * nanoPerMtok(prices.cached_input_per_mtok ?? prices.input_per_mtok!) +
    BigInt(r.output_tokens) * nanoPerMtok(prices.output_per_mtok!)
  );
}

const ceilMillionth = (microNano: bigint) => (microNano + 999_999n) / 1_000_000n;
const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n);
const rowOf = (rows: PreviewRow[], model: string) => rows.find((r) => r.modelId === model)!;

function withDocument(change: (doc: BookDocument) => void): string {
  const doc = JSON.parse(exported) as BookDocument;
  change(doc);
  return JSON.stringify(doc);
}

async function refusal(p: Promise<unknown>): Promise<{ code: Code; param: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  expect(err).toBeDefined();
  const detail = err!.findDetails(GatewayErrorSchema)[0]!;
  return { code: err!.code, param: detail.param, message: detail.message };
}

beforeAll(async () => {
  const name = `preview_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
  const sim = inject('simulatorUrl');
  gateway = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `book-preview-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: url.toString(),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      DEEPSEEK_API_KEY: UPSTREAM_KEY,
      DEEPSEEK_BASE_URL: `${sim}/v1`,
    },
  });
  const transport = createGrpcTransport({ baseUrl: gateway.rpcUrl });
  catalogue = createClient(CatalogueService, transport);
  const billing = createClient(BillingService, transport);
  const key = await billing.createKey({ creditsNano: usdToNano('5'), label: 'preview' });
  const vip = await billing.createKey({ creditsNano: usdToNano('5'), label: 'preview vip' });
  accountId = key.accountId;
  vipAccountId = vip.accountId;
  // Prices finer than a nano-USD per token, so each row's cost is rounded up on its own.
  for (const [modelId, fine] of [
    [CHAT, { input_per_mtok: '0.1501', output_per_mtok: '0.6003' }],
    [EMBEDDING, { input_per_mtok: '0.0221' }],
  ] as const) {
    const [shipped] = (await catalogue.getPriceHistory({ modelId })).versions;
    await catalogue.setPrices({ modelId, prices: { ...shipped!.prices, ...fine }, reason: 'fine', source: 'test' });
  }
  const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gateway.httpUrl}/v1`, maxRetries: 0 });
  const chat = (apiKey: string, model: string, content: string) =>
    client(apiKey).chat.completions.create({ model, messages: [{ role: 'user', content }] });

  await chat(key.apiKey, CHAT, 'one [sim tokens=7]');
  await chat(key.apiKey, CHAT, 'a second, longer question for the preview [sim tokens=23]');
  await chat(key.apiKey, CHAT, 'three [sim tokens=101]');
  await chat(key.apiKey, OTHER_PROVIDER, 'elsewhere [sim tokens=9]');
  await chat(vip.apiKey, OTHER_PROVIDER, 'a vip asks [sim tokens=31]');
  await client(key.apiKey).chat.completions.create({
    model: TIERED,
    service_tier: 'priority',
    messages: [{ role: 'user', content: 'fast please [sim tokens=40]' }],
  });
  await client(key.apiKey).embeddings.create({ model: EMBEDDING, input: 'embed this short text' });
  await client(key.apiKey).embeddings.create({ model: EMBEDDING, input: ['and these', 'two more inputs'] });
  const speech = await client(key.apiKey).audio.speech.create({ model: SPEECH, voice: 'alloy', input: 'héllo 👋' });
  await speech.arrayBuffer();
  // Usage rows are written as each request settles.
  const until = Date.now() + 10_000;
  while (Number((await knex.raw('SELECT count(*) AS n FROM usage_records')).rows[0].n) < 9) {
    expect(Date.now()).toBeLessThan(until);
    await new Promise((r) => setTimeout(r, 50));
  }
  await knex.raw(`UPDATE accounts SET price_group = 'vip' WHERE id = ?`, [vipAccountId]);
  usage = (
    await knex.raw(
      `SELECT model, account_id, input_tokens::text, cached_tokens::text, output_tokens::text, units::text,
         cost_nano::text, provider_cost_nano::text, price_version_id::text FROM usage_records`,
    )
  ).rows as UsageRow[];
  exported = (await catalogue.exportBook({})).document;
});

afterAll(async () => {
  await gateway?.stop();
  await knex?.destroy();
});

describe('PreviewBook', () => {
  it('the book unchanged previews exactly what was charged: every figure equal, no request inexact', async () => {
    const p = await catalogue.previewBook({ document: exported, days: 7 });
    expect(p.rows.map((r) => r.modelId)).toEqual([CHAT, OTHER_PROVIDER, SPEECH, EMBEDDING, TIERED].sort());
    for (const model of [CHAT, OTHER_PROVIDER, EMBEDDING, SPEECH]) {
      const rows = usage.filter((u) => u.model === model);
      const r = rowOf(p.rows, model);
      expect(r.requests, model).toBe(BigInt(rows.length));
      expect(r.providerCostNano, model).toBe(sum(rows.map((u) => BigInt(u.provider_cost_nano))));
      expect(r.revenueNano, model).toBe(sum(rows.map((u) => BigInt(u.cost_nano))));
      expect(r.providerCostNano, model).toBeGreaterThan(0n);
      expect(r.proposedProviderCostNano, model).toBe(r.providerCostNano);
      expect(r.proposedRevenueNano, model).toBe(r.revenueNano);
      expect(r.inexactRequests, model).toBe(0n);
    }
    // The priority request is not explained by its tokens at list prices, but the book is unchanged.
    const tiered = rowOf(p.rows, TIERED);
    expect(tiered).toMatchObject({ requests: 1n, inexactRequests: 1n });
    expect(tiered.proposedProviderCostNano).toBe(tiered.providerCostNano);
    expect(p.total).toMatchObject({
      modelId: '',
      requests: 9n,
      providerCostNano: sum(usage.map((u) => BigInt(u.provider_cost_nano))),
      proposedProviderCostNano: sum(usage.map((u) => BigInt(u.provider_cost_nano))),
      inexactRequests: 1n,
    });
    expect(timestampDate(p.to!).getTime() - timestampDate(p.from!).getTime()).toBe(7 * DAY_MS);
  });

  it("doubling one model's prices previews its rows at the doubled prices, within 1 nano-USD per request of charging each row apart, and leaves the other models as charged", async () => {
    const book = JSON.parse(exported) as BookDocument;
    const own = book.models.find((m) => m.id === CHAT)!.prices;
    const twice = Object.fromEntries(Object.entries(own).map(([k, v]) => [k, doubled(v)]));
    const p = await catalogue.previewBook({
      document: withDocument((doc) => {
        doc.models.find((m) => m.id === CHAT)!.prices = twice;
      }),
    });
    const rows = usage.filter((u) => u.model === CHAT);
    const n = BigInt(rows.length);
    const r = rowOf(p.rows, CHAT);
    // Each row at the doubled prices, rounded up on its own, as the gateway would have charged it.
    const perRow = sum(rows.map((u) => ceilMillionth(chatCostMicroNano(twice, u))));
    const recorded = sum(rows.map((u) => BigInt(u.provider_cost_nano)));
    expect(recorded).toBe(sum(rows.map((u) => ceilMillionth(chatCostMicroNano(own, u)))));
    // The rows were rounded up apart: what they cost together is less than what they were charged.
    expect(recorded * 1_000_000n).toBeGreaterThan(sum(rows.map((u) => chatCostMicroNano(own, u))));
    expect(r.proposedProviderCostNano).not.toBe(r.providerCostNano);
    const diff = r.proposedProviderCostNano - perRow;
    expect(diff <= n && diff >= -n).toBe(true);
    // Exactly: what was charged, plus what the same usage costs more at the doubled prices, rounded up once.
    const more = sum(rows.map((u) => chatCostMicroNano(twice, u) - chatCostMicroNano(own, u)));
    expect(r.proposedProviderCostNano).toBe(ceilMillionth(recorded * 1_000_000n + more));
    expect(r.proposedRevenueNano).toBe(r.proposedProviderCostNano);
    expect(r.inexactRequests).toBe(0n);
    for (const model of [OTHER_PROVIDER, EMBEDDING, SPEECH, TIERED]) {
      const other = rowOf(p.rows, model);
      expect(other.proposedProviderCostNano, model).toBe(other.providerCostNano);
      expect(other.proposedRevenueNano, model).toBe(other.revenueNano);
    }
    expect(p.total!.proposedProviderCostNano).toBe(sum(p.rows.map((x) => x.proposedProviderCostNano)));
  });

  it("a markup on one provider previews that provider's revenue as its provider cost marked up, the most specific markup for each account group winning, and the other providers' revenue unchanged", async () => {
    const p = await catalogue.previewBook({
      document: withDocument((doc) => {
        doc.markups = [
          { provider: 'deepseek', markup: '0.5' },
          { model: OTHER_PROVIDER, group: 'vip', markup: '2' },
        ];
      }),
    });
    const costIn = (account: string) =>
      sum(
        usage
          .filter((u) => u.model === OTHER_PROVIDER && u.account_id === account)
          .map((u) => BigInt(u.provider_cost_nano)),
      );
    const everyone = costIn(accountId);
    const vip = costIn(vipAccountId);
    expect(everyone).toBeGreaterThan(0n);
    expect(vip).toBeGreaterThan(0n);
    const r = rowOf(p.rows, OTHER_PROVIDER);
    expect(r.proposedProviderCostNano).toBe(r.providerCostNano);
    // ceil(cost x 1.5) for everyone, cost x 3 for the vip group (its own model markup beats the provider's).
    expect(r.proposedRevenueNano).toBe((everyone * 3n + 1n) / 2n + vip * 3n);
    for (const model of [CHAT, EMBEDDING, SPEECH, TIERED]) {
      const other = rowOf(p.rows, model);
      expect(other.proposedRevenueNano, model).toBe(other.revenueNano);
    }
  });

  it('a request its recorded tokens do not explain (the priority tier) is counted inexact and scales with the base prices: every price doubled, its cost doubles', async () => {
    const row = usage.find((u) => u.model === TIERED)!;
    const own = (JSON.parse(exported) as BookDocument).models.find((m) => m.id === TIERED)!.prices;
    // Charged at the priority prices, not the list prices its tokens would cost.
    expect(BigInt(row.provider_cost_nano)).toBeGreaterThan(ceilMillionth(chatCostMicroNano(own, row)));
    const p = await catalogue.previewBook({
      document: withDocument((doc) => {
        const m = doc.models.find((x) => x.id === TIERED)!;
        m.prices = Object.fromEntries(Object.entries(m.prices).map(([k, v]) => [k, doubled(v)]));
      }),
    });
    const r = rowOf(p.rows, TIERED);
    expect(r).toMatchObject({ requests: 1n, inexactRequests: 1n });
    expect(r.proposedProviderCostNano).toBe(2n * BigInt(row.provider_cost_nano));
    expect(r.proposedRevenueNano).toBe(r.proposedProviderCostNano);
    expect(rowOf(p.rows, CHAT).inexactRequests).toBe(0n);
  });

  it('only the window counts: a row older than `days` is left out, and counted once the window reaches it', async () => {
    const own = (JSON.parse(exported) as BookDocument).models.find((m) => m.id === CHAT)!.prices;
    const version = usage.find((u) => u.model === CHAT)!.price_version_id;
    const keyId = (await knex.raw('SELECT id FROM api_keys WHERE account_id = ?', [accountId])).rows[0].id;
    const old = { input_tokens: '1000', cached_tokens: '0', output_tokens: '333' } as UsageRow;
    const cost = ceilMillionth(chatCostMicroNano(own, old));
    await knex.raw(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, route, input_tokens, output_tokens,
         cost_nano, provider_cost_nano, price_version_id, status, http_status, latency_ms, created_at)
       VALUES (?, ?, ?, ?, '/v1/chat/completions', 1000, 333, ?, ?, ?, 'ok', 200, 1, now() - interval '40 days')`,
      [`req_old_${uniqueMarker()}`, accountId, keyId, CHAT, cost.toString(), cost.toString(), version],
    );
    const recent = usage.filter((u) => u.model === CHAT);
    const recentCost = sum(recent.map((u) => BigInt(u.provider_cost_nano)));
    const month = rowOf((await catalogue.previewBook({ document: exported, days: 30 })).rows, CHAT);
    expect(month.requests).toBe(BigInt(recent.length));
    expect(month.providerCostNano).toBe(recentCost);
    const longer = rowOf((await catalogue.previewBook({ document: exported, days: 41 })).rows, CHAT);
    expect(longer.requests).toBe(BigInt(recent.length + 1));
    expect(longer.providerCostNano).toBe(recentCost + cost);
    expect(longer.proposedProviderCostNano).toBe(recentCost + cost);
    expect(longer.inexactRequests).toBe(0n);
  });

  it('days 0 means 30, more than 366 is refused, and a document with a problem is refused; a preview writes nothing', async () => {
    const count = async (table: string) => Number((await knex.raw(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
    const before = await Promise.all(['price_versions', 'markup_versions', 'model_versions'].map(count));
    const p = await catalogue.previewBook({ document: exported, days: 0 });
    expect(timestampDate(p.to!).getTime() - timestampDate(p.from!).getTime()).toBe(30 * DAY_MS);
    expect(Math.abs(timestampDate(p.to!).getTime() - Date.now())).toBeLessThan(60_000);

    const tooLong = await refusal(catalogue.previewBook({ document: exported, days: 367 }));
    expect(tooLong).toMatchObject({ code: Code.InvalidArgument, param: 'days' });
    const bad = await refusal(
      catalogue.previewBook({
        document: withDocument((doc) => {
          doc.models.find((m) => m.id === CHAT)!.prices.input_per_mtok = '1,5';
        }),
      }),
    );
    expect(bad.code).toBe(Code.InvalidArgument);
    expect(bad.param).toContain(CHAT);
    expect(bad.message).toContain(CHAT);

    expect(await Promise.all(['price_versions', 'markup_versions', 'model_versions'].map(count))).toEqual(before);
    expect((await catalogue.exportBook({})).document).toBe(exported);
  });
});
