// The price book's admin side (src/services/catalogue.ts, src/cli/catalogue-commands.ts): the
// whole book as a document that round-trips byte for byte, each kind of bad change refused whole
// with nothing written, models, aliases and markups changed one at a time and served at once here
// and within PRICE_BOOK_REFRESH_MS on another instance, and what /v1/models lists for a caller
// being what the caller is charged. Two gateways on a database of this file's own.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { createDatabase } from '../support/postgres.ts';
import { uniqueMarker, upstreamRequests } from '../support/context.ts';
import { runCatalogueCli } from '../support/catalogue-cli.ts';

const REFRESH_MS = 200;
/** How long a second instance may take to serve a change: a few refreshes, with room for a loaded machine. */
const SPREAD_BOUND_MS = 3_000;

let knex: Db;
let a: GatewayProcess;
let b: GatewayProcess;
const catalogueOn = (g: GatewayProcess) => createClient(CatalogueService, createGrpcTransport({ baseUrl: g.rpcUrl }));
const billingOn = (g: GatewayProcess) => createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
let catalogue: ReturnType<typeof catalogueOn>;

beforeAll(async () => {
  const name = `book_admin_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
  const start = (label: string) =>
    startGatewayProcess({
      logFile: path.join(inject('workDir'), `${label}-${uniqueMarker()}.log`),
      env: {
        DATABASE_URL: url.toString(),
        OPENAI_API_KEY: UPSTREAM_KEY,
        OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
        PRICE_BOOK_REFRESH_MS: String(REFRESH_MS),
      },
    });
  // One at a time: both seed the book, and the first to start has written it.
  a = await start('book-admin-a');
  b = await start('book-admin-b');
  catalogue = catalogueOn(a);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await knex?.destroy();
});

/** Rows in the book's four append-only tables: a refused change adds none. */
async function bookRows(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of ['price_versions', 'model_versions', 'alias_versions', 'markup_versions'])
    out[t] = Number((await knex.raw(`SELECT count(*)::int AS n FROM ${t}`)).rows[0].n);
  return out;
}

const exported = async () => (await catalogue.exportBook({})).document;

interface DocModel {
  id: string;
  enabled: boolean;
  prices: Record<string, string>;
  [field: string]: unknown;
}
interface Doc {
  models: DocModel[];
  aliases: Record<string, string>;
  markups: Record<string, string>[];
}

/** `text` (a book document) with `edit` made, written as export writes it. */
function edited(text: string, edit: (doc: Doc, model: (id: string) => DocModel) => void): string {
  const doc = JSON.parse(text) as Doc;
  edit(doc, (id) => doc.models.find((m) => m.id === id)!);
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/** The error a call is refused with (the test fails if it is not refused). */
async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  return call.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => ConnectError.from(e),
  );
}

/** A decimal USD price in 1e-15 USD: customer prices carry up to 9 + 6 decimal places. */
function femtoUsd(price: string): bigint {
  const [whole, frac = ''] = price.split('.');
  if (frac.length > 15) throw new Error(`${price} has more than 15 decimal places`);
  return BigInt(whole! + frac.padEnd(15, '0'));
}

/** A chat request's charge at per-million-token prices: the exact cost, rounded up once to the nano-USD. */
function chatCharge(prices: Record<string, string>, usage: OpenAI.CompletionUsage): bigint {
  expect(usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
  const exact =
    BigInt(usage.prompt_tokens) * femtoUsd(prices.input_per_mtok!) +
    BigInt(usage.completion_tokens) * femtoUsd(prices.output_per_mtok!);
  const perNano = 10n ** 12n; // 1e-15 USD per million tokens, times tokens: 1e-21 USD; a nano-USD is 1e12 of those
  return (exact + perNano - 1n) / perNano;
}

async function newKeyOn(g: GatewayProcess, label: string) {
  return billingOn(g).createKey({ creditsNano: usdToNano('5'), label });
}

const client = (g: GatewayProcess, apiKey: string) => new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });

const chat = (g: GatewayProcess, apiKey: string, model: string, content = `hello ${uniqueMarker()} [sim tokens=7]`) =>
  client(g, apiKey)
    .chat.completions.create({ model, messages: [{ role: 'user', content }] })
    .withResponse();

/** What the caller's /v1/models lists for `model`, or undefined when it is not listed. */
async function listed(g: GatewayProcess, apiKey: string, model: string) {
  const list = (await client(g, apiKey).models.list()).data as unknown as {
    id: string;
    alias_for?: string;
    pricing: Record<string, string>;
  }[];
  return list.find((m) => m.id === model);
}

async function usageRowOf(requestId: string) {
  for (let i = 0; i < 100; i++) {
    const row = (
      await knex.raw(
        `SELECT model, requested_model, cost_nano::text AS cost, provider_cost_nano::text AS provider_cost,
                price_version_id::text AS price_version, markup_version_id::text AS markup_version
         FROM usage_records WHERE request_id = ?`,
        [requestId],
      )
    ).rows[0] as
      | {
          model: string;
          requested_model: string | null;
          cost: string;
          provider_cost: string | null;
          price_version: string | null;
          markup_version: string | null;
        }
      | undefined;
    if (row) return row;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no usage row for ${requestId}`);
}

const chargeOf = (r: { response: Response }) => BigInt(r.response.headers.get('x-gateway-cost-nano-usd')!);
const requestIdOf = (r: { response: Response }) => r.response.headers.get('x-request-id')!;

/** A new chat model the shipped book does not have, served upstream as gpt-4o-mini. */
function houseModel(id: string, prices: Record<string, string>) {
  return {
    id,
    kind: 'chat',
    provider: 'openai',
    upstreamId: 'gpt-4o-mini',
    enabled: true,
    contextWindow: 128_000,
    maxOutputTokens: 16_384,
    vision: { kind: 'tiles', baseTokens: 85, tileTokens: 170 },
    prices,
  };
}

describe('the price book as a document', () => {
  it('export, apply, export gives the same bytes; applying the export changes nothing, and a dry run writes nothing', async () => {
    const before = await exported();
    const rows = await bookRows();
    const applied = await catalogue.applyBook({ document: before, reason: 'round trip' });
    expect(applied.changes).toEqual([]);
    expect(applied.applied).toBe(false);
    expect(await exported()).toBe(before);
    expect(await bookRows()).toEqual(rows);

    const dearer = edited(before, (_d, model) => {
      model('gpt-4o').prices.input_per_mtok = '3.00';
    });
    const dry = await catalogue.applyBook({ document: dearer, dryRun: true });
    expect(dry.applied).toBe(false);
    expect(dry.changes.map((c) => [c.kind, c.subject, c.detail])).toEqual([
      ['set_prices', 'gpt-4o', 'input_per_mtok: 2.50 -> 3.00'],
    ]);
    expect(await exported()).toBe(before);
    expect(await bookRows()).toEqual(rows);
  });

  it('each kind of bad change is refused with INVALID_ARGUMENT naming the model and the field, and writes nothing', async () => {
    const book = await exported();
    const rows = await bookRows();
    const apply = (edit: Parameters<typeof edited>[1]) => catalogue.applyBook({ document: edited(book, edit) });
    const cases: { what: string; call: () => Promise<unknown>; param: string; names: string[] }[] = [
      {
        what: 'a price key the kind is not billed by',
        call: () =>
          apply((_d, m) => {
            m('text-embedding-3-small').prices.output_per_mtok = '0.10';
          }),
        param: 'models[text-embedding-3-small].prices.output_per_mtok',
        names: ['text-embedding-3-small', 'output_per_mtok'],
      },
      {
        what: 'a negative price',
        call: () =>
          apply((_d, m) => {
            m('gpt-4o').prices.input_per_mtok = '-2.50';
          }),
        param: 'models[gpt-4o].prices.input_per_mtok',
        names: ['gpt-4o', 'input_per_mtok', 'negative'],
      },
      {
        what: 'a malformed price',
        call: () =>
          apply((_d, m) => {
            m('gpt-4o').prices.output_per_mtok = '10,00';
          }),
        param: 'models[gpt-4o].prices.output_per_mtok',
        names: ['gpt-4o', 'output_per_mtok', '"10,00"'],
      },
      {
        what: 'a price finer than a nano-USD per unit',
        call: () =>
          apply((_d, m) => {
            m('whisper').prices.per_audio_minute = '0.0170000001';
          }),
        param: 'models[whisper].prices.per_audio_minute',
        names: ['whisper', 'per_audio_minute', 'nano-USD'],
      },
      {
        what: 'a chat model without an output price',
        call: () =>
          apply((_d, m) => {
            delete m('gpt-4o').prices.output_per_mtok;
          }),
        param: 'models[gpt-4o].prices.output_per_mtok',
        names: ['gpt-4o', 'output_per_mtok'],
      },
      {
        what: 'a new chat model without an input price',
        call: () =>
          catalogue.upsertModel({ modelJson: JSON.stringify(houseModel('no-input', { output_per_mtok: '1.00' })) }),
        param: 'models[no-input].prices.input_per_mtok',
        names: ['no-input', 'input_per_mtok'],
      },
      {
        what: 'an alias to a missing model',
        call: () => catalogue.setAlias({ alias: 'nowhere', modelId: 'no-such-model' }),
        param: 'aliases[nowhere]',
        names: ['nowhere', 'no-such-model'],
      },
      {
        what: 'an alias to a disabled model',
        call: () =>
          apply((d, m) => {
            m('gpt-5.6-sol').enabled = false;
            d.aliases['sol-latest'] = 'gpt-5.6-sol';
          }),
        param: 'aliases[sol-latest]',
        names: ['sol-latest', 'gpt-5.6-sol', 'disabled'],
      },
      {
        what: 'an alias to another alias',
        call: () => catalogue.setAlias({ alias: 'opus-latest', modelId: 'claude-opus-5-5' }),
        param: 'aliases[opus-latest]',
        names: ['opus-latest', 'claude-opus-5-5', 'alias'],
      },
      {
        what: "an alias named as a model's id",
        call: () => catalogue.setAlias({ alias: 'gpt-4o', modelId: 'gpt-4.1' }),
        param: 'aliases[gpt-4o]',
        names: ['gpt-4o'],
      },
      {
        what: 'a model listed twice',
        call: () =>
          apply((d, m) => {
            d.models.push({ ...m('gpt-4o'), prices: { ...m('gpt-4o').prices, input_per_mtok: '9.00' } });
          }),
        param: 'models[gpt-4o].id',
        names: ['gpt-4o', 'listed 2 times'],
      },
      {
        what: 'a model left out',
        call: () =>
          apply((d) => {
            d.models = d.models.filter((x) => x.id !== 'whisper');
          }),
        param: 'models[whisper]',
        names: ['whisper', 'enabled'],
      },
      {
        what: 'a new version dated in the past (a whole document)',
        call: () =>
          catalogue.applyBook({
            document: edited(book, (_d, m) => {
              m('gpt-4o').prices.input_per_mtok = '3.00';
            }),
            effectiveFrom: timestampFromDate(new Date(Date.now() - 60_000)),
          }),
        param: 'effective_from',
        names: ['in the past'],
      },
      {
        what: 'a markup dated in the past',
        call: () =>
          catalogue.setMarkup({
            modelId: 'gpt-4o',
            markup: '0.2',
            effectiveFrom: timestampFromDate(new Date(Date.now() - 60_000)),
          }),
        param: 'effective_from',
        names: ['in the past'],
      },
      {
        what: 'a bad markup (one change)',
        call: () => catalogue.setMarkup({ modelId: 'gpt-4o', markup: '-0.1' }),
        param: 'markup',
        names: ['model:gpt-4o', '"-0.1"'],
      },
      {
        what: 'a bad markup (in a document)',
        call: () =>
          apply((d) => {
            d.markups.push({ model: 'gpt-4o', markup: '20%' });
          }),
        param: 'markups[model:gpt-4o].markup',
        names: ['model:gpt-4o', '"20%"'],
      },
      {
        what: 'a markup for a model the book does not have',
        call: () => catalogue.setMarkup({ modelId: 'no-such-model', markup: '0.2' }),
        param: 'markups[model:no-such-model].model',
        names: ['no-such-model'],
      },
    ];
    for (const c of cases) {
      const err = await refusal(c.call());
      expect(err.code, c.what).toBe(Code.InvalidArgument);
      const detail = err.findDetails(GatewayErrorSchema)[0]!;
      expect(detail.param, c.what).toBe(c.param);
      for (const n of c.names) expect(detail.message, c.what).toContain(n);
    }
    expect(await bookRows()).toEqual(rows);
    expect(await exported()).toBe(book);
  });

  it('a deployment weight no number holds (1e999) is refused saying what a weight must be, and writes nothing', async () => {
    const book = await exported();
    const rows = await bookRows();
    const document = edited(book, (_d, m) => {
      m('gpt-4o').deployments = [{ id: 'main', provider: 'openai', weight: 7 }];
    }).replace('"weight": 7', '"weight": 1e999');
    expect(document).toContain('"weight": 1e999');
    const err = await refusal(catalogue.applyBook({ document, reason: 'a weight past any number' }));
    expect(err.code).toBe(Code.InvalidArgument);
    const detail = err.findDetails(GatewayErrorSchema)[0]!;
    expect(detail.param).toBe('models[gpt-4o].deployments[main].weight');
    expect(detail.message).toContain('weight must be a whole number from 0 to 1000000, not 1e999');
    expect(detail.message).not.toContain('null');
    expect(await bookRows()).toEqual(rows);
    expect(await exported()).toBe(book);
  });

  it('a document with two problems is refused whole, each problem named, and its valid first change is not written', async () => {
    const book = await exported();
    const rows = await bookRows();
    const err = await refusal(
      catalogue.applyBook({
        document: edited(book, (d, m) => {
          m('gpt-4.1').prices.input_per_mtok = '2.20'; // a valid change, first in the document
          m('gpt-4o').prices.output_per_mtok = '-1';
          d.aliases['nowhere'] = 'no-such-model';
        }),
      }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    const detail = err.findDetails(GatewayErrorSchema)[0]!;
    expect(detail.param).toBe('models[gpt-4o].prices.output_per_mtok');
    expect(detail.message).toContain('2 problems');
    expect(detail.message).toContain('models[gpt-4o].prices.output_per_mtok');
    expect(detail.message).toContain('aliases[nowhere]');
    expect(await bookRows()).toEqual(rows);
    expect(await exported()).toBe(book);
    expect((await catalogue.getModel({ id: 'gpt-4.1' })).model!.prices.input_per_mtok).toBe('2.00');
  });
});

describe('single changes, served at once', () => {
  it('UpsertModel adds a model that is served through the OpenAI SDK, sent upstream as its upstream id and charged at its prices', async () => {
    const prices = { input_per_mtok: '0.333', output_per_mtok: '1.111' };
    const r = await catalogue.upsertModel({
      modelJson: JSON.stringify(houseModel('house-chat', prices)),
      reason: 'our own name for it',
    });
    expect(r.created).toBe(true);
    expect(r.model).toMatchObject({ id: 'house-chat', available: true, prices });
    const key = await newKeyOn(a, 'upsert');
    const marker = uniqueMarker('house');
    const reply = await chat(a, key.apiKey, 'house-chat', `${marker} [sim tokens=9]`);
    expect(reply.data.model).toBe('house-chat');
    expect(chargeOf(reply)).toBe(chatCharge(prices, reply.data.usage!));
    expect((await upstreamRequests(marker)).map((u) => u.body?.model)).toEqual(['gpt-4o-mini']);
    const row = await usageRowOf(requestIdOf(reply));
    expect(row).toMatchObject({ model: 'house-chat', cost: chargeOf(reply).toString() });
    expect(row.price_version).toBe(r.model!.priceVersionId.toString());
    expect((await listed(a, key.apiKey, 'house-chat'))?.pricing).toEqual(prices);

    // Again, with a larger output cap and no prices: the definition changes, the prices stay.
    const again = await catalogue.upsertModel({
      modelJson: JSON.stringify({ ...houseModel('house-chat', {}), maxOutputTokens: 32_000 }),
    });
    expect(again.created).toBe(false);
    expect(again.model).toMatchObject({ maxOutputTokens: 32_000, prices, priceVersionId: r.model!.priceVersionId });
  });

  it('a disabled model is refused as model_not_available and not listed; disabling a model an alias serves is refused until the alias is deleted', async () => {
    const key = await newKeyOn(a, 'disable');
    await catalogue.setAlias({ alias: 'luna-latest', modelId: 'gpt-5.6-luna' });
    const rows = await bookRows();
    const err = await refusal(catalogue.setModelEnabled({ modelId: 'gpt-5.6-luna', enabled: false }));
    expect(err.code).toBe(Code.InvalidArgument);
    const detail = err.findDetails(GatewayErrorSchema)[0]!;
    expect(detail.param).toBe('aliases[luna-latest]');
    expect(detail.message).toContain('gpt-5.6-luna');
    expect(detail.message).toContain('disabled');
    expect(await bookRows()).toEqual(rows);
    expect((await chat(a, key.apiKey, 'luna-latest')).data.model).toBe('gpt-5.6-luna');

    expect((await catalogue.deleteAlias({ alias: 'luna-latest' })).deleted).toBe(true);
    const off = await catalogue.setModelEnabled({ modelId: 'gpt-5.6-luna', enabled: false, reason: 'retired' });
    expect(off.model).toMatchObject({ enabled: false, available: false });
    const refused = await chat(a, key.apiKey, 'gpt-5.6-luna').then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(refused?.status).toBe(400);
    expect(refused?.code).toBe('model_not_available');
    expect(await listed(a, key.apiKey, 'gpt-5.6-luna')).toBeUndefined();

    await catalogue.setModelEnabled({ modelId: 'gpt-5.6-luna', enabled: true });
    expect((await chat(a, key.apiKey, 'gpt-5.6-luna')).data.model).toBe('gpt-5.6-luna');
    expect(await listed(a, key.apiKey, 'gpt-5.6-luna')).toBeDefined();
  });

  it('SetAlias: a request naming the alias is served by its model and its usage row keeps the alias; after DeleteAlias the alias is an unknown model', async () => {
    const key = await newKeyOn(a, 'alias');
    await catalogue.setAlias({ alias: 'house-default', modelId: 'gpt-4.1', reason: 'the model we recommend' });
    expect(await listed(a, key.apiKey, 'house-default')).toMatchObject({ alias_for: 'gpt-4.1' });
    const reply = await chat(a, key.apiKey, 'house-default');
    expect(reply.data.model).toBe('gpt-4.1');
    const prices = (await catalogue.getModel({ id: 'gpt-4.1' })).model!.prices;
    expect(chargeOf(reply)).toBe(chatCharge(prices, reply.data.usage!));
    expect(await usageRowOf(requestIdOf(reply))).toMatchObject({ model: 'gpt-4.1', requested_model: 'house-default' });

    expect((await catalogue.deleteAlias({ alias: 'house-default' })).deleted).toBe(true);
    const gone = await chat(a, key.apiKey, 'house-default').then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(gone?.status).toBe(400);
    expect(gone?.code).toBe('model_not_found');
    expect(await listed(a, key.apiKey, 'house-default')).toBeUndefined();
    expect((await catalogue.deleteAlias({ alias: 'house-default' })).deleted).toBe(false);
  });

  it('a change made on one instance is served by a second within PRICE_BOOK_REFRESH_MS', async () => {
    const key = await newKeyOn(a, 'two instances');
    const prices = { input_per_mtok: '0.777', output_per_mtok: '2.222' };
    await catalogue.upsertModel({ modelJson: JSON.stringify(houseModel('house-spread', prices)) });
    const written = performance.now();
    // Served on the instance that took the change at once...
    expect((await chat(a, key.apiKey, 'house-spread')).data.model).toBe('house-spread');
    // ...and on the other after its next read of the book.
    for (;;) {
      const onB = await chat(b, key.apiKey, 'house-spread').catch((e: unknown) => e as Error);
      if (!(onB instanceof Error)) {
        expect(chargeOf(onB)).toBe(chatCharge(prices, onB.data.usage!));
        break;
      }
      expect((onB as InstanceType<typeof OpenAI.APIError>).code).toBe('model_not_found');
      expect(performance.now() - written).toBeLessThan(SPREAD_BOUND_MS);
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  it('a markup set for 1.5 s ahead is listed as scheduled and not charged before its time, then listed in force and charged', async () => {
    const key = await newKeyOn(a, 'scheduled markup');
    const model = 'gpt-5.4-nano';
    const prices = (await catalogue.getModel({ id: model })).model!.prices;
    const from = new Date(Date.now() + 1_500);
    const set = await catalogue.setMarkup({
      modelId: model,
      markup: '0.5',
      effectiveFrom: timestampFromDate(from),
      reason: 'from the top of the hour',
    });
    const version = set.markup!.id;
    const listing = await catalogue.listMarkups({});
    expect(listing.scheduled.map((m) => [m.id, m.modelId, m.markup])).toContainEqual([version, model, '0.5']);
    expect(listing.inForce.map((m) => m.id)).not.toContain(version);

    const early = await chat(a, key.apiKey, model);
    expect(chargeOf(early)).toBe(chatCharge(prices, early.data.usage!));
    expect((await usageRowOf(requestIdOf(early))).markup_version).toBeNull();

    // From its time on, charged once this instance has read the book again.
    await new Promise((r) => setTimeout(r, from.getTime() - Date.now()));
    const marked = { input_per_mtok: '0.075', output_per_mtok: '0.6' }; // 0.05 and 0.40 x 1.5
    let due = await chat(a, key.apiKey, model);
    while (chargeOf(due) !== chatCharge(marked, due.data.usage!)) {
      expect(chargeOf(due)).toBe(chatCharge(prices, due.data.usage!));
      expect(Date.now() - from.getTime()).toBeLessThan(SPREAD_BOUND_MS);
      await new Promise((r) => setTimeout(r, 50));
      due = await chat(a, key.apiKey, model);
    }
    const row = await usageRowOf(requestIdOf(due));
    expect(row.markup_version).toBe(version.toString());
    expect(BigInt(row.provider_cost!)).toBe(chatCharge(prices, due.data.usage!));
    const after = await catalogue.listMarkups({});
    expect(after.scheduled.map((m) => m.id)).not.toContain(version);
    expect(after.inForce.map((m) => [m.id, m.modelId, m.markup])).toContainEqual([version, model, '0.5']);
  });

  it("what /v1/models lists for the caller times the usage the provider reports, rounded up once, is the charge, with a model markup for everyone and a markup for the caller's group", async () => {
    const model = 'gpt-5.4-mini';
    const everyone = await catalogue.setMarkup({ modelId: model, markup: '0.25', reason: 'for everyone' });
    const partners = await catalogue.setMarkup({ provider: 'openai', accountGroup: 'partners', markup: '0.1' });
    const provider = (await catalogue.getModel({ id: model })).model!.prices;

    const key = await newKeyOn(a, 'markup');
    const pricing = (await listed(a, key.apiKey, model))!.pricing;
    expect(pricing.input_per_mtok).toBe('0.3125'); // 0.25 x 1.25
    expect(pricing.output_per_mtok).toBe('2.5');
    // Odd token counts, so the exact charge has a fraction of a nano-USD to round.
    const reply = await chat(a, key.apiKey, model, `${uniqueMarker()} odd [sim tokens=13 prompt=4111]`);
    expect(chargeOf(reply)).toBe(chatCharge(pricing, reply.data.usage!));
    const row = await usageRowOf(requestIdOf(reply));
    expect(row.cost).toBe(chargeOf(reply).toString());
    expect(row.markup_version).toBe(everyone.markup!.id.toString());
    expect(BigInt(row.provider_cost!)).toBe(chatCharge(provider, reply.data.usage!));

    // The same model for an account in the partners group: provider:openai@partners comes before model:gpt-5.4-mini (everyone's).
    const grouped = await newKeyOn(a, 'partner');
    const setGroup = await billingOn(a)
      .setAccountGroup({ key: { ref: { case: 'keyId', value: grouped.keyId } }, group: 'partners' })
      .catch((e: unknown) => ConnectError.from(e));
    if (setGroup instanceof ConnectError && setGroup.code === Code.Unimplemented) {
      console.warn('BillingService.SetAccountGroup is not implemented yet: the group markup was not checked');
      return;
    }
    expect(setGroup).not.toBeInstanceOf(ConnectError);
    const since = performance.now();
    let groupPricing = (await listed(a, grouped.apiKey, model))!.pricing;
    while (groupPricing.input_per_mtok !== '0.275') {
      expect(performance.now() - since).toBeLessThan(SPREAD_BOUND_MS);
      await new Promise((r) => setTimeout(r, 50));
      groupPricing = (await listed(a, grouped.apiKey, model))!.pricing;
    }
    expect(groupPricing.output_per_mtok).toBe('2.2');
    const partnerReply = await chat(a, grouped.apiKey, model, `${uniqueMarker()} odd [sim tokens=13 prompt=4111]`);
    expect(chargeOf(partnerReply)).toBe(chatCharge(groupPricing, partnerReply.data.usage!));
    expect((await usageRowOf(requestIdOf(partnerReply))).markup_version).toBe(partners.markup!.id.toString());
  });
});

// Each test runs the CLI a dozen times, a Node process each: seconds apiece on a loaded machine.
describe('the operator CLI', { timeout: 120_000 }, () => {
  const cli = (args: string[], stdin?: string) => runCatalogueCli(a.rpcUrl, args, stdin);

  it('export and apply round trip through a file, diff lists what an edit changes, and a bad file exits 1 naming each problem and changes nothing', async () => {
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'book-cli-'));
    const file = path.join(dir, 'book.json');
    const exportedText = await cli(['export']);
    expect(exportedText.code).toBe(0);
    fs.writeFileSync(file, exportedText.stdout);
    expect(exportedText.stdout).toBe(await exported());

    const unchanged = await cli(['apply', '-f', file]);
    expect(unchanged).toMatchObject({ code: 0, stdout: 'no changes\n' });
    expect((await cli(['export'])).stdout).toBe(exportedText.stdout);

    // An edit: diff shows it and writes nothing; apply writes it; the export is then the edited file.
    const edit = edited(exportedText.stdout, (d, m) => {
      m('gpt-4o-mini').prices.input_per_mtok = '0.16';
      d.aliases['mini-latest'] = 'gpt-4o-mini';
    });
    fs.writeFileSync(file, edit);
    const rows = await bookRows();
    const diff = await cli(['diff', '-f', file]);
    expect(diff.code).toBe(0);
    expect(diff.stdout.split('\n')).toEqual([
      'set_prices gpt-4o-mini input_per_mtok: 0.15 -> 0.16',
      'set_alias mini-latest unset -> gpt-4o-mini',
      '',
    ]);
    expect(await bookRows()).toEqual(rows);
    const fromStdin = await cli(['diff', '-f', '-', '--json'], edit);
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({ applied: false, changes: [{ kind: 'set_prices' }, {}] });

    const applied = await cli(['apply', '-f', file, '--reason', 'from git']);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toBe(diff.stdout);
    expect((await cli(['export'])).stdout).toBe(edit);
    const [latest] = (await catalogue.getPriceHistory({ modelId: 'gpt-4o-mini' })).versions;
    expect(latest).toMatchObject({ source: 'operator-cli', reason: 'from git' });

    // A bad file: every problem on a line of its own, exit 1, nothing written.
    const bad = edited(edit, (d, m) => {
      m('gpt-4o-mini').prices.input_per_mtok = '-0.16';
      d.aliases['nowhere'] = 'no-such-model';
    });
    fs.writeFileSync(file, bad);
    const before = await bookRows();
    const refused = await cli(['apply', '-f', file]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    const lines = refused.stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('models[gpt-4o-mini].prices.input_per_mtok');
    expect(lines[0]).toContain('negative');
    expect(lines[1]).toContain('aliases[nowhere]');
    expect(lines[1]).toContain('no-such-model');
    expect(await bookRows()).toEqual(before);
    expect((await cli(['export'])).stdout).toBe(edit);

    // A refusal only the gateway can make (a model left out): one line, exit 1, nothing written.
    fs.writeFileSync(
      file,
      edited(edit, (d) => {
        d.models = d.models.filter((x) => x.id !== 'whisper');
      }),
    );
    const leftOut = await cli(['apply', '-f', file]);
    expect(leftOut.code).toBe(1);
    expect(leftOut.stderr).toContain('whisper');
    expect(await bookRows()).toEqual(before);

    // Dated ahead: written now, in force from --from; until then the export is the book in force.
    const from = new Date(Date.now() + 60 * 60_000);
    const later = edited(edit, (_d, m) => {
      m('gpt-4o-mini').prices.output_per_mtok = '0.64';
    });
    fs.writeFileSync(file, later);
    const dated = await cli(['apply', '-f', file, '--from', from.toISOString()]);
    expect(dated.code, dated.stderr).toBe(0);
    expect(dated.stdout).toBe('set_prices gpt-4o-mini output_per_mtok: 0.60 -> 0.64\n');
    const [scheduled] = (await catalogue.getPriceHistory({ modelId: 'gpt-4o-mini' })).versions;
    expect(scheduled!.prices.output_per_mtok).toBe('0.64');
    expect(scheduled!.effectiveFrom && Number(scheduled!.effectiveFrom.seconds) * 1000).toBe(
      Math.floor(from.getTime() / 1000) * 1000,
    );
    expect((await cli(['export'])).stdout).toBe(edit);
  });

  it('single changes from the terminal: a model disabled and enabled, an alias set and deleted, a markup scheduled and listed', async () => {
    const model = path.join(fs.mkdtempSync(path.join(inject('workDir'), 'book-cli-')), 'model.json');
    fs.writeFileSync(
      model,
      JSON.stringify(houseModel('house-cli', { input_per_mtok: '0.5', output_per_mtok: '1.5' }), null, 2),
    );
    const added = await cli(['upsert', '-f', model, '--json']);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout)).toMatchObject({ created: true, model_id: 'house-cli', available: true });

    expect(await cli(['alias', 'cli-latest', 'house-cli'])).toMatchObject({
      code: 0,
      stdout: 'cli-latest -> house-cli\n',
    });
    const refused = await cli(['disable', 'house-cli']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cli-latest');
    expect(await cli(['unalias', 'cli-latest'])).toMatchObject({ code: 0, stdout: 'cli-latest deleted\n' });
    expect(await cli(['disable', 'house-cli'])).toMatchObject({ code: 0, stdout: 'house-cli disabled\n' });
    expect((await catalogue.getModel({ id: 'house-cli' })).model!.enabled).toBe(false);
    expect(await cli(['enable', 'house-cli'])).toMatchObject({ code: 0, stdout: 'house-cli enabled\n' });

    const from = new Date(Date.now() + 60 * 60_000);
    const set = await cli(['markup', '--model', 'house-cli', '--group', 'staff', '0.05', '--from', from.toISOString()]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('model:house-cli@staff = 0.05 from');
    const listing = JSON.parse((await cli(['markups', '--json'])).stdout) as {
      scheduled: { scope: string; markup: string; effective_from: string }[];
    };
    expect(listing.scheduled).toContainEqual(
      expect.objectContaining({ scope: 'model:house-cli@staff', markup: '0.05', effective_from: from.toISOString() }),
    );
    const table = await cli(['markups']);
    expect(table.stdout).toMatch(/^SCOPE +MARKUP +STATE +FROM \(UTC\) +VERSION +SOURCE$/m);
    expect(table.stdout).toMatch(/^model:house-cli@staff +0\.05 +scheduled /m);

    const bad = await cli(['markup', '--model', 'house-cli', '1.5%']);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toContain('model:house-cli');
    const usage = await cli(['markup', '--model', 'house-cli', '--provider', 'openai', '0.1']);
    expect(usage.code).toBe(2);
  });

  it('preview prints a row per model of recorded usage with revenue, cost and margin now and under the document, and a total', async () => {
    const key = await newKeyOn(a, 'preview');
    await usageRowOf(requestIdOf(await chat(a, key.apiKey, 'gpt-4.1')));
    const book = await exported();
    const dearer = edited(book, (_d, m) => {
      m('gpt-4.1').prices.input_per_mtok = '4.00';
      m('gpt-4.1').prices.output_per_mtok = '16.00';
    });
    const r = await cli(['preview', '-f', '-', '--days', '1', '--json'], dearer);
    expect(r.code, r.stderr).toBe(0);
    const preview = JSON.parse(r.stdout) as {
      rows: { model_id: string; requests: string; revenue_nano: string; proposed_revenue_nano: string }[];
      total: { requests: string; revenue_nano: string };
    };
    const row = preview.rows.find((x) => x.model_id === 'gpt-4.1')!;
    expect(Number(row.requests)).toBeGreaterThan(0);
    // Doubled provider prices, no markup on gpt-4.1: each request's charge about doubles (each is rounded up once).
    expect(BigInt(row.proposed_revenue_nano)).toBeGreaterThan(BigInt(row.revenue_nano));
    expect(BigInt(preview.total.revenue_nano)).toBe(preview.rows.reduce((s, x) => s + BigInt(x.revenue_nano), 0n));
    const human = await cli(['preview', '-f', '-', '--days', '1'], dearer);
    expect(human.stdout).toMatch(/^MODEL +REQUESTS +REVENUE +COST +MARGIN +NEW REVENUE +NEW COST +NEW MARGIN$/m);
    expect(human.stdout).toMatch(/^gpt-4\.1 +\d+ /m);
    expect(human.stdout).toMatch(/^TOTAL +\d+ /m);
  });
});
