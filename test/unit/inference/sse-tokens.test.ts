import { describe, expect, it } from 'vitest';
import { SseParser } from '../../../src/inference/streams/sse.ts';
import { countInputTokens, inputTokensUpperBound } from '../../../src/inference/tokens.ts';
import { MODELS } from '../../../src/catalogue/shipped-book.ts';

const gpt4oMini = MODELS.find((m) => m.id === 'gpt-4o-mini')!;

async function collect(chunks: (string | Uint8Array)[]) {
  const p = new SseParser();
  return [...chunks.flatMap((c) => p.push(c)), ...p.end()];
}

describe('sse reader', () => {
  it('splits events across arbitrary chunk boundaries, CRLF and multi-byte characters', async () => {
    const text = 'data: {"a":"é€"}\n\n: comment\n\nevent: error\ndata: line1\ndata: line2\r\n\r\ndata: [DONE]\n\n';
    const bytes = new TextEncoder().encode(text);
    const pieces: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += 3) pieces.push(bytes.slice(i, i + 3));
    expect(await collect(pieces)).toEqual([
      { event: 'message', data: '{"a":"é€"}' },
      { event: 'error', data: 'line1\nline2' },
      { event: 'message', data: '[DONE]' },
    ]);
  });

  it('yields a last event that has no trailing blank line', async () => {
    expect(await collect(['data: x'])).toEqual([{ event: 'message', data: 'x' }]);
  });

  it('hands over every event a read completes at once, and keeps an unfinished one for the next read', () => {
    const p = new SseParser();
    expect(p.push('data: 1\n\ndata: 2\r\n\r\nevent: e\ndata: 3\n\ndata: 4')).toEqual([
      { event: 'message', data: '1' },
      { event: 'message', data: '2' },
      { event: 'e', data: '3' },
    ]);
    expect(p.push('\n')).toEqual([]);
    expect(p.push('\ndata: 5\n')).toEqual([{ event: 'message', data: '4' }]);
    expect(p.end()).toEqual([{ event: 'message', data: '5' }]);
    expect(p.end()).toEqual([]);
  });
});

describe('token estimates', () => {
  const body = {
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are terse.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Describe this picture in detail, please — ünïcödé.' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,' + 'A'.repeat(50_000) } },
        ],
      },
    ],
    tools: [
      {
        type: 'function',
        function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
      },
    ],
  };

  it('the hold bound is never below the counted tokens, and ignores image bytes', () => {
    const upper = inputTokensUpperBound(body, gpt4oMini);
    const counted = countInputTokens(body, gpt4oMini);
    expect(upper).toBeGreaterThanOrEqual(counted);
    // The bytes are no image it can read: gpt-4o-mini's largest (48,169 tokens), not 50,000 bytes of base64.
    expect(upper - 48_169).toBeLessThan(5_000);
  });

  it('counts text with a real tokenizer', () => {
    const short = countInputTokens({ messages: [{ role: 'user', content: 'hello world' }] });
    const long = countInputTokens({ messages: [{ role: 'user', content: 'hello world '.repeat(100) }] });
    expect(short).toBeGreaterThan(2);
    expect(long - short).toBeGreaterThanOrEqual(190);
  });
});
