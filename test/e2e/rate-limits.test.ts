// Per-key requests-per-minute, shared through PostgreSQL: exact under concurrency, and shared
// by two gateway processes over one database. 429s carry retry-after and cost nothing.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import {
  accountActivity,
  awayFromMinuteEdge,
  billing,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  type TestKey,
} from '../support/context.ts';

let second: GatewayProcess;
beforeAll(async () => {
  const sim = inject('simulatorUrl');
  second = await startGatewayProcess({
    logFile: path.join(inject('workDir'), 'gateway-2.log'),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: sim,
    },
  });
});
afterAll(async () => {
  await second?.stop();
});

async function limitedKey(rpm: number): Promise<TestKey> {
  const key = await newKey('5');
  const r = await billing().setRateLimits({
    key: { ref: { case: 'keyId', value: key.keyId } },
    requestsPerMinute: rpm,
    tokensPerMinute: 0n,
  });
  expect(r.updated).toBe(true);
  return key;
}

// Far from a minute boundary (at least `needSeconds` before it), so all requests of a test share one window.

describe('rate limits', () => {
  it('N concurrent requests over a per-minute limit of K: exactly K succeed, N-K get 429 with retry-after, free', async () => {
    await awayFromMinuteEdge(10);
    const key = await limitedKey(7);
    const client = openai(key.apiKey);
    const results = await Promise.allSettled(
      Array.from({ length: 25 }, () =>
        client.chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
        }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(7);
    const refused = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => r.reason as InstanceType<typeof OpenAI.APIError>);
    expect(refused).toHaveLength(18);
    for (const e of refused) {
      expect(e).toBeInstanceOf(OpenAI.RateLimitError);
      expect(Number(e.headers!.get('retry-after'))).toBeGreaterThan(0);
      expect(e.headers!.get('x-ratelimit-limit-requests')).toBe('7');
      expect(e.headers!.get('x-ratelimit-remaining-requests')).toBe('0');
      expect(e.headers!.get('x-gateway-cost-nano-usd')).toBe('0');
    }
    expect(await accountActivity(key.accountId)).toMatchObject({ holds: 7, usage: 7 });
    await checkInvariants(key.accountId);
  });

  it('a key without limits is not counted: no window row is written for it', async () => {
    const key = await limitedKey(0); // 0 requests and 0 tokens per minute: unlimited
    for (let i = 0; i < 3; i++)
      await openai(key.apiKey).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'free flow [sim tokens=2]' }],
      });
    await new Promise((r) => setTimeout(r, 100));
    expect(
      (await db().query('SELECT count(*)::int AS n FROM rate_windows WHERE key_id = $1', [key.keyId])).rows[0].n,
    ).toBe(0);
    const limited = await limitedKey(50);
    await openai(limited.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'counted [sim tokens=2]' }],
    });
    expect(
      (await db().query('SELECT requests FROM rate_windows WHERE key_id = $1', [limited.keyId])).rows.map(
        (r) => r.requests,
      ),
    ).toEqual([1]);
  });

  it('two gateway processes over one database share the limit', async () => {
    await awayFromMinuteEdge(10);
    const key = await limitedKey(10);
    const a = openai(key.apiKey);
    const b = new OpenAI({ apiKey: key.apiKey, baseURL: `${second.httpUrl}/v1`, maxRetries: 0 });
    const calls = Array.from({ length: 30 }, (_, i) =>
      (i % 2 ? a : b).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
      }),
    );
    const results = await Promise.allSettled(calls);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof OpenAI.RateLimitError)).toHaveLength(
      20,
    );
    await checkInvariants(key.accountId);
  });

  it('a tokens-per-minute limit: once the tokens settled this minute reach it, the next request gets 429, free', async () => {
    await awayFromMinuteEdge(10);
    const key = await newKey('5');
    await billing().setRateLimits({
      key: { ref: { case: 'keyId', value: key.keyId } },
      requestsPerMinute: 0,
      tokensPerMinute: 10n,
    });
    const first = await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'spend tokens [sim tokens=12]' }],
    });
    const used = first.usage!.prompt_tokens + first.usage!.completion_tokens;
    expect(used).toBeGreaterThanOrEqual(10);
    // The settled request's tokens land in the window just after it answered.
    await expect
      .poll(
        async () =>
          (await db().query('SELECT tokens::int AS t FROM rate_windows WHERE key_id = $1', [key.keyId])).rows[0]?.t ??
          0,
      )
      .toBe(used);
    const err = await openai(key.apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'one more [sim tokens=2]' }],
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.headers.get('x-ratelimit-limit-tokens')).toBe('10');
    expect(err.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    expect(err.headers.get('x-gateway-cost-nano-usd')).toBe('0');
    expect(Number(err.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await accountActivity(key.accountId)).toMatchObject({ usage: 1 });
    await checkInvariants(key.accountId);
  });

  it('count_tokens is rate-limited too, in the Anthropic shape', async () => {
    await awayFromMinuteEdge(10);
    const key = await limitedKey(2);
    const client = new Anthropic({ apiKey: key.apiKey, baseURL: gatewayUrl(), maxRetries: 0 });
    const body = { model: 'claude-haiku-4-5', messages: [{ role: 'user' as const, content: 'count me' }] };
    await client.messages.countTokens(body);
    await client.messages.countTokens(body);
    const err = await client.messages.countTokens(body).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  });
});

// With the key cache (credit leases), instances take requests from a window in grants and admit
// them in memory; the window still never admits more than its limit. These gateways hand unused
// grants back when they stop (and after RATE_LIMIT_GRANT_IDLE_MS unused, set long here except
// where that is the subject), so no count below depends on how fast the machine is.
// Each test starts its gateways and may wait up to 21 s for a fresh minute.
const GATEWAYS_AND_A_MINUTE = { timeout: 150_000 };

describe('rate limits with grants', () => {
  const started: GatewayProcess[] = [];
  afterAll(async () => {
    await Promise.all(started.map((g) => g.stop()));
  });
  const grantsGateway = async (name: string, env: Record<string, string> = {}) => {
    const g = await startGatewayProcess({
      logFile: path.join(inject('workDir'), `${name}.log`),
      env: {
        DATABASE_URL: inject('databaseUrl'),
        OPENAI_API_KEY: UPSTREAM_KEY,
        OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
        BILLING_MODE: 'lease',
        LEASE_FLUSH_MS: '50',
        RATE_LIMIT_GRANT_IDLE_MS: '600000',
        // Requests per minute alone: 150 at once from one key would meet the bounds on requests in flight.
        MAX_IN_FLIGHT_PER_KEY: '0',
        MAX_IN_FLIGHT_PER_ACCOUNT: '0',
        ...env,
      },
    });
    started.push(g);
    return g;
  };

  const via = (g: GatewayProcess, apiKey: string) => new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
  const ask = (g: GatewayProcess, apiKey: string) =>
    via(g, apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'granted [sim tokens=2]' }],
    });
  const windowRequests = async (keyId: string) =>
    (await db().query('SELECT requests FROM rate_windows WHERE key_id = $1', [keyId])).rows[0]?.requests as
      | number
      | undefined;

  it(
    'an instance takes a grant in one statement, admits from it in memory, and hands back what it did not use when it stops',
    GATEWAYS_AND_A_MINUTE,
    async () => {
      // The limit is this instance's default: a key given a limit of its own would announce that
      // change, and a lookup that the notice overtakes is (rightly) not cached.
      const g = await grantsGateway('grants-one', { RATE_LIMIT_RPM: '800' });
      await awayFromMinuteEdge(20);
      const key = await newKey('5');
      for (let i = 0; i < 10; i++) await ask(g, key.apiKey);
      // One grant of 64 (an eighth of 800, at most 64) covered all ten: the window counts the grant.
      expect(await windowRequests(key.keyId)).toBe(64);
      await g.stop();
      // Stopping hands the 54 unused back.
      expect(await windowRequests(key.keyId)).toBe(10);
      await checkInvariants(key.accountId);
    },
  );

  it(
    'unused requests of a grant go back to the window after RATE_LIMIT_GRANT_IDLE_MS without use',
    GATEWAYS_AND_A_MINUTE,
    async () => {
      const g = await grantsGateway('grants-idle', { RATE_LIMIT_RPM: '800', RATE_LIMIT_GRANT_IDLE_MS: '300' });
      await awayFromMinuteEdge(20);
      const key = await newKey('5');
      for (let i = 0; i < 3; i++) await ask(g, key.apiKey);
      await expect.poll(() => windowRequests(key.keyId), { timeout: 30_000 }).toBe(3);
      await checkInvariants(key.accountId);
    },
  );

  it(
    'one instance, concurrent requests over a limit of K: exactly K succeed, though its claims overlap and grant in bulk',
    GATEWAYS_AND_A_MINUTE,
    async () => {
      const g = await grantsGateway('grants-burst');
      await awayFromMinuteEdge(20);
      for (let round = 0; round < 3; round++) {
        const key = await limitedKey(100);
        const results = await Promise.allSettled(Array.from({ length: 160 }, () => ask(g, key.apiKey)));
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(OpenAI.RateLimitError);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(100);
        await checkInvariants(key.accountId);
      }
    },
  );

  it(
    'two instances over one window never admit more than its limit, and once grants are handed back, exactly the limit',
    GATEWAYS_AND_A_MINUTE,
    async () => {
      const [a, b] = [await grantsGateway('grants-a'), await grantsGateway('grants-b')];
      await awayFromMinuteEdge(20);
      const key = await limitedKey(100);
      const burst = await Promise.allSettled(Array.from({ length: 150 }, (_, i) => ask(i % 2 ? b! : a!, key.apiKey)));
      const first = burst.filter((r) => r.status === 'fulfilled').length;
      expect(first).toBeLessThanOrEqual(100);
      for (const r of burst) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(OpenAI.RateLimitError);
      // What the first instance holds unused goes back when it stops; the rest of the limit is
      // then there for the other (its own unused grant included), and not one request more.
      await a!.stop();
      const rest = await Promise.allSettled(Array.from({ length: 100 - first + 10 }, () => ask(b!, key.apiKey)));
      expect(first + rest.filter((r) => r.status === 'fulfilled').length).toBe(100);
      for (const r of rest) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(OpenAI.RateLimitError);
      expect(await windowRequests(key.keyId)).toBe(100);
      await checkInvariants(key.accountId);
    },
  );
});
