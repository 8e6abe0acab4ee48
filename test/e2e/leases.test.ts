// Credit leases (BILLING_MODE=lease): requests spend an in-memory slice of the balance that one
// statement reserved; charges are written in batches. Exact charges, never negative across two
// instances, the loss window on a crash, and a shutdown that writes everything.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { balanceOf, checkInvariants, db, newKey, uniqueMarker } from '../support/context.ts';
import { charactersNano } from '../../src/billing/media-pricing.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';

const started: GatewayProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.stop('SIGKILL')));
});

async function leaseGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const sim = inject('simulatorUrl');
  const g = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `lease-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      BILLING_MODE: 'lease',
      LEASE_SLICE_USD: '0.01',
      LEASE_FLUSH_MS: '50',
      LEASE_IDLE_MS: '500',
      RATE_LIMIT_RPM: '0',
      RATE_LIMIT_TPM: '0',
      ...env,
    },
  });
  started.push(g);
  return g;
}

const client = (g: GatewayProcess, apiKey: string) => new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
const usageOf = async (accountId: string) =>
  (
    await db().query(
      `SELECT request_id, status, cost_nano::text AS cost FROM usage_records WHERE account_id = $1 AND status <> 'lease_returned'`,
      [accountId],
    )
  ).rows as {
    request_id: string;
    status: string;
    cost: string;
  }[];
const activeHolds = async (accountId: string) =>
  Number(
    (await db().query(`SELECT count(*) AS n FROM holds WHERE account_id = $1 AND status = 'active'`, [accountId]))
      .rows[0].n,
  );

async function until(what: string, f: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('credit leases', () => {
  it('charges each request exactly what it reports, in batches, and returns the lease when idle', async () => {
    const g = await leaseGateway();
    const key = await newKey('5');
    const costs = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const content = `lease ${i} [sim tokens=${1 + (i % 7)}]`;
        if (i % 3 === 0) {
          const { data, response } = await client(g, key.apiKey)
            .chat.completions.create({
              model: 'gpt-4o-mini',
              stream: true,
              stream_options: { include_usage: true },
              messages: [{ role: 'user', content }],
            })
            .withResponse();
          let cost = '';
          for await (const c of data)
            cost = (c as unknown as { x_gateway?: { cost_nano_usd: string } }).x_gateway?.cost_nano_usd ?? cost;
          return { requestId: response.headers.get('x-request-id')!, cost };
        }
        const { response } = await client(g, key.apiKey)
          .chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content }] })
          .withResponse();
        return {
          requestId: response.headers.get('x-request-id')!,
          cost: response.headers.get('x-gateway-cost-nano-usd')!,
        };
      }),
    );
    await until('every charge written', async () => (await usageOf(key.accountId)).length === 30);
    const rows = new Map((await usageOf(key.accountId)).map((r) => [r.request_id, r.cost]));
    for (const c of costs) expect(rows.get(c.requestId)).toBe(c.cost);
    const total = costs.reduce((s, c) => s + BigInt(c.cost), 0n);
    expect(total).toBeGreaterThan(0n);
    expect((await balanceOf(key.accountId)).balance).toBe(5_000_000_000n - total);
    await checkInvariants(key.accountId);
    await until('the idle lease returned', async () => (await activeHolds(key.accountId)) === 0);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n - total, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('a lease running low is grown, whatever is left in it: no request falls back to a database hold of its own', async () => {
    // A slice of $0.0001 and requests reserving about a third of it: the lease soon has some
    // but too little left, the case where it must be grown rather than bypassed.
    const g = await leaseGateway({ LEASE_SLICE_USD: '0.0001', LEASE_IDLE_MS: '60000' });
    const key = await newKey('5');
    const ask = async (i: number) => {
      const { response } = await client(g, key.apiKey)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          max_tokens: 50,
          messages: [{ role: 'user', content: `low ${i} [sim tokens=${10 + (i % 40)}]` }],
        })
        .withResponse();
      return {
        requestId: response.headers.get('x-request-id')!,
        cost: response.headers.get('x-gateway-cost-nano-usd')!,
      };
    };
    const costs: { requestId: string; cost: string }[] = [];
    for (let i = 0; i < 24; i++) costs.push(await ask(i));
    costs.push(...(await Promise.all(Array.from({ length: 16 }, (_, i) => ask(24 + i)))));
    const ownHolds = await db().query(
      `SELECT request_id FROM holds WHERE account_id = $1 AND NOT starts_with(request_id, 'lease_')`,
      [key.accountId],
    );
    expect(ownHolds.rows).toEqual([]);
    await until('every charge written', async () => (await usageOf(key.accountId)).length === 40);
    const rows = new Map((await usageOf(key.accountId)).map((r) => [r.request_id, r.cost]));
    for (const c of costs) expect(rows.get(c.requestId)).toBe(c.cost);
    const total = costs.reduce((s, c) => s + BigInt(c.cost), 0n);
    expect(total).toBeGreaterThan(500_000n); // five slices' worth at least: the lease was grown again and again
    expect((await balanceOf(key.accountId)).balance).toBe(5_000_000_000n - total);
    await checkInvariants(key.accountId);
  });

  it('two instances leasing from a small balance never take it below zero; the rest get 402', async () => {
    const [a, b] = [await leaseGateway(), await leaseGateway()];
    const key = await newKey('0.002');
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) =>
        client(i % 2 ? a : b, key.apiKey).chat.completions.create({
          model: 'gpt-4o-mini',
          max_tokens: 400,
          messages: [{ role: 'user', content: `small ${i} [sim tokens=400]` }],
        }),
      ),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results
      .filter((r) => r.status === 'rejected')
      .map((r) => (r as PromiseRejectedResult).reason.status);
    expect(ok).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect(new Set(refused)).toEqual(new Set([402]));
    await until('every charge written', async () => (await usageOf(key.accountId)).length === ok);
    await until('the leases returned', async () => (await activeHolds(key.accountId)) === 0);
    const { balance, held } = await balanceOf(key.accountId);
    expect(balance).toBeGreaterThanOrEqual(0n);
    expect(held).toBe(0n);
    const charged = (await usageOf(key.accountId)).reduce((s, r) => s + BigInt(r.cost), 0n);
    expect(balance).toBe(2_000_000n - charged);
    await checkInvariants(key.accountId);
  });

  it('a crash loses at most the unwritten batch: those requests go uncharged, the lease is swept, the books still balance', async () => {
    const g = await leaseGateway({ LEASE_FLUSH_MS: '60000', HOLD_TTL_SECONDS: '2' });
    const sweeper = await leaseGateway({ HOLD_TTL_SECONDS: '2', HOLD_SWEEP_INTERVAL_MS: '300' });
    void sweeper;
    const key = await newKey('5');
    for (let i = 0; i < 5; i++)
      await client(g, key.apiKey).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `crash ${i}` }],
      });
    expect(await activeHolds(key.accountId)).toBe(1); // the lease
    await g.stop('SIGKILL');
    await until('the lease swept', async () => (await activeHolds(key.accountId)) === 0, 8_000);
    // The five answered requests were never written: not charged (the operator bears it). The
    // only row is the sweeper's record of the expired lease.
    expect((await usageOf(key.accountId)).map((r) => [r.request_id.startsWith('lease_'), r.status, r.cost])).toEqual([
      [true, 'hold_expired', '0'],
    ]);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('SIGTERM writes every pending charge and returns the lease before exiting', async () => {
    const g = await leaseGateway({ LEASE_FLUSH_MS: '60000' });
    const key = await newKey('5');
    let total = 0n;
    for (let i = 0; i < 5; i++) {
      const { response } = await client(g, key.apiKey)
        .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `graceful ${i}` }] })
        .withResponse();
      total += BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
    }
    expect(await usageOf(key.accountId)).toEqual([]); // still in memory
    expect(await g.stop('SIGTERM')).toBe(0);
    expect((await usageOf(key.accountId)).length).toBe(5);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n - total, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('a speech request whose caller hangs up mid-audio settles once: charged, a usage row, the lease returned, nothing unsettled at shutdown', async () => {
    const g = await leaseGateway();
    const key = await newKey('5');
    const input = `read this aloud ${uniqueMarker()} [sim delay=150]`;
    const abort = new AbortController();
    const response = await client(g, key.apiKey).audio.speech.create(
      { model: 'gpt-4o-mini-tts', voice: 'alloy', input },
      { signal: abort.signal },
    );
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false); // the audio has started
    abort.abort();
    await reader.cancel().catch(() => {});
    // The provider makes the whole audio once it started: charged in full, per character.
    const cost = charactersNano(MODELS.find((m) => m.id === 'gpt-4o-mini-tts')!.prices, BigInt([...input].length));
    await until('the speech settled', async () => (await usageOf(key.accountId)).length === 1);
    expect(await usageOf(key.accountId)).toEqual([
      { request_id: response.headers.get('x-request-id'), status: 'client_closed', cost: cost.toString() },
    ]);
    await until('the idle lease returned', async () => (await activeHolds(key.accountId)) === 0);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n - cost, held: 0n });
    await checkInvariants(key.accountId);
    expect(await g.stop('SIGTERM')).toBe(0);
    expect(fs.readFileSync(g.logFile, 'utf8')).not.toContain('unsettled');
  });

  it('a stream whose caller leaves settles once with leases too: the usage the provider reports, the lease returned, nothing unsettled', async () => {
    const g = await leaseGateway();
    const key = await newKey('5');
    const abort = new AbortController();
    const { data, response } = await client(g, key.apiKey)
      .chat.completions.create(
        {
          model: 'gpt-4o-mini',
          stream: true,
          messages: [
            // The usage comes 1.5 s after the words: the caller's leaving reaches the gateway first, even under load.
            { role: 'user', content: `leave ${uniqueMarker()} [sim tokens=4 reasoning=2000 usage_delay=1500]` },
          ],
        },
        { signal: abort.signal },
      )
      .withResponse();
    let text = '';
    try {
      for await (const c of data) {
        text += c.choices[0]?.delta?.content ?? '';
        if (text === 'w1 w2 w3 w4') abort.abort();
      }
    } catch {
      /* the abort */
    }
    await until('the stream settled', async () => (await usageOf(key.accountId)).length === 1);
    const [row] = await usageOf(key.accountId);
    expect(row).toMatchObject({ request_id: response.headers.get('x-request-id'), status: 'client_closed' });
    // 2,004 output tokens (the reasoning the provider billed) at $0.60 per 1M, and the input.
    expect(BigInt(row!.cost)).toBeGreaterThan(1_202_400n);
    await until('the idle lease returned', async () => (await activeHolds(key.accountId)) === 0);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n - BigInt(row!.cost), held: 0n });
    await checkInvariants(key.accountId);
    expect(await g.stop('SIGTERM')).toBe(0);
    expect(fs.readFileSync(g.logFile, 'utf8')).not.toContain('unsettled');
  });
});
