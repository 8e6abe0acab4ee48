// Which ids in a request name objects of the operator's provider account, which name stored
// responses and items that must be the caller's, and how SHARED_PROVIDER_OBJECTS reads.
import { describe, expect, it } from 'vitest';
import { operatorObjectRefusal, NOTHING_SHARED, type WireFormat } from '../../../src/tenancy/operator-objects.ts';
import { storedIds, storedRefs } from '../../../src/tenancy/response-owners.ts';
import { chatPolicy, messagesPolicy, responsesPolicy } from '../../../src/metering/bill-policy.ts';
import { Catalogue } from '../../../src/catalogue/catalogue.ts';
import { loadConfig, parseSharedKinds, SHARED_KINDS, type SharedKind } from '../../../src/config/config.ts';

type Json = Record<string, unknown>;
const catalogue = new Catalogue(loadConfig({ OPENAI_API_KEY: 'sk-x', ANTHROPIC_API_KEY: 'sk-x' }));
const model = (id: string) => catalogue.get(id)!;

describe('objects of the operator found wherever a request names them', () => {
  const cases: [SharedKind, string, WireFormat, Json][] = [
    ['conversation', 'conversation', 'responses', { conversation: 'conv_1' }],
    ['conversation', 'conversation', 'responses', { conversation: { id: 'conv_1' } }],
    ['prompt', 'prompt', 'responses', { prompt: { id: 'pmpt_1', version: '2' } }],
    ['file', 'input', 'responses', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] }],
    [
      'file',
      'input',
      'responses',
      { input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', file_id: 'file-1' }] }] },
    ],
    [
      'file',
      'tools',
      'responses',
      { tools: [{ type: 'code_interpreter', container: { type: 'auto', file_ids: ['file-1'] } }] },
    ],
    ['vector_store', 'tools', 'responses', { tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }],
    ['container', 'tools', 'responses', { tools: [{ type: 'code_interpreter', container: 'cntr_1' }] }],
    [
      'container',
      'tools',
      'responses',
      { tools: [{ type: 'shell', environment: { type: 'container_reference', container_id: 'cntr_1' } }] },
    ],
    [
      'vector_store',
      'tools',
      'responses',
      { tools: [{ type: 'namespace', tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }] },
    ],
    [
      'file',
      'messages',
      'chat',
      { messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] },
    ],
    [
      'file',
      'messages',
      'messages',
      { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: 'file_1' } }] }] },
    ],
    [
      'file',
      'messages',
      'messages',
      {
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }],
              },
            ],
          },
        ],
      },
    ],
    [
      'file',
      'messages',
      'messages',
      { messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: 'file_1' }] }] },
    ],
    [
      'file',
      'system',
      'messages',
      { system: [{ type: 'document', source: { type: 'file', file_id: 'file_1' } }], messages: [] },
    ],
    ['container', 'container', 'messages', { container: 'container_1' }],
    ['container', 'container', 'messages', { container: { id: 'container_1' } }],
    ['skill', 'container', 'messages', { container: { skills: [{ type: 'custom', skill_id: 'skill_1' }] } }],
  ];

  it.each(cases)(
    '%s in %s (%s) is refused with a 400 naming the parameter, and passes once shared',
    (kind, param, format, body) => {
      const r = operatorObjectRefusal(format, body, NOTHING_SHARED);
      expect(r).toMatchObject({ param, code: 'provider_object_not_shared' });
      expect(operatorObjectRefusal(format, body, new Set([kind]))).toBeUndefined();
      expect(operatorObjectRefusal(format, body, new Set(SHARED_KINDS.filter((k) => k !== kind)))).toMatchObject({
        param,
      });
    },
  );

  it("a file in a shared prompt's variables is still a file", () => {
    const body = { prompt: { id: 'pmpt_1', variables: { doc: { type: 'input_file', file_id: 'file-1' } } } };
    expect(operatorObjectRefusal('responses', body, new Set(['prompt']))).toMatchObject({
      param: 'prompt',
      message: expect.stringContaining("a file ('file-1')"),
    });
    expect(operatorObjectRefusal('responses', body, new Set(['prompt', 'file']))).toBeUndefined();
  });

  it("content sent inline or by URL, and Anthropic skills, are nobody's objects", () => {
    expect(
      operatorObjectRefusal(
        'responses',
        {
          input: [
            {
              role: 'user',
              content: [
                { type: 'input_file', file_url: 'https://x/y.pdf' },
                { type: 'input_file', file_data: 'data:application/pdf;base64,AA' },
                { type: 'input_image', image_url: 'https://x/i.png' },
              ],
            },
          ],
        },
        NOTHING_SHARED,
      ),
    ).toBeUndefined();
    expect(
      operatorObjectRefusal(
        'chat',
        {
          messages: [
            { role: 'user', content: [{ type: 'file', file: { file_data: 'data:application/pdf;base64,AA' } }] },
          ],
        },
        NOTHING_SHARED,
      ),
    ).toBeUndefined();
    expect(
      operatorObjectRefusal(
        'messages',
        {
          container: { skills: [{ type: 'anthropic', skill_id: 'pptx' }] },
          messages: [
            { role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://x/y.pdf' } }] },
          ],
        },
        NOTHING_SHARED,
      ),
    ).toBeUndefined();
  });

  it('bill-policy asks first, so the refusal comes out of the same policy as every other', () => {
    expect(responsesPolicy({ conversation: 'conv_1', input: 'x' }, model('gpt-5.5')).refusal?.param).toBe(
      'conversation',
    );
    expect(
      chatPolicy({ messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'f' } }] }] }, model('gpt-4o'))
        .refusal?.code,
    ).toBe('provider_object_not_shared');
    expect(messagesPolicy({ container: 'c_1' }, model('claude-haiku-4-5')).refusal?.code).toBe(
      'provider_object_not_shared',
    );
    // Shared, the billing rules still decide: containers are billed by the hour, unpriced.
    const shared = new Set<SharedKind>(['container']);
    expect(messagesPolicy({ container: 'c_1' }, model('claude-haiku-4-5'), shared).refusal).toMatchObject({
      param: 'container',
      code: 'unsupported_parameter',
    });
    expect(
      responsesPolicy({ conversation: 'conv_1', input: 'x' }, model('gpt-5.5'), new Set(['conversation'])).worst.unseen,
    ).toBe('conversation');
  });
});

describe('SHARED_PROVIDER_OBJECTS', () => {
  it('reads a comma-separated list of kinds; unset or empty shares nothing', () => {
    expect([...parseSharedKinds(' File, prompt ,,conversation')]).toEqual(['file', 'prompt', 'conversation']);
    expect(parseSharedKinds(undefined).size).toBe(0);
    expect(parseSharedKinds('').size).toBe(0);
    expect(loadConfig({}).sharedProviderObjects.size).toBe(0);
    expect([...loadConfig({ SHARED_PROVIDER_OBJECTS: 'vector_store' }).sharedProviderObjects]).toEqual([
      'vector_store',
    ]);
  });

  it('an unknown kind stops the start with a message that names the setting and the kinds', () => {
    expect(() => loadConfig({ SHARED_PROVIDER_OBJECTS: 'files' })).toThrow(
      /SHARED_PROVIDER_OBJECTS: unknown kind "files"; the kinds are conversation, prompt, file, vector_store, container, skill/,
    );
    expect(() => parseSharedKinds('all')).toThrow(/unknown kind "all"/);
  });
});

describe('stored responses and items a request names', () => {
  it('previous_response_id, item references and reasoning items without their encrypted content', () => {
    expect(storedRefs({ input: 'hi' })).toBeUndefined();
    expect(storedRefs({ previous_response_id: 'resp_1', input: 'hi' })).toEqual({
      previousResponseId: 'resp_1',
      itemIds: [],
    });
    expect(
      storedRefs({
        input: [
          { type: 'item_reference', id: 'msg_1' },
          { type: 'reasoning', id: 'rs_1', summary: [] },
          { type: 'reasoning', id: 'rs_2', summary: [], encrypted_content: 'gAAAA' },
          { type: 'message', id: 'msg_2', role: 'assistant', content: [{ type: 'output_text', text: 'inline' }] },
          { type: 'function_call', id: 'fc_1', call_id: 'c', name: 'f', arguments: '{}' },
          { type: 'image_generation_call', id: 'ig_1', status: 'completed' },
          { type: 'image_generation_call', id: 'ig_2', status: 'completed', result: 'iVBORw0' },
        ],
      }),
    ).toEqual({ itemIds: ['msg_1', 'rs_1', 'ig_1'] });
    // Not a string: still checked (and found nobody's), never passed through unchecked.
    expect(storedRefs({ previous_response_id: 42, input: 'x' })).toEqual({ previousResponseId: '42', itemIds: [] });
  });

  it("a stored response's own id and its output items' ids", () => {
    expect(
      storedIds({
        id: 'resp_1',
        output: [{ id: 'rs_1', type: 'reasoning' }, { id: 'msg_1', type: 'message' }, { type: 'x' }],
      }),
    ).toEqual(['resp_1', 'rs_1', 'msg_1']);
    expect(storedIds({ output: [{ id: 'msg_1' }] })).toEqual(['msg_1']);
  });
});
