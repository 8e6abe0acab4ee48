// The price book (src/catalogue/price-book.ts): every model's prices as dated, append-only
// versions in PostgreSQL, the shipped prices being each model's first version. A charge names
// the version it used, and /v1/models lists the prices in force: what is listed is what is charged.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { usdToNano } from '../../src/money/money.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { openDb, migrate, type Db } from '../../src/db/db.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { PriceBook, type BookState } from '../../src/catalogue/price-book.ts';
import { definitionOf } from '../../src/catalogue/book-diff.ts';
import type { Knex } from 'knex';
import { shippedBook } from '../../src/catalogue/shipped-book.ts';
import { formatBookDocument } from '../../src/catalogue/book-document.ts';
import { createDatabase } from '../support/postgres.ts';
import { db, newKey, openai, uniqueMarker, upstreamRequests, waitForUsage } from '../support/context.ts';

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

    // Held at v1, answered after v2 is in force: v2 is written once the request reached the
    // provider, so after it was priced (a fixed pause was too short for a loaded machine's first request).
    const marker = uniqueMarker('held');
    const held = chat(`slow ${marker} [sim tokens=5 delay=1500]`);
    for (const deadline = Date.now() + 20_000; (await upstreamRequests(marker)).length === 0; ) {
      if (Date.now() > deadline) throw new Error('the slow request never reached the provider');
      await new Promise((r) => setTimeout(r, 25));
    }
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

  it('SetPrices on one instance is charged there at once and on a second instance within the refresh bound; GetPriceHistory lists the versions newest first', async () => {
    const { url, knex } = await freshDatabase();
    const sim = inject('simulatorUrl');
    const start = (label: string) =>
      startGatewayProcess({
        logFile: path.join(inject('workDir'), `${label}-${uniqueMarker()}.log`),
        env: {
          DATABASE_URL: url,
          OPENAI_API_KEY: UPSTREAM_KEY,
          OPENAI_BASE_URL: `${sim}/v1`,
          PRICE_BOOK_REFRESH_MS: '200',
        },
      });
    const [a, b] = await Promise.all([start('book-a'), start('book-b')]);
    gateways.push(a, b);
    const catalogueA = createClient(CatalogueService, createGrpcTransport({ baseUrl: a.rpcUrl }));
    const key = await createClient(BillingService, createGrpcTransport({ baseUrl: a.rpcUrl })).createKey({
      creditsNano: usdToNano('5'),
      label: 'two instances',
    });
    const chatOn = (g: GatewayProcess) =>
      new OpenAI({ apiKey: key.apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 }).chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content: 'which price [sim tokens=5]' }] })
        .withResponse();
    const costOf = (r: Awaited<ReturnType<typeof chatOn>>) =>
      BigInt(r.response.headers.get('x-gateway-cost-nano-usd')!);

    const [shipped] = (await catalogueA.getPriceHistory({ modelId: MODEL })).versions;
    const tripled = { ...shipped!.prices, input_per_mtok: '0.45', output_per_mtok: '1.80' };
    const set = await catalogueA.setPrices({
      modelId: MODEL,
      prices: tripled,
      reason: 'follow the provider',
      source: 'test',
    });
    const onA = await chatOn(a);
    expect(costOf(onA)).toBe(chatCost(tripled, onA.data.usage!.prompt_tokens, onA.data.usage!.completion_tokens));
    const setAt = performance.now();
    let onB = await chatOn(b);
    while (costOf(onB) !== chatCost(tripled, onB.data.usage!.prompt_tokens, onB.data.usage!.completion_tokens)) {
      expect(performance.now() - setAt).toBeLessThan(3_000);
      await new Promise((r) => setTimeout(r, 50));
      onB = await chatOn(b);
    }
    const rowB = (
      await knex.raw('SELECT price_version_id::text AS v FROM usage_records WHERE request_id = ?', [
        onB.response.headers.get('x-request-id'),
      ])
    ).rows[0];
    expect(rowB.v).toBe(set.version!.id.toString());

    const history = (await catalogueA.getPriceHistory({ modelId: MODEL })).versions;
    expect(history.map((v) => [v.id, v.source, v.reason])).toEqual([
      [set.version!.id, 'test', 'follow the provider'],
      [shipped!.id, 'shipped', 'the prices the gateway ships with'],
    ]);
    expect(history[0]!.prices).toEqual(tripled);
  });

  it('SetPrices refuses each kind of bad price, naming the model and the field, and writes nothing', async () => {
    const { url, knex } = await freshDatabase();
    const g = await startGatewayProcess({
      logFile: path.join(inject('workDir'), `book-bad-${uniqueMarker()}.log`),
      env: { DATABASE_URL: url, OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1` },
    });
    gateways.push(g);
    const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: g.rpcUrl }));
    const shipped = (await catalogue.getPriceHistory({ modelId: MODEL })).versions[0]!.prices;
    const versions = async () => Number((await knex.raw('SELECT count(*)::int AS n FROM price_versions')).rows[0].n);
    const before = await versions();
    const cases: { req: Parameters<typeof catalogue.setPrices>[0]; field: string }[] = [
      { req: { modelId: MODEL, prices: { ...shipped, inptu_per_mtok: '1.00' } }, field: 'prices.inptu_per_mtok' },
      { req: { modelId: MODEL, prices: { ...shipped, input_per_mtok: '1,5' } }, field: 'prices.input_per_mtok' },
      { req: { modelId: MODEL, prices: { ...shipped, output_per_mtok: '-1' } }, field: 'prices.output_per_mtok' },
      {
        req: { modelId: MODEL, prices: { ...shipped, input_per_mtok: '0.0000000001' } },
        field: 'prices.input_per_mtok',
      },
      { req: { modelId: MODEL, prices: { input_per_mtok: '0.15' } }, field: 'prices.output_per_mtok' },
      {
        req: { modelId: 'whisper', prices: { per_audio_minute: '0.02', per_megapixel: '1' } },
        field: 'prices.per_megapixel',
      },
      { req: { modelId: 'no-such-model', prices: shipped }, field: 'model_id' },
      {
        req: { modelId: MODEL, prices: shipped, effectiveFrom: timestampFromDate(new Date(Date.now() - 60_000)) },
        field: 'effective_from',
      },
    ];
    for (const c of cases) {
      const err = await catalogue.setPrices(c.req).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, c.field).toBe(Code.InvalidArgument);
      const detail = err!.findDetails(GatewayErrorSchema)[0]!;
      expect(detail.param).toBe(c.field);
      expect(detail.message).toContain(c.req.modelId);
    }
    expect(await versions()).toBe(before);
  });

  it('the operator CLI sets a price version and lists the history; a bad price is one line naming the model and the field', async () => {
    const { url } = await freshDatabase();
    const g = await startGatewayProcess({
      logFile: path.join(inject('workDir'), `book-cli-${uniqueMarker()}.log`),
      env: { DATABASE_URL: url, OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1` },
    });
    gateways.push(g);
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['src/cli/main.ts', ...args], {
        cwd: path.resolve(import.meta.dirname, '..', '..'),
        env: { ...process.env, GATEWAY_RPC_URL: g.rpcUrl, ADMIN_TOKEN: '' },
      });
    const set = await cli(
      'catalogue',
      'set-price',
      MODEL,
      'input_per_mtok=0.2',
      'output_per_mtok=0.8',
      '--reason',
      'from the CLI',
      '--json',
    );
    const made = JSON.parse(set.stdout) as { id: string; model_id: string };
    expect(made.model_id).toBe(MODEL);
    const history = JSON.parse((await cli('catalogue', 'history', MODEL, '--json')).stdout) as {
      id: string;
      source: string;
      reason: string;
      prices: Record<string, string>;
    }[];
    expect(history.map((v) => [v.id, v.source, v.reason])).toEqual([
      [made.id, 'operator-cli', 'from the CLI'],
      [history[1]!.id, 'shipped', 'the prices the gateway ships with'],
    ]);
    expect(history[0]!.prices).toEqual({ input_per_mtok: '0.2', output_per_mtok: '0.8' });
    const bad = await cli('catalogue', 'set-price', MODEL, 'input_per_mtok=0.2', 'output_per_mtok=abc').then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(bad?.code).toBe(1);
    expect(bad?.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad?.stderr).toContain(`${MODEL}: output_per_mtok = "abc" is not a price`);
  });

  it("on a database from before the book, usage rows point at their model's first version, the shipped prices; every model and alias gets its shipped first version; seeding again adds nothing", async () => {
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
    await fresh.raw(`INSERT INTO members (id, name) VALUES ('mem_old', 'old')`);
    await fresh.raw(
      `INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id) VALUES ('key_old', 'acct_old', '\\x00', 'prx-old', 'mem_old')`,
    );
    await fresh.raw(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, status, http_status, latency_ms)
       VALUES ('req_old', 'acct_old', 'key_old', ?, '/v1/chat/completions', 5, 'ok', 200, 1)`,
      [MODEL],
    );
    const book = new PriceBook(fresh);
    await Promise.all([book.seed(shippedBook()), book.seed(shippedBook())]);
    await book.seed(shippedBook());
    const versions = (await fresh.raw('SELECT model_id, prices, source FROM price_versions')).rows as {
      model_id: string;
      prices: Record<string, string>;
      source: string;
    }[];
    expect(versions).toHaveLength(MODELS.length);
    const mini = versions.find((v) => v.model_id === MODEL)!;
    expect(mini).toEqual({ model_id: MODEL, prices: MODELS.find((m) => m.id === MODEL)!.prices, source: 'shipped' });
    const state = await book.read();
    const row = (await fresh.raw(`SELECT price_version_id::text AS v FROM usage_records WHERE request_id = 'req_old'`))
      .rows[0];
    expect(row.v).toBe(state.prices.get(MODEL)!.id.toString());
    // The definitions and aliases as shipped, once each: the book reads back as the shipped document.
    const count = async (table: string) => Number((await fresh.raw(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
    expect(await count('model_versions')).toBe(MODELS.length);
    expect(await count('alias_versions')).toBe(Object.keys(shippedBook().aliases).length);
    expect(formatBookDocument(PriceBook.documentOf(state))).toBe(formatBookDocument(shippedBook()));
    // A model's definitions newest first by number: version 100000 before 99999 (as text, '99999' sorted first).
    await fresh.raw(
      `INSERT INTO model_versions (id, model_id, definition, source) VALUES (99999, 'x-order', '{}', 'test'), (100000, 'x-order', '{}', 'test')`,
    );
    expect((await book.definitionHistory('x-order')).map((v) => v.id)).toEqual([100000n, 99999n]);
  });
  it('a read begun before a change and snapshotted after it serves the new model with its price; of two changes, the one decided last is in force', async () => {
    const { knex } = await freshDatabase();
    await migrate(knex);
    const book = new PriceBook(knex);
    await book.seed(shippedBook());
    const meta = { source: 'test', reason: 'race' };
    const template = MODELS.find((m) => m.id === MODEL)!;
    const prices = (input: string) => ({ ...template.prices, input_per_mtok: input });
    const add = () => ({
      changes: [
        {
          kind: 'add_model' as const,
          definition: definitionOf({ ...template, id: 'race-new' }),
          prices: prices('0.31'),
        },
      ],
    });
    const seen: string[] = [];
    const setPrice = (input: string) => (current: BookState) => {
      const before = current.prices.get('race-new')!.prices;
      seen.push(before.input_per_mtok!);
      return { changes: [{ kind: 'set_prices' as const, modelId: 'race-new', prices: prices(input), before }] };
    };
    // The reader's transaction has begun (its now() is fixed) when the model is added and
    // committed; only then does the reader run its first statement, which takes its snapshot.
    const reader = new PriceBook(afterBegin(knex, () => book.change(add, meta)));
    const state = await reader.read();
    expect(state.definitions.has('race-new')).toBe(true);
    expect(state.prices.get('race-new')?.prices.input_per_mtok).toBe('0.31');
    // A change begun before another, that waits for the write lock until the other committed, is
    // decided on the other's prices and written after it: it is the one in force.
    const late = new PriceBook(afterBegin(knex, () => book.change(setPrice('0.66'), meta)));
    expect((await late.change(setPrice('0.55'), meta)).written).toHaveLength(1);
    expect(seen).toEqual(['0.31', '0.66']);
    expect((await book.read()).prices.get('race-new')?.prices.input_per_mtok).toBe('0.55');
    expect((await book.history('race-new')).map((v) => v.prices.input_per_mtok)).toEqual(['0.55', '0.66', '0.31']);
  });
});

/** `db`, whose next transaction runs `between` after its BEGIN and before its first statement. */
function afterBegin(db: Db, between: () => Promise<unknown>): Db {
  let hook: (() => Promise<unknown>) | undefined = between;
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
      return (handler: (trx: Knex.Transaction) => unknown, options?: Knex.TransactionConfig) =>
        target.transaction(async (trx) => {
          const run = hook;
          hook = undefined;
          if (run) await run();
          return handler(trx);
        }, options);
    },
  });
}
