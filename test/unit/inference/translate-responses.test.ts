import { describe, expect, it } from 'vitest';
import {
  builtinToolTypes,
  chatResponseToResponses,
  ChatToolNames,
  ChatToResponsesStream,
  responsesRequestToChat,
  TranslationError,
} from '../../../src/inference/translate/responses-chat.ts';

const fnTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: true,
};
const customTool = { type: 'custom', name: 'run_sql', description: 'Runs SQL' };

describe('responses request -> chat request', () => {
  it('maps instructions, items, a prior tool round trip, images, tools and options', () => {
    const chat = responsesRequestToChat(
      {
        model: 'grok-4',
        instructions: 'Be brief.',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Weather in Oslo?' },
              { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' },
            ],
          },
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
          { type: 'function_call_output', call_id: 'call_1', output: '3C' },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'And now SQL.' }] },
        ],
        tools: [fnTool, customTool],
        tool_choice: { type: 'custom', name: 'run_sql' },
        max_output_tokens: 500,
        temperature: 0.2,
        reasoning: { effort: 'low' },
        text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
        store: true,
        stream: true,
      },
      { upstreamModel: 'grok-4' },
    );
    expect(chat).toEqual({
      model: 'grok-4',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather in Oslo?' },
            { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '3C' },
        { role: 'user', content: 'And now SQL.' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'get_weather', description: 'Weather', parameters: fnTool.parameters, strict: true },
        },
        {
          type: 'function',
          function: {
            name: 'run_sql',
            description: 'Runs SQL',
            parameters: {
              type: 'object',
              properties: { input: { type: 'string', description: 'The tool input' } },
              required: ['input'],
            },
          },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'run_sql' } },
      max_completion_tokens: 500,
      temperature: 0.2,
      reasoning_effort: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it('finds built-in tools and refuses what a stateless rewrite cannot honour', () => {
    expect(
      builtinToolTypes({
        tools: [fnTool, { type: 'web_search' }, { type: 'code_interpreter' }, { type: 'web_search' }, customTool],
      }),
    ).toEqual(['web_search', 'code_interpreter']);
    expect(() =>
      responsesRequestToChat({ input: 'x', tools: [{ type: 'file_search' }] }, { upstreamModel: 'm' }),
    ).toThrow(expect.objectContaining({ code: 'unsupported_responses_tools' }));
    expect(() =>
      responsesRequestToChat({ input: 'x', previous_response_id: 'resp_1' }, { upstreamModel: 'm' }),
    ).toThrow(TranslationError);
    expect(() =>
      responsesRequestToChat(
        { input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] },
        { upstreamModel: 'm' },
      ),
    ).toThrow(TranslationError);
  });
});

const ctx = (request: Record<string, unknown>) => ({
  model: 'grok-4',
  request,
  responseId: 'resp_abc',
  createdAt: 1700000000,
});
const chatReply = (message: Record<string, unknown>, finish = 'stop') => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'grok-4',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
  usage: {
    prompt_tokens: 120,
    completion_tokens: 15,
    total_tokens: 135,
    prompt_tokens_details: { cached_tokens: 100 },
    completion_tokens_details: { reasoning_tokens: 4 },
  },
});

describe('chat reply -> response', () => {
  it('text, function and custom tool calls, usage', () => {
    const r = chatResponseToResponses(
      chatReply(
        {
          content: 'Hi.',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_b', type: 'function', function: { name: 'run_sql', arguments: '{"input":"select 1"}' } },
          ],
        },
        'tool_calls',
      ),
      ctx({ tools: [fnTool, customTool] }),
    ) as { output: unknown[]; usage: unknown; status: string };
    expect(r.status).toBe('completed');
    expect(r.output).toEqual([
      {
        id: 'msg_abc',
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hi.', annotations: [], logprobs: [] }],
      },
      {
        id: 'fc_abc_0',
        type: 'function_call',
        status: 'completed',
        call_id: 'call_a',
        name: 'get_weather',
        arguments: '{"city":"Oslo"}',
      },
      {
        id: 'fc_abc_1',
        type: 'custom_tool_call',
        status: 'completed',
        call_id: 'call_b',
        name: 'run_sql',
        input: 'select 1',
      },
    ]);
    // Every field OpenAI's schema requires of a Response's usage, cache_write_tokens included.
    expect(r.usage).toEqual({
      input_tokens: 120,
      input_tokens_details: { cached_tokens: 100, cache_write_tokens: 0 },
      output_tokens: 15,
      output_tokens_details: { reasoning_tokens: 4 },
      total_tokens: 135,
    });
  });

  it('a length finish is an incomplete response', () => {
    const r = chatResponseToResponses(chatReply({ content: 'Hi' }, 'length'), ctx({})) as {
      status: string;
      incomplete_details: unknown;
    };
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
  });
});

describe('chat stream -> response events', () => {
  it('emits the real event sequence and ends with the same response as the unstreamed mapping', () => {
    const request = { tools: [fnTool] };
    const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'grok-4' };
    const chunks = [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { content: '.' }, finish_reason: null }] },
      {
        ...base,
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                { index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } },
              ],
            },
            finish_reason: null,
          },
        ],
      },
      {
        ...base,
        choices: [
          { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null },
        ],
      },
      {
        ...base,
        choices: [
          { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: null },
        ],
      },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { ...base, choices: [], usage: chatReply({}).usage },
    ];
    const t = new ChatToResponsesStream(ctx(request));
    const events = [...t.start(), ...chunks.flatMap((c) => t.push(c)), ...t.finish()] as {
      type: string;
      sequence_number: number;
      delta?: string;
      response?: unknown;
    }[];
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const unstreamed = chatResponseToResponses(
      chatReply(
        {
          content: 'Hi.',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          ],
        },
        'tool_calls',
      ),
      ctx(request),
    );
    expect(events.at(-1)!.response).toEqual(unstreamed);
  });
});

// Codex CLI sends its sub-agent tools as a namespace (a named group of function tools) on every
// request: the wire shape below is what it sends, and a call comes back as a function_call
// with `name` and `namespace`.
const params = (prop: string) => ({
  type: 'object',
  properties: { [prop]: { type: 'string' } },
  required: [prop],
  additionalProperties: false,
});
const agentsNamespace = {
  type: 'namespace',
  name: 'multi_agent_v1',
  description: 'Tools for spawning and managing sub-agents.',
  tools: [
    {
      type: 'function',
      name: 'spawn_agent',
      description: 'Spawn a sub-agent.',
      strict: false,
      parameters: params('message'),
    },
    {
      type: 'function',
      name: 'wait_agent',
      description: 'Wait for agents.',
      strict: false,
      parameters: params('targets'),
    },
  ],
};
const execTool = {
  type: 'function',
  name: 'exec_command',
  description: 'Runs a command.',
  strict: false,
  parameters: params('cmd'),
};

describe('namespace tools on a chat-only model', () => {
  it('flattens a namespace of functions into chat functions, and a namespaced call in history to the same name', () => {
    const chat = responsesRequestToChat(
      {
        input: [
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Split the work.' }] },
          {
            type: 'function_call',
            call_id: 'call_1',
            name: 'spawn_agent',
            namespace: 'multi_agent_v1',
            arguments: '{"message":"a"}',
          },
          { type: 'function_call_output', call_id: 'call_1', output: 'agent-1' },
        ],
        tools: [execTool, agentsNamespace],
        tool_choice: { type: 'function', name: 'wait_agent', namespace: 'multi_agent_v1' },
      },
      { upstreamModel: 'gpt-4o-mini' },
    ) as {
      messages: unknown[];
      tools: { function: { name: string; description?: string; parameters: unknown } }[];
      tool_choice: unknown;
    };
    expect(chat.tools.map((t) => t.function.name)).toEqual([
      'exec_command',
      'multi_agent_v1__spawn_agent',
      'multi_agent_v1__wait_agent',
    ]);
    expect(chat.tools[1]!.function).toEqual({
      name: 'multi_agent_v1__spawn_agent',
      description: 'Spawn a sub-agent.',
      parameters: params('message'),
      strict: false,
    });
    expect(chat.messages[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"a"}' },
        },
      ],
    });
    expect(chat.tool_choice).toEqual({ type: 'function', function: { name: 'multi_agent_v1__wait_agent' } });
  });

  it('answers a call to a flattened name with the name and namespace the caller declared, unstreamed and streamed alike', () => {
    const request = { tools: [execTool, agentsNamespace] };
    const calls = [
      {
        id: 'call_a',
        type: 'function',
        function: { name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"go"}' },
      },
      { id: 'call_b', type: 'function', function: { name: 'exec_command', arguments: '{"cmd":"ls"}' } },
    ];
    const r = chatResponseToResponses(chatReply({ content: null, tool_calls: calls }, 'tool_calls'), ctx(request)) as {
      output: unknown[];
    };
    expect(r.output).toEqual([
      {
        id: 'fc_abc_0',
        type: 'function_call',
        status: 'completed',
        call_id: 'call_a',
        name: 'spawn_agent',
        namespace: 'multi_agent_v1',
        arguments: '{"message":"go"}',
      },
      {
        id: 'fc_abc_1',
        type: 'function_call',
        status: 'completed',
        call_id: 'call_b',
        name: 'exec_command',
        arguments: '{"cmd":"ls"}',
      },
    ]);

    const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini' };
    const t = new ChatToResponsesStream(ctx(request));
    const events = [
      ...t.start(),
      ...[
        {
          ...base,
          choices: [
            {
              index: 0,
              delta: {
                role: 'assistant',
                content: null,
                tool_calls: [
                  {
                    index: 0,
                    id: 'call_a',
                    type: 'function',
                    function: { name: 'multi_agent_v1__spawn_agent', arguments: '' },
                  },
                ],
              },
              finish_reason: null,
            },
          ],
        },
        {
          ...base,
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index: 0, function: { arguments: '{"message":"go"}' } }] },
              finish_reason: null,
            },
          ],
        },
        {
          ...base,
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  {
                    index: 1,
                    id: 'call_b',
                    type: 'function',
                    function: { name: 'exec_command', arguments: '{"cmd":"ls"}' },
                  },
                ],
              },
              finish_reason: null,
            },
          ],
        },
        { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
        { ...base, choices: [], usage: chatReply({}).usage },
      ].flatMap((c) => t.push(c)),
      ...t.finish(),
    ] as { type: string; item?: Record<string, unknown>; response?: unknown }[];
    const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item);
    expect(added).toEqual([
      {
        id: 'fc_abc_0',
        type: 'function_call',
        status: 'in_progress',
        call_id: 'call_a',
        name: 'spawn_agent',
        namespace: 'multi_agent_v1',
        arguments: '',
      },
      {
        id: 'fc_abc_1',
        type: 'function_call',
        status: 'in_progress',
        call_id: 'call_b',
        name: 'exec_command',
        arguments: '',
      },
    ]);
    expect(events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item)).toEqual(r.output);
    expect(events.at(-1)!.response).toEqual(
      chatResponseToResponses(chatReply({ content: null, tool_calls: calls }, 'tool_calls'), ctx(request)),
    );
  });

  it('gives names that cannot collide: with a top-level tool of the flat name, across namespaces, and past 64 characters', () => {
    const long = 'n'.repeat(60);
    const request = {
      tools: [
        { type: 'function', name: 'a__b_c' },
        { type: 'namespace', name: 'a', description: '', tools: [{ type: 'function', name: 'b_c' }] },
        { type: 'namespace', name: 'a__b', description: '', tools: [{ type: 'function', name: 'c' }] },
        {
          type: 'namespace',
          name: long,
          description: '',
          tools: [
            { type: 'function', name: 'x' },
            { type: 'function', name: 'y' },
          ],
        },
        { type: 'namespace', name: 'has.dot', description: '', tools: [{ type: 'custom', name: 'patch' }] },
      ],
    };
    const names = new ChatToolNames(request);
    const flat = [
      names.chatName('a__b_c'),
      names.chatName('b_c', 'a'),
      names.chatName('c', 'a__b'),
      names.chatName('x', long),
      names.chatName('y', long),
      names.chatName('patch', 'has.dot'),
    ];
    expect(new Set(flat).size).toBe(flat.length);
    for (const n of flat) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(flat[0]).toBe('a__b_c'); // a top-level tool keeps its own name
    expect(names.ref(flat[1]!)).toEqual({ name: 'b_c', namespace: 'a', custom: false });
    expect(names.ref(flat[2]!)).toEqual({ name: 'c', namespace: 'a__b', custom: false });
    expect(names.ref(flat[4]!)).toEqual({ name: 'y', namespace: long, custom: false });
    expect(names.ref(flat[5]!)).toEqual({ name: 'patch', namespace: 'has.dot', custom: true });
    // Deterministic: the next turn of the conversation sends the same tools and gets the same names.
    const again = new ChatToolNames(request);
    expect([
      again.chatName('a__b_c'),
      again.chatName('b_c', 'a'),
      again.chatName('c', 'a__b'),
      again.chatName('x', long),
      again.chatName('y', long),
      again.chatName('patch', 'has.dot'),
    ]).toEqual(flat);
    // A custom tool inside a namespace comes back as a custom_tool_call with its namespace.
    const r = chatResponseToResponses(
      chatReply(
        {
          content: null,
          tool_calls: [
            { id: 'call_p', type: 'function', function: { name: flat[5], arguments: '{"input":"*** Begin Patch"}' } },
          ],
        },
        'tool_calls',
      ),
      ctx(request),
    ) as { output: unknown[] };
    expect(r.output).toEqual([
      {
        id: 'fc_abc_0',
        type: 'custom_tool_call',
        status: 'completed',
        call_id: 'call_p',
        name: 'patch',
        namespace: 'has.dot',
        input: '*** Begin Patch',
      },
    ]);
  });

  it('still refuses built-in tools, beside a namespace or inside one', () => {
    expect(builtinToolTypes({ tools: [execTool, agentsNamespace] })).toEqual([]);
    expect(builtinToolTypes({ tools: [agentsNamespace, { type: 'web_search' }] })).toEqual(['web_search']);
    expect(
      builtinToolTypes({ tools: [{ type: 'namespace', name: 'x', description: '', tools: [{ type: 'web_search' }] }] }),
    ).toEqual(['namespace']);
    expect(() =>
      responsesRequestToChat({ input: 'x', tools: [agentsNamespace, { type: 'web_search' }] }, { upstreamModel: 'm' }),
    ).toThrow(expect.objectContaining({ code: 'unsupported_responses_tools' }));
  });
});
