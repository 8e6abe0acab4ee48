// The hold counts every part of a request the provider bills as input (issue 31, items 1 and 2):
// fields beside the messages (legacy functions, a response schema, a message's other fields,
// Responses' text format) on the tokenizer path a tight balance takes, and the tokens Anthropic
// adds for tools on every balance. Against a stand-in that bills the prompt as each provider
// renders it (test/upstream/provider-tokens.ts): a request is refused with 402 when the balance
// cannot pay what the provider would bill, and otherwise charged all of it (nothing uncovered).
import { describe, expect, it } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import { costNano } from '../../src/money/money.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  uniqueMarker,
  waitForUsage,
} from '../support/context.ts';

const price = (model: string, key: string) => MODELS.find((m) => m.id === model)!.prices[key]!;
const usd = (model: string, input: number, output: number, cached = 0) =>
  costNano([
    { quantity: BigInt(input - cached), priceUsd: price(model, 'input_per_mtok'), perUnits: 1_000_000n },
    ...(cached
      ? [{ quantity: BigInt(cached), priceUsd: price(model, 'cached_input_per_mtok'), perUnits: 1_000_000n }]
      : []),
    { quantity: BigInt(output), priceUsd: price(model, 'output_per_mtok'), perUnits: 1_000_000n },
  ]);

/** Text of `words` varied words: about 2 tokens a word, 7 bytes. */
const prose = (words: number) =>
  Array.from({ length: words }, (_, i) => `${['alpha', 'beta', 'gamma', 'delta', 'epsilon'][i % 5]}${i % 97}`).join(
    ' ',
  );

/** The request's usage row, with what the provider billed beyond its charge. */
async function chargedRow(requestId: string) {
  await waitForUsage(requestId);
  const r = await db().query(
    `SELECT cost_nano::text, uncovered_nano::text, provider_cost_nano::text, input_tokens::text
       FROM usage_records WHERE request_id = $1`,
    [requestId],
  );
  return r.rows[0] as { cost_nano: string; uncovered_nano: string; provider_cost_nano: string; input_tokens: string };
}

/** A 402 that took nothing: no usage row, no hold left, the balance as it was. */
async function expectRefusedFree(accountId: string, credits: bigint, send: () => Promise<unknown>) {
  const err = (await send().then(
    () => undefined,
    (e: unknown) => e,
  )) as { status?: number; error?: { error?: { code?: string } } } | undefined;
  expect(err?.status).toBe(402);
  expect(await accountActivity(accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  expect(await balanceOf(accountId)).toEqual({ balance: credits, held: 0n });
  await checkInvariants(accountId);
}

const TWO_CENTS = 20_000_000n;

describe('on a tight balance, the tokenizer count reads every field the provider bills', () => {
  // Each body's input costs the provider more than $0.02, its bytes far more: the byte bound
  // does not fit the balance, so the hold falls back to the tokenizer's count.
  it.each([
    [
      'chat: 8 legacy functions with long descriptions',
      {
        functions: Array.from({ length: 8 }, (_, i) => ({
          name: `lookup_${i}`,
          description: prose(1_500),
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        })),
      },
    ],
    [
      'chat: a response_format JSON schema',
      {
        response_format: {
          type: 'json_schema',
          json_schema: {
            name: 'report',
            schema: {
              type: 'object',
              properties: Object.fromEntries(
                Array.from({ length: 8 }, (_, i) => [`f${i}`, { type: 'string', description: prose(1_500) }]),
              ),
            },
          },
        },
      },
    ],
    [
      'chat: an assistant message whose refusal holds the text',
      { before: [{ role: 'assistant', content: 'No.', refusal: prose(12_000) }] },
    ],
  ])('%s: 402, nothing charged', async (_what, extra) => {
    const key = await newKey(TWO_CENTS);
    const { before = [], ...fields } = extra as { before?: unknown[] };
    const body = {
      model: 'gpt-4.1',
      max_completion_tokens: 4000,
      messages: [...before, { role: 'user', content: `hi ${uniqueMarker()} [sim tokens=5]` }],
      ...fields,
    };
    await expectRefusedFree(key.accountId, TWO_CENTS, () => openai(key.apiKey).chat.completions.create(body as never));
  });

  it('responses: a text.format JSON schema on gpt-5.5: 402, nothing charged', async () => {
    const key = await newKey(TWO_CENTS);
    const body = {
      model: 'gpt-5.5',
      max_output_tokens: 4000,
      input: `hi ${uniqueMarker()} [sim tokens=5]`,
      text: {
        format: {
          type: 'json_schema',
          name: 'report',
          schema: {
            type: 'object',
            properties: Object.fromEntries(
              Array.from({ length: 12 }, (_, i) => [`f${i}`, { type: 'string', description: prose(1_500) }]),
            ),
          },
        },
      },
    };
    await expectRefusedFree(key.accountId, TWO_CENTS, () => openai(key.apiKey).responses.create(body as never));
  });

  it("chat: a special token's text in a message is counted as text, not a 500", async () => {
    const key = await newKey(1_000n);
    await expectRefusedFree(key.accountId, 1_000n, () =>
      openai(key.apiKey).chat.completions.create({
        model: 'gpt-4.1',
        messages: [{ role: 'user', content: `<|endoftext|> ${prose(50)} ${uniqueMarker()}` }],
      }),
    );
  });

  it('chat: the same functions on a balance that pays their tokens but not their bytes are served and billed in full', async () => {
    const key = await newKey(150_000_000n); // $0.15: below the byte bound, above the billed input
    const functions = Array.from({ length: 8 }, (_, i) => ({
      name: `lookup_${i}`,
      description: prose(1_500),
      parameters: { type: 'object', properties: { q: { type: 'string' } } },
    }));
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'gpt-4.1',
        max_completion_tokens: 4000,
        messages: [{ role: 'user', content: `hi ${uniqueMarker()} [sim tokens=5]` }],
        functions,
      })
      .withResponse();
    expect(data.usage!.prompt_tokens).toBeGreaterThan(20_000);
    const cost = usd('gpt-4.1', data.usage!.prompt_tokens, data.usage!.completion_tokens);
    const row = await chargedRow(response.headers.get('x-request-id')!);
    expect(row).toMatchObject({ cost_nano: cost.toString(), uncovered_nano: '0', provider_cost_nano: cost.toString() });
    await checkInvariants(key.accountId);
  });
});

describe('text the tokenizer once choked on', () => {
  it('embeddings: a 200,000-letter run with no break is counted at once (it was quadratic: minutes of CPU), and refused as too long', async () => {
    const key = await newKey('1');
    const err = (await openai(key.apiKey)
      .embeddings.create({ model: 'text-embedding-3-small', input: 'x'.repeat(200_000) })
      .then(
        () => undefined,
        (e: unknown) => e,
      )) as { status?: number; message?: string } | undefined;
    expect(err?.status).toBe(400);
    expect(err?.message).toMatch(/maximum context length is 8191 tokens/);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it("embeddings: a special token's text is counted as text", async () => {
    const key = await newKey('1');
    const { data } = await openai(key.apiKey)
      .embeddings.create({ model: 'text-embedding-3-small', input: `${'<|endoftext|> '.repeat(1_000)}` })
      .withResponse();
    expect(data.data).toHaveLength(1);
  });
});

describe("Claude's tool tokens are held, on any balance", () => {
  const claude = (apiKey: string) => new Anthropic({ apiKey, baseURL: gatewayUrl(), maxRetries: 0 });
  const FIVE = 5_000_000_000n;

  it.each([
    ['bash_20250124', 'bash', 245],
    ['text_editor_20250728', 'str_replace_based_edit_tool', 700],
    ['computer_20250124', 'computer', 1234],
  ])(
    '/v1/messages with %s: charged everything the provider bills (its %s tool and the tool-use system prompt)',
    async (type, name, fixed) => {
      const key = await newKey(FIVE);
      const tool = type.startsWith('computer')
        ? { type, name, display_width_px: 1024, display_height_px: 768 }
        : { type, name };
      // The stand-in writes the whole cap: the hold has no unused output to hide a short input count.
      const { data, response } = await claude(key.apiKey)
        .messages.create({
          model: 'claude-opus-4-8',
          max_tokens: 64,
          tools: [tool as never],
          messages: [{ role: 'user', content: `run it ${uniqueMarker()} [sim tokens=64]` }],
        })
        .withResponse();
      expect(data.usage.input_tokens).toBeGreaterThanOrEqual(346 + fixed);
      const cost = usd('claude-opus-4-8', data.usage.input_tokens, data.usage.output_tokens);
      const row = await chargedRow(response.headers.get('x-request-id')!);
      expect(row).toMatchObject({ cost_nano: cost.toString(), uncovered_nano: '0' });
      await checkInvariants(key.accountId);
    },
  );

  it('/v1/messages with all three and tool_choice any: charged in full', async () => {
    const key = await newKey(FIVE);
    const { data, response } = await claude(key.apiKey)
      .messages.create({
        model: 'claude-opus-4-8',
        max_tokens: 64,
        tool_choice: { type: 'any' },
        tools: [
          { type: 'bash_20250124', name: 'bash' },
          { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
          { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
        ] as never,
        messages: [{ role: 'user', content: `go ${uniqueMarker()} [sim tokens=64]` }],
      })
      .withResponse();
    expect(data.usage.input_tokens).toBeGreaterThanOrEqual(313 + 245 + 700 + 1234);
    const cost = usd('claude-opus-4-8', data.usage.input_tokens, data.usage.output_tokens);
    expect(await chargedRow(response.headers.get('x-request-id')!)).toMatchObject({
      cost_nano: cost.toString(),
      uncovered_nano: '0',
    });
  });

  it('chat completions on a Claude model with a function tool: the tool-use system prompt is charged too', async () => {
    const key = await newKey(FIVE);
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create({
        model: 'claude-opus-4-8',
        max_tokens: 64,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
        messages: [{ role: 'user', content: `call f ${uniqueMarker()} [sim tokens=64]` }],
      })
      .withResponse();
    expect(data.usage!.prompt_tokens).toBeGreaterThanOrEqual(346);
    const cost = usd('claude-opus-4-8', data.usage!.prompt_tokens, data.usage!.completion_tokens);
    expect(await chargedRow(response.headers.get('x-request-id')!)).toMatchObject({
      cost_nano: cost.toString(),
      uncovered_nano: '0',
    });
  });
});
