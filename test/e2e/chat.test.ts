// POST /v1/chat/completions end to end: the official openai SDK against the gateway process,
// the gateway against the simulator, the charge checked against the database.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, usageFromOpenAI, affordableOutputTokens, type TokenPrices } from '../../src/billing/pricing.ts';
import { inputTokensUpperBound } from '../../src/inference/tokens.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import {
  balanceOf,
  checkInvariants,
  newKey,
  openai,
  uniqueMarker,
  upstreamRequests,
  usageRow,
  accountActivity,
} from '../support/context.ts';

const prices = (id: string) => MODELS.find((m) => m.id === id)!.prices as unknown as TokenPrices;
const FIVE_USD = 5_000_000_000n;

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

describe('chat completions', () => {
  it('unstreamed: forwards the body untouched with the provider key, bills the usage exactly and says so', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const params = {
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system' as const, content: 'be brief' },
        { role: 'user' as const, content: `hello ${m} [sim tokens=12 cached=3]` },
      ],
      temperature: 0.3,
      tools: [weatherTool],
      tool_choice: 'auto' as const,
      metadata: { team: 'infra' },
      seed: 7,
      user: 'user-1',
      logit_bias: { '1234': -5 },
      parallel_tool_calls: false,
    };
    const { data, response } = await openai(key.apiKey).chat.completions.create(params).withResponse();

    expect(data.model).toBe('gpt-4o-mini');
    expect(data.choices[0]!.message.content).toBe(Array.from({ length: 12 }, (_, i) => `w${i + 1}`).join(' '));
    expect(data.usage!.completion_tokens).toBe(12);
    expect(data.usage!.prompt_tokens_details!.cached_tokens).toBe(3);

    const sent = await upstreamRequests(m);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body).toEqual(params);
    expect(sent[0]!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(sent[0]!.headers)).not.toContain(key.apiKey);

    const cost = tokenCostNano(
      prices('gpt-4o-mini'),
      usageFromOpenAI(data.usage as unknown as Record<string, unknown>),
    );
    expect(cost).toBeGreaterThan(0n);
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    const requestId = response.headers.get('x-request-id')!;
    expect(requestId).toMatch(/^req_/);
    const row = await usageRow(requestId);
    expect(row).toMatchObject({
      cost_nano: cost.toString(),
      status: 'ok',
      model: 'gpt-4o-mini',
      route: '/v1/chat/completions',
      output_tokens: '12',
      cached_tokens: '3',
    });
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - cost);
    await checkInvariants(key.accountId);
  });

  it('streamed with include_usage: same text, same charge as unstreamed, charge in the final usage chunk', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const content = `stream me ${uniqueMarker()} [sim tokens=9]`;
    const plain = await client.chat.completions
      .create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content }] })
      .withResponse();

    const { data: stream, response } = await client.chat.completions
      .create({
        model: 'gpt-5.4-mini',
        messages: [{ role: 'user', content }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe(plain.data.choices[0]!.message.content);
    expect(chunks.every((c) => c.model === 'gpt-5.4-mini')).toBe(true);

    const last = chunks.at(-1)! as (typeof chunks)[number] & {
      x_gateway?: { cost_nano_usd: string; request_id: string };
    };
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBe(9);
    const plainCost = plain.response.headers.get('x-gateway-cost-nano-usd');
    expect(last.x_gateway!.cost_nano_usd).toBe(plainCost);
    expect(last.x_gateway!.request_id).toBe(response.headers.get('x-request-id'));
    expect((await usageRow(last.x_gateway!.request_id))!.cost_nano).toBe(plainCost);
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 2n * BigInt(plainCost!));
    await checkInvariants(key.accountId);
  });

  it('streamed without include_usage: upstream is asked for usage, caller gets no extra chunk, charge rides on the last chunk', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const stream = await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: `${m} [sim tokens=5]` }],
      stream: true,
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    expect(chunks.every((c) => c.usage === undefined)).toBe(true);
    const last = chunks.at(-1)! as (typeof chunks)[number] & {
      x_gateway?: { cost_nano_usd: string; request_id: string };
    };
    expect(last.choices[0]!.finish_reason).toBe('stop');
    const row = await usageRow(last.x_gateway!.request_id);
    expect(row!.cost_nano).toBe(last.x_gateway!.cost_nano_usd);
    expect(row!.usage_estimated).toBe('false');

    const sent = await upstreamRequests(m);
    expect((sent[0]!.body as { stream_options: unknown }).stream_options).toEqual({ include_usage: true });
  });

  it('tool calls round trip, unstreamed and streamed', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: `weather in Paris? ${uniqueMarker()}` },
    ];
    const toolChoice = { type: 'function' as const, function: { name: 'get_weather' } };

    const first = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      tools: [weatherTool],
      tool_choice: toolChoice,
    });
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('get_weather');
    expect(() => JSON.parse(call.function.arguments)).not.toThrow();

    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      tools: [weatherTool],
      tool_choice: toolChoice,
      stream: true,
    });
    let args = '';
    let name = '';
    for await (const c of stream) {
      for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
        name += tc.function?.name ?? '';
        args += tc.function?.arguments ?? '';
      }
    }
    expect(name).toBe('get_weather');
    expect(args).toBe(call.function.arguments);

    const second = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      tools: [weatherTool],
      messages: [
        ...messages,
        first.choices[0]!.message,
        { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21}' },
      ],
    });
    expect(second.choices[0]!.finish_reason).toBe('stop');
    expect(second.choices[0]!.message.content).toBeTruthy();
    await checkInvariants(key.accountId);
  });

  it('names the upstream model id upstream and the caller model id to the caller', async () => {
    // grok-4 is served by the simulator standing in for xAI; the ids match, so check both ends.
    const key = await newKey('5');
    const m = uniqueMarker();
    const r = await openai(key.apiKey).chat.completions.create({
      model: 'grok-4',
      messages: [{ role: 'user', content: m }],
      max_tokens: 50,
    });
    expect(r.model).toBe('grok-4');
    const sent = await upstreamRequests(m);
    expect(sent[0]!.body!.model).toBe('grok-4');
    expect(sent[0]!.body!.max_tokens).toBe(50);
  });

  it('lowers the output cap to what the balance affords instead of refusing', async () => {
    const budget = 10_000_000n; // $0.01: far below gpt-5.6-sol's 128k-token worst case
    const key = await newKey(budget);
    const m = uniqueMarker();
    const body = {
      model: 'gpt-5.6-sol',
      messages: [{ role: 'user' as const, content: `long answer please ${m} [sim tokens=40]` }],
    };
    const r = await openai(key.apiKey).chat.completions.create(body);
    expect(r.choices[0]!.finish_reason).toBe('stop');

    const sent = await upstreamRequests(m);
    const expectedCap = affordableOutputTokens(prices('gpt-5.6-sol'), BigInt(inputTokensUpperBound(body)), budget);
    expect(BigInt(sent[0]!.body!.max_completion_tokens as number)).toBe(expectedCap);
    expect(expectedCap).toBeLessThan(128_000n);
    const { balance, held } = await balanceOf(key.accountId);
    expect(held).toBe(0n);
    expect(balance).toBeGreaterThanOrEqual(0n);
    expect(balance).toBeLessThan(budget);
    await checkInvariants(key.accountId);
  });

  it('answers 402 as the SDK typed APIError when the balance cannot cover the least cost, and holds nothing', async () => {
    const key = await newKey(0n);
    const err = await openai(key.apiKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('lists the available models in the OpenAI list shape', async () => {
    const key = await newKey('1');
    const list = await openai(key.apiKey).models.list();
    const ids = list.data.map((m) => m.id);
    expect(ids).toContain('gpt-5.6-sol');
    expect(ids).toContain('grok-4');
    expect(ids).toContain('claude-opus-4-8');
    // Every provider has credentials in this run, so every enabled catalogue model is listed
    // (models of a provider without credentials are left out: see the catalogue unit test).
    expect(ids).toEqual(
      expect.arrayContaining(['Cohere-embed-v3-multilingual', 'FLUX.2-pro', 'whisper', 'gpt-4o-mini-tts']),
    );
    expect(list.data[0]).toMatchObject({ object: 'model' });
  });
});
