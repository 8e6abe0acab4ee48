// What the provider bills, worked out from its usage, and the worst case a hold covers: pure
// functions, against the catalogue's own prices and hand-computed figures.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { Catalogue } from '../../../src/catalogue/catalogue.ts';
import type { CatalogueEntry } from '../../../src/catalogue/models.ts';
import { MODELS } from '../../../src/catalogue/shipped-book.ts';
import { costNano } from '../../../src/money/money.ts';
import {
  affordableBeyond,
  affordableCap,
  affordableOutputTokens,
  usageCostNano,
  usageFromAnthropic,
  usageFromOpenAI,
  usageFromOpenAIResponses,
  worstCostNano,
  type TokenPrices,
} from '../../../src/billing/pricing.ts';
import {
  chatPolicy,
  DEFAULT_SERVER_TOOL_CALLS,
  messagesPolicy,
  responsesPolicy,
} from '../../../src/metering/bill-policy.ts';
import { providerErrorFields, upstreamErrorOf } from '../../../src/inference/upstream/replies.ts';
import { toGatewayError } from '../../../src/errors/errors.ts';

const catalogue = new Catalogue(
  loadConfig({ OPENAI_API_KEY: 'k', ANTHROPIC_API_KEY: 'k', XAI_API_KEY: 'k', DEEPSEEK_API_KEY: 'k' }),
);
const model = (id: string) => catalogue.get(id)!;
const perM = (q: number | bigint, p: string) => ({ quantity: BigInt(q), priceUsd: p, perUnits: 1_000_000n });

describe('usage as each provider reports it', () => {
  it('OpenAI counts reasoning inside completion_tokens; xAI beside it (in total_tokens); both are output', () => {
    const openai = usageFromOpenAI({
      prompt_tokens: 100,
      completion_tokens: 505,
      total_tokens: 605,
      completion_tokens_details: { reasoning_tokens: 500 },
    });
    expect(openai.outputTokens).toBe(505n);
    const xai = usageFromOpenAI({
      prompt_tokens: 100,
      completion_tokens: 5,
      total_tokens: 605,
      completion_tokens_details: { reasoning_tokens: 500 },
    });
    expect(xai.outputTokens).toBe(505n);
  });

  it('DeepSeek cache hits (prompt_cache_hit_tokens) count as cached input', () => {
    expect(
      usageFromOpenAI({
        prompt_tokens: 1000,
        prompt_cache_hit_tokens: 600,
        prompt_cache_miss_tokens: 400,
        completion_tokens: 3,
      }).cachedTokens,
    ).toBe(600n);
  });

  it('the service tier comes from the reply', () => {
    expect(usageFromOpenAI({ prompt_tokens: 1, completion_tokens: 1 }, 'priority').serviceTier).toBe('priority');
    expect(usageFromOpenAIResponses({ input_tokens: 1, output_tokens: 1 }, { service_tier: 'flex' }).serviceTier).toBe(
      'flex',
    );
  });

  it('Anthropic: cache writes split by TTL, web searches from server_tool_use', () => {
    const u = usageFromAnthropic({
      input_tokens: 10,
      cache_read_input_tokens: 5,
      cache_creation_input_tokens: 2300,
      output_tokens: 7,
      cache_creation: { ephemeral_5m_input_tokens: 300, ephemeral_1h_input_tokens: 2000 },
      server_tool_use: { web_search_requests: 3, web_fetch_requests: 1 },
    });
    expect(u).toMatchObject({
      inputTokens: 2315n,
      cachedTokens: 5n,
      cacheWriteTokens: 2300n,
      cacheWrite1hTokens: 2000n,
      toolCalls: { web_search_per_call: 3n },
    });
  });

  it('Responses: each web_search_call output item is a call', () => {
    const u = usageFromOpenAIResponses(
      { input_tokens: 10, output_tokens: 2 },
      {
        output: [{ type: 'web_search_call' }, { type: 'reasoning' }, { type: 'web_search_call' }, { type: 'message' }],
      },
    );
    expect(u.toolCalls).toEqual({ web_search_per_call: 2n });
  });
});

describe('what a usage costs', () => {
  it('at the tier the provider reports: priority at the priority prices, flex at flex, default at list', () => {
    const m = model('gpt-5.5');
    const u = { inputTokens: 1_000n, outputTokens: 100n, cachedTokens: 0n, cacheWriteTokens: 0n };
    expect(usageCostNano(m, { ...u, serviceTier: 'priority' })).toBe(
      costNano([perM(1_000, '2.50'), perM(100, '20.00')]),
    );
    expect(usageCostNano(m, { ...u, serviceTier: 'flex' })).toBe(costNano([perM(1_000, '0.625'), perM(100, '5.00')]));
    expect(usageCostNano(m, { ...u, serviceTier: 'default' })).toBe(
      costNano([perM(1_000, '1.25'), perM(100, '10.00')]),
    );
  });

  it('long context: the whole request at the long prices past the threshold, not at it', () => {
    const m = model('claude-sonnet-4-6');
    const at = (input: bigint) =>
      usageCostNano(m, { inputTokens: input, outputTokens: 1_000n, cachedTokens: 0n, cacheWriteTokens: 0n });
    expect(at(200_000n)).toBe(costNano([perM(200_000, '3.00'), perM(1_000, '15.00')]));
    expect(at(200_001n)).toBe(costNano([perM(200_001, '6.00'), perM(1_000, '22.50')]));
    // xAI: from 128k ("reaches"), as its price list says.
    const grok = (input: bigint) =>
      usageCostNano(model('grok-4'), { inputTokens: input, outputTokens: 0n, cachedTokens: 0n, cacheWriteTokens: 0n });
    expect(grok(127_999n)).toBe(costNano([perM(127_999, '3.00')]));
    expect(grok(128_000n)).toBe(costNano([perM(128_000, '6.00')]));
  });

  it('1-hour cache writes at their own price, tool calls at their fee', () => {
    const m = model('claude-haiku-4-5');
    const cost = usageCostNano(m, {
      inputTokens: 2_310n,
      outputTokens: 7n,
      cachedTokens: 0n,
      cacheWriteTokens: 2_300n,
      cacheWrite1hTokens: 2_000n,
      toolCalls: { web_search_per_call: 3n },
    });
    expect(cost).toBe(
      costNano([
        perM(10, '1.00'),
        perM(300, '1.25'),
        perM(2_000, '2.00'),
        perM(7, '5.00'),
        { quantity: 3n, priceUsd: '0.01', perUnits: 1n },
      ]),
    );
  });

  it('a tool call count without a price is an error, never free', () => {
    expect(() =>
      usageCostNano(model('deepseek-chat'), {
        inputTokens: 1n,
        outputTokens: 1n,
        cachedTokens: 0n,
        cacheWriteTokens: 0n,
        toolCalls: { web_search_per_call: 1n },
      }),
    ).toThrow(/no price/);
  });
});

describe('the worst case a hold covers', () => {
  it('input the gateway cannot see: a full context window per pass, at the input price', () => {
    const p = responsesPolicy({ model: 'gpt-5.5', previous_response_id: 'resp_x', input: 'hi' }, model('gpt-5.5'));
    expect(p.worst.unseen).toBe('previous_response_id');
    expect(worstCostNano(p.worst, 20n, 16n, 1n)).toBe(costNano([perM(400_000, '1.25'), perM(16, '10.00')]));
  });

  it('web search: a pass per call and the fee per call, with the injected cap', () => {
    const p = responsesPolicy({ model: 'gpt-5.5', input: 'hi', tools: [{ type: 'web_search' }] }, model('gpt-5.5'));
    expect(p.set).toEqual({ max_tool_calls: DEFAULT_SERVER_TOOL_CALLS });
    const calls = BigInt(DEFAULT_SERVER_TOOL_CALLS);
    expect(worstCostNano(p.worst, 20n, 16n, 1n)).toBe(
      costNano([
        perM(400_000n * (calls + 1n), '1.25'),
        perM(16, '10.00'),
        { quantity: calls, priceUsd: '0.01', perUnits: 1n },
      ]),
    );
    const capped = responsesPolicy(
      { model: 'gpt-5.5', input: 'hi', tools: [{ type: 'web_search' }], max_tool_calls: 1 },
      model('gpt-5.5'),
    );
    expect(capped.set).toBeUndefined();
    expect(capped.worst.passes).toBe(2n);
  });

  it('Anthropic server tools: max_uses set where missing, each pass able to write max_tokens', () => {
    const body = {
      model: 'claude-haiku-4-5',
      max_tokens: 100,
      messages: [],
      tools: [
        { type: 'web_search_20250305', name: 'web_search' },
        { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 1 },
      ],
    };
    const p = messagesPolicy(body, model('claude-haiku-4-5'));
    expect((p.set!.tools as { max_uses: number }[]).map((t) => t.max_uses)).toEqual([DEFAULT_SERVER_TOOL_CALLS, 1]);
    expect(p.worst.passes).toBe(BigInt(DEFAULT_SERVER_TOOL_CALLS + 2));
    expect(worstCostNano(p.worst, 10n, 100n, 1n)).toBe(
      costNano([
        perM(200_000n * p.worst.passes, '1.00'),
        perM(100n * p.worst.passes, '5.00'),
        { quantity: BigInt(DEFAULT_SERVER_TOOL_CALLS), priceUsd: '0.01', perUnits: 1n },
      ]),
    );
  });

  it('a request that writes the cache is held at the write price; a 1-hour write at the 1-hour price', () => {
    const body = {
      model: 'claude-haiku-4-5',
      max_tokens: 1,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
      ],
    };
    expect(messagesPolicy(body, model('claude-haiku-4-5')).worst.prices.input_per_mtok).toBe('2.00');
    const five = {
      ...body,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }] }],
    };
    expect(messagesPolicy(five, model('claude-haiku-4-5')).worst.prices.input_per_mtok).toBe('1.25');
  });

  it('cache writes are found in the parsed body: an escaped key in the bytes hides nothing', () => {
    const raw =
      '{"model":"claude-haiku-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache\\u005fcontrol":{"type":"ephemeral","ttl":"1\\u0068"}}]}]}';
    expect(raw).not.toContain('cache_control');
    expect(messagesPolicy(JSON.parse(raw), model('claude-haiku-4-5')).worst.prices.input_per_mtok).toBe('2.00');
    expect(
      messagesPolicy({ cache_control: { type: 'ephemeral' }, messages: [] }, model('claude-haiku-4-5')).worst.prices
        .input_per_mtok,
    ).toBe('1.25');
  });

  it('content the provider reads is found wherever it sits: an image URL in a tool output', () => {
    const p = responsesPolicy(
      {
        input: [
          {
            type: 'function_call_output',
            call_id: 'c',
            output: [{ type: 'input_image', image_url: 'https://x/y.png' }],
          },
        ],
      },
      model('gpt-5.5'),
    );
    expect(p.worst.unseen).toBe('an input image by URL or file id');
    const doc = messagesPolicy(
      {
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [{ type: 'document', source: { type: 'url', url: 'https://x' } }],
              },
            ],
          },
        ],
      },
      model('claude-haiku-4-5'),
    );
    expect(doc.worst.unseen).toBe('a document by URL');
  });

  it('long context: an unseen input past the threshold is held at the long prices', () => {
    const body = {
      model: 'claude-sonnet-4-6',
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://x/y.pdf' } }] }],
    };
    const p = messagesPolicy(body, model('claude-sonnet-4-6'));
    expect(worstCostNano(p.worst, 50n, 10n, 1n)).toBe(costNano([perM(1_000_000, '6.00'), perM(10, '22.50')]));
  });

  it('xAI: reasoning the cap does not bound is held on top of the cap', () => {
    const p = chatPolicy({ model: 'grok-4', messages: [] }, model('grok-4'));
    expect(worstCostNano(p.worst, 10n, 50n, 1n)).toBe(costNano([perM(10, '3.00'), perM(50 + 64_000, '15.00')]));
  });

  it('the affordable cap is the largest whose worst case fits the balance, exactly', () => {
    const p = responsesPolicy({ model: 'gpt-5.5', previous_response_id: 'r', input: 'x' }, model('gpt-5.5'));
    for (const budget of [500_000_000n, 500_000_001n, 512_345_678n, 1_000_000_000n]) {
      const cap = affordableCap(p.worst, 10n, 1n, budget);
      expect(worstCostNano(p.worst, 10n, cap, 1n)).toBeLessThanOrEqual(budget);
      expect(worstCostNano(p.worst, 10n, cap + 1n, 1n)).toBeGreaterThan(budget);
    }
    expect(affordableCap(p.worst, 10n, 1n, 499_999_999n)).toBe(0n);
  });

  it('affordableBeyond agrees with the plain input + output formula', () => {
    const prices = MODELS.find((m) => m.id === 'gpt-4o-mini')!.prices as unknown as TokenPrices;
    for (const [input, budget] of [
      [10n, 1_000_000n],
      [12_345n, 98_765_432n],
      [0n, 7n],
    ] as const) {
      expect(affordableOutputTokens(prices, input, budget)).toBe(
        affordableBeyond([perM(input, prices.input_per_mtok)], prices.output_per_mtok, budget),
      );
    }
  });
});

describe('what is refused', () => {
  it.each([
    ['background', () => responsesPolicy({ background: true }, model('gpt-5.5'))],
    ['service_tier', () => responsesPolicy({ service_tier: 'scale' }, model('gpt-5.5'))],
    ['service_tier', () => chatPolicy({ service_tier: 'flex' }, model('gpt-4o'))],
    ['service_tier', () => chatPolicy({ service_tier: 'priority' }, model('deepseek-chat'))],
    ['tools', () => responsesPolicy({ tools: [{ type: 'code_interpreter' }] }, model('gpt-5.5'))],
    [
      'tools',
      () => responsesPolicy({ tools: [{ type: 'shell', environment: { type: 'container_auto' } }] }, model('gpt-5.5')),
    ],
    ['tools', () => messagesPolicy({ tools: [{ type: 'code_execution_20250825' }] }, model('claude-haiku-4-5'))],
    ['speed', () => messagesPolicy({ speed: 'fast' }, model('claude-opus-4-8'))],
    ['inference_geo', () => messagesPolicy({ inference_geo: 'us' }, model('claude-opus-4-8'))],
    ['container', () => messagesPolicy({ container: 'c_1' }, model('claude-opus-4-8'))],
    ['web_search_options', () => chatPolicy({ web_search_options: {} }, model('gpt-4o'))],
    [
      'messages',
      () =>
        chatPolicy(
          {
            messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] }],
          },
          model('gpt-4o'),
        ),
    ],
  ])('%s', (param, policy) => {
    expect(policy().refusal?.param).toBe(param);
  });

  it('client tools, local shells and priced tiers pass', () => {
    expect(
      responsesPolicy(
        {
          tools: [
            { type: 'function', name: 'f' },
            { type: 'shell', environment: { type: 'local' } },
            { type: 'apply_patch' },
          ],
          service_tier: 'priority',
        },
        model('gpt-5.5'),
      ).refusal,
    ).toBeUndefined();
    expect(
      messagesPolicy(
        {
          tools: [
            { name: 'f', input_schema: {} },
            { type: 'bash_20250124', name: 'bash' },
            { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
          ],
        },
        model('claude-haiku-4-5'),
      ).refusal,
    ).toBeUndefined();
  });
});

describe('the catalogue refuses prices it could not bill by', () => {
  const entry = (prices: Record<string, string>, extra: Partial<CatalogueEntry> = {}): CatalogueEntry => ({
    id: 'x',
    kind: 'chat',
    provider: 'openai',
    upstreamId: 'x',
    enabled: true,
    contextWindow: 1,
    maxOutputTokens: 1,
    prices,
    ...extra,
  });
  it.each([
    [
      'a tier without its output price',
      entry({ input_per_mtok: '1', output_per_mtok: '1', priority_input_per_mtok: '2' }),
    ],
    [
      'long prices without a threshold',
      entry({ input_per_mtok: '1', output_per_mtok: '1', long_input_per_mtok: '2', long_output_per_mtok: '2' }),
    ],
    [
      'tiers and long context together',
      entry(
        {
          input_per_mtok: '1',
          output_per_mtok: '1',
          flex_input_per_mtok: '1',
          flex_output_per_mtok: '1',
          long_input_per_mtok: '2',
          long_output_per_mtok: '2',
        },
        { longContextAboveTokens: 5 },
      ),
    ],
  ])('%s', (_label, e) => {
    expect(() => new Catalogue(loadConfig({}), [e])).toThrow(/catalogue entry x/);
  });
});

describe("upstream errors in any shape keep the provider's words", () => {
  it.each([
    [
      'OpenAI',
      '{"error":{"message":"bad temp","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}',
      { message: 'bad temp', type: 'invalid_request_error', param: 'temperature', code: 'invalid_value' },
    ],
    [
      'Anthropic',
      '{"type":"error","error":{"type":"invalid_request_error","message":"roles must alternate"}}',
      { message: 'roles must alternate', type: 'invalid_request_error' },
    ],
    ['a string error', '{"error":"input: unsupported item","status":400}', { message: 'input: unsupported item' }],
    [
      'FastAPI detail',
      '{"detail":[{"msg":"field required"},{"msg":"too long"}]}',
      { message: 'field required; too long' },
    ],
    ['plain text', 'upstream connect error', { message: 'upstream connect error' }],
    ['an HTML page', '<html>502</html>', {}],
  ])('%s', (_label, text, fields) => {
    expect(providerErrorFields(text)).toMatchObject(fields);
  });

  it("401/403 become 502 and never repeat the provider's text (it can quote the key)", () => {
    const ge = toGatewayError(
      upstreamErrorOf(401, undefined, '{"error":{"message":"Incorrect API key provided: sk-abc***xyz"}}', 'req_1'),
    );
    expect(ge.httpStatus).toBe(502);
    expect(ge.message).not.toContain('sk-');
  });
});
