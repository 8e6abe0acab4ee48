// The hold's input counts never fall below what the provider bills: over generated bodies that
// carry every documented field of chat completions, messages and responses (and fields no
// provider documents yet), both the byte bound and the tokenizer count are at least what the
// stand-in bills (test/upstream/provider-tokens.ts renders each prompt as the provider does).
import { describe, expect, it } from 'vitest';
import { MODELS } from '../../../src/catalogue/shipped-book.ts';
import {
  anthropicInputUpperBound,
  claudeToolUseTokens,
  countAnthropicInput,
  countInputTokens,
  countResponsesInput,
  inputTokensUpperBound,
  responsesInputUpperBound,
} from '../../../src/inference/tokens.ts';
import { chatInputTokens, messagesInputTokens, responsesInputTokens } from '../../upstream/provider-tokens.ts';
import { mulberry32 } from '../../support/random.ts';

type Json = Record<string, unknown>;
const model = (id: string) => MODELS.find((m) => m.id === id)!;

/** Generated bodies from a seeded sequence (mulberry32), so a failing body can be made again from its seed. */
function generator(seed: number) {
  const next = mulberry32(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const chance = (p: number) => next() < p;
  const PIECES = [
    'the',
    'weather',
    ' in',
    'Paris',
    '\n',
    '\n\n',
    '  ',
    '\t',
    '"quoted"',
    '\\',
    '{',
    '}',
    '=>',
    '()',
    '42',
    '3.14159',
    'ünïcödé',
    '日本語のテキスト',
    '🙂',
    '👩‍💻',
    'const x = y ?? z;',
    'SELECT * FROM t;',
    'aaaaaaaaaaaaaaaa',
    'ZZZZ',
    '<|endoftext|>',
    '\u0000',
    '\u2028',
    'http://example.com/a?b=c',
  ];
  const text = (max = 40) => Array.from({ length: 1 + int(max) }, () => pick(PIECES)).join(chance(0.5) ? ' ' : '');
  const name = () => `${pick(['get', 'set', 'run', 'find'])}_${pick(['weather', 'file', 'user', 'x'])}${int(100)}`;
  const schema = (depth = 0): Json => {
    const kind =
      depth > 2 ? pick(['string', 'number', 'boolean']) : pick(['string', 'number', 'object', 'array', 'enum']);
    const d = chance(0.6) ? { description: text(20) } : {};
    if (kind === 'object') {
      const properties: Json = {};
      for (let i = 0; i < 1 + int(4); i++) properties[name()] = schema(depth + 1);
      return { type: 'object', properties, required: Object.keys(properties).slice(0, int(3)), ...d };
    }
    if (kind === 'array') return { type: 'array', items: schema(depth + 1), ...d };
    if (kind === 'enum') return { type: 'string', enum: Array.from({ length: 1 + int(4) }, () => text(3)), ...d };
    return { type: kind, ...d };
  };
  /** A member no provider documents today, as one might add tomorrow. */
  const unknown = (): [string, unknown] => [
    `future_${int(1000)}`,
    pick([() => text(60), () => ({ note: text(30), list: [text(10), text(10)] }), () => [schema()]])(),
  ];
  return { int, pick, chance, text, name, schema, unknown };
}

type Gen = ReturnType<typeof generator>;

function chatBody(g: Gen): Json {
  const body: Json = { model: 'gpt-4.1', messages: [] };
  const messages = body.messages as Json[];
  if (g.chance(0.5)) messages.push({ role: g.pick(['system', 'developer']), content: g.text(80) });
  for (let i = 0; i < 1 + g.int(5); i++) {
    const role = g.pick(['user', 'assistant', 'tool']);
    const m: Json = { role };
    m.content = g.chance(0.5)
      ? g.text(80)
      : Array.from({ length: 1 + g.int(3) }, () => ({ type: 'text', text: g.text(40) }));
    if (g.chance(0.3)) m.name = g.name();
    if (role === 'assistant' && g.chance(0.5))
      m.tool_calls = [
        {
          id: `call_${g.int(1e6)}`,
          type: 'function',
          function: { name: g.name(), arguments: JSON.stringify(g.schema()) },
        },
      ];
    if (role === 'assistant' && g.chance(0.3)) m.refusal = g.text(40);
    if (role === 'assistant' && g.chance(0.2)) m.function_call = { name: g.name(), arguments: g.text(20) };
    if (role === 'tool') m.tool_call_id = `call_${g.int(1e6)}`;
    if (g.chance(0.15)) m[g.unknown()[0]] = g.unknown()[1];
    messages.push(m);
  }
  const fn = () => ({ name: g.name(), description: g.text(60), parameters: g.schema() });
  if (g.chance(0.5)) body.tools = Array.from({ length: 1 + g.int(4) }, () => ({ type: 'function', function: fn() }));
  if (g.chance(0.4)) body.functions = Array.from({ length: 1 + g.int(4) }, fn);
  if (g.chance(0.4))
    body.response_format = g.pick([
      {
        type: 'json_schema',
        json_schema: { name: g.name(), description: g.text(20), schema: g.schema(), strict: true },
      },
      { type: 'json_object' },
      { type: 'text' },
    ]);
  if (g.chance(0.3))
    body.tool_choice = g.pick(['auto', 'none', 'required', { type: 'function', function: { name: g.name() } }]);
  if (g.chance(0.3)) body.function_call = g.pick(['auto', { name: g.name() }]);
  if (g.chance(0.3)) Object.assign(body, { temperature: 0.5, top_p: 0.9, seed: 7, user: g.name(), stop: [g.text(3)] });
  if (g.chance(0.3)) body.metadata = { team: g.text(5) };
  if (g.chance(0.4)) {
    const [k, v] = g.unknown();
    body[k] = v;
  }
  return body;
}

function messagesBody(g: Gen): Json {
  const body: Json = { model: 'claude-opus-4-8', max_tokens: 64, messages: [] };
  if (g.chance(0.5))
    body.system = g.chance(0.5)
      ? g.text(80)
      : [{ type: 'text', text: g.text(60), cache_control: { type: 'ephemeral' } }];
  const messages = body.messages as Json[];
  for (let i = 0; i < 1 + g.int(5); i++) {
    const role = g.pick(['user', 'assistant']);
    const blocks: Json[] = [];
    for (let j = 0; j < 1 + g.int(3); j++)
      blocks.push(
        g.pick([
          () => ({ type: 'text', text: g.text(60) }),
          () => ({ type: 'tool_use', id: `toolu_${g.int(1e6)}`, name: g.name(), input: g.schema() }),
          () => ({
            type: 'tool_result',
            tool_use_id: `toolu_${g.int(1e6)}`,
            content: [{ type: 'text', text: g.text(40) }],
            is_error: g.chance(0.5),
          }),
          () => ({ type: 'thinking', thinking: g.text(40), signature: g.text(10) }),
          () => ({ type: 'document', source: { type: 'text', media_type: 'text/plain', data: g.text(40) } }),
        ])(),
      );
    messages.push({ role, content: g.chance(0.3) ? g.text(50) : blocks });
  }
  if (g.chance(0.7)) {
    const tools: Json[] = [];
    for (let i = 0; i < 1 + g.int(4); i++)
      tools.push(
        g.pick([
          () => ({ name: g.name(), description: g.text(60), input_schema: g.schema() }),
          () => ({ type: 'custom', name: g.name(), input_schema: g.schema() }),
          () => ({ type: 'bash_20250124', name: 'bash' }),
          () => ({ type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' }),
          () => ({ type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 }),
          () => ({ type: 'memory_20250818', name: 'memory' }),
        ])(),
      );
    body.tools = tools;
    if (g.chance(0.6))
      body.tool_choice = g.pick([
        { type: 'auto' },
        { type: 'any' },
        { type: 'none' },
        { type: 'tool', name: g.name() },
      ]);
  }
  if (g.chance(0.3)) Object.assign(body, { temperature: 0.2, top_k: 5, stop_sequences: [g.text(3)] });
  if (g.chance(0.3)) body.thinking = { type: 'enabled', budget_tokens: 1024 };
  if (g.chance(0.2)) body.metadata = { user_id: g.name() };
  if (g.chance(0.4)) {
    const [k, v] = g.unknown();
    body[k] = v;
  }
  return body;
}

function responsesBody(g: Gen): Json {
  const body: Json = { model: 'gpt-5.5' };
  if (g.chance(0.5)) body.instructions = g.text(80);
  if (g.chance(0.3)) body.input = g.text(80);
  else {
    const input: Json[] = [];
    for (let i = 0; i < 1 + g.int(5); i++)
      input.push(
        g.pick([
          () => ({ role: 'user', content: g.text(60) }),
          () => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text: g.text(40) }] }),
          () => ({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: g.text(40) }] }),
          () => ({
            type: 'function_call',
            call_id: `c${g.int(1e6)}`,
            name: g.name(),
            arguments: JSON.stringify(g.schema()),
          }),
          () => ({ type: 'function_call_output', call_id: `c${g.int(1e6)}`, output: g.text(60) }),
          () => ({ type: 'reasoning', id: `rs_${g.int(1e6)}`, summary: [{ type: 'summary_text', text: g.text(30) }] }),
        ])(),
      );
    body.input = input;
  }
  if (g.chance(0.5))
    body.tools = Array.from({ length: 1 + g.int(4) }, () =>
      g.pick([
        () => ({ type: 'function', name: g.name(), description: g.text(60), parameters: g.schema(), strict: false }),
        () => ({ type: 'custom', name: g.name(), description: g.text(40) }),
      ])(),
    );
  if (g.chance(0.5))
    body.text = g.pick([
      { format: { type: 'json_schema', name: g.name(), description: g.text(20), schema: g.schema(), strict: true } },
      { format: { type: 'text' }, verbosity: 'low' },
      { format: { type: 'json_object' } },
    ]);
  if (g.chance(0.3)) body.tool_choice = g.pick(['auto', 'required', { type: 'function', name: g.name() }]);
  if (g.chance(0.3)) Object.assign(body, { temperature: 1, max_output_tokens: 100, reasoning: { effort: 'low' } });
  if (g.chance(0.4)) {
    const [k, v] = g.unknown();
    body[k] = v;
  }
  return body;
}

const CASES = [
  {
    format: 'chat',
    make: chatBody,
    model: model('gpt-4.1'),
    bound: inputTokensUpperBound,
    count: countInputTokens,
    billed: chatInputTokens,
  },
  {
    format: 'messages',
    make: messagesBody,
    model: model('claude-opus-4-8'),
    bound: anthropicInputUpperBound,
    count: countAnthropicInput,
    billed: messagesInputTokens,
  },
  {
    format: 'responses',
    make: responsesBody,
    model: model('gpt-5.5'),
    bound: responsesInputUpperBound,
    count: countResponsesInput,
    billed: responsesInputTokens,
  },
] as const;

describe('the input counts are never below what the provider bills', () => {
  for (const c of CASES) {
    it(`${c.format}: over 1,000 generated bodies, tokenizer count >= billed and byte bound >= tokenizer count`, () => {
      for (let seed = 1; seed <= 1_000; seed++) {
        const body = c.make(generator(seed));
        const billed = c.billed(body);
        const counted = c.count(body, c.model);
        const bound = c.bound(body, c.model);
        if (counted < billed || bound < counted)
          throw new Error(
            `seed ${seed}: billed ${billed}, counted ${counted}, bound ${bound}: ${JSON.stringify(body)}`,
          );
      }
      expect(true).toBe(true);
    }, 120_000); // a tokenizer's work: minutes on a machine under load, not seconds
  }
});

const bigText = (words: number) =>
  Array.from({ length: words }, (_, i) => `${['alpha', 'beta', 'gamma', 'delta', 'epsilon'][i % 5]}${i % 97}`).join(
    ' ',
  );

describe('fields the counts once left out', () => {
  const gpt41 = model('gpt-4.1');
  const short = [{ role: 'user', content: 'hi' }];

  it.each([
    ['legacy functions', { functions: [{ name: 'f', description: bigText(2000), parameters: { type: 'object' } }] }],
    [
      'a response_format JSON schema',
      {
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'r', schema: { type: 'object', description: bigText(2000) } },
        },
      },
    ],
    ['tool_choice', { tool_choice: { type: 'function', function: { name: bigText(2000) } } }],
    [
      'a message field other than content',
      { messages: [{ role: 'assistant', content: 'ok', refusal: bigText(2000) }] },
    ],
    ['a field no provider documents yet', { brand_new_field: bigText(2000) }],
  ])('chat: %s is counted', (_what, extra) => {
    const body = { model: 'gpt-4.1', messages: short, ...extra };
    expect(countInputTokens(body, gpt41)).toBeGreaterThanOrEqual(chatInputTokens(body));
    expect(countInputTokens(body, gpt41)).toBeGreaterThan(2000);
  });

  it('responses: text.format is counted', () => {
    const body = {
      model: 'gpt-5.5',
      input: 'hi',
      text: { format: { type: 'json_schema', name: 'r', schema: { type: 'object', description: bigText(2000) } } },
    };
    expect(countResponsesInput(body, model('gpt-5.5'))).toBeGreaterThanOrEqual(responsesInputTokens(body));
    expect(countResponsesInput(body, model('gpt-5.5'))).toBeGreaterThan(2000);
  });

  it('special tokens in text are text, and a long run with no break is counted in slices, not in quadratic time', () => {
    expect(countInputTokens({ messages: [{ role: 'user', content: 'a <|endoftext|> b' }] })).toBeGreaterThan(9);
    // Whole, this run took hours (18 s at a tenth of its length); in slices, milliseconds.
    const run = 'x'.repeat(1_000_000);
    expect(countInputTokens({ messages: [{ role: 'user', content: run }] })).toBeGreaterThanOrEqual(run.length / 8);
  });

  it('settings the provider does not bill are not counted', () => {
    const plain = { model: 'gpt-4.1', messages: short };
    expect(countInputTokens({ ...plain, temperature: 0.3, user: 'u', metadata: { a: 'b' } }, gpt41)).toBe(
      countInputTokens(plain, gpt41),
    );
  });
});

describe("Claude's tool-use tokens are in the count, as the book gives them per model", () => {
  const opus = model('claude-opus-4-8');
  const base = { model: 'claude-opus-4-8', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };

  it('the shipped book gives every Claude chat model its tool-use figures', () => {
    for (const m of MODELS.filter((x) => x.provider === 'anthropic' && x.kind === 'chat'))
      expect(m.toolUse).toEqual({
        systemPrompt: { auto: 346, any: 313 },
        tools: { bash: 245, computer: 1234, text_editor: 700 },
      });
  });

  it.each([
    ['bash_20250124', 346 + 245],
    ['text_editor_20250728', 346 + 700],
    ['computer_20250124', 346 + 1234],
  ])('%s adds the system prompt and its fixed tokens', (type, tokens) => {
    const body = { ...base, tools: [{ type, name: 'x' }] };
    expect(claudeToolUseTokens(body, opus)).toBe(tokens);
    expect(countAnthropicInput(body, opus)).toBeGreaterThanOrEqual(tokens);
    expect(anthropicInputUpperBound(body, opus)).toBeGreaterThanOrEqual(tokens);
    expect(countAnthropicInput(body, opus)).toBeGreaterThanOrEqual(messagesInputTokens(body));
  });

  it('the system prompt follows tool_choice; a custom tool adds it alone; an unlisted Anthropic tool counts at the dearest', () => {
    const custom = { name: 'f', input_schema: { type: 'object' } };
    expect(claudeToolUseTokens({ tools: [custom] }, opus)).toBe(346);
    expect(claudeToolUseTokens({ tools: [custom], tool_choice: { type: 'any' } }, opus)).toBe(313);
    expect(claudeToolUseTokens({ tools: [custom], tool_choice: { type: 'tool', name: 'f' } }, opus)).toBe(313);
    expect(claudeToolUseTokens({ tools: [custom], tool_choice: { type: 'none' } }, opus)).toBe(346);
    expect(claudeToolUseTokens({ tools: [{ type: 'memory_20250818', name: 'memory' }] }, opus)).toBe(346 + 1234);
    expect(claudeToolUseTokens({ tools: [] }, opus)).toBe(0);
  });

  it('a Claude model the book gives no figures holds the dearest published', () => {
    const { toolUse: _, ...bare } = opus;
    expect(claudeToolUseTokens({ tools: [{ type: 'bash_20250124', name: 'bash' }] }, bare)).toBe(530 + 245);
  });
});
