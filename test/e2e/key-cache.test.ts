// Known keys are cached in memory by every instance (no database round trip per request), and
// any change to a key reaches every instance through LISTEN/NOTIFY: a key rotated, revoked (by
// the service or by hand in SQL) or given new limits on one instance is treated accordingly by
// another as soon as the notice arrives (at commit: milliseconds; the tests allow a loaded
// machine 3 s). With the listener's connection gone the cache is off, then comes back.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { billing, checkInvariants, db, newKey, type TestKey } from '../support/context.ts';
import { KeyCache } from '../../src/billing/key-cache.ts';
import { createLogger } from '../../src/log/logger.ts';

let other: GatewayProcess;
// The other instance's connections (its key listener's too) carry this name, so this file can
// end them without touching the gateways other test files run at the same time.
const APP = 'gateway-key-cache-test';
beforeAll(async () => {
  const sim = inject('simulatorUrl');
  const url = new URL(inject('databaseUrl'));
  url.searchParams.set('application_name', APP);
  other = await startGatewayProcess({
    logFile: path.join(inject('workDir'), 'gateway-key-cache.log'),
    // With credit leases a request touches no database at all, so only the cache stands between a revoked key and a 200.
    env: {
      DATABASE_URL: url.toString(),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      BILLING_MODE: 'lease',
      LEASE_FLUSH_MS: '50',
    },
  });
});
afterAll(async () => {
  await other?.stop();
});

const onOther = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${other.httpUrl}/v1`, maxRetries: 0 });
const ask = (apiKey: string) =>
  onOther(apiKey).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'cached? [sim tokens=2]' }],
  });

async function lookups(): Promise<Record<'hit' | 'miss' | 'off', number>> {
  const text = await (await fetch(`${other.httpUrl}/metrics`)).text();
  const count = (result: string) =>
    Number(new RegExp(`^gateway_key_cache_lookups_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { hit: count('hit'), miss: count('miss'), off: count('off') };
}

/** A key without limits, known to the other instance's cache (a request was answered from memory). */
async function cachedKey(): Promise<TestKey> {
  const key = await newKey('1');
  await billing().setRateLimits({
    key: { ref: { case: 'keyId', value: key.keyId } },
    requestsPerMinute: 0,
    tokensPerMinute: 0n,
  });
  // The change notice of the limits just set may land while the first request's lookup runs,
  // and then that lookup does not fill the cache: ask until a request is answered from memory.
  await expect
    .poll(
      async () => {
        const before = await lookups();
        await ask(key.apiKey);
        return (await lookups()).hit - before.hit;
      },
      { timeout: 5_000 },
    )
    .toBe(1);
  return key;
}

async function expectRefused(apiKey: string) {
  await expect(ask(apiKey)).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
}

/** Refused once the change notice has arrived, and from then on. */
async function expectRefusedSoon(apiKey: string) {
  await expect
    .poll(
      () =>
        ask(apiKey).then(
          () => 'admitted',
          (e) => (e instanceof OpenAI.AuthenticationError ? 'refused' : String(e)),
        ),
      { timeout: 3_000, interval: 20 },
    )
    .toBe('refused');
  await expectRefused(apiKey);
}

describe('key cache', () => {
  it('a key rotated through one instance is refused by another that had it cached as soon as the notice arrives; the new key works there', async () => {
    const key = await cachedKey();
    const rotated = await billing().rotateKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
    await expectRefusedSoon(key.apiKey);
    expect((await ask(rotated.apiKey)).choices[0]!.message.content).toBeTruthy();
    await checkInvariants(key.accountId);
  });

  it('a key rotated or revoked through the instance that has it cached is refused there at once, not when the notice comes back', async () => {
    for (const change of ['rotate', 'revoke'] as const) {
      const key = await cachedKey();
      const own = createClient(BillingService, createGrpcTransport({ baseUrl: other.rpcUrl }));
      const ref = { key: { ref: { case: 'keyId' as const, value: key.keyId } } };
      if (change === 'rotate') await own.rotateKey(ref);
      else await own.revokeKey(ref);
      await expectRefused(key.apiKey);
    }
  });

  it('forgetting a key drops its entry at once, and a lookup that began before cannot put it back', async () => {
    const cache = new KeyCache({ databaseUrl: inject('databaseUrl'), maxAgeMs: 60_000, log: createLogger('silent') });
    await cache.start();
    try {
      const entry = {
        keyId: 'key_forget',
        accountId: 'acct_forget',
        group: '',
        memberId: '',
        teamId: '',
        rpm: 0,
        tpm: 0,
        maxInFlight: 0,
        teamMaxInFlight: 0,
        memberMaxInFlight: 0,
        allowedModels: null,
      };
      cache.fill('aa', entry, cache.mark());
      const before = cache.mark(); // a lookup of the key under way…
      expect(cache.get('aa')).toEqual(expect.objectContaining(entry));
      cache.forgetKey('key_forget'); // …when this instance changes the key
      expect(cache.get('aa')).toBeUndefined();
      cache.fill('aa', entry, before);
      expect(cache.get('aa')).toBeUndefined();
      cache.fill('bb', { ...entry, keyId: 'key_other' }, before); // another key is not held up
      expect(cache.get('bb')).toEqual(expect.objectContaining({ keyId: 'key_other' }));
      cache.fill('aa', entry, cache.mark()); // a lookup that began after the change may fill
      expect(cache.get('aa')).toEqual(expect.objectContaining(entry));
    } finally {
      await cache.close();
    }
  });

  it('serves entries only while the newest heartbeat it heard back was sent within 3 s: late notices cannot stretch the revocation bound', async () => {
    let skew = 0; // how far this test moves the cache's clock ahead of the real one
    const cache = new KeyCache({
      databaseUrl: inject('databaseUrl'),
      maxAgeMs: 60_000,
      log: createLogger('silent'),
      now: () => performance.now() + skew,
    });
    await cache.start();
    try {
      const entry = {
        keyId: 'key_lag',
        accountId: 'acct_lag',
        group: '',
        memberId: '',
        teamId: '',
        rpm: 0,
        tpm: 0,
        maxInFlight: 0,
        teamMaxInFlight: 0,
        memberMaxInFlight: 0,
        allowedModels: null,
      };
      cache.fill('cc', entry, cache.mark());
      expect(cache.get('cc')).toEqual(expect.objectContaining(entry));
      // 3.1 s on without a newer heartbeat heard (as when notices are delivered late): not served,
      // at once, not at the next heartbeat tick; nothing is filled either.
      skew = 3_100;
      expect(cache.usable).toBe(false);
      expect(cache.get('cc')).toBeUndefined();
      cache.fill('dd', entry, cache.mark());
      expect(cache.peek('dd')).toBeUndefined();
      // Back on time it is usable again (a newer heartbeat heard, or the listener reconnected
      // and started empty).
      skew = 0;
      await expect.poll(() => cache.usable, { timeout: 5_000 }).toBe(true);
    } finally {
      await cache.close();
    }
  });

  it('a process too busy to read its notices for longer than 3 s stops serving from the cache meanwhile, without calling the listener lost', async () => {
    const lines: string[] = [];
    const cache = new KeyCache({
      databaseUrl: inject('databaseUrl'),
      maxAgeMs: 60_000,
      log: createLogger('info', { write: (line: string) => void lines.push(line) }),
    });
    await cache.start();
    try {
      await expect.poll(() => cache.usable, { timeout: 5_000 }).toBe(true);
      // What a first start on a loaded machine does (unpacking the Temporal CLI, synchronously):
      // the event loop held for 4.5 s, heartbeat ticks and notices waiting.
      const until = performance.now() + 4_500;
      while (performance.now() < until) {
        /* busy */
      }
      expect(cache.usable).toBe(false);
      // The next heartbeat heard back turns it on again, on the same connection.
      await expect.poll(() => cache.usable, { timeout: 5_000 }).toBe(true);
      // Two more ticks judged on time: nothing was called lost.
      await new Promise((r) => setTimeout(r, 2_500));
      expect(cache.usable).toBe(true);
      expect(lines.filter((l) => l.includes('listener lost'))).toEqual([]);
    } finally {
      await cache.close();
    }
  });

  it('a key revoked by hand in SQL is refused as soon as the notice arrives', async () => {
    const key = await cachedKey();
    await db().query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.keyId]);
    await expectRefusedSoon(key.apiKey);
  });

  it('new limits set through one instance apply on another as soon as the notice arrives', async () => {
    const key = await cachedKey();
    await billing().setRateLimits({
      key: { ref: { case: 'keyId', value: key.keyId } },
      requestsPerMinute: 1,
      tokensPerMinute: 0n,
    });
    // Once the limit of one request a minute applies, a second request is refused with 429.
    await expect
      .poll(
        () =>
          ask(key.apiKey).then(
            () => 'admitted',
            (e) => (e instanceof OpenAI.RateLimitError ? 'limited' : String(e)),
          ),
        { timeout: 3_000, interval: 20 },
      )
      .toBe('limited');
  });

  it('an unknown key is never cached: each try asks the database', async () => {
    const key = await newKey('1');
    await db().query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.keyId]);
    const before = await lookups();
    await expectRefused(key.apiKey);
    await expectRefused(key.apiKey);
    const after = await lookups();
    expect(after.miss - before.miss).toBe(2);
    expect(after.hit).toBe(before.hit);
  });

  it('with the listener connection killed the cache is off (a revoke still applies at once), and it comes back', async () => {
    const key = await cachedKey();
    const killed = await db().query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
      [APP],
    );
    expect(killed.rowCount).toBeGreaterThanOrEqual(1);
    // Until the listener is back, every key check goes to the database.
    await expect
      .poll(
        async () => {
          const b = await lookups();
          await ask(key.apiKey);
          return (await lookups()).off - b.off;
        },
        { timeout: 5_000 },
      )
      .toBe(1);
    await db().query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.keyId]);
    await expectRefused(key.apiKey);
    // Back (within about a second): a fresh key is cached again.
    await expect
      .poll(
        async () => {
          const b = await lookups();
          const k = await newKey('1');
          await billing().setRateLimits({
            key: { ref: { case: 'keyId', value: k.keyId } },
            requestsPerMinute: 0,
            tokensPerMinute: 0n,
          });
          await ask(k.apiKey);
          await ask(k.apiKey);
          return (await lookups()).hit - b.hit;
        },
        { timeout: 10_000, interval: 500 },
      )
      .toBe(1);
    await expectRefused(key.apiKey);
  });
});
