// JSON with positions: JSON.parse says where a syntax error is only sometimes, and keeps the last
// of two equal keys without a word (an alias or a price given twice would vanish silently).

import { BOOK_LIMITS, type Json, UnreadableNumber } from './limits.ts';

export class JsonSyntaxError extends Error {
  readonly at: number;
  constructor(message: string, at: number) {
    super(message);
    this.at = at;
  }
}

export interface ParsedJson {
  value: unknown;
  /** Each key given again in the same object: the object's path and the key, and where the repeat is. */
  duplicates: { path: (string | number)[]; at: number }[];
}

/** The characters after a backslash that make an escape (`\u` takes four hex digits besides). */
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't', 'u']);
const HEX4 = /^[0-9a-fA-F]{4}$/;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const MAX_DEPTH = 64;

export function parseJson(text: string): ParsedJson {
  let i = text.startsWith('\uFEFF') ? 1 : 0;
  const duplicates: ParsedJson['duplicates'] = [];
  const fail = (message: string): never => {
    throw new JsonSyntaxError(message, i);
  };
  const space = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  };
  // A loop, not a regular expression: a backtracking match of a long string (a 10 MiB id) overflows the stack.
  const string = (): string => {
    const start = i;
    let escaped = false;
    for (i++; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        // Without escapes the text between the quotes is the string itself.
        return escaped ? (JSON.parse(text.slice(start, i)) as string) : text.slice(start + 1, i - 1);
      }
      if (c < 0x20) fail('a raw control character in a string (write it as an escape such as \\n)');
      if (c === 0x5c) {
        escaped = true;
        const e = text[i + 1] ?? '';
        if (!ESCAPES.has(e) || (e === 'u' && !HEX4.test(text.slice(i + 2, i + 6))))
          fail('a bad escape in a string (JSON has \\" \\\\ \\/ \\b \\f \\n \\r \\t and \\u with 4 hex digits)');
        i += e === 'u' ? 5 : 1;
      }
    }
    i = start;
    return fail('a string that is not closed');
  };
  // Where the value being read is: one list pushed and popped, copied only for a duplicate.
  const path: (string | number)[] = [];
  const inside = (step: string | number): unknown => {
    path.push(step);
    const v = value();
    path.pop();
    return v;
  };
  const object = (): Json => {
    i++;
    const obj: Json = {};
    const seen = new Set<string>();
    space();
    if (text[i] === '}') {
      i++;
      return obj;
    }
    for (;;) {
      space();
      if (text[i] !== '"')
        fail(text[i] === '}' ? "a comma before '}' (JSON allows none)" : 'expected a property name in double quotes');
      const at = i;
      const key = string();
      // One past the refusal's limit is kept, so that the refusal says there were more.
      if (seen.has(key) && duplicates.length <= BOOK_LIMITS.problems) duplicates.push({ path: [...path, key], at });
      seen.add(key);
      space();
      if (text[i] !== ':') fail(`expected ':' after the property name ${JSON.stringify(key)}`);
      i++;
      // Defined, not assigned: a key named __proto__ is a field like any other (and refused as unknown).
      Object.defineProperty(obj, key, {
        value: inside(key),
        enumerable: true,
        writable: true,
        configurable: true,
      });
      space();
      if (text[i] === ',') i++;
      else if (text[i] === '}') {
        i++;
        return obj;
      } else fail("expected ',' or '}' after a property value");
    }
  };
  const array = (): unknown[] => {
    i++;
    const arr: unknown[] = [];
    space();
    if (text[i] === ']') {
      i++;
      return arr;
    }
    for (;;) {
      space();
      if (text[i] === ']') fail("a comma before ']' (JSON allows none)");
      arr.push(inside(arr.length));
      space();
      if (text[i] === ',') i++;
      else if (text[i] === ']') {
        i++;
        return arr;
      } else fail("expected ',' or ']' after an array element");
    }
  };
  const value = (): unknown => {
    if (path.length > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`);
    space();
    const c = text[i];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    NUMBER.lastIndex = i;
    const n = NUMBER.exec(text);
    if (n) {
      i += n[0].length;
      const number = Number(n[0]);
      return Number.isFinite(number) ? number : new UnreadableNumber(n[0]);
    }
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const)
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    return fail(
      c === undefined
        ? 'the document ends where a value should be'
        : `unexpected ${JSON.stringify(c)} where a value should be`,
    );
  };
  const root = value();
  space();
  if (i < text.length) fail('unexpected text after the document');
  return { value: root, duplicates };
}

export function lineAndColumn(text: string, at: number): string {
  return positionsIn(text)(at);
}

/**
 * Names places in `text` as `line L, column C`, for offsets asked in increasing order (as a
 * document's duplicates are found): each call counts lines on from the last, so naming every
 * problem of a large document reads it once, not once per problem.
 */
export function positionsIn(text: string): (at: number) => string {
  let from = 0;
  let line = 1;
  let lineStart = 0;
  return (at) => {
    if (at < from) {
      from = 0;
      line = 1;
      lineStart = 0;
    }
    for (let nl = text.indexOf('\n', from); nl !== -1 && nl < at; nl = text.indexOf('\n', nl + 1)) {
      line++;
      lineStart = nl + 1;
    }
    from = at;
    return `line ${line}, column ${at - lineStart + 1}`;
  };
}
