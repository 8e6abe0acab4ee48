// Markups (docs/billing.md#markups): a customer pays the provider's cost times (1 + markup),
// rounded up to the nano-USD once per request, held at that price, and every usage row keeps both
// figures and the markup version. First the metering itself against the real ledger (a model
// object carrying a markup, as the catalogue builds them), then the gateway, a markup written into
// the price book's table and driven through the official SDK, in both billing modes.
import path from 'node:path';
import { Decimal } from 'decimal.js';
import OpenAI from 'openai';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { openDb, type Db } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { LeaseBook } from '../../src/billing/leases.ts';
import { KeyCheck } from '../../src/billing/key-check.ts';
import { RateLimiter } from '../../src/billing/rate-limits.ts';
import { newRequestId } from '../../src/billing/ids.ts';
import { costNano, costRational, usdToNano, type PricedQuantity } from '../../src/money/money.ts';
import { customerPrice, parseMarkup, type Markup } from '../../src/billing/markup.ts';
import { worstCostNano, type TokenPrices } from '../../src/billing/pricing.ts';
import { loadConfig } from '../../src/config/config.ts';
import { Catalogue, type ResolvedModel } from '../../src/catalogue/catalogue.ts';
import { Metering } from '../../src/metering/metering.ts';
import { baseWorst } from '../../src/metering/bill-policy.ts';
import type { Plan } from '../../src/metering/plan.ts';
import { Metrics } from '../../src/log/metrics.ts';
import { videoActivities, type ActivityDeps } from '../../src/video/activities.ts';
import { VideoJobs } from '../../src/video/jobs.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { createDatabase } from '../support/postgres.ts';
import { balanceOf, checkInvariants, newKey, uniqueMarker, type TestKey } from '../support/context.ts';

const MODEL = 'gpt-4o-mini';
const SPEECH = 'gpt-4o-mini-tts';
const D = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_CEIL });
const perM = (quantity: bigint, priceUsd: string): PricedQuantity => ({ quantity, priceUsd, perUnits: 1_000_000n });

/** ceil(nano x (1 + rate)): a whole provider figure (a worst case) marked up, in big decimals. */
const customerOf = (nano: bigint, rate: string): bigint =>
  BigInt(new D(nano.toString()).times(new D(1).plus(rate)).toDecimalPlaces(0, Decimal.ROUND_CEIL).toFixed(0));

/** ceil(sum of quantity x price x (1 + rate)) in nano-USD: the reference, in big decimals. */
function markedUpNano(parts: readonly PricedQuantity[], rate: string): bigint {
  const total = parts.reduce(
    (s, p) => s.plus(new D(p.quantity.toString()).times(p.priceUsd).times(1e9).div(p.perUnits.toString())),
    new D(0),
  );
  return BigInt(total.times(new D(1).plus(rate)).toDecimalPlaces(0, Decimal.ROUND_CEIL).toFixed(0));
}

type UsageFigures = {
  cost_nano: string;
  uncovered_nano: string;
  provider_cost_nano: string;
  markup_version_id: string | null;
  status: string;
};
const FIGURES = `SELECT cost_nano::text AS cost_nano, uncovered_nano::text AS uncovered_nano,
  provider_cost_nano::text AS provider_cost_nano, markup_version_id::text AS markup_version_id, status
  FROM usage_records WHERE request_id = ?`;

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the money path with a markup, against the real ledger', () => {
  let knex: Db;
  let ledger: Ledger;
  const log = pino({ level: 'silent' });
  const config = loadConfig({ OPENAI_API_KEY: 'k' });
  const shipped = new Catalogue(config).get(MODEL)!;
  const books: LeaseBook[] = [];

  beforeAll(async () => {
    knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 4 });
    ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
  });
  afterAll(async () => {
    for (const b of books) await b.close();
    await knex.destroy();
  });

  const metering = (leases?: LeaseBook) =>
    new Metering({
      holds: config.holds,
      ledger,
      limiter: new RateLimiter(knex, { rpm: 0, tpm: 0 }),
      keys: new KeyCheck(ledger),
      metrics: new Metrics(),
      log,
      ...(leases ? { leases } : {}),
    });

  /** The model as the catalogue resolves it with `markup` in force for every group. */
  const markedUp = (m: Markup): ResolvedModel => ({ ...shipped, markups: new Map([['', m]]) });

  const planFor = (key: TestKey, model: ResolvedModel, inputUpper = 1000n, maxOutput = 500n): Plan => ({
    requestId: newRequestId(),
    route: '/v1/chat/completions',
    caller: {
      keyHash: ledger.hash(key.apiKey),
      keyId: key.keyId,
      accountId: key.accountId,
      prefix: 'test',
      group: '',
      memberId: '',
      teamId: '',
    },
    model,
    prices: model.prices as unknown as TokenPrices,
    body: { model: model.id },
    inputUpper,
    countInput: () => inputUpper,
    maxOutput,
    choices: 1n,
    startedAt: performance.now(),
  });

  const figures = async (requestId: string) => (await knex.raw(FIGURES, [requestId])).rows[0] as UsageFigures;
  const prices = shipped.prices as unknown as TokenPrices;
  const usage = { inputTokens: 777n, outputTokens: 333n, cachedTokens: 0n, cacheWriteTokens: 0n, estimated: false };
  const providerParts = [perM(777n, prices.input_per_mtok), perM(333n, prices.output_per_mtok)];

  it('holds the worst case at the customer price and charges the usage at the listed customer prices, rounded up once; the usage row keeps the provider cost and the markup version', async () => {
    const key = await newKey('1');
    const m = parseMarkup(9_000_001n, '0.37');
    const plan = planFor(key, markedUp(m));
    const meter = metering();
    const held = await meter.hold(plan);
    expect(held).toEqual({ amountNano: customerOf(worstCostNano(baseWorst(shipped), 1000n, 500n, 1n), '0.37') });
    expect((await balanceOf(key.accountId)).held).toBe(held.amountNano);

    const charge = await meter.settle(plan, usage, 'ok', 200);
    const listed = costNano(providerParts.map((p) => ({ ...p, priceUsd: customerPrice(p.priceUsd, m) })));
    expect(charge.costNano).toBe(listed);
    expect(charge.costNano).toBe(markedUpNano(providerParts, '0.37'));
    expect(await figures(plan.requestId)).toEqual({
      cost_nano: listed.toString(),
      uncovered_nano: '0',
      provider_cost_nano: costNano(providerParts).toString(),
      markup_version_id: '9000001',
      status: 'ok',
    });
    expect(await balanceOf(key.accountId)).toEqual({ balance: 1_000_000_000n - listed, held: 0n });
    await checkInvariants(key.accountId);
  });

  it("refuses 402 a balance that covers the provider's least cost but not the customer's, naming the customer's figure", async () => {
    const m = parseMarkup(9_000_002n, '0.5');
    const model = markedUp(m);
    const leastProvider = worstCostNano(baseWorst(model), 1000n, 1n, 1n);
    const leastCustomer = customerOf(leastProvider, '0.5');
    const key = await newKey(leastProvider);
    const err = await metering()
      .hold(planFor(key, model))
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err).toBeInstanceOf(Error);
    expect(err?.message).toContain(`needs at least ${leastCustomer} nano-USD and ${leastProvider} are available`);
    expect(await balanceOf(key.accountId)).toEqual({ balance: leastProvider, held: 0n });
  });

  it('a balance below the worst case lowers the output cap to the most whose marked-up worst case fits the hold', async () => {
    const m = parseMarkup(9_000_003n, '2.5');
    const model = markedUp(m);
    const worstAt = (cap: bigint) => customerOf(worstCostNano(baseWorst(model), 1000n, cap, 1n), '2.5');
    const balance = worstAt(200n) + 7n;
    const key = await newKey(balance);
    const plan = planFor(key, model);
    const meter = metering();
    const held = await meter.hold(plan);
    expect(held.amountNano).toBe(balance);
    const cap = held.loweredOutputCap!;
    expect(cap).toBeGreaterThanOrEqual(200n);
    expect(cap).toBeLessThan(500n);
    expect(worstAt(cap)).toBeLessThanOrEqual(balance);
    expect(worstAt(cap + 1n)).toBeGreaterThan(balance);
    await meter.release(plan, new Error('done'));
    expect(await balanceOf(key.accountId)).toEqual({ balance, held: 0n });
  });

  it('a price known up front is held and charged at the customer price of its exact cost: 62 s at $0.017 a minute with 20% is 21,080,000 nano-USD, not the 21,080,001 of marking up the rounded 17,566,667', async () => {
    const key = await newKey('1');
    const m = parseMarkup(9_000_004n, '0.2');
    const plan = planFor(key, markedUp(m));
    const meter = metering();
    const cost = costRational([{ quantity: 62n, priceUsd: '0.017', perUnits: 60n }]);
    expect(await meter.holdExact(plan, cost)).toBe(21_080_000n);
    expect((await balanceOf(key.accountId)).held).toBe(21_080_000n);
    const charge = await meter.settle(plan, { ...usage, inputTokens: 0n, outputTokens: 0n }, 'ok', 200, cost);
    expect(charge.costNano).toBe(21_080_000n);
    expect(await figures(plan.requestId)).toMatchObject({
      cost_nano: '21080000',
      provider_cost_nano: '17566667',
      markup_version_id: '9000004',
    });
  });

  it('with credit leases the reservation is the customer price and the batched usage row carries the same figures', async () => {
    const key = await newKey('1');
    const m = parseMarkup(9_000_005n, '0.37');
    const leases = new LeaseBook(
      knex,
      ledger,
      { sliceNano: usdToNano('0.05'), flushMs: 50, idleMs: 60_000, ttlSeconds: 60 },
      log,
    );
    books.push(leases);
    const meter = metering(leases);
    const plan = planFor(key, markedUp(m));
    const held = await meter.hold(plan);
    expect(plan.meter?.lease?.amountNano).toBe(held.amountNano);
    expect(held.amountNano).toBe(customerOf(worstCostNano(baseWorst(shipped), 1000n, 500n, 1n), '0.37'));
    const charge = await meter.settle(plan, usage, 'ok', 200);
    expect(charge.costNano).toBe(markedUpNano(providerParts, '0.37'));
    const row = await until('the batch written', async () => (await knex.raw(FIGURES, [plan.requestId])).rows[0]);
    expect(row).toEqual({
      cost_nano: charge.costNano.toString(),
      uncovered_nano: '0',
      provider_cost_nano: costNano(providerParts).toString(),
      markup_version_id: '9000005',
      status: 'ok',
    });
    await leases.close();
    expect(await balanceOf(key.accountId)).toEqual({ balance: 1_000_000_000n - charge.costNano, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('a video job settles at the markup its hold was taken at, carried in its workflow input; a job started before markups settles at the provider price', async () => {
    const key = await newKey('5');
    // The job's attempts are read from its row at the settle: a job made before there were any has none.
    const activities = videoActivities({ config, ledger, log, jobs: new VideoJobs(knex) } as unknown as ActivityDeps);
    const price = '0.123456789';
    const produced = [{ quantity: 3333n, priceUsd: price, perUnits: 1000n }];
    const settle = async (markup: { markupVersion: string; markupRate: string } | undefined) => {
      const requestId = newRequestId();
      const held = customerOf(costNano([{ quantity: 4n, priceUsd: price, perUnits: 1n }]), markup?.markupRate ?? '0');
      await ledger.placeHold({
        apiKeyHash: ledger.hash(key.apiKey),
        requestId,
        minNano: held,
        maxNano: held,
        ttlSeconds: 60,
      });
      const r = await activities.settleCharge({
        requestId,
        model: 'sora-2',
        producedMs: 3333,
        seconds: 4,
        pricePerSecondUsd: price,
        ...markup,
        createdAtMs: Date.now(),
      });
      return { charged: r.costNano, row: await figures(requestId) };
    };
    const marked = await settle({ markupVersion: '9000006', markupRate: '0.37' });
    expect(marked.charged).toBe(markedUpNano(produced, '0.37').toString());
    expect(marked.row).toMatchObject({
      cost_nano: marked.charged,
      provider_cost_nano: costNano(produced).toString(),
      markup_version_id: '9000006',
    });
    const old = await settle(undefined);
    expect(old.charged).toBe(costNano(produced).toString());
    expect(old.row).toMatchObject({
      cost_nano: old.charged,
      provider_cost_nano: old.charged,
      markup_version_id: null,
    });
    await checkInvariants(key.accountId);
  });
});

describe('markups through the gateway', () => {
  const gateways: GatewayProcess[] = [];
  let knex: Db;
  let hold: GatewayProcess;
  let lease: GatewayProcess;
  const versions: Record<string, string> = {};
  const RATES: Record<string, string> = { [MODEL]: '0.37', [SPEECH]: '0.5' };

  beforeAll(async () => {
    // A database of this test's own: a markup set there touches no other test.
    const name = `markups_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    const admin = inject('adminDatabaseUrl');
    await createDatabase(admin, name);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
    const start = (label: string, env: Record<string, string> = {}) =>
      startGatewayProcess({
        logFile: path.join(inject('workDir'), `${label}-${uniqueMarker()}.log`),
        env: {
          DATABASE_URL: url.toString(),
          OPENAI_API_KEY: UPSTREAM_KEY,
          OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
          PRICE_BOOK_REFRESH_MS: '100',
          RATE_LIMIT_RPM: '0',
          RATE_LIMIT_TPM: '0',
          ...env,
        },
      });
    hold = await start('markups-hold');
    gateways.push(hold);
    lease = await start('markups-lease', { BILLING_MODE: 'lease', LEASE_FLUSH_MS: '50' });
    gateways.push(lease);
    for (const [model, rate] of Object.entries(RATES)) {
      versions[model] = (
        await knex.raw(
          `INSERT INTO markup_versions (model_id, markup, effective_from, source, reason)
           VALUES (?, ?, now(), 'test', 'markups e2e') RETURNING id::text AS id`,
          [model, rate],
        )
      ).rows[0].id;
    }
    // In force on both instances within the refresh: /v1/models lists the marked-up price.
    const want = customerPrice(await providerPrice(MODEL, 'input_per_mtok'), parseMarkup(1n, RATES[MODEL]!));
    for (const g of [hold, lease]) {
      const key = await keyOn(g, '0.01');
      await until(`the markup in force on ${g.httpUrl}`, async () => {
        const listed = await pricingOn(g, key.apiKey, MODEL);
        return listed.input_per_mtok === want ? true : undefined;
      });
    }
  }, 120_000);
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await knex?.destroy();
  });

  const keyOn = async (g: GatewayProcess, usd: string | bigint) => {
    const billing = createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
    return billing.createKey({ creditsNano: typeof usd === 'bigint' ? usd : usdToNano(usd), label: 'markups' });
  };
  const client = (g: GatewayProcess, apiKey: string) =>
    new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
  const pricingOn = async (g: GatewayProcess, apiKey: string, model: string) =>
    ((await client(g, apiKey).models.list()).data as unknown as { id: string; pricing: Record<string, string> }[]).find(
      (m) => m.id === model,
    )!.pricing;
  /** The provider's price in force for a model, straight from the price book's table. */
  async function providerPrice(model: string, key: string): Promise<string> {
    const r = await knex.raw(
      `SELECT prices FROM price_versions WHERE model_id = ? AND effective_from <= now() ORDER BY effective_from DESC LIMIT 1`,
      [model],
    );
    return r.rows[0].prices[key];
  }
  const balanceIn = async (accountId: string) => {
    const r = (
      await knex.raw('SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = ?', [accountId])
    ).rows[0];
    return { balance: BigInt(r.b), held: BigInt(r.h) };
  };
  const figuresOf = (requestId: string) =>
    until(`the usage row of ${requestId}`, async () => (await knex.raw(FIGURES, [requestId])).rows[0] as UsageFigures);

  /** What a chat usage costs: the provider's figure and the customer's, and the listed prices times the usage. */
  async function expectedChat(g: GatewayProcess, apiKey: string, input: number, output: number) {
    const parts = [
      perM(BigInt(input), await providerPrice(MODEL, 'input_per_mtok')),
      perM(BigInt(output), await providerPrice(MODEL, 'output_per_mtok')),
    ];
    const listed = await pricingOn(g, apiKey, MODEL);
    const atListed = costNano([
      perM(BigInt(input), listed.input_per_mtok!),
      perM(BigInt(output), listed.output_per_mtok!),
    ]);
    return { provider: costNano(parts), customer: markedUpNano(parts, RATES[MODEL]!), atListed };
  }

  it('a chat completion is charged ceil(provider cost x 1.37) to the nano-USD, which is the /v1/models price times the usage; the usage row keeps both figures and the markup version', async () => {
    const key = await keyOn(hold, '1');
    const { data, response } = await client(hold, key.apiKey)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `mark me up [sim tokens=29]` }] })
      .withResponse();
    const want = await expectedChat(hold, key.apiKey, data.usage!.prompt_tokens, data.usage!.completion_tokens);
    expect(want.customer).toBeGreaterThan(want.provider);
    expect(want.atListed).toBe(want.customer);
    expect(BigInt(response.headers.get('x-gateway-cost-nano-usd')!)).toBe(want.customer);
    expect(await figuresOf(response.headers.get('x-request-id')!)).toEqual({
      cost_nano: want.customer.toString(),
      uncovered_nano: '0',
      provider_cost_nano: want.provider.toString(),
      markup_version_id: versions[MODEL],
      status: 'ok',
    });
    expect(await balanceIn(key.accountId)).toEqual({ balance: 1_000_000_000n - want.customer, held: 0n });
  });

  it('ListUsage gives each row its provider cost, price and markup versions and the name asked for; a row from before markups reports its cost plus uncovered as the provider cost', async () => {
    const key = await keyOn(hold, '1');
    const { data, response } = await client(hold, key.apiKey)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `list me [sim tokens=11]` }] })
      .withResponse();
    const want = await expectedChat(hold, key.apiKey, data.usage!.prompt_tokens, data.usage!.completion_tokens);
    const requestId = response.headers.get('x-request-id')!;
    await figuresOf(requestId);
    const priceVersion = (
      await knex.raw(
        `SELECT id::text AS id FROM price_versions WHERE model_id = ? AND effective_from <= now() ORDER BY effective_from DESC LIMIT 1`,
        [MODEL],
      )
    ).rows[0].id as string;
    // As a row written before markups: no provider cost of its own, part of its cost uncovered.
    await knex.raw(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, uncovered_nano, status, http_status,
         latency_ms, requested_model, created_at)
       VALUES (?, ?, ?, ?, '/v1/chat/completions', 1000, 234, 'ok', 200, 1, 'an-old-alias', now() - interval '1 hour')`,
      [`req_old_${uniqueMarker().replace(/[^a-zA-Z0-9]/g, '')}`, key.accountId, key.keyId, MODEL],
    );
    const billing = createClient(BillingService, createGrpcTransport({ baseUrl: hold.rpcUrl }));
    const { records } = await billing.listUsage({ key: { ref: { case: 'keyId', value: key.keyId } }, limit: 10 });
    expect(
      records.map((r) => ({
        requestId: r.requestId,
        costNano: r.costNano,
        providerCostNano: r.providerCostNano,
        priceVersionId: r.priceVersionId,
        markupVersionId: r.markupVersionId,
        requestedModel: r.requestedModel,
      })),
    ).toEqual([
      {
        requestId,
        costNano: want.customer,
        providerCostNano: want.provider,
        priceVersionId: BigInt(priceVersion),
        markupVersionId: BigInt(versions[MODEL]!),
        requestedModel: '',
      },
      {
        requestId: expect.stringMatching(/^req_old_/),
        costNano: 1000n,
        providerCostNano: 1234n,
        priceVersionId: 0n,
        markupVersionId: 0n,
        requestedModel: 'an-old-alias',
      },
    ]);
  });

  it('a streamed chat completion carries the customer charge in x_gateway.cost_nano_usd, and its usage row the same figures', async () => {
    const key = await keyOn(hold, '1');
    const { data, response } = await client(hold, key.apiKey)
      .chat.completions.create({
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: `stream me up [sim tokens=17]` }],
      })
      .withResponse();
    let cost = '';
    let used: OpenAI.CompletionUsage | undefined;
    for await (const c of data) {
      used = c.usage ?? used;
      cost = (c as unknown as { x_gateway?: { cost_nano_usd: string } }).x_gateway?.cost_nano_usd ?? cost;
    }
    const want = await expectedChat(hold, key.apiKey, used!.prompt_tokens, used!.completion_tokens);
    expect(cost).toBe(want.customer.toString());
    expect(want.atListed).toBe(want.customer);
    expect(await figuresOf(response.headers.get('x-request-id')!)).toEqual({
      cost_nano: want.customer.toString(),
      uncovered_nano: '0',
      provider_cost_nano: want.provider.toString(),
      markup_version_id: versions[MODEL],
      status: 'ok',
    });
  });

  it('speech is held at the customer price: a balance that covers the provider cost but not the marked-up one gets 402 and holds nothing; one that covers it is charged exactly that', async () => {
    const input = 'x'.repeat(1000);
    const provider = costNano([perM(1000n, await providerPrice(SPEECH, 'per_mchar'))]);
    const customer = markedUpNano([perM(1000n, await providerPrice(SPEECH, 'per_mchar'))], RATES[SPEECH]!);
    expect(customer).toBeGreaterThan(provider);
    const short = await keyOn(hold, provider);
    const err = await client(hold, short.apiKey)
      .audio.speech.create({ model: SPEECH, voice: 'alloy', input })
      .then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err?.status).toBe(402);
    expect(err?.message).toContain(`costs ${customer} nano-USD and ${provider} are available`);
    expect(await balanceIn(short.accountId)).toEqual({ balance: provider, held: 0n });

    const enough = await keyOn(hold, customer);
    const res = await client(hold, enough.apiKey).audio.speech.create({ model: SPEECH, voice: 'alloy', input });
    await res.arrayBuffer();
    expect(res.headers.get('x-gateway-cost-nano-usd')).toBe(customer.toString());
    expect(await figuresOf(res.headers.get('x-request-id')!)).toEqual({
      cost_nano: customer.toString(),
      uncovered_nano: '0',
      provider_cost_nano: provider.toString(),
      markup_version_id: versions[SPEECH],
      status: 'ok',
    });
    expect(await balanceIn(enough.accountId)).toEqual({ balance: 0n, held: 0n });
  });

  it('with credit leases the charge and the batched usage row are the same as with a hold per request', async () => {
    const key = await keyOn(lease, '1');
    const { data, response } = await client(lease, key.apiKey)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `lease me up [sim tokens=23]` }] })
      .withResponse();
    const want = await expectedChat(lease, key.apiKey, data.usage!.prompt_tokens, data.usage!.completion_tokens);
    expect(want.atListed).toBe(want.customer);
    expect(BigInt(response.headers.get('x-gateway-cost-nano-usd')!)).toBe(want.customer);
    expect(await figuresOf(response.headers.get('x-request-id')!)).toEqual({
      cost_nano: want.customer.toString(),
      uncovered_nano: '0',
      provider_cost_nano: want.provider.toString(),
      markup_version_id: versions[MODEL],
      status: 'ok',
    });
  });
});
