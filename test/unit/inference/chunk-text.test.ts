// A stream's chunk goes on as the provider's own text where the gateway's changes can be made in
// it, and that text is always the JSON of the event the gateway hands on (what is billed and what
// is sent agree); where it cannot (data on several lines, an unusual layout) the event has no text
// and is written again from its JSON.
import { describe, expect, it } from 'vitest';
import { ChatChunkProcessor } from '../../../src/inference/routes/chat.ts';
import { asIs } from '../../../src/inference/streams/stream-types.ts';

const chunk = (extra: Record<string, unknown>) =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, delta: { content: 'Hi "model"' }, logprobs: null, finish_reason: null }],
    ...extra,
  });

describe('a chat chunk passed on as text', () => {
  it("names the caller's model and drops the usage:null they did not ask for, in the provider's own text", () => {
    const p = new ChatChunkProcessor('mini', false);
    const data = chunk({ usage: null });
    const [out] = p.step({ event: 'message', data }).out!;
    expect(out!.text).toBe(
      data.replace('"model":"gpt-4o-mini-2024-07-18"', '"model":"mini"').replace(',"usage":null', ''),
    );
    expect(JSON.parse(out!.text!)).toEqual(out!.data);
    expect(out!.data.model).toBe('mini');
    expect('usage' in out!.data).toBe(false);
  });

  it('keeps the usage:null a caller asked for, and marks the finishing chunk to carry the charge', () => {
    const p = new ChatChunkProcessor('gpt-4o-mini-2024-07-18', true);
    const data = chunk({ usage: null, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] });
    const [out] = p.step({ event: 'message', data }).out!;
    expect(out!.text).toBe(data);
    expect(out!.needsCharge).toBeUndefined(); // with usage asked for, the usage chunk carries it
    const q = new ChatChunkProcessor('gpt-4o-mini-2024-07-18', false);
    const [last] = q.step({ event: 'message', data }).out!;
    expect(last!.needsCharge).toBe(true);
    expect(JSON.parse(last!.text!)).toEqual(last!.data);
  });

  it('data on several lines, or laid out otherwise, is written again from its JSON', () => {
    const p = new ChatChunkProcessor('mini', false);
    const spread = JSON.stringify(JSON.parse(chunk({ usage: null })), null, 1);
    const [out] = p.step({ event: 'message', data: spread }).out!;
    expect(out!.text).toBeUndefined();
    expect(out!.data.model).toBe('mini');
    const spaced = chunk({}).replace('"model":', '"model": ');
    expect(p.step({ event: 'message', data: spaced }).out![0]!.text).toBeUndefined();
  });

  it('an event passed on unchanged keeps its text only when it is one line', () => {
    expect(asIs('content_block_delta', { a: 1 }, { event: 'content_block_delta', data: '{"a":1}' })).toEqual({
      event: 'content_block_delta',
      data: { a: 1 },
      text: '{"a":1}',
    });
    expect(asIs('x', { a: 1 }, { event: 'x', data: '{\n"a":1}' }).text).toBeUndefined();
  });
});
