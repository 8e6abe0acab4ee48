// POST /v1/responses with the official openai SDK: passthrough models natively, chat-only
// models rewritten through chat completions; function tools on both; billing equal streamed
// and unstreamed; failures free.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, usageFromOpenAIResponses, type TokenPrices } from '../../src/billing/pricing.ts';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  newKey,
  openai,
  uniqueMarker,
  upstreamRequests,
  usageRow,
  waitForUsage,
} from '../support/context.ts';

const FIVE_USD = 5_000_000_000n;
const prices = (id: string) => MODELS.find((m) => m.id === id)!.prices as unknown as TokenPrices;
const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'Weather for a city',
  strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
type Xg = { x_gateway?: { request_id: string; cost_nano_usd: string } };

describe.each([
  ['passthrough', 'gpt-5.5', '/v1/responses'],
  ['chat-only', 'gpt-4o-mini', '/v1/chat/completions'],
])('/v1/responses on a %s model', (_kind, model, upstreamPath) => {
  it('unstreamed and streamed give the same output and the same charge', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const m = uniqueMarker();
    const input = `tell me ${m} [sim tokens=6]`;
    const plain = await client.responses.create({ model, instructions: 'be brief', input }).withResponse();
    expect(plain.data.output_text).toBe('w1 w2 w3 w4 w5 w6');
    expect(plain.data.model).toBe(model);
    expect(plain.data.status).toBe('completed');
    const sent = await upstreamRequests(m);
    expect(sent[0]!.path).toBe(upstreamPath);

    const cost = plain.response.headers.get('x-gateway-cost-nano-usd')!;
    expect(
      tokenCostNano(
        prices(model),
        usageFromOpenAIResponses(plain.data.usage as unknown as Record<string, unknown>),
      ).toString(),
    ).toBe(cost);
    expect((await usageRow(plain.response.headers.get('x-request-id')!))!.cost_nano).toBe(cost);

    const { data: stream, response } = await client.responses
      .create({ model, instructions: 'be brief', input, stream: true })
      .withResponse();
    const types: string[] = [];
    let text = '';
    let completed: (OpenAI.Responses.ResponseCompletedEvent & Xg) | undefined;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') completed = ev as typeof completed;
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(text).toBe('w1 w2 w3 w4 w5 w6');
    expect(completed!.response.output_text ?? text).toBe(text);
    expect(completed!.x_gateway!.cost_nano_usd).toBe(cost);
    expect(completed!.x_gateway!.request_id).toBe(response.headers.get('x-request-id'));
    expect((await waitForUsage(completed!.x_gateway!.request_id)).cost_nano).toBe(cost);
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 2n * BigInt(cost));
    await checkInvariants(key.accountId);
  });

  it.each([false, true])('a function tool round trip (stream: %s)', async (stream) => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const input: OpenAI.Responses.ResponseInputItem[] = [
      { role: 'user', content: `weather in Oslo? ${uniqueMarker()}` },
    ];
    const ask = async (
      items: OpenAI.Responses.ResponseInputItem[],
      choice: OpenAI.Responses.ResponseCreateParams['tool_choice'],
    ) => {
      if (!stream) return client.responses.create({ model, input: items, tools: [weather], tool_choice: choice });
      const s = client.responses.stream({ model, input: items, tools: [weather], tool_choice: choice });
      return s.finalResponse();
    };
    const first = await ask(input, { type: 'function', name: 'get_weather' });
    const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather' });
    expect(() => JSON.parse(call.arguments)).not.toThrow();

    const second = await ask(
      [...input, call, { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":3}' }],
      'auto',
    );
    expect(second.output_text.length).toBeGreaterThan(0);
    expect(second.output.some((o) => o.type === 'function_call')).toBe(false);
    await checkInvariants(key.accountId);
  });

  it.each([false, true])('an upstream 5xx costs nothing (stream: %s)', async (stream) => {
    const key = await newKey('5');
    const err = await (stream
      ? client(key.apiKey).responses.create({ model, input: `${uniqueMarker()} [sim fault=500]`, stream: true })
      : client(key.apiKey).responses.create({ model, input: `${uniqueMarker()} [sim fault=500]` })
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
    await checkInvariants(key.accountId);
  });
});

const client = (apiKey: string) => openai(apiKey);

describe('/v1/responses rules', () => {
  it('a built-in tool on a chat-only model is refused with unsupported_responses_tools, naming the passthrough models', async () => {
    const key = await newKey('1');
    const err = await openai(key.apiKey)
      .responses.create({ model: 'grok-4', input: 'search the web', tools: [{ type: 'web_search' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.code).toBe('unsupported_responses_tools');
    expect(err.message).toContain('gpt-5.6-sol');
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('a built-in tool on a passthrough model goes to the upstream untouched, its calls capped when the caller set no cap', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const r = await openai(key.apiKey).responses.create({
      model: 'gpt-5.6-sol',
      input: `search ${m}`,
      tools: [{ type: 'web_search' }],
      max_output_tokens: 1000,
    });
    expect(r.status).toBe('completed');
    const [sent] = await upstreamRequests(m);
    expect((sent!.body as { tools: unknown }).tools).toEqual([{ type: 'web_search' }]);
    expect((sent!.body as { max_tool_calls: unknown }).max_tool_calls).toBe(3);
  });

  it('custom tools: rewritten for a chat-only model and mapped back to custom_tool_call; untouched for a passthrough model', async () => {
    const key = await newKey('1');
    const custom = { type: 'custom' as const, name: 'run_sql', description: 'Runs SQL' };
    const r = await openai(key.apiKey).responses.create({
      model: 'gpt-4o-mini',
      input: 'count users',
      tools: [custom],
      tool_choice: { type: 'custom', name: 'run_sql' },
    });
    expect(r.output[0]).toMatchObject({ type: 'custom_tool_call', name: 'run_sql' });
    const m = uniqueMarker();
    await openai(key.apiKey).responses.create({ model: 'gpt-5.5', input: `count ${m}`, tools: [custom] });
    const [sent] = await upstreamRequests(m);
    expect((sent!.body as { tools: unknown }).tools).toEqual([custom]);
  });

  it('an error-only stream costs nothing', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .responses.create({ model: 'gpt-5.5', input: `${uniqueMarker()} [sim fault=error_stream]`, stream: true })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
  });
});
