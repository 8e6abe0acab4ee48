// End customers' budgets, the refusal's headers and GET /v1/budgets (docs/budgets.md): a customer
// budget is a template each customer a request names gets a window of; concurrent first requests
// of a new customer get exactly as many through as the template allows; a refusal says which
// budget in its headers as well as its message; a key lists every budget over it with the figures
// the ledger has; a video job's hold counts against its budgets until it settles.
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { usdToNano } from '../../src/money/money.ts';
import { db, gatewayUrl, openai } from '../support/context.ts';
import { budgetSpec, newOrganisation, type TestOrg } from '../support/organisations.ts';

const spec = budgetSpec;

/** FLUX.2-pro at 1024 × 1024: held and charged exactly $0.03 a megapixel (31,457,280 nano-USD). */
const FLUX_NANO = 31_457_280n;
const flux = (apiKey: string, customer?: string) =>
  openai(apiKey, customer ? { defaultHeaders: { 'x-gateway-customer': customer } } : {})
    .images.generate({ model: 'FLUX.2-pro', prompt: 'a lighthouse', size: '1024x1024' })
    .withResponse()
    .then(
      ({ response }) => ({ status: 200, code: '', headers: response.headers }),
      (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status ?? 0, code: e.code ?? '', headers: e.headers }),
    );

const chat = (apiKey: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  openai(apiKey, { defaultHeaders: headers })
    .chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi [sim tokens=4]' }],
      ...body,
    })
    .withResponse()
    .then(
      ({ response }) => ({ status: 200, code: '', param: '', headers: response.headers }),
      (e: InstanceType<typeof OpenAI.APIError>) => ({
        status: e.status ?? 0,
        code: e.code ?? '',
        param: e.param ?? '',
        headers: e.headers,
      }),
    );

async function listed(apiKey: string, customer?: string) {
  const res = await fetch(`${gatewayUrl()}/v1/budgets`, {
    headers: { authorization: `Bearer ${apiKey}`, ...(customer ? { 'x-gateway-customer': customer } : {}) },
  });
  return { status: res.status, body: (await res.json()) as { object: string; data: Record<string, unknown>[] } };
}

/** What the organisation's usage rows charged (all, or one key's). */
async function charged(org: TestOrg, keyId?: string): Promise<bigint> {
  const r = await db().query(
    `SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE account_id = $1 AND ($2::text IS NULL OR key_id = $2)`,
    [org.id, keyId ?? null],
  );
  return BigInt(r.rows[0].c);
}

describe('end customers', () => {
  it('ten concurrent first requests of a new customer: exactly the three its template allows pass; another customer and a request naming none are not held to it', async () => {
    const org = await newOrganisation('5');
    const template = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'customer', amountUsd: '0.09437184', name: 'per customer' }),
    });
    const results = await Promise.all(Array.from({ length: 10 }, () => flux(org.people.member.apiKey, 'cust-a')));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    const refusedOnes = results.filter((r) => r.status !== 200);
    expect(refusedOnes.every((r) => r.status === 402 && r.code === 'budget_exceeded')).toBe(true);
    const h = refusedOnes[0]!.headers!;
    expect(h.get('x-gateway-budget-id')).toBe(template.budget!.budgetId);
    expect(h.get('x-gateway-budget-scope')).toBe('customer');
    expect(h.get('x-gateway-budget-remaining-nano-usd')).toBe('0');
    expect(h.get('x-gateway-budget-reset')).toMatch(/^\d{4}-\d\d-\d\dT00:00:00\.000Z$/);
    expect(h.get('x-should-retry')).toBe('false');
    expect(await charged(org)).toBe(3n * FLUX_NANO);
    // Customer b has a window of its own; a request naming no customer is under no customer budget.
    expect((await flux(org.people.member.apiKey, 'cust-b')).status).toBe(200);
    expect((await flux(org.people.member.apiKey)).status).toBe(200);
    const rows = await db().query(
      'SELECT subject, spent_nano::text AS spent, held_nano::text AS held FROM budget_windows WHERE budget_id = $1 ORDER BY subject',
      [template.budget!.budgetId],
    );
    expect(rows.rows).toEqual([
      { subject: 'cust-a', spent: String(3n * FLUX_NANO), held: '0' },
      { subject: 'cust-b', spent: String(FLUX_NANO), held: '0' },
    ]);
  });

  it("names its customer in the body too (OpenAI's user, Anthropic's metadata.user_id); the header wins; an id that cannot key a window is a 400 naming it", async () => {
    const org = await newOrganisation('5');
    await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'customer', amountUsd: '0' }),
    });
    const key = org.people.member.apiKey;
    expect(await chat(key)).toMatchObject({ status: 200 });
    expect(await chat(key, { user: 'cust-1' })).toMatchObject({ status: 402, code: 'budget_exceeded' });
    const anthropic = new Anthropic({ apiKey: key, baseURL: gatewayUrl(), maxRetries: 0 });
    const err = await anthropic.messages
      .create({
        model: 'claude-haiku-4-5',
        max_tokens: 16,
        metadata: { user_id: 'cust-2' },
        messages: [{ role: 'user', content: 'hi' }],
      })
      .catch((e: InstanceType<typeof Anthropic.APIError>) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: 'error',
      error: { type: 'billing_error', message: expect.stringContaining("end customer 'cust-2'") },
    });
    expect((err as InstanceType<typeof Anthropic.APIError>).headers?.get('x-gateway-budget-scope')).toBe('customer');
    // A long user id, where a customer budget would key a window with it.
    expect(await chat(key, { user: 'u'.repeat(129) })).toMatchObject({
      status: 400,
      code: 'invalid_customer',
      param: 'user',
    });
    expect(await chat(key, {}, { 'x-gateway-customer': 'c'.repeat(129) })).toMatchObject({
      status: 400,
      code: 'invalid_customer',
      param: 'x-gateway-customer',
    });
    expect(await charged(org)).toBeGreaterThan(0n);
    const before = await charged(org);
    // Nothing was charged for the refusals.
    expect(await chat(key, { user: 'x'.repeat(200) }, { 'x-gateway-customer': 'ok' })).toMatchObject({ status: 402 });
    expect(await charged(org)).toBe(before);
  });
});

describe('GET /v1/budgets', () => {
  it('lists every budget over the key with the figures the ledger has: organisation, member, key and customer, not a teammate’s', async () => {
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    const set = (s: Record<string, unknown>) => admin.setBudget({ organisationId: org.id, spec: spec(s) });
    const orgBudget = await set({ amountUsd: '3', period: 'month', timeZone: 'Asia/Tokyo' });
    const memberBudget = await set({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '2' });
    const keyBudget = await set({ scope: 'key', scopeId: org.people.member.keyId, amountUsd: '1', mode: 'soft' });
    const customer = await set({ scope: 'customer', amountUsd: '0.5', period: 'rolling', rollingHours: 24 });
    await set({ scope: 'member', scopeId: org.people.billing.memberId, amountUsd: '9' });
    for (const c of ['cust-x', 'cust-x', undefined]) expect((await flux(org.people.member.apiKey, c)).status).toBe(200);

    const { status, body } = await listed(org.people.member.apiKey, 'cust-x');
    expect(status).toBe(200);
    expect(body.object).toBe('list');
    expect(body.data.map((b) => b.id)).toEqual([
      orgBudget.budget!.budgetId,
      memberBudget.budget!.budgetId,
      keyBudget.budget!.budgetId,
      customer.budget!.budgetId,
    ]);
    const spent = await charged(org, org.people.member.keyId);
    expect(spent).toBe(3n * FLUX_NANO);
    const [o, m, k, c] = body.data;
    expect(o).toMatchObject({
      scope: 'organisation',
      period: 'month',
      time_zone: 'Asia/Tokyo',
      start_day: 1,
      mode: 'hard',
    });
    expect(o!.spent_nano_usd).toBe(String(spent));
    expect(o!.remaining_nano_usd).toBe(String(usdToNano('3') - spent));
    // A Tokyo month starts at local midnight of the 1st: 15:00 UTC the day before.
    expect(o!.window_start).toMatch(/T15:00:00\.000Z$/);
    expect(m).toMatchObject({ scope: 'member', amount_usd: '2', spent_nano_usd: String(spent), held_nano_usd: '0' });
    expect(k).toMatchObject({ scope: 'key', mode: 'soft' });
    expect(k!.remaining_nano_usd).toBe(String(usdToNano('1') - spent));
    expect(c).toMatchObject({ scope: 'customer', customer: 'cust-x', period: 'rolling', rolling_hours: 24 });
    expect(c!.spent_nano_usd).toBe(String(2n * FLUX_NANO));
    expect(c!.resets_at).not.toBeNull();
    // Without the customer named, the template is listed with no window of its own.
    const plain = await listed(org.people.member.apiKey);
    expect(plain.body.data[3]).toMatchObject({ customer: null, spent_nano_usd: '0' });
    // The billing member sees the organisation's and their own, not the member's.
    const theirs = await listed(org.people.billing.apiKey);
    expect(theirs.body.data.map((b) => b.scope)).toEqual(['organisation', 'member', 'customer']);
    expect(theirs.body.data[1]!.amount_usd).toBe('9');
  });

  it('is 401 without a live key, in the OpenAI error shape; a key under no budget gets an empty list', async () => {
    const none = await fetch(`${gatewayUrl()}/v1/budgets`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    const org = await newOrganisation('1');
    expect(await listed(org.people.owner.apiKey)).toEqual({ status: 200, body: { object: 'list', data: [] } });
  });
});

describe('video jobs', () => {
  it("a job's hold counts against its budget until it settles: a second job that would not fit beside it is refused", async () => {
    const org = await newOrganisation('5');
    const budget = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ amountUsd: '1' }),
    });
    const client = openai(org.people.member.apiKey);
    const first = await client.videos.create({ model: 'sora-2', prompt: 'waves [sim ms=2000]', seconds: '8' });
    const second = await client.videos
      .create({ model: 'sora-2', prompt: 'more waves [sim ms=100]', seconds: '8' })
      .catch((e: InstanceType<typeof OpenAI.APIError>) => e);
    expect(second).toBeInstanceOf(OpenAI.APIError);
    expect((second as InstanceType<typeof OpenAI.APIError>).code).toBe('budget_exceeded');
    const held = await db().query('SELECT held_nano::text AS held FROM budget_windows WHERE budget_id = $1', [
      budget.budget!.budgetId,
    ]);
    expect(BigInt(held.rows[0].held)).toBeGreaterThan(0n);
    // Settled: the window holds nothing and has spent what the job was charged.
    let v = await client.videos.retrieve(first.id);
    for (let i = 0; i < 300 && (v.status === 'queued' || v.status === 'in_progress'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      v = await client.videos.retrieve(first.id);
    }
    expect(v.status).toBe('completed');
    const after = await db().query(
      'SELECT spent_nano::text AS spent, held_nano::text AS held FROM budget_windows WHERE budget_id = $1',
      [budget.budget!.budgetId],
    );
    expect(after.rows[0]).toEqual({ spent: String(await charged(org)), held: '0' });
  });
});

describe('over gRPC (grpc-js)', () => {
  const def = protoLoader.loadSync(['gateway/v1/inference.proto'], {
    includeDirs: [path.resolve(import.meta.dirname, '..', '..', 'proto')],
    longs: String,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    gateway: { v1: Record<string, grpc.ServiceClientConstructor> };
  };
  const inference = new pkg.gateway.v1.InferenceService!(
    new URL(inject('rpcUrl')).host,
    grpc.credentials.createInsecure(),
  );
  afterAll(() => inference.close());
  const call = (method: string, req: object, md: grpc.Metadata) =>
    new Promise<Record<string, unknown>>((resolve, reject) =>
      (inference as unknown as Record<string, (...a: unknown[]) => void>)[method]!.call(
        inference,
        req,
        md,
        (err: Error | null, res: Record<string, unknown>) => (err ? reject(err) : resolve(res)),
      ),
    );

  it('names the end customer in the x-gateway-customer metadata: held to its window, listed by ListKeyBudgets', async () => {
    const org = await newOrganisation('5');
    const budget = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'customer', amountUsd: '0.000001' }),
    });
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${org.people.member.apiKey}`);
    md.set('x-gateway-customer', 'grpc-cust');
    const body = Buffer.from(
      JSON.stringify({
        model: 'gpt-4o-mini',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi [sim tokens=4]' }],
      }),
    );
    const err = (await call('ChatCompletion', { body }, md).catch((e) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err.details).toContain("end customer 'grpc-cust'");
    const listed = await call('ListKeyBudgets', {}, md);
    expect(listed.budgets).toEqual([
      expect.objectContaining({
        budgetId: budget.budget!.budgetId,
        scope: 'customer',
        customer: 'grpc-cust',
        amountNano: '1000',
        spentNano: '0',
        heldNano: '0',
      }),
    ]);
  });
});
