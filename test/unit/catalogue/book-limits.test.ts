// The limits of a price book document (docs/price-book.md#limits): a document past its size is
// refused unread, a field past its length is refused naming its limit, no refusal quotes more than
// the start of a value or lists more than BOOK_LIMITS.problems problems, and nothing in the parser
// recurses or backtracks over a long string (a 10 MiB id overflowed the stack of a regular expression).
import fs from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import {
  BOOK_LIMITS,
  bookProblems,
  clip,
  MORE_PROBLEMS,
  parseBookDocument,
  type BookDocument,
  type BookProblem,
} from '../../../src/catalogue/book-document.ts';

const SHIPPED_FILE = new URL('../../../src/catalogue/shipped-book.json', import.meta.url);
const SCHEMA_FILE = new URL('../../../src/catalogue/book.schema.json', import.meta.url);
const shippedText = fs.readFileSync(SHIPPED_FILE, 'utf8');
const matchesSchema = new Ajv2020({ allErrors: true }).compile(JSON.parse(fs.readFileSync(SCHEMA_FILE, 'utf8')));

type Json = any;
const shippedJson = (): Json => JSON.parse(shippedText);
const MiB = 1024 * 1024;
/** A refusal of ours stays this small whatever the document holds. */
const SMALL = 16 * 1024;

function problemsOf(text: string): BookProblem[] {
  const parsed = parseBookDocument(text);
  return 'doc' in parsed ? bookProblems(parsed.doc) : parsed.problems;
}
const sizeOf = (problems: readonly BookProblem[]) => JSON.stringify(problems).length;

/** The shipped book with one edit, as text. */
function edited(edit: (doc: Json) => void): { doc: Json; text: string } {
  const doc = shippedJson();
  edit(doc);
  return { doc, text: JSON.stringify(doc, null, 2) };
}

const DOCUMENT_LIMIT = new RegExp(`at most ${BOOK_LIMITS.documentBytes} bytes \\(4 MiB`);

describe('the size of a book document', () => {
  it.each([
    ['a 10 MiB model id', (d: Json) => (d.models[0].id = 'a'.repeat(10 * MiB))],
    ['a 10 MiB upstreamId', (d: Json) => (d.models[0].upstreamId = 'u'.repeat(10 * MiB))],
    ['50 MiB of models', (d: Json) => (d.models = Array(100_000).fill(d.models[0]))],
  ])('%s: refused as one problem naming the 4 MiB limit, unparsed', (_name, edit) => {
    const { text } = edited(edit);
    expect(Buffer.byteLength(text)).toBeGreaterThan(BOOK_LIMITS.documentBytes);
    const problems = problemsOf(text);
    expect(problems).toEqual([
      { field: 'document', message: expect.stringMatching(DOCUMENT_LIMIT) as unknown as string },
    ]);
    expect(problems[0]!.message).toContain(`the document is ${Buffer.byteLength(text)} bytes`);
    expect(sizeOf(problems)).toBeLessThan(300);
  });

  it('counts the limit in UTF-8 bytes: 4 MiB of 3-byte characters is over it, the same count of ASCII is not', () => {
    const wide = '€'.repeat(BOOK_LIMITS.documentBytes / 2);
    expect(problemsOf(JSON.stringify(wide))[0]!.message).toMatch(DOCUMENT_LIMIT);
    expect(problemsOf(JSON.stringify('a'.repeat(BOOK_LIMITS.documentBytes / 2)))[0]!.message).toMatch(
      /^a book document is a JSON object/,
    );
  });

  it('reads a document just under the limit: a 4 MB id is a field past its limit, quoted by its start only', () => {
    // The second case: a 4 MB id was refused, quoted whole several times (a 22 MB answer).
    const { text } = edited((d) => (d.models[3].id = 'x'.repeat(4_000_000)));
    expect(Buffer.byteLength(text)).toBeLessThan(BOOK_LIMITS.documentBytes);
    const problems = problemsOf(text);
    expect(problems).toEqual([
      {
        field: 'models[3].id',
        message: `the model at index 3: id is 4000000 characters long ("${'x'.repeat(64)}"…); at most 128 characters (a model id)`,
      },
    ]);
  });
});

describe('the length of each field', () => {
  const long = (n: number) => 'z'.repeat(n);
  const FIELDS: { name: string; edit: (d: Json) => void; field: string; limit: number; schemaRefuses: boolean }[] = [
    {
      name: 'a model id',
      edit: (d) => (d.models[0].id = long(129)),
      field: 'models[0].id',
      limit: 128,
      schemaRefuses: true,
    },
    {
      name: 'an upstreamId',
      edit: (d) => (d.models.find((m: Json) => m.id === 'gpt-4o').upstreamId = long(257)),
      field: 'models[gpt-4o].upstreamId',
      limit: 256,
      schemaRefuses: true,
    },
    {
      name: 'a price',
      edit: (d) => (d.models.find((m: Json) => m.id === 'gpt-4o').prices.input_per_mtok = `1.${'0'.repeat(70)}`),
      field: 'models[gpt-4o].prices.input_per_mtok',
      limit: 64,
      schemaRefuses: true,
    },
    {
      name: 'a price key',
      edit: (d) => (d.models.find((m: Json) => m.id === 'gpt-4o').prices[long(65)] = '1'),
      field: `models[gpt-4o].prices.${long(64)}… (65 characters)`,
      limit: 64,
      schemaRefuses: true,
    },
    {
      name: 'a vision multiplier',
      edit: (d) => {
        const m = d.models.find((x: Json) => x.vision?.kind === 'patches');
        m.vision.multiplier = `1.${'5'.repeat(70)}`;
      },
      field: '.vision.multiplier',
      limit: 64,
      schemaRefuses: true,
    },
    {
      name: 'an alias',
      edit: (d) => (d.aliases[long(300)] = 'gpt-4o'),
      field: `aliases[${long(64)}… (300 characters)]`,
      limit: 128,
      schemaRefuses: true,
    },
    {
      name: 'the model an alias names',
      edit: (d) => (d.aliases.mine = long(300)),
      field: 'aliases[mine]',
      limit: 128,
      schemaRefuses: true,
    },
    {
      name: "a markup's model",
      edit: (d) => d.markups.push({ model: long(200), markup: '0.1' }),
      field: `markups[model:${long(64)}… (200 characters)].model`,
      limit: 128,
      schemaRefuses: true,
    },
    {
      name: "a markup's group",
      edit: (d) => d.markups.push({ group: long(33), markup: '0.1' }),
      field: `markups[default@${long(33)}].group`,
      limit: 32,
      schemaRefuses: true,
    },
    {
      name: 'a markup',
      edit: (d) => d.markups.push({ markup: `0.${'1'.repeat(70)}` }),
      field: 'markups[default].markup',
      limit: 64,
      schemaRefuses: true,
    },
    {
      name: '$schema',
      edit: (d) => (d.$schema = long(1025)),
      field: '$schema',
      limit: 1024,
      schemaRefuses: true,
    },
  ];

  it.each(FIELDS)('refuses $name past its limit, naming the limit, as the schema does', (f) => {
    const { doc, text } = edited(f.edit);
    const problems = problemsOf(text);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.field.endsWith(f.field)).toBe(true);
    expect(problems[0]!.message).toMatch(new RegExp(`characters long \\(".*\\); at most ${f.limit} characters`));
    expect(matchesSchema(doc)).toBe(!f.schemaRefuses);
  });

  it('takes each field at its limit', () => {
    const { doc, text } = edited((d) => {
      const m = structuredClone(d.models.find((x: Json) => x.id === 'gpt-4o'));
      m.id = `m${'1'.repeat(127)}`;
      m.upstreamId = long(256);
      d.models.push(m);
      d.aliases[`a${'2'.repeat(127)}`] = m.id;
      d.markups.push({ model: m.id, group: 'g'.repeat(32), markup: '0.1' });
    });
    expect(problemsOf(text)).toEqual([]);
    expect(matchesSchema(doc), JSON.stringify(matchesSchema.errors)).toBe(true);
  });

  it('refuses a model with more price keys than any kind has, once, not once per key', () => {
    const { text } = edited((d) => {
      const prices = d.models[0].prices;
      for (let i = 0; i < 100_000; i++) prices[`k${i}`] = '1';
    });
    expect(problemsOf(text)).toEqual([
      {
        field: expect.stringMatching(/^models\[.+\]\.prices$/) as unknown as string,
        message: expect.stringMatching(/prices has 100\d{3} keys; a model has at most 64/) as unknown as string,
      },
    ]);
  });

  it('quotes an unknown field, a duplicate key and a wrong value by their start only', () => {
    const key = 'k'.repeat(1.5 * MiB);
    const problems = problemsOf(
      `{"models": [], "aliases": {"a": "b", "a": ${JSON.stringify(key)}}, "markups": [], ${JSON.stringify(key)}: 1}`,
    );
    expect(problems.map((p) => p.field)).toEqual([
      'aliases[a]',
      `${'k'.repeat(64)}… (${key.length} characters)`,
      'aliases[a]',
    ]);
    expect(sizeOf(problems)).toBeLessThan(1_000);
  });
});

describe('how many problems a refusal lists', () => {
  it('stops at BOOK_LIMITS.problems and says there were more, however many the document has', () => {
    const text = JSON.stringify({ models: Array(1_000_000).fill({}), aliases: {}, markups: [] });
    const problems = problemsOf(text);
    expect(problems).toHaveLength(BOOK_LIMITS.problems + 1);
    expect(problems.at(-1)).toBe(MORE_PROBLEMS);
    expect(sizeOf(problems)).toBeLessThan(SMALL);
  });

  it('stops at the limit for keys given twice, and names their lines', () => {
    const text = `{"models": [], "aliases": {\n${Array(200_000).fill('"a": "b"').join(',\n')}\n}, "markups": []}`;
    const problems = problemsOf(text);
    expect(problems).toHaveLength(BOOK_LIMITS.problems + 1);
    expect(problems[0]!.message).toMatch(/^aliases\[a\] is given twice \(the second at line 3, column 1\)/);
    expect(problems[99]!.message).toMatch(/\(the second at line 102, column 1\)/);
    expect(problems.at(-1)).toBe(MORE_PROBLEMS);
  });

  it('stops at the limit in what the values mean, too (a book built from RPC fields is not parsed)', () => {
    const doc: BookDocument = { models: [], aliases: {}, markups: [] };
    for (let i = 0; i < 10_000; i++) doc.aliases[`alias-${i}`] = `missing-${i}`;
    const problems = bookProblems(doc);
    expect(problems).toHaveLength(BOOK_LIMITS.problems + 1);
    expect(problems.at(-1)).toBe(MORE_PROBLEMS);
  });

  it('quotes names past their limit by their start in what the values mean', () => {
    const doc: BookDocument = { models: [], aliases: { [`a${'b'.repeat(MiB)}`]: 'c'.repeat(MiB) }, markups: [] };
    const problems = bookProblems(doc);
    expect(problems.length).toBeGreaterThan(0);
    expect(sizeOf(problems)).toBeLessThan(1_000);
  });
});

describe('reading JSON strings', () => {
  it('reads strings of any length without a stack overflow, escapes and all, as JSON.parse does', () => {
    const value = `${'é\\"\n\t\u0001'.repeat(100_000)}\u{1F600}`;
    // Too long for an alias, so the refusal shows what was read: its length and its start.
    const problems = problemsOf(JSON.stringify({ models: [], aliases: { [value]: value }, markups: [] }));
    const read = `is ${value.length} characters long (${JSON.stringify(value.slice(0, 64))}…)`;
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringContaining(`the alias ${read}`),
      expect.stringContaining(`the model id it names ${read}`),
    ]);
    const short = 'é\\"\n\t\u0001\u{1F600}/';
    const parsed = parseBookDocument(JSON.stringify({ models: [], aliases: { [short]: short }, markups: [] }));
    if (!('doc' in parsed)) throw new Error(JSON.stringify(parsed.problems));
    expect(parsed.doc.aliases).toEqual({ [short]: short });
  });

  it('names where a string goes wrong', () => {
    expect(problemsOf('{"models": "abc')).toEqual([
      { field: 'document', message: 'line 1, column 12: a string that is not closed' },
    ]);
    expect(problemsOf('{"models": "a\u0001"}')[0]!.message).toMatch(
      /^line 1, column 14: a raw control character in a string/,
    );
    expect(problemsOf('{"models": "a\\q"}')[0]!.message).toMatch(/^line 1, column 14: a bad escape in a string/);
    expect(problemsOf('{"models": "a\\u12G4"}')[0]!.message).toMatch(/^line 1, column 14: a bad escape in a string/);
  });
});

describe('clip', () => {
  it('keeps a name within its limit whole and quotes the start and the length of a longer one', () => {
    expect(clip('gpt-4o')).toBe('gpt-4o');
    expect(clip('a'.repeat(128))).toBe('a'.repeat(128));
    expect(clip('a'.repeat(129))).toBe(`${'a'.repeat(64)}… (129 characters)`);
    // A surrogate pair is not split.
    expect(clip(`${'a'.repeat(63)}\u{1F600}${'b'.repeat(100)}`)).toBe(`${'a'.repeat(63)}… (165 characters)`);
  });
});
