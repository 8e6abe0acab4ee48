import { describe, expect, it } from 'vitest';
import { builtinToolTypes, chatResponseToResponses, ChatToResponsesStream, responsesRequestToChat, TranslationError } from '../../src/inference/translate/responses-chat.ts';

const fnTool = { type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true };
const customTool = { type: 'custom', name: 'run_sql', description: 'Runs SQL' };

describe('responses request -> chat request', () => {
  it('maps instructions, items, a prior tool round trip, images, tools and options', () => {
    const chat = responsesRequestToChat({
      model: 'grok-4',
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo?' }, { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' }] },
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
    }, { upstreamModel: 'grok-4' });
    expect(chat).toEqual({
      model: 'grok-4',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo?' }, { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '3C' },
        { role: 'user', content: 'And now SQL.' },
      ],
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: fnTool.parameters, strict: true } },
        { type: 'function', function: { name: 'run_sql', description: 'Runs SQL', parameters: { type: 'object', properties: { input: { type: 'string', description: 'The tool input' } }, required: ['input'] } } },
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
    expect(builtinToolTypes({ tools: [fnTool, { type: 'web_search' }, { type: 'code_interpreter' }, { type: 'web_search' }, customTool] })).toEqual(['web_search', 'code_interpreter']);
    expect(() => responsesRequestToChat({ input: 'x', tools: [{ type: 'file_search' }] }, { upstreamModel: 'm' })).toThrow(expect.objectContaining({ code: 'unsupported_responses_tools' }));
    expect(() => responsesRequestToChat({ input: 'x', previous_response_id: 'resp_1' }, { upstreamModel: 'm' })).toThrow(TranslationError);
    expect(() => responsesRequestToChat({ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, { upstreamModel: 'm' })).toThrow(TranslationError);
  });
});

const ctx = (request: Record<string, unknown>) => ({ model: 'grok-4', request, responseId: 'resp_abc', createdAt: 1700000000 });
const chatReply = (message: Record<string, unknown>, finish = 'stop') => ({
  id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'grok-4',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
  usage: { prompt_tokens: 120, completion_tokens: 15, total_tokens: 135, prompt_tokens_details: { cached_tokens: 100 }, completion_tokens_details: { reasoning_tokens: 4 } },
});

describe('chat reply -> response', () => {
  it('text, function and custom tool calls, usage', () => {
    const r = chatResponseToResponses(chatReply({ content: 'Hi.', tool_calls: [
      { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      { id: 'call_b', type: 'function', function: { name: 'run_sql', arguments: '{"input":"select 1"}' } },
    ] }, 'tool_calls'), ctx({ tools: [fnTool, customTool] })) as { output: unknown[]; usage: unknown; status: string };
    expect(r.status).toBe('completed');
    expect(r.output).toEqual([
      { id: 'msg_abc', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hi.', annotations: [], logprobs: [] }] },
      { id: 'fc_abc_0', type: 'function_call', status: 'completed', call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { id: 'fc_abc_1', type: 'custom_tool_call', status: 'completed', call_id: 'call_b', name: 'run_sql', input: 'select 1' },
    ]);
    // Every field OpenAI's schema requires of a Response's usage, cache_write_tokens included.
    expect(r.usage).toEqual({ input_tokens: 120, input_tokens_details: { cached_tokens: 100, cache_write_tokens: 0 }, output_tokens: 15, output_tokens_details: { reasoning_tokens: 4 }, total_tokens: 135 });
  });

  it('a length finish is an incomplete response', () => {
    const r = chatResponseToResponses(chatReply({ content: 'Hi' }, 'length'), ctx({})) as { status: string; incomplete_details: unknown };
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
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { ...base, choices: [], usage: chatReply({}).usage },
    ];
    const t = new ChatToResponsesStream(ctx(request));
    const events = [...t.start(), ...chunks.flatMap((c) => t.push(c)), ...t.finish()] as { type: string; sequence_number: number; delta?: string; response?: unknown }[];
    expect(events.map((e) => e.type)).toEqual([
      'response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.function_call_arguments.done', 'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const unstreamed = chatResponseToResponses(chatReply({ content: 'Hi.', tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] }, 'tool_calls'), ctx(request));
    expect(events.at(-1)!.response).toEqual(unstreamed);
  });
});
