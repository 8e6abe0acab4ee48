// POST /v1/messages and count_tokens with the official @anthropic-ai/sdk, against the
// simulator's Anthropic API, billed from Anthropic usage (cache reads and writes included).
import { describe, expect, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, usageFromAnthropic, type TokenPrices } from '../../src/billing/pricing.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  gatewayUrl,
  newKey,
  postRaw,
  uniqueMarker,
  upstreamRequests,
  usageRow,
  waitForUsage,
} from '../support/context.ts';

const MODEL = 'claude-sonnet-4-6';
const prices = MODELS.find((m) => m.id === MODEL)!.prices as unknown as TokenPrices;
const FIVE_USD = 5_000_000_000n;
const claude = (apiKey: string, opts: Partial<ConstructorParameters<typeof Anthropic>[0]> = {}) =>
  new Anthropic({ apiKey, baseURL: gatewayUrl(), maxRetries: 0, ...opts });
const costOf = (usage: unknown) => tokenCostNano(prices, usageFromAnthropic(usage as Record<string, unknown>));

describe('/v1/messages', () => {
  it('messages.create: passes the request through untouched and bills input, output, cache reads and writes', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const params = {
      model: MODEL,
      max_tokens: 300,
      system: [{ type: 'text' as const, text: 'You are terse.', cache_control: { type: 'ephemeral' as const } }],
      messages: [
        {
          role: 'user' as const,
          content: [{ type: 'text' as const, text: `hello ${m} [sim tokens=11 cached=700 cache_write=300]` }],
        },
      ],
      tools: [
        {
          name: 'lookup',
          description: 'Look up',
          input_schema: { type: 'object' as const, properties: { q: { type: 'string' } } },
        },
      ],
      metadata: { user_id: 'u-1' },
      temperature: 0.2,
    };
    const { data, response } = await claude(key.apiKey)
      .messages.create(params, {
        headers: { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'prompt-caching-2024-07-31' },
      })
      .withResponse();
    expect(data.model).toBe(MODEL);
    expect(data.content[0]).toMatchObject({ type: 'text', text: 'w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11' });
    expect(data.usage.cache_read_input_tokens).toBe(700);
    expect(data.usage.cache_creation_input_tokens).toBe(300);

    const [sent] = await upstreamRequests(m);
    expect(sent!.path).toBe('/v1/messages');
    expect(sent!.body).toEqual(params);
    expect(sent!.headers['x-api-key']).toBe(UPSTREAM_KEY);
    expect(sent!.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent!.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
    expect(JSON.stringify(sent!.headers)).not.toContain(key.apiKey);

    const cost = costOf(data.usage);
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    const row = await usageRow(response.headers.get('request-id')!);
    expect(row).toMatchObject({
      cost_nano: cost.toString(),
      route: '/v1/messages',
      cached_tokens: '700',
      status: 'ok',
    });
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - cost);
    await checkInvariants(key.accountId);
  });

  it('messages.stream: finalMessage equals the unstreamed reply, and costs the same', async () => {
    const key = await newKey('5');
    const client = claude(key.apiKey);
    const body = {
      model: MODEL,
      max_tokens: 200,
      messages: [{ role: 'user' as const, content: `stream ${uniqueMarker()} [sim tokens=7 cached=40]` }],
    };
    const plain = await client.messages.create(body).withResponse();
    const stream = client.messages.stream(body);
    const final = await stream.finalMessage();
    const { id: _a, ...streamed } = final;
    const { id: _b, ...unstreamed } = plain.data;
    // The SDK adds client-side fields (parsed_output…) to finalMessage; every field of the wire reply matches.
    expect(streamed).toMatchObject(unstreamed);
    expect(final.usage).toEqual(plain.data.usage);

    const plainCost = plain.response.headers.get('x-gateway-cost-nano-usd')!;
    const streamRequestId = (await stream.withResponse()).response.headers.get('request-id')!;
    const row = await waitForUsage(streamRequestId);
    expect(row.cost_nano).toBe(plainCost);
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 2n * BigInt(plainCost));
    await checkInvariants(key.accountId);
  });

  it('a tool_use round trip, streamed', async () => {
    const key = await newKey('5');
    const client = claude(key.apiKey);
    const tools = [
      { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } },
    ];
    const first = await client.messages
      .stream({
        model: MODEL,
        max_tokens: 100,
        tools,
        tool_choice: { type: 'tool', name: 'get_weather' },
        messages: [{ role: 'user', content: `weather? ${uniqueMarker()}` }],
      })
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather' });
    const second = await client.messages.create({
      model: MODEL,
      max_tokens: 100,
      tools,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: '21C' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    await checkInvariants(key.accountId);
  });

  it('accepts Authorization: Bearer (Claude Code with ANTHROPIC_AUTH_TOKEN) as well as x-api-key', async () => {
    const key = await newKey('1');
    const client = new Anthropic({ authToken: key.apiKey, apiKey: null, baseURL: gatewayUrl(), maxRetries: 0 });
    const r = await client.messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 20,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.type).toBe('message');
  });

  it('count_tokens: forwarded to the upstream counter, free, still authenticated', async () => {
    const key = await newKey('1');
    const client = claude(key.apiKey);
    const r = await client.messages.countTokens({
      model: MODEL,
      messages: [{ role: 'user', content: 'how many tokens is this? [sim prompt=42]' }],
    });
    expect(r.input_tokens).toBe(42);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 1_000_000_000n, held: 0n });
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
    const err = await claude('prx-not-a-key')
      .messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
  });
});

describe('/v1/messages errors, in the Anthropic shape, with the SDK typed errors', () => {
  const ask = async (apiKey: string, content: string, model = MODEL, stream = false) => {
    const body = { model, max_tokens: 50, messages: [{ role: 'user' as const, content }] };
    return (stream ? claude(apiKey).messages.stream(body).finalMessage() : claude(apiKey).messages.create(body)).catch(
      (e: unknown) => e,
    );
  };

  it('400 for an unknown model and for a non-Claude model, naming the chat route', async () => {
    const key = await newKey('1');
    const unknown = await ask(key.apiKey, 'hi', 'claude-nope');
    expect(unknown).toBeInstanceOf(Anthropic.BadRequestError);
    expect((unknown as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error' },
    });
    const gpt = await ask(key.apiKey, 'hi', 'gpt-5.5');
    expect(gpt).toBeInstanceOf(Anthropic.BadRequestError);
    expect((gpt as Error).message).toContain('/v1/chat/completions');
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('broken JSON, a missing max_tokens and an oversized body answer in the Anthropic shape', async () => {
    const key = await newKey('1');
    const post = async (body: string) => {
      const r = await fetch(`${gatewayUrl()}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key.apiKey, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body,
      });
      return { status: r.status, body: (await r.json()) as { type: string; error: { type: string; message: string } } };
    };
    const broken = await post('{"model":');
    expect(broken).toMatchObject({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error' } } });
    const noMax = await post(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }));
    expect(noMax.status).toBe(400);
    expect(noMax.body.error.message).toContain('max_tokens');
    const huge = await postRaw(
      `${gatewayUrl()}/v1/messages`,
      { 'x-api-key': key.apiKey },
      JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'x'.repeat(400 * 1024) }] }),
    );
    expect(huge.status).toBe(413);
    expect(JSON.parse(huge.text)).toMatchObject({ type: 'error', error: { type: 'request_too_large' } });
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('401 for a bad key', async () => {
    expect(await ask('prx-junk', 'hi')).toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it('402 when the balance cannot cover the least cost', async () => {
    const key = await newKey(0n);
    const err = (await ask(key.apiKey, 'hi')) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });
  });

  it.each([false, true])('429 and 5xx from the upstream cost nothing (stream: %s)', async (stream) => {
    const key = await newKey('5');
    const limited = await ask(key.apiKey, `${uniqueMarker()} [sim fault=429]`, MODEL, stream);
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError);
    const overloaded = await ask(key.apiKey, `${uniqueMarker()} [sim fault=529]`, MODEL, stream);
    expect(overloaded).toBeInstanceOf(Anthropic.InternalServerError);
    expect((overloaded as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    const broken = await ask(key.apiKey, `${uniqueMarker()} [sim fault=500]`, MODEL, stream);
    expect(broken).toBeInstanceOf(Anthropic.InternalServerError);
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('an error-only stream costs nothing; a stream cut after content pays for what was delivered', async () => {
    const key = await newKey('5');
    const onlyError = await ask(key.apiKey, `${uniqueMarker()} [sim fault=error_stream]`, MODEL, true);
    expect(onlyError).toBeInstanceOf(Anthropic.APIError);
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });

    const stream = claude(key.apiKey).messages.stream({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: `${uniqueMarker()} [sim fault=error_after after=3 tokens=30]` }],
    });
    let text = '';
    stream.on('text', (t) => {
      text += t;
    });
    const err = await stream.finalMessage().catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(text.trim().split(' ')).toHaveLength(3);
    const requestId = (await stream.withResponse()).response.headers.get('request-id')!;
    const row = await waitForUsage(requestId);
    expect(BigInt(row.cost_nano!)).toBeGreaterThan(0n);
    expect(row.status).toBe('upstream_stream_error');
    await checkInvariants(key.accountId);
  });
});
