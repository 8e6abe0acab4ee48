// The gateway process's life: graceful shutdown (in-flight streams finish, bounded), a process
// killed with holds open (the sweeper of another instance releases them within expiry + one
// sweep), and callers that leave before the stream starts.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { countTextTokens } from '../../src/inference/tokens.ts';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  uniqueMarker,
  upstreamRequests,
} from '../support/context.ts';

const started: GatewayProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.stop('SIGKILL')));
});

async function gateway(name: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const sim = inject('simulatorUrl');
  const g = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `${name}-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  started.push(g);
  return g;
}

const client = (g: GatewayProcess | string, apiKey: string) =>
  new OpenAI({ apiKey, baseURL: `${typeof g === 'string' ? g : g.httpUrl}/v1`, maxRetries: 0 });

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const holdsOf = async (accountId: string) =>
  (await db().query('SELECT status FROM holds WHERE account_id = $1', [accountId])).rows.map((r) => r.status as string);
const usageOf = async (accountId: string) =>
  (await db().query('SELECT status, cost_nano::text AS cost FROM usage_records WHERE account_id = $1', [accountId]))
    .rows as { status: string; cost: string }[];

describe('graceful shutdown', () => {
  it('SIGTERM mid-stream: no new requests, the stream finishes and is charged, exit 0', async () => {
    const g = await gateway('graceful', { SHUTDOWN_GRACE_MS: '15000' });
    const key = await newKey('5');
    const stream = await client(g, key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'long [sim tokens=10 delay=150]' }],
    });
    const it = stream[Symbol.asyncIterator]();
    let text = ((await it.next()).value as OpenAI.ChatCompletionChunk).choices[0]?.delta?.content ?? '';
    const exited = g.stop('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));
    const refused = await fetch(`${g.httpUrl}/healthz`).then(
      (r) => r.status,
      () => 'refused',
    );
    expect([503, 'refused']).toContain(refused);
    for (let r = await it.next(); !r.done; r = await it.next())
      text += (r.value as OpenAI.ChatCompletionChunk).choices[0]?.delta?.content ?? '';
    expect(text).toBe('w1 w2 w3 w4 w5 w6 w7 w8 w9 w10');
    expect(await exited).toBe(0);
    const usage = await usageOf(key.accountId);
    expect(usage).toHaveLength(1);
    expect(usage[0]!.status).toBe('ok');
    expect(BigInt(usage[0]!.cost)).toBeGreaterThan(0n);
    expect((await balanceOf(key.accountId)).held).toBe(0n);
    await checkInvariants(key.accountId);
  });

  it('a stream longer than the grace period is cut, charged for what it delivered, and nothing stays held', async () => {
    const g = await gateway('grace-exceeded', { SHUTDOWN_GRACE_MS: '400' });
    const key = await newKey('5');
    const stream = await client(g, key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'very long [sim tokens=40 delay=150]' }],
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    const exited = g.stop('SIGTERM');
    let chunks = 0;
    await (async () => {
      for (let r = await it.next(); !r.done; r = await it.next()) chunks++;
    })().catch(() => {});
    expect(chunks).toBeLessThan(40);
    expect(await exited).toBe(0);
    const usage = await usageOf(key.accountId);
    expect(usage).toHaveLength(1);
    expect(usage[0]!.status).toBe('client_closed');
    expect(BigInt(usage[0]!.cost)).toBeGreaterThan(0n);
    expect(await holdsOf(key.accountId)).toEqual(['settled']);
    await checkInvariants(key.accountId);
  });
});

describe('a process killed with a hold open', () => {
  it('the hold expires and another instance releases it within expiry + one sweep; nothing is charged', async () => {
    const ttlSeconds = 2;
    const sweepMs = 300;
    const doomed = await gateway('doomed', { HOLD_TTL_SECONDS: String(ttlSeconds) });
    // The survivor runs the sweeper often; it shares the database.
    await gateway('survivor', { HOLD_TTL_SECONDS: String(ttlSeconds), HOLD_SWEEP_INTERVAL_MS: String(sweepMs) });
    const key = await newKey('5');
    const pending = client(doomed, key.apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'never answered [sim delay=20000]' }],
      })
      .catch((e) => e);
    await until('the hold', async () => ((await holdsOf(key.accountId))[0] === 'active' ? true : undefined), 10_000);
    expect((await balanceOf(key.accountId)).held).toBeGreaterThan(0n);
    await doomed.stop('SIGKILL');
    const killedAt = Date.now();
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
    await until(
      'the sweep',
      async () => ((await holdsOf(key.accountId))[0] === 'expired' ? true : undefined),
      (ttlSeconds * 1000 + sweepMs) * 3,
    );
    // Renewed at most ttl/3 before the kill, so it expired within ttl of the kill; one sweep later it is released.
    expect(Date.now() - killedAt).toBeLessThan(ttlSeconds * 1000 + sweepMs + 1500);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n, held: 0n });
    expect(await usageOf(key.accountId)).toEqual([{ status: 'hold_expired', cost: '0' }]);
    await checkInvariants(key.accountId);
  });
});

describe('callers that leave early', () => {
  it('a client that aborts before the stream starts pays what the provider bills for the request it was sent, and no more is held', async () => {
    const key = await newKey('5');
    const abort = new AbortController();
    const request = fetch(`${gatewayUrl()}/v1/chat/completions`, {
      method: 'POST',
      signal: abort.signal,
      headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'slow start [sim delay=1500 tokens=2]' }],
      }),
    });
    await until('the hold', async () => ((await holdsOf(key.accountId))[0] === 'active' ? true : undefined), 5_000);
    abort.abort();
    await request.catch(() => {});
    // The request had gone to the provider, which answers it whole and bills it: the gateway
    // reads the answer (sending nothing) and charges the usage it reports.
    const row = await until(
      'the settle',
      async () =>
        (
          await db().query(
            'SELECT status, output_tokens::text AS out, usage_estimated, cost_nano::text AS cost FROM usage_records WHERE account_id = $1',
            [key.accountId],
          )
        ).rows[0] ?? undefined,
      10_000,
    );
    expect(row).toMatchObject({ status: 'client_closed', out: '2', usage_estimated: false });
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n - BigInt(row.cost), held: 0n });
    expect(await accountActivity(key.accountId)).toEqual({ holds: 1, charges: 1, usage: 1 });
    await checkInvariants(key.accountId);
  });

  it('a client that leaves while the gateway waits to retry costs nothing: no new request goes out for it', async () => {
    // Retries wait for the upstream's retry-after (1 s): the caller leaves inside that wait.
    const g = await gateway('retry-wait', { UPSTREAM_RETRY_MAX_WAIT_MS: '5000' });
    const key = await newKey('5');
    const m = uniqueMarker();
    const abort = new AbortController();
    const request = fetch(`${g.httpUrl}/v1/chat/completions`, {
      method: 'POST',
      signal: abort.signal,
      headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: `${m} [sim fault=429 id=${m} fail=5]` }],
      }),
    });
    await until('the first attempt', async () => ((await upstreamRequests(m)).length >= 1 ? true : undefined), 5_000);
    abort.abort();
    await request.catch(() => {});
    const usage = await until('the settle', async () => (await usageOf(key.accountId))[0] ?? undefined, 5_000);
    expect(usage).toEqual({ status: 'client_closed', cost: '0' });
    expect(await upstreamRequests(m)).toHaveLength(1);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 5_000_000_000n, held: 0n });
    await checkInvariants(key.accountId);
  });
});

describe('streams read on after their caller left', () => {
  const leave = async (g: GatewayProcess, apiKey: string, content: string) => {
    const abort = new AbortController();
    const { data, response } = await client(g, apiKey)
      .chat.completions.create(
        { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content }] },
        { signal: abort.signal },
      )
      .withResponse();
    let text = '';
    try {
      for await (const c of data) {
        text += c.choices[0]?.delta?.content ?? '';
        if (text === 'w1 w2 w3') abort.abort();
      }
    } catch {
      /* the abort */
    }
    return response.headers.get('x-request-id')!;
  };
  const rowOf = async (requestId: string) =>
    (
      await db().query(
        'SELECT status, usage_estimated, output_tokens::text AS out FROM usage_records WHERE request_id = $1',
        [requestId],
      )
    ).rows[0] as { status: string; usage_estimated: boolean; out: string } | undefined;

  it('are read for ABANDONED_STREAM_DRAIN_MS at most: usage later than that is not waited for, the delivered text is charged', async () => {
    const g = await gateway('drain-bound', { ABANDONED_STREAM_DRAIN_MS: '300' });
    const key = await newKey('5');
    const requestId = await leave(g, key.apiKey, `late usage ${uniqueMarker()} [sim tokens=3 usage_delay=20000]`);
    const row = await until('the settle', () => rowOf(requestId), 10_000);
    expect(row).toEqual({ status: 'client_closed', usage_estimated: true, out: String(countTextTokens('w1 w2 w3')) });
    expect((await balanceOf(key.accountId)).held).toBe(0n);
    await checkInvariants(key.accountId);
  });

  it('SIGTERM cuts their reading short, settles them at the estimate and exits 0 with nothing unsettled', async () => {
    const g = await gateway('drain-shutdown');
    const key = await newKey('5');
    const requestId = await leave(g, key.apiKey, `late usage ${uniqueMarker()} [sim tokens=3 usage_delay=60000]`);
    expect(await rowOf(requestId)).toBeUndefined(); // still reading for the usage
    expect(await g.stop('SIGTERM')).toBe(0);
    expect(await rowOf(requestId)).toEqual({
      status: 'client_closed',
      usage_estimated: true,
      out: String(countTextTokens('w1 w2 w3')),
    });
    expect(fs.readFileSync(g.logFile, 'utf8')).not.toContain('unsettled');
    expect(await balanceOf(key.accountId)).toMatchObject({ held: 0n });
    await checkInvariants(key.accountId);
  });
});

describe('fallback deployment', () => {
  it('when the first deployment fails before the first byte, the same request goes at once to the fallback (OPENAI_FALLBACK_*), with its own key, charged once', async () => {
    const sim = inject('simulatorUrl');
    const g = await gateway('fallback', {
      OPENAI_FALLBACK_BASE_URL: `${sim}/fallback/v1`,
      OPENAI_FALLBACK_API_KEY: `${UPSTREAM_KEY}-fallback`,
    });
    const key = await newKey('5');
    const m = uniqueMarker();
    for (const stream of [false, true]) {
      const content = `${m}-${stream} [sim fault=503]`;
      let text = '';
      if (stream) {
        for await (const c of await client(g, key.apiKey).chat.completions.create({
          model: 'gpt-4o-mini',
          stream: true,
          messages: [{ role: 'user', content }],
        }))
          text += c.choices[0]?.delta?.content ?? '';
      } else {
        text = (
          await client(g, key.apiKey).chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content }],
          })
        ).choices[0]!.message.content!;
      }
      expect(text).toBe('w1 w2 w3 w4 w5 w6 w7 w8');
      const sent = await upstreamRequests(`${m}-${stream}`);
      // A model on two deployments moves on to the next at once; it does not retry the failing one first.
      expect(sent.map((r) => r.path)).toEqual(['/v1/chat/completions', '/fallback/v1/chat/completions']);
      expect(sent[1]!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}-fallback`);
    }
    const usage = await usageOf(key.accountId);
    expect(usage.map((u) => u.status)).toEqual(['ok', 'ok']);
    expect((await balanceOf(key.accountId)).balance).toBe(
      5_000_000_000n - usage.reduce((s, u) => s + BigInt(u.cost), 0n),
    );
    await checkInvariants(key.accountId);
  });
});
