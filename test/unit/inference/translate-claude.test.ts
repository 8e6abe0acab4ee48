import { describe, expect, it } from 'vitest';
import {
  chatRequestToMessages,
  messagesResponseToChat,
  MessagesToChatStream,
  TranslationError,
} from '../../../src/inference/translate/chat-messages.ts';

const opts = { upstreamModel: 'claude-sonnet-4-6', defaultMaxTokens: 4096 };

describe('chat request -> Anthropic messages', () => {
  it('moves system/developer to system, merges tool results with the next user turn, maps tools and choices', () => {
    const req = chatRequestToMessages(
      {
        model: 'claude-sonnet-4-6',
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'developer', content: [{ type: 'text', text: 'Answer in English.' }] },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in this picture?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
            ],
          },
          {
            role: 'assistant',
            content: 'Let me check the weather.',
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '21C' },
          { role: 'user', content: 'Thanks!' },
        ],
        tools: [
          {
            type: 'function',
            function: {
              name: 'get_weather',
              description: 'Weather',
              parameters: { type: 'object', properties: { city: { type: 'string' } } },
            },
          },
        ],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
        temperature: 1.6,
        stop: 'END',
        max_completion_tokens: 300,
        user: 'u-9',
        stream: true,
        stream_options: { include_usage: true },
        seed: 3,
      },
      opts,
    );
    expect(req).toEqual({
      model: 'claude-sonnet-4-6',
      max_tokens: 300,
      system: [
        { type: 'text', text: 'You are terse.' },
        { type: 'text', text: 'Answer in English.' },
      ],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me check the weather.' },
            { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: '21C' },
            { type: 'text', text: 'Thanks!' },
          ],
        },
      ],
      tools: [
        {
          name: 'get_weather',
          description: 'Weather',
          input_schema: { type: 'object', properties: { city: { type: 'string' } } },
        },
      ],
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      temperature: 1,
      stop_sequences: ['END'],
      metadata: { user_id: 'u-9' },
      stream: true,
    });
  });

  it('maps tool_choice strings, reasoning effort, and a single system string', () => {
    expect(
      chatRequestToMessages(
        {
          messages: [{ role: 'user', content: 'x' }],
          tools: [{ type: 'function', function: { name: 'f' } }],
          tool_choice: 'required',
        },
        opts,
      ).tool_choice,
    ).toEqual({
      type: 'any',
    });
    expect(
      chatRequestToMessages({ messages: [{ role: 'user', content: 'x' }], tool_choice: 'none' }, opts).tool_choice,
    ).toEqual({ type: 'none' });
    const r = chatRequestToMessages(
      {
        messages: [
          { role: 'system', content: 'S' },
          { role: 'user', content: 'x' },
        ],
        reasoning_effort: 'high',
        max_tokens: 1000,
        temperature: 0.5,
      },
      opts,
    );
    expect(r.system).toBe('S');
    expect(r.thinking).toEqual({ type: 'enabled', budget_tokens: 16384 });
    expect(r.max_tokens).toBeGreaterThan(16384);
    expect(r.temperature).toBeUndefined();
    expect(chatRequestToMessages({ messages: [{ role: 'user', content: 'x' }] }, opts).max_tokens).toBe(4096);
  });

  it('refuses what Anthropic cannot express', () => {
    expect(() => chatRequestToMessages({ n: 2, messages: [{ role: 'user', content: 'x' }] }, opts)).toThrow(
      TranslationError,
    );
    expect(() =>
      chatRequestToMessages(
        {
          messages: [
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{oops' } }],
            },
          ],
        },
        opts,
      ),
    ).toThrow(/not JSON/);
    expect(() =>
      chatRequestToMessages(
        { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] },
        opts,
      ),
    ).toThrow(TranslationError);
  });
});

const message = {
  id: 'msg_01',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-6',
  content: [
    { type: 'thinking', thinking: 'hmm', signature: 'sig' },
    { type: 'text', text: 'Checking.' },
    { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } },
  ],
  stop_reason: 'tool_use',
  stop_sequence: null,
  usage: { input_tokens: 100, cache_read_input_tokens: 2000, cache_creation_input_tokens: 50, output_tokens: 30 },
};

describe('Anthropic reply -> chat completion', () => {
  it('maps text, tool_use, thinking, stop reason and usage (cache tokens included in prompt_tokens)', () => {
    expect(messagesResponseToChat(message, { model: 'claude-sonnet-4-6', created: 1700000000 })).toEqual({
      id: 'chatcmpl-msg_01',
      object: 'chat.completion',
      created: 1700000000,
      model: 'claude-sonnet-4-6',
      choices: [
        {
          index: 0,
          logprobs: null,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: 'Checking.',
            refusal: null,
            reasoning_content: 'hmm',
            tool_calls: [
              { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            ],
          },
        },
      ],
      usage: {
        prompt_tokens: 2150,
        completion_tokens: 30,
        total_tokens: 2180,
        prompt_tokens_details: { cached_tokens: 2000 },
      },
    });
    for (const [stop, finish] of [
      ['end_turn', 'stop'],
      ['max_tokens', 'length'],
      ['stop_sequence', 'stop'],
      ['refusal', 'content_filter'],
    ]) {
      const r = messagesResponseToChat(
        { ...message, content: [{ type: 'text', text: 'x' }], stop_reason: stop },
        { model: 'm', created: 0 },
      );
      expect((r.choices as { finish_reason: string }[])[0]!.finish_reason).toBe(finish);
    }
  });
});

describe('Anthropic stream -> chat chunks', () => {
  const events: [string, Record<string, unknown>][] = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          usage: {
            input_tokens: 100,
            cache_read_input_tokens: 2000,
            cache_creation_input_tokens: 50,
            output_tokens: 1,
          },
        },
      },
    ],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['ping', { type: 'ping' }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Check' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ing.' } }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    [
      'content_block_start',
      {
        type: 'content_block_start',
        index: 1,
        content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} },
      },
    ],
    [
      'content_block_delta',
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"ci' } },
    ],
    [
      'content_block_delta',
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'ty":"Oslo"}' } },
    ],
    ['content_block_stop', { type: 'content_block_stop', index: 1 }],
    [
      'message_delta',
      { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 30 } },
    ],
    ['message_stop', { type: 'message_stop' }],
  ];

  it.each([true, false])('assembles the same message as the unstreamed mapping (includeUsage %s)', (includeUsage) => {
    const t = new MessagesToChatStream({ model: 'claude-sonnet-4-6', created: 1700000000, includeUsage });
    const chunks = events.flatMap(([e, d]) => t.push(e, d)) as {
      id: string;
      choices: { delta: Record<string, unknown>; finish_reason: string | null }[];
      usage?: unknown;
    }[];
    expect(t.done).toBe(true);
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(['chatcmpl-msg_01']));
    const text = chunks.map((c) => (c.choices[0]?.delta.content as string | undefined) ?? '').join('');
    const args = chunks
      .flatMap((c) => (c.choices[0]?.delta.tool_calls as { function: { arguments?: string } }[] | undefined) ?? [])
      .map((tc) => tc.function.arguments ?? '')
      .join('');
    const unstreamed = messagesResponseToChat(
      { ...message, content: message.content.slice(1) },
      { model: 'claude-sonnet-4-6', created: 1700000000 },
    ) as {
      choices: {
        message: { content: string; tool_calls: { function: { arguments: string } }[] };
        finish_reason: string;
      }[];
      usage: unknown;
    };
    expect(text).toBe(unstreamed.choices[0]!.message.content);
    expect(JSON.parse(args)).toEqual(JSON.parse(unstreamed.choices[0]!.message.tool_calls[0]!.function.arguments));
    expect(chunks.find((c) => c.choices[0]?.finish_reason)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(t.usage()).toMatchObject({ input_tokens: 100, output_tokens: 30, cache_read_input_tokens: 2000 });
    const last = chunks.at(-1)!;
    if (includeUsage) {
      expect(last.choices).toEqual([]);
      expect(last.usage).toEqual(unstreamed.usage);
      expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    } else {
      expect(chunks.every((c) => !('usage' in c))).toBe(true);
    }
  });

  it('records an error event', () => {
    const t = new MessagesToChatStream({ model: 'm', created: 0, includeUsage: false });
    expect(t.push('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toEqual([]);
    expect(t.error).toEqual({ type: 'overloaded_error', message: 'Overloaded' });
  });
});
