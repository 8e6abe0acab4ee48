import { describe, expect, it } from 'vitest';
import { asksForStream } from '../../../src/facade/stream-flag.ts';
import { withLeadingMember } from '../../../src/inference/routes/chat.ts';

// The scan must answer as JSON.parse(body).stream === true does, for every body that parses.
const byParse = (s: string) => {
  try {
    return (JSON.parse(s) as { stream?: unknown })?.stream === true;
  } catch {
    return false;
  }
};

describe('asksForStream: "stream": true at the top level, without parsing the body', () => {
  const cases: [string, boolean][] = [
    ['{"model":"m","stream":true}', true],
    ['{ "stream" : true , "model":"m"}', true],
    ['{\n\t"stream":\ntrue\n}', true],
    ['{"model":"m","stream":false}', false],
    ['{"model":"m","stream":"true"}', false],
    ['{"model":"m","stream":1}', false],
    ['{"model":"m","stream":null}', false],
    ['{"model":"m"}', false],
    ['{"model":"m","stream":trueish}', false], // not JSON
    // Nested, or inside strings: not the top-level flag.
    ['{"model":"m","metadata":{"stream":true}}', false],
    ['{"model":"m","tools":[{"stream":true}],"x":{"a":[{"stream":true}]}}', false],
    ['{"model":"m","messages":[{"role":"user","content":"\\"stream\\": true"}]}', false],
    ['{"model":"m","messages":[{"content":"say \\\\"}],"stream":true}', true], // a string ending in a backslash
    ['{"model":"m","note":"\\\\\\"stream\\\\\\":true","stream":false}', false],
    // Duplicate keys: the last one counts, as in JSON.parse.
    ['{"stream":true,"stream":false}', false],
    ['{"stream":false,"stream":true}', true],
    // Keys written with escapes are judged by JSON.parse, once the word appears unescaped.
    ['{"str\\u0065am":true,"note":"stream"}', true],
    ['{"str\\u0065am":false,"stream":true}', true],
    ['{"stream":true,"str\\u0065am":false}', false],
    // A value that is an object or array at the top level, then the flag.
    ['{"a":{"b":[1,2,{"c":"}"}]},"stream":true}', true],
    ['{"a":"{","stream":true}', true],
  ];
  for (const [body, want] of cases) {
    it(`${body} -> ${want}`, () => {
      if (byParse(body) !== want && !body.includes('trueish')) throw new Error('the case itself is wrong');
      expect(asksForStream(Buffer.from(body))).toBe(want);
    });
  }

  it('answers false for empty and missing bodies, and for bodies without the word (even spelled with escapes)', () => {
    expect(asksForStream(Buffer.from('{"str\\u0065am":true}'))).toBe(false);
    expect(asksForStream(undefined)).toBe(false);
    expect(asksForStream(Buffer.alloc(0))).toBe(false);
    expect(asksForStream(Buffer.from('not json at all'))).toBe(false);
  });

  it('agrees with JSON.parse on generated bodies', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const atoms = ['"stream"', 'true', 'false', 'null', '"\\"stream\\":true"', '"\\\\"', '"x"', '1'];
    const value = (d: number): unknown => {
      const k = rnd(d > 2 ? 4 : 6);
      if (k === 4)
        return Object.fromEntries(Array.from({ length: rnd(3) }, () => [rnd(2) ? 'stream' : 'k', value(d + 1)]));
      if (k === 5) return Array.from({ length: rnd(3) }, () => value(d + 1));
      return JSON.parse(atoms[rnd(atoms.length)]!);
    };
    for (let n = 0; n < 2000; n++) {
      const members = Array.from(
        { length: 1 + rnd(4) },
        () => `${rnd(3) ? '"stream"' : '"k"'}${rnd(2) ? ' : ' : ':'}${JSON.stringify(value(0))}`,
      );
      const body = `{${members.join(rnd(2) ? ', ' : ',')}}`;
      expect(asksForStream(Buffer.from(body)), body).toBe(byParse(body));
    }
  });
});

describe('withLeadingMember: a member put in front of a body without re-encoding it', () => {
  it('gives the same object with the member added, whitespace and non-ASCII kept as sent', () => {
    const dec = new TextDecoder();
    for (const body of [
      '{"model":"m","messages":[{"role":"user","content":"é \\u00e9"}]}',
      ' \n{ "model" : "m" }',
      '{"a":{"b":[1,{"c":"}"}]}}',
    ]) {
      const out = withLeadingMember(new TextEncoder().encode(body), '"stream_options":{"include_usage":true}');
      expect(JSON.parse(dec.decode(out))).toEqual({ stream_options: { include_usage: true }, ...JSON.parse(body) });
      expect(dec.decode(out).endsWith(body.slice(body.indexOf('{') + 1))).toBe(true);
    }
  });
});
