import fs from 'node:fs';
// The named export: the default one is not constructable under NodeNext's typing of a CommonJS module.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import {
  bookProblems,
  formatBookDocument,
  parseBookDocument,
  type BookDocument,
  type BookProblem,
} from '../../../src/catalogue/book-document.ts';
import { PRICE_KEYS } from '../../../src/catalogue/price-rules.ts';
import { MODELS, shippedBook } from '../../../src/catalogue/shipped-book.ts';

const SHIPPED_FILE = new URL('../../../src/catalogue/shipped-book.json', import.meta.url);
const SCHEMA_FILE = new URL('../../../src/catalogue/book.schema.json', import.meta.url);
const shippedText = fs.readFileSync(SHIPPED_FILE, 'utf8');
const schema = JSON.parse(fs.readFileSync(SCHEMA_FILE, 'utf8'));
const matchesSchema = new Ajv2020({ allErrors: true }).compile(schema);

/** A document under test: any JSON, to break at will. */
type Json = any;

/** The shipped book as plain JSON, to break. */
const shippedJson = (): Json => JSON.parse(shippedText);
const model = (doc: Json, id: string) => doc.models.find((m: Json) => m.id === id);

/** Every problem the gateway finds in `text`: its shape first, then (when the shape is right) its meaning. */
function problemsOf(text: string): BookProblem[] {
  const parsed = parseBookDocument(text);
  return 'doc' in parsed ? bookProblems(parsed.doc) : parsed.problems;
}

/** A small seeded shuffle, so an order-insensitivity failure can be reproduced. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
const shuffledKeys = <T extends object>(o: T, seed: number): T =>
  Object.fromEntries(shuffled(Object.entries(o), seed)) as T;

interface BadInput {
  name: string;
  edit: (doc: Json) => void;
  field: string;
  message: RegExp;
  /** The schema can say this much too (cross-references and per-scope counts it cannot). */
  schemaRefuses: boolean;
}

const BAD_INPUTS: BadInput[] = [
  {
    name: 'a price key the model kind is not billed by',
    edit: (d) => (model(d, 'gpt-4o').prices.per_second = '0.10'),
    field: 'models[gpt-4o].prices.per_second',
    message: /^gpt-4o: 'per_second' is not a price a chat model is billed by/,
    schemaRefuses: true,
  },
  {
    name: 'a negative price',
    edit: (d) => (model(d, 'gpt-4o').prices.input_per_mtok = '-2.50'),
    field: 'models[gpt-4o].prices.input_per_mtok',
    message: /^gpt-4o: input_per_mtok = "-2.50" is negative/,
    schemaRefuses: true,
  },
  {
    name: 'a malformed price',
    edit: (d) => (model(d, 'sora-2').prices.per_second = '0,10'),
    field: 'models[sora-2].prices.per_second',
    message: /^sora-2: per_second = "0,10" is not a price/,
    schemaRefuses: true,
  },
  {
    name: 'a price finer than one nano-USD per unit',
    edit: (d) => (model(d, 'whisper').prices.per_audio_minute = '0.0170000001'),
    field: 'models[whisper].prices.per_audio_minute',
    message: /^whisper: per_audio_minute = "0.0170000001" is finer than one nano-USD per unit/,
    schemaRefuses: true,
  },
  {
    name: 'a price written as a number',
    edit: (d) => (model(d, 'gpt-4o').prices.output_per_mtok = 10),
    field: 'models[gpt-4o].prices.output_per_mtok',
    message: /^gpt-4o: prices.output_per_mtok must be a decimal USD string/,
    schemaRefuses: true,
  },
  {
    name: 'a chat model without an output price',
    edit: (d) => delete model(d, 'deepseek-chat').prices.output_per_mtok,
    field: 'models[deepseek-chat].prices.output_per_mtok',
    message: /^deepseek-chat: a chat model needs a non-zero output_per_mtok/,
    schemaRefuses: true,
  },
  {
    name: 'a chat model whose input is free',
    edit: (d) => (model(d, 'deepseek-chat').prices.input_per_mtok = '0.00'),
    field: 'models[deepseek-chat].prices.input_per_mtok',
    message: /^deepseek-chat: a chat model needs a non-zero input_per_mtok/,
    schemaRefuses: true,
  },
  {
    name: 'a service tier with an input price and no output price',
    edit: (d) => (model(d, 'deepseek-chat').prices.priority_input_per_mtok = '0.56'),
    field: 'models[deepseek-chat].prices.priority_output_per_mtok',
    message: /^deepseek-chat: priority_output_per_mtok is missing/,
    schemaRefuses: false,
  },
  {
    name: 'long-context prices without the threshold they apply past',
    edit: (d) =>
      Object.assign(model(d, 'deepseek-chat').prices, { long_input_per_mtok: '1', long_output_per_mtok: '2' }),
    field: 'models[deepseek-chat].longContextAboveTokens',
    message: /^deepseek-chat: long_ prices need longContextAboveTokens/,
    schemaRefuses: false,
  },
  {
    name: 'a chat model that does not say how it bills an image',
    edit: (d) => delete model(d, 'gpt-4o').vision,
    field: 'models[gpt-4o].vision',
    message: /^gpt-4o: a chat model needs vision/,
    schemaRefuses: true,
  },
  {
    name: 'a vision rule of zero tokens',
    edit: (d) => (model(d, 'gpt-4o').vision.tileTokens = 0),
    field: 'models[gpt-4o].vision.tileTokens',
    message: /^gpt-4o: vision.tileTokens = 0 is not a positive integer/,
    schemaRefuses: true,
  },
  {
    name: 'a vision rule of an unknown kind',
    edit: (d) => (model(d, 'gpt-4o').vision = { kind: 'pixels' }),
    field: 'models[gpt-4o].vision.kind',
    message: /^gpt-4o: vision.kind must be one of tiles, patches, claude, window, none/,
    schemaRefuses: true,
  },
  {
    name: 'a duplicate model id',
    edit: (d) => d.models.push(structuredClone(model(d, 'gpt-4o'))),
    field: 'models[gpt-4o].id',
    message: /^gpt-4o: listed 2 times/,
    schemaRefuses: false,
  },
  {
    name: 'an unknown kind of model',
    edit: (d) => (model(d, 'sora-2').kind = 'hologram'),
    field: 'models[sora-2].kind',
    message: /^sora-2: kind must be one of chat, embedding, image, transcription, speech, video, not "hologram"/,
    schemaRefuses: true,
  },
  {
    name: 'an unknown provider',
    edit: (d) => (model(d, 'sora-2').provider = 'acme'),
    field: 'models[sora-2].provider',
    message: /^sora-2: provider "acme" is not a provider in the book \(anthropic, bfl, cohere, deepseek, openai, xai\)/,
    schemaRefuses: false,
  },
  {
    name: 'a field of the wrong type',
    edit: (d) => (model(d, 'gpt-4o').contextWindow = '128k'),
    field: 'models[gpt-4o].contextWindow',
    message: /^gpt-4o: contextWindow must be a whole number, 0 or more, not "128k"/,
    schemaRefuses: true,
  },
  {
    name: 'a missing field',
    edit: (d) => delete model(d, 'gpt-4o').upstreamId,
    field: 'models[gpt-4o].upstreamId',
    message: /^gpt-4o: upstreamId is missing/,
    schemaRefuses: true,
  },
  {
    name: 'an unknown field on a model',
    edit: (d) => (model(d, 'gpt-4o').inputPrice = '2.50'),
    field: 'models[gpt-4o].inputPrice',
    message: /^gpt-4o: unknown field 'inputPrice'/,
    schemaRefuses: true,
  },
  {
    name: 'an unknown field in the book',
    edit: (d) => (d.prices = {}),
    field: 'prices',
    message: /^unknown field 'prices' in the book/,
    schemaRefuses: true,
  },
  {
    name: 'an alias to a missing model',
    edit: (d) => (d.aliases['gpt-6'] = 'gpt-9'),
    field: 'aliases[gpt-6]',
    message: /^alias gpt-6: points at "gpt-9", which is not a model in the book/,
    schemaRefuses: false,
  },
  {
    name: 'an alias to a disabled model',
    edit: (d) => (model(d, 'claude-haiku-4-5').enabled = false),
    field: 'aliases[claude-haiku-5-5]',
    message: /^alias claude-haiku-5-5: points at claude-haiku-4-5, which is disabled/,
    schemaRefuses: false,
  },
  {
    name: 'an alias to another alias',
    edit: (d) => (d.aliases.opus = 'claude-opus-5-5'),
    field: 'aliases[opus]',
    message:
      /^alias opus: points at claude-opus-5-5, which is itself an alias; point it at the model \(claude-opus-4-8\)/,
    schemaRefuses: false,
  },
  {
    name: 'an alias that would hide a model',
    edit: (d) => (d.aliases['gpt-4o'] = 'gpt-4.1'),
    field: 'aliases[gpt-4o]',
    message: /^alias gpt-4o: gpt-4o is a model in the book; an alias cannot replace a model/,
    schemaRefuses: false,
  },
  {
    name: 'a malformed markup',
    edit: (d) => d.markups.push({ model: 'gpt-4o', group: 'bot', markup: '20%' }),
    field: 'markups[model:gpt-4o@bot].markup',
    message: /^markup model:gpt-4o@bot: markup "20%" is not a markup/,
    schemaRefuses: true,
  },
  {
    name: 'a markup with more than 6 decimal places',
    edit: (d) => d.markups.push({ provider: 'openai', markup: '0.1234567' }),
    field: 'markups[provider:openai].markup',
    message: /^markup provider:openai: markup "0.1234567" is not a markup/,
    schemaRefuses: true,
  },
  {
    name: 'a markup for both a provider and a model',
    edit: (d) => d.markups.push({ provider: 'openai', model: 'gpt-4o', markup: '0.2' }),
    field: 'markups[model:gpt-4o+provider:openai]',
    message: /^markup model:gpt-4o\+provider:openai: a markup is for a model or a provider/,
    schemaRefuses: true,
  },
  {
    name: 'a markup for an unknown provider',
    edit: (d) => d.markups.push({ provider: 'acme', markup: '0.2' }),
    field: 'markups[provider:acme].provider',
    message: /^markup provider:acme: provider "acme" is not a provider in the book/,
    schemaRefuses: false,
  },
  {
    name: 'a markup for an unknown model',
    edit: (d) => d.markups.push({ model: 'gpt-9', markup: '0.2' }),
    field: 'markups[model:gpt-9].model',
    message: /^markup model:gpt-9: model "gpt-9" is not a model in the book/,
    schemaRefuses: false,
  },
  {
    name: 'a markup for an alias rather than its model',
    edit: (d) => d.markups.push({ model: 'claude-opus-5-5', markup: '0.2' }),
    field: 'markups[model:claude-opus-5-5].model',
    message: /claude-opus-5-5 is an alias; a markup names the model that serves it \(claude-opus-4-8\)/,
    schemaRefuses: false,
  },
  {
    name: 'a markup for a malformed account group',
    edit: (d) => d.markups.push({ group: 'Bot Users', markup: '0.2' }),
    field: 'markups[default@Bot Users].group',
    message: /^markup default@Bot Users: group "Bot Users" is not an account group/,
    schemaRefuses: true,
  },
  {
    name: 'two markups for one scope',
    edit: (d) =>
      d.markups.push(
        { model: 'gpt-4o', group: 'bot', markup: '0.2' },
        { model: 'gpt-4o', group: 'bot', markup: '0.3' },
      ),
    field: 'markups[model:gpt-4o@bot]',
    message: /^markup model:gpt-4o@bot: given 2 times; a scope has one markup/,
    schemaRefuses: false,
  },
];

describe('the price book document', () => {
  it('ships a book that parses with no problems and is written in canonical form, byte for byte', () => {
    const parsed = parseBookDocument(shippedText);
    if (!('doc' in parsed)) throw new Error(JSON.stringify(parsed.problems));
    expect(bookProblems(parsed.doc)).toEqual([]);
    expect(formatBookDocument(parsed.doc)).toBe(shippedText);
    expect(parsed.doc.models.map((m) => m.id)).toEqual(MODELS.map((m) => m.id));
  });

  it('ships a book the JSON Schema for editors accepts', () => {
    expect(matchesSchema(shippedJson()), JSON.stringify(matchesSchema.errors)).toBe(true);
  });

  it('gives editors the same price keys per kind as the gateway bills by', () => {
    const kindRules = schema.$defs.model.allOf.filter((r: Json) => r.then.properties?.prices?.propertyNames);
    const fromSchema = Object.fromEntries(
      kindRules.map((r: Json) => [r.if.properties.kind.const, [...r.then.properties.prices.propertyNames.enum].sort()]),
    );
    const fromGateway = Object.fromEntries(Object.entries(PRICE_KEYS).map(([kind, keys]) => [kind, [...keys].sort()]));
    expect(fromSchema).toEqual(fromGateway);
  });

  it('hands each caller a copy of the shipped book of its own to edit', () => {
    const mine = shippedBook();
    mine.models[0]!.prices.input_per_mtok = '999';
    mine.aliases.extra = 'gpt-4o';
    expect(shippedBook().models[0]!.prices.input_per_mtok).not.toBe('999');
    expect(shippedBook().aliases.extra).toBeUndefined();
    expect(Object.isFrozen(MODELS[0]!.prices)).toBe(true);
  });

  it.each(BAD_INPUTS)('refuses $name with one problem naming the model and the field', (bad) => {
    const doc = shippedJson();
    bad.edit(doc);
    const problems = problemsOf(JSON.stringify(doc, null, 2));
    expect(problems).toHaveLength(1);
    expect(problems[0]!.field).toBe(bad.field);
    expect(problems[0]!.message).toMatch(bad.message);
    expect(matchesSchema(doc)).toBe(!bad.schemaRefuses);
  });

  it('reports every problem of a document, not just the first', () => {
    const doc = shippedJson();
    model(doc, 'gpt-4o').prices.input_per_mtok = '-1';
    model(doc, 'gpt-4o').prices.flex_output_per_mtok = 'cheap';
    model(doc, 'sora-2').prices.per_frame = '0.01';
    doc.models.push(structuredClone(model(doc, 'whisper')));
    doc.aliases['gpt-6'] = 'gpt-9';
    doc.markups.push({ model: 'gpt-4o', markup: 'lots' }, { provider: 'xai', group: 'BOT', markup: '0.1' });
    expect(problemsOf(JSON.stringify(doc)).map((p) => p.field)).toEqual([
      'models[gpt-4o].prices.input_per_mtok',
      'models[gpt-4o].prices.flex_output_per_mtok',
      // flex_output without flex_input: the tier is incomplete
      'models[gpt-4o].prices.flex_input_per_mtok',
      'models[sora-2].prices.per_frame',
      'models[whisper].id',
      'aliases[gpt-6]',
      'markups[model:gpt-4o].markup',
      'markups[provider:xai@BOT].group',
    ]);
  });

  it('reports every field of the wrong shape at once, in models and markups alike', () => {
    const doc = shippedJson();
    model(doc, 'gpt-4o').enabled = 'yes';
    delete model(doc, 'sora-2').prices;
    doc.markups.push({ model: 'gpt-4o', markup: 0.2, note: 'x' });
    expect(problemsOf(JSON.stringify(doc))).toEqual([
      { field: 'models[gpt-4o].enabled', message: 'gpt-4o: enabled must be true or false, not "yes"' },
      { field: 'models[sora-2].prices', message: 'sora-2: prices is missing' },
      {
        field: 'markups[model:gpt-4o].note',
        message: "markup model:gpt-4o: unknown field 'note' (a markup object has provider, model, group, markup)",
      },
      { field: 'markups[model:gpt-4o].markup', message: 'markup model:gpt-4o: markup must be a string, not 0.2' },
    ]);
  });

  it('reports a JSON syntax error with its line and column', () => {
    const text = '{\n  "models": [],\n  "aliases": {"a": "b",},\n  "markups": []\n}\n';
    expect(problemsOf(text)).toEqual([
      { field: 'document', message: "line 3, column 24: a comma before '}' (JSON allows none)" },
    ]);
    expect(problemsOf('{"models": [] "aliases": {}}')).toEqual([
      { field: 'document', message: "line 1, column 15: expected ',' or '}' after a property value" },
    ]);
    expect(problemsOf('')).toEqual([
      { field: 'document', message: 'line 1, column 1: the document ends where a value should be' },
    ]);
  });

  it('refuses a key given twice in one object, which plain JSON parsing would drop without a word', () => {
    const text = shippedText
      .replace(
        '"claude-opus-5-5": "claude-opus-4-8",',
        '"claude-opus-5-5": "claude-opus-4-8",\n    "claude-opus-5-5": "gpt-4o",',
      )
      .replace('"input_per_mtok": "2.50",', '"input_per_mtok": "2.50",\n        "input_per_mtok": "0.01",');
    const problems = problemsOf(text);
    expect(problems.map((p) => p.field)).toEqual([
      // the first model with input_per_mtok "2.50" in file order
      'models[gpt-4o].prices.input_per_mtok',
      'aliases[claude-opus-5-5]',
    ]);
    expect(problems[1]!.message).toMatch(
      /^aliases\[claude-opus-5-5\] is given twice \(the second at line \d+, column 5\)/,
    );
  });

  it('writes one text for a book however its models, aliases, markups and fields are ordered', () => {
    const doc = shippedBook();
    doc.markups.push(
      { model: 'gpt-4o', group: 'bot', markup: '0.3' },
      { markup: '0.1' },
      { provider: 'anthropic', markup: '0.25' },
      { group: 'bot', markup: '0.15' },
      { model: 'gpt-4o', markup: '0.2' },
    );
    doc.aliases['gpt-6'] = 'gpt-5.5';
    const canonical = formatBookDocument(doc);
    for (const seed of [1, 2, 3]) {
      const scrambled: BookDocument = {
        providers: shuffled(doc.providers!, seed).map((p) => shuffledKeys(p, seed)),
        models: shuffled(doc.models, seed).map((m) => ({
          ...shuffledKeys(m, seed),
          prices: shuffledKeys(m.prices, seed),
        })),
        aliases: shuffledKeys(doc.aliases, seed),
        markups: shuffled(doc.markups, seed).map((m) => shuffledKeys(m, seed)),
      };
      expect(formatBookDocument(scrambled)).toBe(canonical);
    }
    // The broader scope first: default, then a provider's, then a model's; everyone before a group.
    const parsed = parseBookDocument(canonical);
    if (!('doc' in parsed)) throw new Error(JSON.stringify(parsed.problems));
    expect(parsed.doc.markups).toEqual([
      { markup: '0.1' },
      { group: 'bot', markup: '0.15' },
      { provider: 'anthropic', markup: '0.25' },
      { model: 'gpt-4o', markup: '0.2' },
      { model: 'gpt-4o', group: 'bot', markup: '0.3' },
    ]);
    expect(bookProblems(parsed.doc)).toEqual([]);
  });

  it('writes only what a book holds, even from models that carry more (a resolved model and its provider key)', () => {
    const doc = shippedBook();
    const resolved = { ...doc.models[0]!, providerConfig: { apiKey: 'sk-secret' }, priceVersion: 7n };
    const text = formatBookDocument({ ...doc, models: [resolved, ...doc.models.slice(1)] });
    expect(text).toBe(shippedText);
    expect(text).not.toContain('sk-secret');
  });

  it('formats stably: the canonical text parsed and formatted again is the same text', () => {
    const doc = shippedBook();
    doc.markups.push({ provider: 'openai', group: 'internal', markup: '0' });
    const once = formatBookDocument(doc);
    const parsed = parseBookDocument(once);
    if (!('doc' in parsed)) throw new Error(JSON.stringify(parsed.problems));
    expect(formatBookDocument(parsed.doc)).toBe(once);
    expect(once.endsWith('}\n')).toBe(true);
    expect(once.startsWith('{\n  "$schema": "./book.schema.json",\n  "providers": [\n')).toBe(true);
  });
});
