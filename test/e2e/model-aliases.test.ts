// Model aliases through the official SDKs: listed with what serves them, served and billed as
// that model, both names on the usage row (hold settles here, lease batches on a gateway of
// their own); and error answers that tell the SDKs whether to retry.
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { billing, db, gatewayUrl, newKey, openai, uniqueMarker, upstreamRequests } from '../support/context.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';

const anthropic = (apiKey: string) => new Anthropic({ apiKey, baseURL: gatewayUrl(), maxRetries: 0 });
const usageRow = async (requestId: string) =>
  (
    await db().query(
      'SELECT model, requested_model, cost_nano::text AS cost FROM usage_records WHERE request_id = $1',
      [requestId],
    )
  ).rows[0] as { model: string; requested_model: string; cost: string } | undefined;

describe('model aliases', () => {
  it('GET /v1/models lists each alias with the model that serves it, and each model with its aliases, in the OpenAI shape and, for Anthropic callers, in theirs', async () => {
    const key = await newKey('1');
    const list = await openai(key.apiKey).models.list();
    const byId = new Map(list.data.map((m) => [m.id, m as unknown as Record<string, unknown>]));
    expect(byId.get('claude-opus-5-5')).toMatchObject({
      object: 'model',
      owned_by: 'anthropic',
      alias_for: 'claude-opus-4-8',
    });
    expect(byId.get('claude-haiku-5-5')).toMatchObject({ alias_for: 'claude-haiku-4-5' });
    expect(byId.get('claude-opus-4-8')).not.toHaveProperty('alias_for');
    // A model's own entry names the aliases it serves.
    expect(byId.get('claude-opus-4-8')).toMatchObject({ aliases: ['claude-opus-5-5'] });
    expect(byId.get('gpt-5.5')).toMatchObject({ aliases: [] });
    expect(byId.has('gpt-5.5')).toBe(true);
    expect(await openai(key.apiKey).models.retrieve('claude-sonnet-5-5')).toMatchObject({
      id: 'claude-sonnet-5-5',
      alias_for: 'claude-sonnet-4-6',
    });

    // The Anthropic SDK sends anthropic-version and pages by has_more / last_id.
    const ids: string[] = [];
    for await (const m of anthropic(key.apiKey).models.list()) {
      expect(m).toMatchObject({ type: 'model', display_name: expect.any(String), created_at: expect.any(String) });
      ids.push(m.id);
    }
    expect(ids).toContain('claude-opus-4-8');
    expect(ids).toContain('claude-opus-5-5');
    expect(ids.every((id) => id.startsWith('claude-'))).toBe(true);
    expect(await anthropic(key.apiKey).models.retrieve('claude-fable-5-2')).toMatchObject({
      type: 'model',
      id: 'claude-fable-5-2',
      alias_for: 'claude-fable-5',
    });
    await expect(anthropic(key.apiKey).models.retrieve('gpt-5.5')).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('serves an alias as its model: the reply and x-gateway-model name it, upstream gets its id, its price is charged, the usage row keeps both names', async () => {
    const key = await newKey('1');
    const marker = uniqueMarker('alias');
    const { data, response } = await anthropic(key.apiKey)
      .messages.create({
        model: 'claude-haiku-5-5',
        max_tokens: 50,
        messages: [{ role: 'user', content: `${marker} [sim tokens=4 prompt=20]` }],
      })
      .withResponse();
    expect(data.model).toBe('claude-haiku-4-5');
    expect(response.headers.get('x-gateway-model')).toBe('claude-haiku-4-5');
    expect((await upstreamRequests(marker)).map((r) => r.body?.model)).toEqual(['claude-haiku-4-5']);
    // claude-haiku-4-5: $1 in, $5 out per million tokens.
    const cost = 20n * 1000n + 4n * 5000n;
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(String(cost));
    expect(await usageRow(response.headers.get('x-request-id')!)).toEqual({
      model: 'claude-haiku-4-5',
      requested_model: 'claude-haiku-5-5',
      cost: String(cost),
    });

    // A streamed reply says so in its header and its message_start alike; a model's own id is recorded as asked.
    const stream = anthropic(key.apiKey).messages.stream({
      model: 'claude-sonnet-5-5',
      max_tokens: 50,
      messages: [{ role: 'user', content: `${marker} s [sim tokens=2]` }],
    });
    const { response: sr } = await stream.withResponse();
    expect(sr.headers.get('x-gateway-model')).toBe('claude-sonnet-4-6');
    expect((await stream.finalMessage()).model).toBe('claude-sonnet-4-6');
    const { response: own } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `${marker} [sim tokens=1]` }],
      })
      .withResponse();
    expect(await usageRow(own.headers.get('x-request-id')!)).toMatchObject({
      model: 'gpt-4o-mini',
      requested_model: 'gpt-4o-mini',
    });
  });

  describe('with credit leases and an operator alias (MODEL_ALIASES)', () => {
    let g: GatewayProcess | undefined;
    afterAll(async () => {
      await g?.stop();
    });

    it('writes both names from the lease batch too', async () => {
      const sim = inject('simulatorUrl');
      g = await startGatewayProcess({
        logFile: path.join(inject('workDir'), `aliases-${uniqueMarker()}.log`),
        env: {
          DATABASE_URL: inject('databaseUrl'),
          OPENAI_API_KEY: UPSTREAM_KEY,
          OPENAI_BASE_URL: `${sim}/v1`,
          BILLING_MODE: 'lease',
          LEASE_FLUSH_MS: '50',
          MODEL_ALIASES: 'house-model=gpt-4o-mini,claude-opus-5-5=',
        },
      });
      const key = await newKey('1');
      const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
      const { data, response } = await client.chat.completions
        .create({ model: 'house-model', messages: [{ role: 'user', content: `${uniqueMarker()} [sim tokens=3]` }] })
        .withResponse();
      expect(data.model).toBe('gpt-4o-mini');
      expect(response.headers.get('x-gateway-model')).toBe('gpt-4o-mini');
      const requestId = response.headers.get('x-request-id')!;
      const deadline = Date.now() + 10_000;
      while (!(await usageRow(requestId)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(await usageRow(requestId)).toEqual({
        model: 'gpt-4o-mini',
        requested_model: 'house-model',
        cost: response.headers.get('x-gateway-cost-nano-usd'),
      });
      // The alias turned off is an unknown model there, and no longer listed.
      await expect(
        client.chat.completions.create({ model: 'claude-opus-5-5', messages: [{ role: 'user', content: 'x' }] }),
      ).rejects.toMatchObject({ status: 400, code: 'model_not_found' });
      expect((await client.models.list()).data.map((m) => m.id)).toContain('house-model');
    });
  });
});

describe('error answers say whether a retry can help', () => {
  const post = (route: string, key: string, body: unknown) =>
    fetch(`${gatewayUrl()}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('x-should-retry: false on 400, 401, 402 and 404, in both wire shapes; true with retry-after on 429', async () => {
    const key = await newKey('0.000001');
    const cases: [Response, number][] = [
      [
        await post('/v1/chat/completions', key.apiKey, {
          model: 'no-such-model',
          messages: [{ role: 'user', content: 'x' }],
        }),
        400,
      ],
      [await post('/v1/messages', key.apiKey, { model: 'claude-opus-5-5', messages: [] }), 400],
      [
        await post('/v1/messages', 'prx-not-a-key', {
          model: 'claude-opus-5-5',
          max_tokens: 5,
          messages: [{ role: 'user', content: 'x' }],
        }),
        401,
      ],
      [await post('/v1/responses', key.apiKey, { model: 'gpt-5.5', input: 'x'.repeat(4000) }), 402],
      [await fetch(`${gatewayUrl()}/v1/models/no-such-model`), 404],
      [await fetch(`${gatewayUrl()}/v1/no-such-route`), 404],
    ];
    for (const [r, status] of cases) {
      expect(r.status).toBe(status);
      expect(r.headers.get('x-should-retry'), `${status} ${r.url}`).toBe('false');
    }
    const insufficient = (await (
      await post('/v1/chat/completions', key.apiKey, {
        model: 'gpt-5.5',
        messages: [{ role: 'user', content: 'x'.repeat(4000) }],
      })
    ).json()) as { error: { code: string } };
    expect(insufficient.error.code).toBe('insufficient_quota');

    const limited = await newKey('1');
    await billing().setRateLimits({
      key: { ref: { case: 'keyId', value: limited.keyId } },
      requestsPerMinute: 1,
      tokensPerMinute: 0n,
    });
    await post('/v1/chat/completions', limited.apiKey, {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: '[sim tokens=1]' }],
    });
    const r429 = await post('/v1/chat/completions', limited.apiKey, {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: '[sim tokens=1]' }],
    });
    expect(r429.status).toBe(429);
    expect(r429.headers.get('x-should-retry')).toBe('true');
    expect(Number(r429.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('an upstream 5xx that outlasts the retries says retry', async () => {
    const key = await newKey('1');
    const r = await post('/v1/chat/completions', key.apiKey, {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: `${uniqueMarker()} [sim fault=503]` }],
    });
    expect(r.status).toBe(503);
    expect(r.headers.get('x-should-retry')).toBe('true');
  });
});
