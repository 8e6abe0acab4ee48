// Claude models on /v1/chat/completions: the OpenAI SDK reaches Claude through the
// chat <-> messages translation, billed from Anthropic usage, streamed and not.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, type TokenPrices } from '../../src/billing/pricing.ts';
import {
  balanceOf,
  checkInvariants,
  newKey,
  openai,
  uniqueMarker,
  upstreamRequests,
  usageRow,
} from '../support/context.ts';

const MODEL = 'claude-haiku-4-5';
const prices = MODELS.find((m) => m.id === MODEL)!.prices as unknown as TokenPrices;
const FIVE_USD = 5_000_000_000n;
type Xg = { x_gateway?: { request_id: string; cost_nano_usd: string } };

describe('Claude on /v1/chat/completions', () => {
  it('translates the request to the messages upstream and the reply back, billed from Anthropic usage', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: `hi ${m} [sim tokens=5 cached=100]` },
        ],
        max_tokens: 64,
      })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.model).toBe(MODEL);
    expect(data.choices[0]!.message.content).toBe('w1 w2 w3 w4 w5');
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.usage!.completion_tokens).toBe(5);
    expect(data.usage!.prompt_tokens_details!.cached_tokens).toBe(100);

    const [sent] = await upstreamRequests(m);
    expect(sent!.path).toBe('/v1/messages');
    expect(sent!.body).toMatchObject({ model: MODEL, system: 'be brief', max_tokens: 64 });

    // Anthropic usage: prompt_tokens = input + cache reads + writes; cached priced at the read rate.
    const usage = {
      inputTokens: BigInt(data.usage!.prompt_tokens),
      outputTokens: 5n,
      cachedTokens: 100n,
      cacheWriteTokens: 0n,
    };
    const cost = tokenCostNano(prices, usage);
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    expect((await usageRow(response.headers.get('x-request-id')!))!.cost_nano).toBe(cost.toString());
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - cost);
  });

  it('streams translated deltas with the same text and charge as unstreamed', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const content = `stream ${uniqueMarker()} [sim tokens=8]`;
    const plain = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content }] })
      .withResponse();
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let last: (OpenAI.ChatCompletionChunk & Xg) | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      last = c as typeof last;
    }
    expect(text).toBe(plain.data.choices[0]!.message.content);
    expect(last!.usage!.completion_tokens).toBe(8);
    expect(last!.x_gateway!.cost_nano_usd).toBe(plain.response.headers.get('x-gateway-cost-nano-usd'));
    await checkInvariants(key.accountId);
  });

  it('tool calls come back as OpenAI tool_calls, and a tool result goes back as tool_result', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: `weather? ${uniqueMarker()}` }];
    const first = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      stream: true,
    });
    let args = '';
    for await (const c of stream)
      for (const tc of c.choices[0]?.delta?.tool_calls ?? []) args += tc.function?.arguments ?? '';
    expect(JSON.parse(args)).toEqual(JSON.parse(call.function.arguments));

    const m2 = uniqueMarker();
    const second = await client.chat.completions.create({
      model: MODEL,
      tools,
      messages: [
        ...messages,
        first.choices[0]!.message,
        { role: 'tool', tool_call_id: call.id, content: '21C' },
        { role: 'user', content: `thanks ${m2}` },
      ],
    });
    expect(second.choices[0]!.finish_reason).toBe('stop');
    const [sent] = await upstreamRequests(m2);
    const msgs = (sent!.body as { messages: { role: string; content: { type: string }[] }[] }).messages;
    expect(msgs.at(-1)!.role).toBe('user');
    expect(msgs.at(-1)!.content.map((b) => b.type)).toEqual(['tool_result', 'text']);
  });

  it('an upstream 429 reaches the OpenAI SDK as RateLimitError in the OpenAI shape, free', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `${uniqueMarker()} [sim fault=429]` }],
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.error).toMatchObject({ type: 'rate_limit_error' });
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
  });
});
