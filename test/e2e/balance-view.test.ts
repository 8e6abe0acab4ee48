// What a key holder sees stays exact with credit leases: GetBalance (and so `keys balance` and the
// bot's /balance) shows the customer's own figures: the opening balance less exactly what their
// requests were charged, written or still in the instance's memory, and as held only what their
// requests in flight hold, never the slice an instance has leased.
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { balanceOf, billing, checkInvariants, db, uniqueMarker } from '../support/context.ts';

const started: GatewayProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.stop('SIGKILL')));
});

async function leaseGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const g = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `balance-view-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
      BILLING_MODE: 'lease',
      LEASE_SLICE_USD: '1',
      LEASE_IDLE_MS: '600000',
      RATE_LIMIT_RPM: '0',
      RATE_LIMIT_TPM: '0',
      ...env,
    },
  });
  started.push(g);
  return g;
}

const billingOf = (g: GatewayProcess) => createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
const client = (g: GatewayProcess, apiKey: string) => new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
const OPENING = 5_000_000_000n;

/** N requests through `g`; the sum of what each answer says it cost. */
async function spend(g: GatewayProcess, apiKey: string, n: number): Promise<bigint> {
  let total = 0n;
  for (let i = 0; i < n; i++) {
    const { response } = await client(g, apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `spend ${i} [sim tokens=${3 + i}]` }],
      })
      .withResponse();
    total += BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
  }
  return total;
}

const written = async (accountId: string) =>
  Number(
    (await db().query(`SELECT count(*) AS n FROM usage_records WHERE account_id = $1 AND status = 'ok'`, [accountId]))
      .rows[0].n,
  );

describe('GetBalance with credit leases', () => {
  it('before the batch is written: the instance that charged shows opening - charges exactly and nothing held; another shows the written figure, never the lease', async () => {
    const g = await leaseGateway({ LEASE_FLUSH_MS: '600000' }); // nothing is written during this test
    const key = await billingOf(g).createKey({ creditsNano: OPENING });
    const ref = { key: { ref: { case: 'keyId' as const, value: key.keyId } } };
    const charged = await spend(g, key.apiKey, 6);
    expect(charged).toBeGreaterThan(0n);
    expect(await written(key.accountId)).toBe(0); // all still in the instance's memory
    expect((await balanceOf(key.accountId)).held).toBeGreaterThan(0n); // the lease, in the database

    expect(await billingOf(g).getBalance(ref)).toMatchObject({
      balanceNano: OPENING - charged,
      heldNano: 0n,
      availableNano: OPENING - charged,
    });
    // Another instance knows only what is written: the balance lags (by at most the flush
    // interval in normal operation), and the lease is not shown as held.
    expect(await billing().getBalance(ref)).toMatchObject({
      balanceNano: OPENING,
      heldNano: 0n,
      availableNano: OPENING,
    });

    // SIGTERM writes the batch: now every instance shows the exact figures.
    expect(await g.stop('SIGTERM')).toBe(0);
    expect(await written(key.accountId)).toBe(6);
    expect(await billing().getBalance(ref)).toMatchObject({
      balanceNano: OPENING - charged,
      heldNano: 0n,
      availableNano: OPENING - charged,
    });
    await checkInvariants(key.accountId);
  });

  it('while batches are written, before and after: the figure is exact at every read, and held is what a request in flight holds', async () => {
    // A stream whose caller left is read on for its usage; here for 300 ms at most.
    const g = await leaseGateway({ LEASE_FLUSH_MS: '50', ABANDONED_STREAM_DRAIN_MS: '300' });
    const key = await billingOf(g).createKey({ creditsNano: OPENING });
    const ref = { key: { ref: { case: 'keyId' as const, value: key.keyId } } };
    let charged = 0n;
    for (let round = 0; round < 3; round++) {
      charged += await spend(g, key.apiKey, 4);
      expect(await billingOf(g).getBalance(ref)).toMatchObject({
        balanceNano: OPENING - charged,
        heldNano: 0n,
        availableNano: OPENING - charged,
      });
    }
    await expect.poll(() => written(key.accountId), { timeout: 10_000 }).toBe(12);
    expect(await billingOf(g).getBalance(ref)).toMatchObject({
      balanceNano: OPENING - charged,
      heldNano: 0n,
      availableNano: OPENING - charged,
    });
    expect(await billing().getBalance(ref)).toMatchObject({ balanceNano: OPENING - charged, heldNano: 0n });

    // A streamed request the upstream never answers: in flight, its reservation is held.
    const abort = new AbortController();
    const inFlight = client(g, key.apiKey)
      .chat.completions.create(
        { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'wait [sim fault=hang]' }] },
        { signal: abort.signal },
      )
      .catch(() => 'aborted');
    await expect
      .poll(async () => (await billingOf(g).getBalance(ref)).heldNano, { timeout: 10_000 })
      .toBeGreaterThan(0n);
    const during = await billingOf(g).getBalance(ref);
    expect(during.balanceNano).toBe(OPENING - charged);
    expect(during.availableNano).toBe(during.balanceNano - during.heldNano);
    abort.abort();
    expect(await inFlight).toBe('aborted');
    // Left before anything was delivered, and the upstream never reported usage while the
    // gateway read on: charged nothing, held nothing.
    await expect.poll(async () => (await billingOf(g).getBalance(ref)).heldNano, { timeout: 10_000 }).toBe(0n);
    expect(await billingOf(g).getBalance(ref)).toMatchObject({
      balanceNano: OPENING - charged,
      availableNano: OPENING - charged,
    });
  });
});

describe('GetBalance with a hold per request', () => {
  it('shows opening - charges exactly, and nothing held when nothing is in flight', async () => {
    const key = await billing().createKey({ creditsNano: OPENING });
    const ref = { key: { ref: { case: 'keyId' as const, value: key.keyId } } };
    const shared = { httpUrl: inject('gatewayUrl') } as GatewayProcess;
    const charged = await spend(shared, key.apiKey, 3);
    expect(await billing().getBalance(ref)).toMatchObject({
      balanceNano: OPENING - charged,
      heldNano: 0n,
      availableNano: OPENING - charged,
    });
  });
});
