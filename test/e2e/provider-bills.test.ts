// A request is charged what the provider bills for it, never more than its hold, and the hold
// covers the worst case the provider can bill (docs/billing.md). Against a stand-in that bills
// as the real providers do: server-side state far larger than the body, reasoning tokens only in
// the final usage, background responses, per-call tool fees, service tiers, 1-hour cache writes,
// long-context prices. Expected figures are worked out here from the provider's reported usage
// and the catalogue's published prices, with the exact money arithmetic.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { costNano } from '../../src/money/money.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { countTextTokens } from '../../src/inference/tokens.ts';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  simulatorUrl,
  uniqueMarker,
  upstreamRequests,
  usageRow,
  waitForUsage,
} from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { png } from '../support/media-files.ts';

const FIVE_USD = 5_000_000_000n;
const price = (model: string, key: string): string => {
  const p = MODELS.find((m) => m.id === model)!.prices[key];
  if (p === undefined) throw new Error(`${model} has no price ${key}`);
  return p;
};
/** Exact cost of [tokens, USD per 1M tokens] pairs and [calls, USD per call] pairs, rounded up once. */
const usd = (perMillion: [number | bigint, string][], perCall: [number | bigint, string][] = []) =>
  costNano([
    ...perMillion.map(([q, p]) => ({ quantity: BigInt(q), priceUsd: p, perUnits: 1_000_000n })),
    ...perCall.map(([q, p]) => ({ quantity: BigInt(q), priceUsd: p, perUnits: 1n })),
  ]);
const claude = (apiKey: string, baseURL = gatewayUrl()) => new Anthropic({ apiKey, baseURL, maxRetries: 0 });
/**
 * Conversations, prompts and files by id live in the operator's provider account, which the
 * gateway shares with its keys only when told to (docs/security.md): these run on a gateway
 * that shares them.
 */
const sharing = gatewayForFile('sharing-objects', { SHARED_PROVIDER_OBJECTS: 'conversation,prompt,file' });

/** Tells the stand-in how many tokens a stored response, conversation, prompt, file or URL holds. */
async function seed(ref: string, tokens: number): Promise<string> {
  const r = await fetch(`${simulatorUrl()}/__sim/refs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ref, tokens }),
  });
  expect(r.status).toBe(204);
  return ref;
}

/** A seeded stored response made the account's, as the gateway records one it relayed (src/tenancy/response-owners.ts). */
async function storedResponseOf(accountId: string, tokens: number): Promise<string> {
  const id = await seed(`resp_${uniqueMarker('stored')}`, tokens);
  await db().query('INSERT INTO response_owners (object_id, account_id) VALUES ($1, $2)', [id, accountId]);
  return id;
}

type ResponsesUsage = { input_tokens: number; input_tokens_details: { cached_tokens: number }; output_tokens: number };
const responsesCost = (model: string, u: ResponsesUsage, calls = 0) =>
  usd(
    [
      [u.input_tokens - u.input_tokens_details.cached_tokens, price(model, 'input_per_mtok')],
      [u.input_tokens_details.cached_tokens, price(model, 'cached_input_per_mtok')],
      [u.output_tokens, price(model, 'output_per_mtok')],
    ],
    calls > 0 ? [[calls, price(model, 'web_search_per_call')]] : [],
  );

async function expectCharged(accountId: string, requestId: string, cost: bigint, credits = FIVE_USD) {
  const row = await waitForUsage(requestId);
  expect(row.cost_nano).toBe(cost.toString());
  expect(await balanceOf(accountId)).toEqual({ balance: credits - cost, held: 0n });
  await checkInvariants(accountId);
  return row;
}

describe('state the provider keeps is billed as it reports it (issue 12, item 4)', () => {
  it('previous_response_id with 300k tokens of stored conversation: charged the $0.375+ the provider bills', async () => {
    const key = await newKey('5');
    const stored = await storedResponseOf(key.accountId, 300_000);
    const { data, response } = await openai(key.apiKey)
      .responses.create({
        model: 'gpt-5.5',
        previous_response_id: stored,
        input: `and then? ${uniqueMarker()} [sim tokens=10]`,
        max_output_tokens: 16,
      })
      .withResponse();
    expect(data.usage!.input_tokens).toBeGreaterThan(300_000);
    const cost = responsesCost('gpt-5.5', data.usage!);
    expect(cost).toBeGreaterThanOrEqual(375_000_000n);
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    const row = await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
    expect(row.usage_estimated).toBe('false');
  });

  it.each([
    ['conversation', (ref: string) => ({ conversation: ref, input: 'more [sim tokens=5]' })],
    [
      'a stored prompt',
      (ref: string) => ({ prompt: { id: ref, variables: { city: 'Oslo' } }, input: 'go [sim tokens=5]' }),
    ],
    [
      'input_file by file_id',
      (ref: string) => ({
        input: [
          {
            role: 'user' as const,
            content: [
              { type: 'input_file' as const, file_id: ref },
              { type: 'input_text' as const, text: 'summarise [sim tokens=5]' },
            ],
          },
        ],
      }),
    ],
    [
      'input_file by URL',
      (ref: string) => ({
        input: [
          {
            role: 'user' as const,
            content: [
              { type: 'input_file' as const, file_url: ref },
              { type: 'input_text' as const, text: 'summarise [sim tokens=5]' },
            ],
          },
        ],
      }),
    ],
    [
      'input_image by URL',
      (ref: string) => ({
        input: [
          {
            role: 'user' as const,
            content: [
              { type: 'input_image' as const, image_url: ref, detail: 'high' as const },
              { type: 'input_text' as const, text: 'describe [sim tokens=5]' },
            ],
          },
        ],
      }),
    ],
    [
      'input_image by file_id',
      (ref: string) => ({
        input: [
          {
            role: 'user' as const,
            content: [
              { type: 'input_image' as const, file_id: ref, detail: 'auto' as const },
              { type: 'input_text' as const, text: 'describe [sim tokens=5]' },
            ],
          },
        ],
      }),
    ],
  ])('/v1/responses with %s: the referenced tokens are charged', async (label, body) => {
    const key = await newKey('5');
    const ref = await seed(
      label.includes('URL')
        ? `https://files.example/${uniqueMarker()}.pdf`
        : `${label.startsWith('conv') ? 'conv' : label.includes('prompt') ? 'pmpt' : 'file'}_${uniqueMarker()}`,
      120_000,
    );
    const { data, response } = await openai(key.apiKey, { baseURL: `${(await sharing()).httpUrl}/v1` })
      .responses.create({
        model: 'gpt-5.5',
        max_output_tokens: 16,
        ...body(ref),
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      .withResponse();
    expect(data.usage!.input_tokens).toBeGreaterThan(120_000);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, responsesCost('gpt-5.5', data.usage!));
  });

  it.each([
    ['a URL document', (ref: string) => ({ type: 'document' as const, source: { type: 'url' as const, url: ref } })],
    ['a URL image', (ref: string) => ({ type: 'image' as const, source: { type: 'url' as const, url: ref } })],
    [
      'a file document',
      (ref: string) => ({ type: 'document' as const, source: { type: 'file' as const, file_id: ref } }),
    ],
  ])('/v1/messages with %s: 150k tokens read by the provider are charged ($0.45)', async (label, block) => {
    // Sonnet reads up to 1M tokens, past 200k at $6 per 1M: the worst case is over $6.
    const key = await newKey('10');
    const ref = await seed(
      label.includes('URL') ? `https://docs.example/${uniqueMarker()}` : `file_${uniqueMarker()}`,
      150_000,
    );
    const { data, response } = await claude(key.apiKey, (await sharing()).httpUrl)
      .messages.create({
        model: 'claude-sonnet-4-6',
        max_tokens: 16,
        messages: [
          {
            role: 'user',
            content: [
              block(ref) as Anthropic.ContentBlockParam,
              { type: 'text', text: `what is this? ${uniqueMarker()} [sim tokens=5]` },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage.input_tokens).toBeGreaterThan(150_000);
    const cost = usd([
      [data.usage.input_tokens, price('claude-sonnet-4-6', 'input_per_mtok')],
      [data.usage.output_tokens, price('claude-sonnet-4-6', 'output_per_mtok')],
    ]);
    expect(cost).toBeGreaterThanOrEqual(450_000_000n);
    await expectCharged(key.accountId, response.headers.get('request-id')!, cost, 10_000_000_000n);
  });

  it('an image URL sent to Claude through chat completions is charged as Claude reads it', async () => {
    const key = await newKey('10');
    const url = await seed(`https://img.example/${uniqueMarker()}.png`, 150_000);
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'claude-sonnet-4-6',
        max_tokens: 16,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url } },
              { type: 'text', text: 'what is it? [sim tokens=5]' },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage!.prompt_tokens).toBeGreaterThan(150_000);
    const cost = usd([
      [data.usage!.prompt_tokens, price('claude-sonnet-4-6', 'input_per_mtok')],
      [data.usage!.completion_tokens, price('claude-sonnet-4-6', 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost, 10_000_000_000n);
  });

  it('a balance that covers the unseen input but not the output cap: the cap is lowered to what fits, the usage charged', async () => {
    const key = await newKey('0.6');
    const m = uniqueMarker();
    const stored = await storedResponseOf(key.accountId, 300_000);
    const { data, response } = await openai(key.apiKey)
      .responses.create({ model: 'gpt-5.5', previous_response_id: stored, input: `go ${m} [sim tokens=10]` })
      .withResponse();
    // $0.60 less 400,000 window tokens at $1.25 per 1M leaves $0.10: 10,000 output tokens at $10 per 1M.
    const [sent] = await upstreamRequests(m);
    expect(sent!.body!.max_output_tokens).toBe(10_000);
    expect(
      usd([
        [400_000, '1.25'],
        [10_000, '10.00'],
      ]),
    ).toBe(600_000_000n);
    await expectCharged(
      key.accountId,
      response.headers.get('x-request-id')!,
      responsesCost('gpt-5.5', data.usage!),
      600_000_000n,
    );
  });

  it('a small balance and a previous_response_id: 402 that says why, nothing held or charged', async () => {
    const key = await newKey('0.02');
    const stored = await storedResponseOf(key.accountId, 300_000);
    const err = await openai(key.apiKey)
      .responses.create({
        model: 'gpt-5.5',
        previous_response_id: stored,
        input: 'hi [sim tokens=3]',
        max_output_tokens: 16,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((err as Error).message).toContain('previous_response_id');
    expect((err as Error).message).toContain('context window');
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });
});

describe('server tools: per-call fees counted from what the provider reports, calls bounded (item 4)', () => {
  it('Responses web_search: each web_search_call is charged its fee; max_tool_calls is set when the caller gives none, and binds', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const { data, response } = await openai(key.apiKey)
      .responses.create({
        model: 'gpt-5.5',
        tools: [{ type: 'web_search' }],
        input: `news ${m} [sim searches=5 tokens=10]`,
        max_output_tokens: 64,
      })
      .withResponse();
    const calls = data.output.filter((o) => o.type === 'web_search_call').length;
    expect(calls).toBe(3);
    const [sent] = await upstreamRequests(m);
    expect(sent!.body!.max_tool_calls).toBe(3);
    await expectCharged(
      key.accountId,
      response.headers.get('x-request-id')!,
      responsesCost('gpt-5.5', data.usage!, calls),
    );
  });

  it('Responses web_search streamed: the same calls, the same charge', async () => {
    const key = await newKey('5');
    const body = {
      model: 'gpt-5.5',
      tools: [{ type: 'web_search' as const }],
      input: `news ${uniqueMarker()} [sim searches=2 tokens=10]`,
      max_output_tokens: 64,
      max_tool_calls: 2,
    };
    const plain = await openai(key.apiKey).responses.create(body).withResponse();
    const cost = responsesCost('gpt-5.5', plain.data.usage!, 2);
    expect(plain.response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    const final = await openai(key.apiKey).responses.stream(body).finalResponse();
    expect(final.output.filter((o) => o.type === 'web_search_call')).toHaveLength(2);
    expect(responsesCost('gpt-5.5', final.usage!, 2)).toBe(cost);
    const rows = await usageOf(key.accountId);
    expect(rows).toEqual([cost.toString(), cost.toString()]);
  });

  it('Anthropic web search: usage.server_tool_use.web_search_requests are charged; max_uses is set when the tool has none, and binds', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const { data, response } = await claude(key.apiKey)
      .messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 64,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
        messages: [{ role: 'user', content: `news ${m} [sim searches=5 tokens=10]` }],
      })
      .withResponse();
    expect(data.usage.server_tool_use!.web_search_requests).toBe(3);
    const [sent] = await upstreamRequests(m);
    expect((sent!.body!.tools as { max_uses?: number }[])[0]!.max_uses).toBe(3);
    const cost = usd(
      [
        [data.usage.input_tokens, price('claude-haiku-4-5', 'input_per_mtok')],
        [data.usage.output_tokens, price('claude-haiku-4-5', 'output_per_mtok')],
      ],
      [[3, price('claude-haiku-4-5', 'web_search_per_call')]],
    );
    await expectCharged(key.accountId, response.headers.get('request-id')!, cost);
  });

  it.each([
    ['code_interpreter', { type: 'code_interpreter', container: { type: 'auto' } }],
    ['image_generation', { type: 'image_generation' }],
    ['mcp', { type: 'mcp', server_label: 'x', server_url: 'https://mcp.example/sse' }],
    ['file_search', { type: 'file_search', vector_store_ids: ['vs_1'] }],
  ])('Responses tool %s, which the gateway cannot bill, is refused with 400 naming tools', async (type, tool) => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const err = await openai(key.apiKey)
      .responses.create({ model: 'gpt-5.5', tools: [tool as OpenAI.Responses.Tool], input: m })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe('tools');
    expect((err as Error).message).toContain(type);
    expect(await upstreamRequests(m)).toEqual([]);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('Anthropic code execution, which the gateway cannot bill, is refused with 400 in the Anthropic shape', async () => {
    const key = await newKey('5');
    const err = await claude(key.apiKey)
      .messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 64,
        tools: [{ type: 'code_execution_20250825', name: 'code_execution' }],
        messages: [{ role: 'user', content: 'run it' }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toContain('code_execution_20250825');
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });
});

describe('background responses (item 5)', () => {
  it.each([false, true])(
    'background: true is refused with 400 naming background (stream: %s), nothing held',
    async (stream) => {
      const key = await newKey('5');
      const m = uniqueMarker();
      const err = await (stream
        ? openai(key.apiKey).responses.create({
            model: 'gpt-5.5',
            background: true,
            input: `long task ${m}`,
            stream: true,
          })
        : openai(key.apiKey).responses.create({ model: 'gpt-5.5', background: true, input: `long task ${m}` })
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe('background');
      expect(await upstreamRequests(m)).toEqual([]);
      expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
    },
  );
});

const usageOf = async (accountId: string) => {
  const { db } = await import('../support/context.ts');
  return (
    await db().query('SELECT cost_nano::text AS c FROM usage_records WHERE account_id = $1 ORDER BY created_at', [
      accountId,
    ])
  ).rows.map((r) => r.c as string);
};

/** Reads a stream until `enough` says the visible answer is in, then hangs up. */
async function readThenLeave<T>(
  stream: AsyncIterable<T>,
  abort: AbortController,
  enough: (seen: T[]) => boolean,
): Promise<T[]> {
  const seen: T[] = [];
  try {
    for await (const ev of stream) {
      seen.push(ev);
      if (enough(seen)) {
        abort.abort();
        break;
      }
    }
  } catch {
    /* the abort */
  }
  return seen;
}

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(' ');

describe('a caller that leaves a stream pays what the provider bills (item 6)', () => {
  // The stand-in sends 5 visible words, then holds the usage (with 10,000 reasoning tokens) back
  // 1.5 s: long enough for the caller's leaving to reach the gateway first on a loaded machine.
  const directive = '[sim tokens=5 reasoning=10000 usage_delay=1500]';

  it('chat: $0.20 unstreamed; streamed and left right after the visible answer, still $0.20', async () => {
    const key = await newKey('5');
    const body = {
      model: 'gpt-5.6-sol',
      messages: [{ role: 'user' as const, content: `think ${uniqueMarker()} ${directive}` }],
    };
    const plain = await openai(key.apiKey).chat.completions.create(body).withResponse();
    expect(plain.data.usage!.completion_tokens_details!.reasoning_tokens).toBe(10_000);
    const cost = BigInt(plain.response.headers.get('x-gateway-cost-nano-usd')!);
    expect(cost).toBe(
      usd([
        [plain.data.usage!.prompt_tokens, price('gpt-5.6-sol', 'input_per_mtok')],
        [10_005, price('gpt-5.6-sol', 'output_per_mtok')],
      ]),
    );
    expect(cost).toBeGreaterThan(200_000_000n);

    const abort = new AbortController();
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({ ...body, stream: true }, { signal: abort.signal })
      .withResponse();
    let text = '';
    await readThenLeave(
      data,
      abort,
      (seen) => (text = seen.map((c) => c.choices[0]?.delta?.content ?? '').join('')) === words(5),
    );
    expect(text).toBe(words(5));
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({
      status: 'client_closed',
      usage_estimated: 'false',
      output_tokens: '10005',
      cost_nano: cost.toString(),
    });
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD - 2n * cost, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('Claude through chat: left after the visible answer, charged the thinking tokens the usage reports', async () => {
    const key = await newKey('5');
    const body = {
      model: 'claude-haiku-4-5',
      max_tokens: 20_000,
      messages: [{ role: 'user' as const, content: `think ${uniqueMarker()} ${directive}` }],
    };
    const plain = await openai(key.apiKey).chat.completions.create(body).withResponse();
    const cost = BigInt(plain.response.headers.get('x-gateway-cost-nano-usd')!);
    expect(plain.data.usage!.completion_tokens).toBe(10_005);
    const abort = new AbortController();
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({ ...body, stream: true }, { signal: abort.signal })
      .withResponse();
    await readThenLeave(
      data,
      abort,
      (seen) => seen.map((c) => c.choices[0]?.delta?.content ?? '').join('') === words(5),
    );
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({
      status: 'client_closed',
      usage_estimated: 'false',
      output_tokens: '10005',
      cost_nano: cost.toString(),
    });
  });

  it('/v1/messages: left after content_block_stop, charged what message_delta reports', async () => {
    const key = await newKey('5');
    const body = {
      model: 'claude-haiku-4-5',
      max_tokens: 20_000,
      messages: [{ role: 'user' as const, content: `think ${uniqueMarker()} ${directive}` }],
    };
    const plain = await claude(key.apiKey).messages.create(body).withResponse();
    const cost = BigInt(plain.response.headers.get('x-gateway-cost-nano-usd')!);
    expect(plain.data.usage.output_tokens).toBe(10_005);
    const abort = new AbortController();
    const { data, response } = await claude(key.apiKey)
      .messages.create({ ...body, stream: true }, { signal: abort.signal })
      .withResponse();
    await readThenLeave(data, abort, (seen) => seen.some((e) => e.type === 'content_block_stop'));
    const row = await waitForUsage(response.headers.get('request-id')!);
    expect(row).toMatchObject({
      status: 'client_closed',
      usage_estimated: 'false',
      output_tokens: '10005',
      cost_nano: cost.toString(),
    });
  });

  it('/v1/responses: left after output_text.done, charged what response.completed reports', async () => {
    const key = await newKey('5');
    const body = { model: 'gpt-5.6-sol', input: `think ${uniqueMarker()} ${directive}` };
    const plain = await openai(key.apiKey).responses.create(body).withResponse();
    const cost = BigInt(plain.response.headers.get('x-gateway-cost-nano-usd')!);
    expect(plain.data.usage!.output_tokens_details.reasoning_tokens).toBe(10_000);
    const abort = new AbortController();
    const { data, response } = await openai(key.apiKey)
      .responses.create({ ...body, stream: true }, { signal: abort.signal })
      .withResponse();
    await readThenLeave(data, abort, (seen) => seen.some((e) => e.type === 'response.output_text.done'));
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({
      status: 'client_closed',
      usage_estimated: 'false',
      output_tokens: '10005',
      cost_nano: cost.toString(),
    });
  });

  it('when the provider never reports usage after the caller left, the delivered text is charged, marked estimated', async () => {
    const key = await newKey('5');
    const abort = new AbortController();
    const content = `stall ${uniqueMarker()} [sim tokens=6 fault=stall]`;
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create(
        { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content }] },
        { signal: abort.signal },
      )
      .withResponse();
    await readThenLeave(
      data,
      abort,
      (seen) => seen.map((c) => c.choices[0]?.delta?.content ?? '').join('') === words(6),
    );
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({
      status: 'client_closed',
      usage_estimated: 'true',
      output_tokens: String(countTextTokens(words(6))),
    });
    expect((await balanceOf(key.accountId)).held).toBe(0n);
    await checkInvariants(key.accountId);
  });
});

describe('price modifiers are priced, refused or stripped (item 8)', () => {
  it.each(['priority', 'flex'] as const)(
    'chat service_tier %s: billed at that tier, streamed and not alike',
    async (tier) => {
      const key = await newKey('5');
      const body = {
        model: 'gpt-5.5',
        service_tier: tier,
        messages: [{ role: 'user' as const, content: `tiered ${uniqueMarker()} [sim tokens=40]` }],
      };
      const { data, response } = await openai(key.apiKey).chat.completions.create(body).withResponse();
      expect(data.service_tier).toBe(tier);
      const cost = usd([
        [data.usage!.prompt_tokens, price('gpt-5.5', `${tier}_input_per_mtok`)],
        [data.usage!.completion_tokens, price('gpt-5.5', `${tier}_output_per_mtok`)],
      ]);
      expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
      let last: { x_gateway?: { cost_nano_usd: string } } = {};
      for await (const c of await openai(key.apiKey).chat.completions.create({
        ...body,
        stream: true,
        stream_options: { include_usage: true },
      }))
        last = c as typeof last;
      expect(last.x_gateway!.cost_nano_usd).toBe(cost.toString());
      expect(await usageOf(key.accountId)).toEqual([cost.toString(), cost.toString()]);
    },
  );

  it('Responses service_tier priority (asked as "fast"): billed at the priority tier the provider reports', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .responses.create({
        model: 'gpt-5.5',
        service_tier: 'fast' as 'priority',
        input: `fast ${uniqueMarker()} [sim tokens=20]`,
      })
      .withResponse();
    expect(data.service_tier).toBe('priority');
    const cost = usd([
      [data.usage!.input_tokens, price('gpt-5.5', 'priority_input_per_mtok')],
      [data.usage!.output_tokens, price('gpt-5.5', 'priority_output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
  });

  it.each([
    ['service_tier scale on gpt-5.5', 'service_tier', { model: 'gpt-5.5', service_tier: 'scale' }],
    [
      'service_tier priority on a model without tier prices',
      'service_tier',
      { model: 'grok-4', service_tier: 'priority' },
    ],
    ['service_tier on DeepSeek', 'service_tier', { model: 'deepseek-chat', service_tier: 'flex' }],
    ['web_search_options', 'web_search_options', { model: 'gpt-4o', web_search_options: {} }],
    ['xAI live search', 'search_parameters', { model: 'grok-4', search_parameters: { mode: 'on' } }],
    [
      'audio output',
      'modalities',
      { model: 'gpt-4o', modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } },
    ],
  ])('chat: %s is refused with 400 naming %s, nothing held', async (_label, param, extra) => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const err = await openai(key.apiKey)
      .chat.completions.create({
        messages: [{ role: 'user', content: m }],
        ...extra,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).param).toBe(param);
    expect(await upstreamRequests(m)).toEqual([]);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it.each([
    ['speed fast', 'speed', { speed: 'fast' }],
    ['US-only inference', 'inference_geo', { inference_geo: 'us' }],
  ])('/v1/messages: %s (priced above list) is refused with 400 naming %s', async (_label, param, extra) => {
    const key = await newKey('5');
    const err = await claude(key.apiKey)
      .messages.create({
        model: 'claude-opus-4-8',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
        ...extra,
      } as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toContain(param);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('1-hour cache writes are charged at the 1-hour price, 5-minute ones at theirs', async () => {
    const key = await newKey('5');
    const m = 'claude-sonnet-4-6';
    const body = {
      model: m,
      max_tokens: 16,
      // A system prompt long enough to hold the 2,300 tokens written to the cache.
      system: [
        {
          type: 'text' as const,
          text: 'Long standing instructions. '.repeat(400),
          cache_control: { type: 'ephemeral' as const, ttl: '1h' as const },
        },
      ],
      messages: [
        {
          role: 'user' as const,
          content: `cached ${uniqueMarker()} [sim tokens=4 cache_write=300 cache_write_1h=2000]`,
        },
      ],
    };
    const { data, response } = await claude(key.apiKey).messages.create(body).withResponse();
    expect(data.usage.cache_creation).toEqual({ ephemeral_5m_input_tokens: 300, ephemeral_1h_input_tokens: 2000 });
    const cost = usd([
      [data.usage.input_tokens, price(m, 'input_per_mtok')],
      [300, price(m, 'cache_write_per_mtok')],
      [2000, price(m, 'cache_write_1h_per_mtok')],
      [data.usage.output_tokens, price(m, 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('request-id')!, cost);
  });

  it('Claude above 200k input tokens: the whole request at the long-context prices', async () => {
    const key = await newKey('10');
    const m = 'claude-sonnet-4-6';
    const url = await seed(`https://docs.example/${uniqueMarker()}.pdf`, 300_000);
    const { data, response } = await claude(key.apiKey)
      .messages.create({
        model: m,
        max_tokens: 100,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', source: { type: 'url', url } },
              { type: 'text', text: 'summary [sim tokens=50]' },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage.input_tokens).toBeGreaterThan(200_000);
    const cost = usd([
      [data.usage.input_tokens, price(m, 'long_input_per_mtok')],
      [data.usage.output_tokens, price(m, 'long_output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('request-id')!, cost, 10_000_000_000n);
  });

  it('DeepSeek: max_completion_tokens goes upstream as the max_tokens it honours, and the hold and charge follow it', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'deepseek-chat',
        max_completion_tokens: 20,
        messages: [{ role: 'user', content: `go ${m} [sim tokens=400]` }],
      })
      .withResponse();
    const [sent] = await upstreamRequests(m);
    expect(sent!.body!.max_tokens).toBe(20);
    expect(sent!.body!.max_completion_tokens).toBeUndefined();
    expect(data.usage!.completion_tokens).toBe(20);
    const cost = usd([
      [data.usage!.prompt_tokens, price('deepseek-chat', 'input_per_mtok')],
      [20, price('deepseek-chat', 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
  });

  it('DeepSeek cache hits (prompt_cache_hit_tokens) are charged at the cache-hit price', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'deepseek-chat',
        messages: [{ role: 'user', content: `${'context '.repeat(400)} ${uniqueMarker()} [sim tokens=5 cached=300]` }],
      })
      .withResponse();
    const u = data.usage as unknown as {
      prompt_tokens: number;
      prompt_cache_hit_tokens: number;
      completion_tokens: number;
    };
    expect(u.prompt_cache_hit_tokens).toBe(300);
    const cost = usd([
      [u.prompt_tokens - 300, price('deepseek-chat', 'input_per_mtok')],
      [300, price('deepseek-chat', 'cached_input_per_mtok')],
      [u.completion_tokens, price('deepseek-chat', 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
  });

  it('xAI reasoning tokens, reported outside completion_tokens, are charged as output', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'grok-4',
        messages: [{ role: 'user', content: `think ${uniqueMarker()} [sim tokens=5 reasoning=3000]` }],
      })
      .withResponse();
    expect(data.usage!.completion_tokens).toBe(5);
    expect(data.usage!.completion_tokens_details!.reasoning_tokens).toBe(3000);
    const cost = usd([
      [data.usage!.prompt_tokens, price('grok-4', 'input_per_mtok')],
      [3005, price('grok-4', 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
  });
});

describe('Responses rebuilt from chat completions', () => {
  it('carry usage.input_tokens_details.cache_write_tokens, unstreamed and streamed', async () => {
    const key = await newKey('5');
    const body = { model: 'gpt-4o-mini', input: `hi ${uniqueMarker()} [sim tokens=3 cached=2]` };
    const plain = await openai(key.apiKey).responses.create(body);
    expect(plain.usage!.input_tokens_details).toEqual({ cached_tokens: 2, cache_write_tokens: 0 });
    const streamed = await openai(key.apiKey).responses.stream(body).finalResponse();
    expect(streamed.usage!.input_tokens_details).toEqual({ cached_tokens: 2, cache_write_tokens: 0 });
  });
});

describe("upstream error bodies in the route's own shape", () => {
  it("an odd-shaped 422 on chat reaches the OpenAI SDK as {error:{message,type,param,code}} with the provider's words", async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x [sim fault=odd_error]' }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    const e = err as InstanceType<typeof OpenAI.APIError>;
    expect(Object.keys(e.error as object).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(e.message).toContain('Input should be a valid list of content parts');
    expect(e.headers?.get('x-gateway-cost-nano-usd')).toBe('0');
  });

  it('a {"error":"text"} body on /v1/responses keeps its message in the OpenAI shape', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .responses.create({ model: 'gpt-5.5', input: 'x [sim fault=odd_error]' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const e = err as InstanceType<typeof OpenAI.APIError>;
    expect(e.error).toMatchObject({ message: 'input: unsupported item', type: 'invalid_request_error' });
  });

  it('an OpenAI-shaped error on /v1/messages reaches the Anthropic SDK in the Anthropic shape', async () => {
    const key = await newKey('5');
    const err = await claude(key.apiKey)
      .messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'x [sim fault=odd_error]' }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const e = err as InstanceType<typeof Anthropic.APIError>;
    expect(e.error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'messages.0.content: document source not allowed' },
    });
  });

  it('a plain-text 503 on chat becomes the OpenAI shape', async () => {
    const key = await newKey('5');
    const res = await fetch(`${gatewayUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x [sim fault=text_error]' }] }),
    });
    expect(res.status).toBe(503);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(await usageRow(res.headers.get('x-request-id')!)).toMatchObject({ cost_nano: '0' });
  });
});

describe('images are charged what the provider bills for them (issue 24)', () => {
  // Each image is held at what its model bills for it (its own size, read from the bytes), no
  // longer at 2,000 tokens whatever the model: the stand-in bills as the providers' vision guides do.
  it('ten 1536x768 PNGs on gpt-4o-mini with max_tokens 16: charged the $0.055 of 368,350 image tokens the provider bills', async () => {
    const key = await newKey('5');
    const url = `data:image/png;base64,${png(1536, 768).toString('base64')}`;
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: 16,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: `which differ? ${uniqueMarker()} [sim tokens=5]` },
              ...Array.from({ length: 10 }, () => ({ type: 'image_url' as const, image_url: { url } })),
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage!.prompt_tokens).toBeGreaterThan(368_350); // 10 x (2,833 + 6 tiles x 5,667), and the text
    const cost = usd([
      [data.usage!.prompt_tokens, price('gpt-4o-mini', 'input_per_mtok')],
      [data.usage!.completion_tokens, price('gpt-4o-mini', 'output_per_mtok')],
    ]);
    expect(cost).toBeGreaterThan(55_000_000n);
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe(cost.toString());
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, cost);
  });

  it('a 2000x2000 base64 image to claude-opus-4-8 on /v1/messages: charged the 4,761 image tokens Claude bills', async () => {
    const key = await newKey('5');
    const { data, response } = await claude(key.apiKey)
      .messages.create({
        model: 'claude-opus-4-8',
        max_tokens: 16,
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'image',
                source: { type: 'base64', media_type: 'image/png', data: png(2000, 2000).toString('base64') },
              },
              { type: 'text', text: `what is it? ${uniqueMarker()} [sim tokens=5]` },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage.input_tokens).toBeGreaterThan(4_761); // 69 x 69 patches of the image resized to fit 4,784
    const cost = usd([
      [data.usage.input_tokens, price('claude-opus-4-8', 'input_per_mtok')],
      [data.usage.output_tokens, price('claude-opus-4-8', 'output_per_mtok')],
    ]);
    await expectCharged(key.accountId, response.headers.get('request-id')!, cost);
  });

  it('a 2400x1600 input_image data URL on gpt-5.5 /v1/responses: charged the image tokens OpenAI bills', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .responses.create({
        model: 'gpt-5.5',
        max_output_tokens: 16,
        input: [
          {
            role: 'user',
            content: [
              {
                type: 'input_image',
                image_url: `data:image/png;base64,${png(2400, 1600).toString('base64')}`,
                detail: 'auto',
              },
              { type: 'input_text', text: `describe ${uniqueMarker()} [sim tokens=5]` },
            ],
          },
        ],
      })
      .withResponse();
    expect(data.usage!.input_tokens).toBeGreaterThan(2_880); // 2,400 patches at 1.2 tokens each
    await expectCharged(key.accountId, response.headers.get('x-request-id')!, responsesCost('gpt-5.5', data.usage!));
  });
});
