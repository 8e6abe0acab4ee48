// A provider's JSON changed at one top-level member in its text (src/inference/upstream/reply-text.ts):
// wherever it answers, the text parses to the object changed as JSON.stringify would have written
// it, and where it cannot be certain it answers nothing.
import { describe, expect, it } from 'vitest';
import { replyNamingModel, withTopLevelMember } from '../../../src/inference/upstream/reply-text.ts';
import type { Json } from '../../../src/metering/plan.ts';
import { mulberry32 } from '../../support/random.ts';

const change = (text: string, key: string, value: unknown) =>
  withTopLevelMember(text, JSON.parse(text) as Json, key, value);

describe('a top-level member changed in the text', () => {
  it('sets a member in place and drops one with its comma, keeping every other byte', () => {
    const chunk =
      '{"id":"c1","model":"gpt-4o-mini-2024-07-18","choices":[{"delta":{"content":"1.0e2 "}}],"usage":null}';
    expect(change(chunk, 'model', 'gpt-4o-mini')).toBe(
      '{"id":"c1","model":"gpt-4o-mini","choices":[{"delta":{"content":"1.0e2 "}}],"usage":null}',
    );
    expect(change(chunk, 'usage', undefined)).toBe(
      '{"id":"c1","model":"gpt-4o-mini-2024-07-18","choices":[{"delta":{"content":"1.0e2 "}}]}',
    );
    expect(change('{"usage":null,"id":1.50}', 'usage', undefined)).toBe('{"id":1.50}');
    expect(change('{"usage":null}', 'usage', undefined)).toBe('{}');
    // A quoted "model" inside a string is escaped: still one member named model.
    expect(change('{"content":"say \\"model\\" here","model":"a"}', 'model', 'b')).toBe(
      '{"content":"say \\"model\\" here","model":"b"}',
    );
  });

  it('answers nothing where it cannot be certain', () => {
    const unsure = [
      ['{"model": "a"}', 'model'], // not written as JSON.stringify writes it
      ['{"id":1, "usage":null ,"x":2}', 'usage'], // whitespace beside the commas
      ['{"model":"a","model":"b"}', 'model'], // twice
      ['{"model":"a","meta":{"model":"a"}}', 'model'], // a nested one
      ['{"mod\\u0065l":"a","x":{"model":"a"}}', 'model'], // the member's name escaped
      ['{"content":"ends in \\"model","model":"a"}', 'model'], // a string ending in "model
      ['{"model":"a\\/b"}', 'model'], // its value written otherwise than JSON.stringify writes it
      ['{"id":1}', 'model'], // no such member
    ] as const;
    for (const [text, key] of unsure)
      expect(change(text, key, key === 'usage' ? undefined : 'z'), text).toBeUndefined();
  });

  it('on 5,000 random objects, whatever it answers parses to the object changed, in the same member order', () => {
    const random = mulberry32(44);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
    const words = ['model', 'usage', '"model"', 'a\\"model', 'null', ',', '{', '}', 'é', '\u2028', 'x'];
    const value = (depth: number): unknown => {
      const r = random();
      if (depth > 2 || r < 0.3) return pick([null, 1, 1.5, true, 'gpt-4o', '']);
      if (r < 0.6) return Array.from({ length: Math.floor(random() * 4) }, () => pick(words)).join(' ');
      if (r < 0.75) return [value(depth + 1), value(depth + 1)];
      return object(depth + 1);
    };
    const object = (depth: number): Record<string, unknown> => {
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(random() * 5); i > 0; i--)
        o[pick(['id', 'model', 'usage', 'choices', 'x', 'y'])] = value(depth);
      return o;
    };
    let answered = 0;
    for (let i = 0; i < 5_000; i++) {
      const o = object(0);
      const key = pick(['model', 'usage']);
      const next = key === 'model' ? 'gpt-4o-mini' : undefined;
      const spaced = random() < 0.2;
      const text = spaced ? JSON.stringify(o, null, 1) : JSON.stringify(o);
      const got = withTopLevelMember(text, JSON.parse(text) as Json, key, next);
      if (got === undefined) continue;
      answered++;
      const expected: Record<string, unknown> = { ...o };
      if (next === undefined) delete expected[key];
      else expected[key] = next;
      expect(JSON.stringify(JSON.parse(got)), text).toBe(JSON.stringify(expected));
    }
    expect(answered).toBeGreaterThan(500); // 755 with this seed: the answering path is exercised
  });

  it("a unary reply keeps its own bytes when it names the caller's model, and otherwise names it", () => {
    const text = '{"id":"r","model":"gpt-4o-mini-2024-07-18","usage":{"total_tokens":3}}';
    const bytes = new TextEncoder().encode(text);
    const json = JSON.parse(text) as Json;
    expect(replyNamingModel({ text, json, bytes }, 'gpt-4o-mini-2024-07-18')).toBe(bytes);
    const renamed = new TextDecoder().decode(replyNamingModel({ text, json, bytes }, 'mini'));
    expect(renamed).toBe('{"id":"r","model":"mini","usage":{"total_tokens":3}}');
    // Without a model member: the reply written again, with it last.
    const bare = '{"id":"r"}';
    expect(new TextDecoder().decode(replyNamingModel({ text: bare, json: JSON.parse(bare), bytes }, 'mini'))).toBe(
      '{"id":"r","model":"mini"}',
    );
  });
});
