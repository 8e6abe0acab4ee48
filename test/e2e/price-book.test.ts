// The price book (src/catalogue/price-book.ts): every model's prices as dated, append-only
// versions in PostgreSQL, the shipped prices being each model's first version. A charge names
// the version it used, and /v1/models lists the prices in force: what is listed is what is charged.
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../../src/billing/money.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { openDb, migrate, type Db } from '../../src/db/db.ts';
import { MODELS } from '../../src/catalogue/models.ts';
import { PriceBook } from '../../src/catalogue/price-book.ts';
import { createDatabase } from '../support/postgres.ts';
import { db, newKey, openai, uniqueMarker, waitForUsage } from '../support/context.ts';

const MODEL = 'gpt-4o-mini';
const opened: Db[] = [];
const gateways: GatewayProcess[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  for (const d of opened) await d.destroy();
});

/** A database of this test's own, migrated: prices changed there touch no other test. */
async function freshDatabase(): Promise<{ url: string; knex: Db }> {
  const name = `book_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
  opened.push(knex);
  return { url: url.toString(), knex };
}

/** The cost of a chat usage at a version's token prices, rounded up once to the nano-USD. */
function chatCost(prices: Record<string, string>, input: number, output: number): bigint {
  const scaled =
    BigInt(input) * nanoPerMtok(prices.input_per_mtok!) + BigInt(output) * nanoPerMtok(prices.output_per_mtok!);
  return (scaled + 999_999n) / 1_000_000n;
}

/** The version in force for a model, straight from the table. */
async function versionInForce(model: string): Promise<{ id: string; prices: Record<string, string> }> {
  const r = await db().query(
    `SELECT id::text AS id, prices FROM price_versions WHERE model_id = $1 AND effective_from <= now()
     ORDER BY effective_from DESC LIMIT 1`,
    [model],
  );
  return r.rows[0];
}

/** A decimal USD string per million tokens as nano-USD per million tokens (exact: at most 9 decimals). */
function nanoPerMtok(price: string): bigint {
  const [whole, frac = ''] = price.split('.');
  return BigInt(whole!) * 1_000_000_000n + BigInt(frac.padEnd(9, '0'));
}

describe('the price book', () => {
  it("a request's usage row names the version in force, and that version's prices times the reported usage is its charge", async () => {
    const key = await newKey('1');
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `price me ${uniqueMarker()} [sim tokens=7]` }],
      })
      .withResponse();
    const requestId = response.headers.get('x-request-id')!;
    await waitForUsage(requestId);
    const row = (
      await db().query(
        'SELECT price_version_id::text AS price_version_id, cost_nano::text AS cost_nano FROM usage_records WHERE request_id = $1',
        [requestId],
      )
    ).rows[0];
    const version = await versionInForce(MODEL);
    expect(row.price_version_id).toBe(version.id);
    const input = BigInt(data.usage!.prompt_tokens);
    const output = BigInt(data.usage!.completion_tokens);
    const scaled =
      input * nanoPerMtok(version.prices.input_per_mtok!) + output * nanoPerMtok(version.prices.output_per_mtok!);
    const expected = (scaled + 999_999n) / 1_000_000n; // rounded up once, to the nano-USD
    expect(expected).toBeGreaterThan(0n);
    expect(BigInt(response.headers.get('x-gateway-cost-nano-usd')!)).toBe(expected);
    expect(BigInt(row.cost_nano!)).toBe(expected);
  });

  it('GET /v1/models lists each model with the prices of its version in force', async () => {
    const key = await newKey('1');
    const list = (await openai(key.apiKey).models.list()).data as unknown as {
      id: string;
      pricing: Record<string, string>;
    }[];
    const entry = list.find((m) => m.id === MODEL)!;
    expect(entry.pricing).toEqual((await versionInForce(MODEL)).prices);
    expect(Object.keys(entry.pricing).length).toBeGreaterThan(1);
    for (const m of list.filter((x) => x.id.startsWith('gpt-')))
      expect(Object.keys(m.pricing).length).toBeGreaterThan(0);
  });

  it('versions are append-only: an UPDATE or DELETE of one is refused by the database', async () => {
    const { id } = await versionInForce(MODEL);
    await expect(db().query(`UPDATE price_versions SET prices = '{}' WHERE id = $1`, [id])).rejects.toThrow(
      /append-only/,
    );
    await expect(db().query('DELETE FROM price_versions WHERE id = $1', [id])).rejects.toThrow(/append-only/);
    expect((await versionInForce(MODEL)).id).toBe(id);
  });

  it('a new version is charged within the refresh bound, a request held before it settles at the old one, and a scheduled one takes effect at its time', async () => {
    const { url, knex } = await freshDatabase();
    const sim = inject('simulatorUrl');
    const g = await startGatewayProcess({
      logFile: path.join(inject('workDir'), `price-book-${uniqueMarker()}.log`),
      env: {
        DATABASE_URL: url,
        OPENAI_API_KEY: UPSTREAM_KEY,
        OPENAI_BASE_URL: `${sim}/v1`,
        PRICE_BOOK_REFRESH_MS: '100',
      },
    });
    gateways.push(g);
    const billing = createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
    const key = await billing.createKey({ creditsNano: usdToNano('5'), label: 'price book' });
    const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
    const chat = (content: string) =>
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] }).withResponse();
    const versionOf = async (requestId: string) =>
      (
        await knex.raw(
          'SELECT price_version_id::text AS v, cost_nano::text AS c FROM usage_records WHERE request_id = ?',
          [requestId],
        )
      ).rows[0] as {
        v: string;
        c: string;
      };
    const v1 = (await knex.raw(`SELECT id::text AS id, prices FROM price_versions WHERE model_id = ?`, [MODEL]))
      .rows[0];

    // Held at v1, answered after v2 is in force.
    const held = chat(`slow [sim tokens=5 delay=1500]`);
    await new Promise((r) => setTimeout(r, 300));
    const doubled = { ...v1.prices, input_per_mtok: '0.30', output_per_mtok: '1.20' };
    const v2 = (
      await knex.raw(
        `INSERT INTO price_versions (model_id, prices, effective_from, source, reason) VALUES (?, CAST(? AS jsonb), now(), 'test', 'doubled') RETURNING id::text AS id`,
        [MODEL, JSON.stringify(doubled)],
      )
    ).rows[0].id as string;
    await new Promise((r) => setTimeout(r, 500)); // several refreshes
    const after = await chat('after [sim tokens=5]');
    const old = await held;
    const oldRow = await versionOf(old.response.headers.get('x-request-id')!);
    expect(oldRow.v).toBe(v1.id);
    expect(BigInt(oldRow.c)).toBe(
      chatCost(v1.prices, old.data.usage!.prompt_tokens, old.data.usage!.completion_tokens),
    );
    const newRow = await versionOf(after.response.headers.get('x-request-id')!);
    expect(newRow.v).toBe(v2);
    expect(BigInt(newRow.c)).toBe(
      chatCost(doubled, after.data.usage!.prompt_tokens, after.data.usage!.completion_tokens),
    );
    expect(BigInt(newRow.c)).toBeGreaterThan(BigInt(oldRow.c) / 2n);

    // A version for later is not charged before its time, and is from then on.
    const later = { ...v1.prices, input_per_mtok: '0.45', output_per_mtok: '1.80' };
    const v3 = (
      await knex.raw(
        `INSERT INTO price_versions (model_id, prices, effective_from, source, reason) VALUES (?, CAST(? AS jsonb), now() + interval '1500 milliseconds', 'test', 'scheduled') RETURNING id::text AS id`,
        [MODEL, JSON.stringify(later)],
      )
    ).rows[0].id as string;
    const before = await chat('before its time [sim tokens=5]');
    expect((await versionOf(before.response.headers.get('x-request-id')!)).v).toBe(v2);
    await new Promise((r) => setTimeout(r, 2_000));
    const due = await chat('due [sim tokens=5]');
    const dueRow = await versionOf(due.response.headers.get('x-request-id')!);
    expect(dueRow.v).toBe(v3);
    expect(BigInt(dueRow.c)).toBe(chatCost(later, due.data.usage!.prompt_tokens, due.data.usage!.completion_tokens));
    const listed = (
      (await client.models.list()).data as unknown as { id: string; pricing: Record<string, string> }[]
    ).find((m) => m.id === MODEL)!;
    expect(listed.pricing).toEqual(later);
  });

  it("on a database from before the book, usage rows point at their model's first version, the shipped prices; seeding again adds nothing", async () => {
    const name = `book_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    const admin = inject('adminDatabaseUrl');
    await createDatabase(admin, name);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const fresh = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
    opened.push(fresh);
    await migrate(fresh);
    // A usage row as one written before the book existed: no version.
    await fresh.raw(`INSERT INTO accounts (id, label) VALUES ('acct_old', 'old')`);
    await fresh.raw(
      `INSERT INTO api_keys (id, account_id, key_hash, prefix) VALUES ('key_old', 'acct_old', '\\x00', 'prx-old')`,
    );
    await fresh.raw(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, status, http_status, latency_ms)
       VALUES ('req_old', 'acct_old', 'key_old', ?, '/v1/chat/completions', 5, 'ok', 200, 1)`,
      [MODEL],
    );
    const book = new PriceBook(fresh);
    await book.seed(MODELS);
    await book.seed(MODELS);
    const versions = (await fresh.raw('SELECT model_id, prices, source FROM price_versions')).rows as {
      model_id: string;
      prices: Record<string, string>;
      source: string;
    }[];
    expect(versions).toHaveLength(MODELS.length);
    const mini = versions.find((v) => v.model_id === MODEL)!;
    expect(mini).toEqual({ model_id: MODEL, prices: MODELS.find((m) => m.id === MODEL)!.prices, source: 'shipped' });
    const inForce = await book.inForce();
    const row = (await fresh.raw(`SELECT price_version_id::text AS v FROM usage_records WHERE request_id = 'req_old'`))
      .rows[0];
    expect(row.v).toBe(inForce.get(MODEL)!.id.toString());
  });
});
