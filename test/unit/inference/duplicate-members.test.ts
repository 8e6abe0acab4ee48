import { describe, expect, it } from 'vitest';
import { duplicateMember, duplicateMemberRefusal } from '../../../src/inference/duplicate-members.ts';
import { Form } from '../../../src/inference/media/common.ts';
import { toGatewayError } from '../../../src/errors/errors.ts';
import { create } from '@bufbuild/protobuf';
import { FormPartSchema } from '../../../src/gen/gateway/v1/inference_pb.js';

/** The check as the engine runs it: on the text JSON.parse read, after it parsed. */
const check = (text: string) => duplicateMember(text, JSON.parse(text) as object);

describe('duplicateMember: the first member a body names twice in one object', () => {
  const cases: [string, string, string | undefined][] = [
    [
      'the issue: a second model at the end',
      '{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":16,"model":"gpt-5.4-nano"}',
      'model',
    ],
    ['a top-level number twice', '{"model":"m","n":1,"n":8}', 'n'],
    ['whitespace around the colons', '{ "stream" : false ,\n\t"stream"\r\n:\ttrue }', 'stream'],
    ['a member whose values are arrays', '{"tools":[],"tools":[{"type":"function"}]}', 'tools'],
    [
      'inside a priced object',
      '{"model":"m","stream_options":{"include_usage":false,"include_usage":true}}',
      'stream_options.include_usage',
    ],
    [
      'in an array of objects',
      '{"tools":[{"type":"function","name":"f"},{"type":"function","name":"g","type":"web_search"}]}',
      'tools[1].type',
    ],
    [
      'deep in a message part',
      '{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral","ttl":"5m","ttl":"1h"}}]}]}',
      'messages[1].content[0].cache_control.ttl',
    ],
    ['arrays nested in arrays', '{"a":[[1,2],[{"x":1}],[3,{"y":1,"y":2}]]}', 'a[2][1].y'],
    ['the first repeat in the text wins', '{"a":{"b":1,"b":2},"a":3}', 'a.b'],
    ['a name that is not a plain word', '{"metadata":{"a b":1,"a b":2}}', 'metadata["a b"]'],
    ['a top-level name that is not a plain word', '{"x.y":1,"x.y":2}', '["x.y"]'],
    // Names compared as JSON.parse reads them: escapes decoded.
    ['a name spelled with an escape', '{"model":"a","mod\\u0065l":"b"}', 'model'],
    ['both spelled with escapes', '{"\\u006d\\u006fdel":"a","m\\u006f\\u0064el":"b"}', 'model'],
    ['an escaped slash', '{"a/b":1,"a\\/b":2}', '["a/b"]'],
    ['a name with an escaped quote', '{"x":{"a\\"b":1,"a\\u0022b":2}}', 'x["a\\"b"]'],
    ['non-ASCII names', '{"modèle":1,"mod\\u00e8le":2}', '["modèle"]'],
    // Strings that look like structure are skipped whole.
    ['a value that ends in a backslash', '{"a":"\\\\","a":1}', 'a'],
    // No repeat: the same name in different objects, look-alikes inside strings.
    ['the same name in sibling and nested objects', '{"a":{"x":1},"b":{"x":2},"x":3,"c":[{"x":1},{"x":2}]}', undefined],
    [
      'quotes, colons and braces inside strings',
      '{"note":"\\"model\\": \\"x\\", {\\"model\\":1}","model":"m","s":"}]{[,:"}',
      undefined,
    ],
    ['a name that differs only after an escape', '{"model":"a","model\\u0000":"b"}', undefined],
    ['strings of backslashes', '{"a":"\\\\\\"","b":"\\\\\\\\","c":"x\\\\"}', undefined],
    ['an empty object and array', '{"a":{},"b":[],"c":[{}]}', undefined],
    ['an empty name once', '{"":1,"a":{"":2}}', undefined],
  ];
  for (const [label, body, want] of cases) {
    it(`${label}: ${want ?? 'none'}`, () => {
      expect(check(body)).toBe(want);
    });
  }

  it('names two empty names as such', () => {
    expect(check('{"":1,"":2}')).toBe('[""]');
  });

  it('sees names that JSON.parse reads as the same after replacing invalid UTF-8', () => {
    // The engine decodes the body as UTF-8 before JSON.parse: 0xFF and 0xFE both become U+FFFD.
    const text = Buffer.from([
      ...Buffer.from('{"'),
      0xff,
      ...Buffer.from('":1,"'),
      0xfe,
      ...Buffer.from('":2}'),
    ]).toString('utf8');
    expect(check(text)).toBe('["\uFFFD"]');
  });

  it('handles bodies nested 100,000 levels deep without overflowing the stack', () => {
    const depth = 100_000;
    const deepRepeat = `${'{"a":'.repeat(depth)}{"x":1,"x":2}${'}'.repeat(depth)}`;
    const found = check(deepRepeat);
    expect(found?.startsWith('a.a.a.')).toBe(true);
    expect(found?.endsWith('.a.x')).toBe(true);
    expect(found?.length).toBe(depth * 2 + 1);
    expect(check(`{"k":${'['.repeat(depth)}${']'.repeat(depth)},"k2":1}`)).toBe(undefined);
  });

  it('agrees with a plain reader of the same bodies, generated with many repeats', () => {
    let seed = 3;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return (seed >>> 16) % n; // the high bits: the low ones of this generator repeat quickly
    };
    // Few names, some written with escapes, so repeats are common; strings full of look-alikes.
    const names = ['a', 'b', 'type', 'model'];
    const spell = (name: string) =>
      rnd(3) === 0
        ? `"${name.slice(0, -1)}\\u${name
            .charCodeAt(name.length - 1)
            .toString(16)
            .padStart(4, '0')}"`
        : `"${name}"`;
    const strings = ['"x"', '"\\"a\\": {"', '"\\\\"', '"]}[{,:"', '""'];
    const space = () => [' ', '', '\n', ''][rnd(4)]!;
    const value = (depth: number): string => {
      const kind = depth > 4 ? rnd(3) : rnd(6);
      if (kind === 0) return strings[rnd(strings.length)]!;
      if (kind === 1) return String(rnd(100));
      if (kind === 2) return ['true', 'null'][rnd(2)]!;
      if (kind === 3) return `[${Array.from({ length: rnd(4) }, () => value(depth + 1)).join(',')}]`;
      return object(depth, rnd(5));
    };
    const object = (depth: number, size: number) =>
      `{${Array.from({ length: size }, () => `${space()}${spell(names[rnd(names.length)]!)}${space()}:${space()}${value(depth + 1)}`).join(',')}}`;
    let repeats = 0;
    for (let i = 0; i < 2000; i++) {
      const text = object(0, 1 + rnd(4));
      const want = expectedFirst(text);
      if (want !== undefined) repeats++;
      expect(check(text), text).toBe(want);
    }
    expect(repeats).toBeGreaterThan(200);
    expect(repeats).toBeLessThan(1900);
  });
});

/**
 * The reference answer: a straightforward recursive reader that keeps each object's names as
 * JSON.parse decodes them (slow, and recursive: for small generated bodies only).
 */
function expectedFirst(text: string): string | undefined {
  let i = 0;
  let found: string | undefined;
  const ws = () => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const str = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const join = (path: string, name: string) =>
    /^[A-Za-z_$][\w$-]*$/.test(name) ? (path === '' ? name : `${path}.${name}`) : `${path}[${JSON.stringify(name)}]`;
  const value = (path: string): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      ws();
      while (text[i] !== '}') {
        ws();
        const name = str();
        if (seen.has(name)) found ??= join(path, name);
        seen.add(name);
        ws();
        i++; // colon
        value(join(path, name));
        ws();
        if (text[i] === ',') i++;
        ws();
      }
      i++;
    } else if (c === '[') {
      i++;
      ws();
      for (let k = 0; text[i] !== ']'; k++) {
        value(`${path}[${k}]`);
        ws();
        if (text[i] === ',') i++;
        ws();
      }
      i++;
    } else if (c === '"') {
      str();
    } else {
      while (i < text.length && !/[\s,\]}]/.test(text[i]!)) i++;
    }
  };
  value('');
  return found;
}

describe('Form.repeatedField: a multipart text field sent twice', () => {
  const text = (name: string, value: string) => create(FormPartSchema, { name, data: Buffer.from(value) });
  const file = (name: string, filename: string) => create(FormPartSchema, { name, filename, data: Buffer.from('x') });

  it('refuses a second model with 400 duplicate_member naming it', () => {
    const err = new Form([
      text('model', 'gpt-image-2'),
      file('image', 'a.png'),
      text('prompt', 'p'),
      text('model', 'gpt-image-1-mini'),
    ]).repeatedField();
    expect(err).toBeDefined();
    expect(toGatewayError(err)).toMatchObject({
      httpStatus: 400,
      type: 'invalid_request_error',
      code: 'duplicate_member',
      param: 'model',
    });
  });

  it('refuses a repeated n, size or quality, and names the first repeat', () => {
    const err = new Form([
      text('n', '1'),
      text('size', '1024x1024'),
      text('size', '1536x1024'),
      text('n', '10'),
    ]).repeatedField();
    expect(toGatewayError(err).param).toBe('size');
  });

  it('lets array fields and files repeat, as the OpenAI SDKs send them', () => {
    const parts = [
      text('model', 'gpt-4o-transcribe'),
      text('include[]', 'logprobs'),
      text('timestamp_granularities[]', 'word'),
      text('timestamp_granularities[]', 'segment'),
      text('known_speaker_names[]', 'agent'),
      text('known_speaker_names[]', 'customer'),
      file('image[]', 'a.png'),
      file('image[]', 'b.png'),
      file('image', 'c.png'),
      file('image', 'd.png'),
    ];
    expect(new Form(parts).repeatedField()).toBeUndefined();
  });

  it('does not count a file against a text field of the same name (the routes refuse that on their own)', () => {
    expect(new Form([text('model', 'gpt-image-2'), file('model', 'model.txt')]).repeatedField()).toBeUndefined();
  });
});

describe('duplicateMemberRefusal', () => {
  it('quotes at most 200 characters of a long name', () => {
    const ge = toGatewayError(duplicateMemberRefusal('k'.repeat(50_000)));
    expect(ge.param).toBe(`${'k'.repeat(200)}…`);
    expect(ge.message.length).toBeLessThan(500);
  });
});
