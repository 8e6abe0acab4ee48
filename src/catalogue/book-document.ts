// The price book as one JSON document: every model (its definition and prices), every alias and
// every markup. It is what `catalogue export` writes, what `catalogue apply` reads, and the form
// of the shipped defaults (shipped-book.json); docs/price-book.md describes it field by field.
//
// Reading one is two steps, so that every problem is reported at once: parseBookDocument checks
// the JSON and its shape (each field there with its type, nothing unknown), bookProblems checks
// what the values mean (prices, references, scopes). A document is usable only when both find
// nothing. formatBookDocument writes the one canonical text of a document, so export -> apply ->
// export gives the same bytes and two books differ in text only where they differ in meaning.
import { markupPpm } from '../billing/markup.ts';
import type { ProviderName } from '../config/config.ts';
import type { CatalogueEntry, ModelKindName, PatchBudget, VisionBilling } from './models.ts';
import { priceMapProblems, priceProblem, visionProblem } from './price-rules.ts';

/** A markup over the provider's prices for one scope: a model, a provider's models, or (neither) every model. */
export interface BookMarkup {
  /** A provider name (ProviderName); a string, as the database and the RPCs carry it, and checked by bookProblems. */
  provider?: string;
  model?: string;
  /** The account group it applies to (accounts.price_group); absent: every account without one of its own. */
  group?: string;
  /** A decimal fraction: "0.2" is 20% over the provider's price (src/billing/markup.ts). */
  markup: string;
}

/** A whole book. Mutable, so a change can be made on a copy of the book in force and checked whole. */
export interface BookDocument {
  models: CatalogueEntry[];
  /** Alias -> the id of the model that serves it. */
  aliases: Record<string, string>;
  markups: BookMarkup[];
}

/**
 * Where a document is wrong and why. `field` names the place: `models[gpt-4o].prices.input_per_mtok`,
 * `aliases[claude-opus-5-5]`, `markups[model:gpt-4o@bot].markup`, `document` for the JSON itself;
 * `message` starts with the model, alias or markup it is about.
 */
export interface BookProblem {
  field: string;
  message: string;
}

export type ParsedBookDocument = { doc: BookDocument } | { problems: BookProblem[] };

/** What a canonical document's `$schema` says: the schema beside the shipped book, for editors. */
export const BOOK_SCHEMA_REF = './book.schema.json';

const MODEL_KINDS: Record<ModelKindName, true> = {
  chat: true,
  embedding: true,
  image: true,
  transcription: true,
  speech: true,
  video: true,
};
// Written out so the compiler says when config.ts gains a provider (the type has no runtime list).
const PROVIDERS: Record<ProviderName, true> = {
  openai: true,
  anthropic: true,
  xai: true,
  deepseek: true,
  cohere: true,
  bfl: true,
};
const VISION_KINDS: Record<VisionBilling['kind'], true> = {
  tiles: true,
  patches: true,
  claude: true,
  window: true,
  none: true,
};
const names = (r: Record<string, true>) => Object.keys(r).join(', ');
const isKind = (k: unknown): k is ModelKindName => typeof k === 'string' && Object.hasOwn(MODEL_KINDS, k);
const isProvider = (p: unknown): p is ProviderName => typeof p === 'string' && Object.hasOwn(PROVIDERS, p);

/** The names a model or an alias can have: the ones MODEL_ALIASES accepts (src/config/config.ts). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;
/** An account group (accounts.price_group). */
const GROUP = /^[a-z0-9_-]{1,32}$/;

// ---------------------------------------------------------------------------------------------
// Parsing: the JSON, then its shape.

/** Reads a book document: a JSON syntax error (with its line and column), or every field that is missing, unknown or of the wrong type. */
export function parseBookDocument(text: string): ParsedBookDocument {
  let json: ParsedJson;
  try {
    json = parseJson(text);
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    return { problems: [{ field: 'document', message: `${lineAndColumn(text, e.at)}: ${e.message}` }] };
  }
  const problems = json.duplicates.map(({ path, at }) => {
    const field = fieldOfPath(path, json.value);
    return {
      field,
      message: `${field} is given twice (the second at ${lineAndColumn(text, at)}); a key appears once in an object`,
    };
  });
  problems.push(...shapeProblems(json.value));
  if (problems.length > 0) return { problems };
  const root = json.value as Record<string, unknown>;
  return {
    doc: {
      models: root.models as CatalogueEntry[],
      aliases: root.aliases as Record<string, string>,
      markups: root.markups as BookMarkup[],
    },
  };
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

/** How one field is checked: mustBe says what it must be when it is wrong; nested objects check their own fields. */
interface FieldSpec {
  optional?: true;
  check: (v: unknown, at: Place) => BookProblem[];
}

/** A place in the document: `field` for BookProblem.field, `rel` the same inside its model (or markup), `who` what it belongs to. */
interface Place {
  field: string;
  rel: string;
  who: string;
}

const child = (p: Place, key: string): Place => ({
  field: `${p.field}.${key}`,
  rel: p.rel === '' ? key : `${p.rel}.${key}`,
  who: p.who,
});

const mustBe =
  (ok: (v: unknown) => boolean, what: string): FieldSpec['check'] =>
  (v, at) =>
    ok(v) ? [] : [{ field: at.field, message: `${at.who}: ${at.rel} must be ${what}, not ${show(v)}` }];

const aString = mustBe((v) => typeof v === 'string', 'a string');
const aBoolean = mustBe((v) => typeof v === 'boolean', 'true or false');
const aCount = mustBe((v) => Number.isSafeInteger(v) && (v as number) >= 0, 'a whole number, 0 or more');
const aPositiveCount = mustBe((v) => Number.isSafeInteger(v) && (v as number) > 0, 'a whole number above 0');
const oneOf = (r: Record<string, true>) =>
  mustBe((v) => typeof v === 'string' && Object.hasOwn(r, v), `one of ${names(r)}`);

/** Checks `v` is an object with the fields `spec` names (required ones present, no others). */
function objectProblems(v: unknown, at: Place, spec: Record<string, FieldSpec>, what: string): BookProblem[] {
  if (!isObject(v))
    return [{ field: at.field, message: `${at.who}: ${at.rel || 'it'} must be ${what}, not ${show(v)}` }];
  const out: BookProblem[] = [];
  for (const key of Object.keys(v)) {
    if (!Object.hasOwn(spec, key))
      out.push({
        field: child(at, key).field,
        message: `${at.who}: unknown field '${child(at, key).rel}' (${what} has ${Object.keys(spec).join(', ')})`,
      });
  }
  for (const [key, s] of Object.entries(spec)) {
    if (v[key] === undefined) {
      if (!s.optional)
        out.push({ field: child(at, key).field, message: `${at.who}: ${child(at, key).rel} is missing` });
    } else out.push(...s.check(v[key], child(at, key)));
  }
  return out;
}

const PATCH_BUDGET: Record<keyof PatchBudget, FieldSpec> = {
  patches: { check: aCount },
  maxEdge: { check: aCount },
};
const patchBudget: FieldSpec['check'] = (v, at) => objectProblems(v, at, PATCH_BUDGET, 'a patch budget object');

/** The fields of each kind of vision billing, beside its `kind`. */
const VISION_FIELDS: Record<VisionBilling['kind'], Record<string, FieldSpec>> = {
  tiles: { baseTokens: { check: aCount }, tileTokens: { check: aCount } },
  patches: {
    multiplier: { check: aString },
    high: { check: patchBudget },
    original: { optional: true, check: patchBudget },
  },
  claude: { maxEdge: { check: aCount }, maxPatches: { check: aCount } },
  window: {},
  none: {},
};

const vision: FieldSpec['check'] = (v, at) => {
  const kind = isObject(v) ? v.kind : undefined;
  if (typeof kind !== 'string' || !Object.hasOwn(VISION_KINDS, kind))
    return isObject(v)
      ? [
          {
            field: child(at, 'kind').field,
            message: `${at.who}: vision.kind must be one of ${names(VISION_KINDS)}, not ${show(kind)}`,
          },
        ]
      : objectProblems(v, at, {}, 'a vision object');
  const spec = { kind: { check: () => [] }, ...VISION_FIELDS[kind as VisionBilling['kind']] };
  return objectProblems(v, at, spec, `a '${kind}' vision object`);
};

const prices: FieldSpec['check'] = (v, at) => {
  if (!isObject(v))
    return [{ field: at.field, message: `${at.who}: prices must be an object of decimal USD strings, not ${show(v)}` }];
  return Object.entries(v).flatMap(([key, price]) =>
    typeof price === 'string'
      ? []
      : [
          {
            field: child(at, key).field,
            message: `${at.who}: ${child(at, key).rel} must be a decimal USD string (e.g. "2.50"), not ${show(price)}`,
          },
        ],
  );
};

/** Every field of a CatalogueEntry (the compiler keeps this table and the type together). */
const MODEL_FIELDS: { [K in keyof CatalogueEntry]-?: FieldSpec } = {
  id: { check: aString },
  kind: { check: oneOf(MODEL_KINDS) },
  provider: { check: oneOf(PROVIDERS) },
  upstreamId: { check: aString },
  enabled: { check: aBoolean },
  responsesPassthrough: { optional: true, check: aBoolean },
  contextWindow: { check: aCount },
  maxOutputTokens: { check: aCount },
  prices: { check: prices },
  longContextAboveTokens: { optional: true, check: aPositiveCount },
  reasoningBeyondCap: { optional: true, check: aBoolean },
  vision: { optional: true, check: vision },
};

const MARKUP_FIELDS: { [K in keyof BookMarkup]-?: FieldSpec } = {
  provider: { optional: true, check: oneOf(PROVIDERS) },
  model: { optional: true, check: aString },
  group: { optional: true, check: aString },
  markup: { check: aString },
};

/** `models[<id>]`, or `models[<index>]` for a model without a usable id. */
function modelLabel(m: unknown, index: number): string {
  const id = isObject(m) ? m.id : undefined;
  return typeof id === 'string' && id !== '' ? id : String(index);
}

/** The scope a markup is for, as fields name it: `default`, `provider:openai`, `model:gpt-4o`, then `@group` when it has one. */
export function markupScope(m: { provider?: unknown; model?: unknown; group?: unknown }): string {
  const text = (v: unknown) => (typeof v === 'string' ? v : show(v));
  const parts: string[] = [];
  if (m.model !== undefined) parts.push(`model:${text(m.model)}`);
  if (m.provider !== undefined) parts.push(`provider:${text(m.provider)}`);
  const scope = parts.length > 0 ? parts.join('+') : 'default';
  return m.group !== undefined ? `${scope}@${text(m.group)}` : scope;
}

const TOP_FIELDS = ['$schema', 'models', 'aliases', 'markups'];

function shapeProblems(root: unknown): BookProblem[] {
  if (!isObject(root))
    return [
      {
        field: 'document',
        message: `a book document is a JSON object with models, aliases and markups, not ${show(root)}`,
      },
    ];
  const out: BookProblem[] = [];
  for (const key of Object.keys(root))
    if (!TOP_FIELDS.includes(key))
      out.push({ field: key, message: `unknown field '${key}' in the book (it has ${TOP_FIELDS.join(', ')})` });
  if (root.$schema !== undefined && typeof root.$schema !== 'string')
    out.push({ field: '$schema', message: `$schema must be a string, not ${show(root.$schema)}` });

  if (!Array.isArray(root.models))
    out.push({ field: 'models', message: `models must be an array of model objects, not ${show(root.models)}` });
  else
    root.models.forEach((m, i) => {
      const id = isObject(m) && typeof m.id === 'string' && m.id !== '' ? m.id : undefined;
      const place = { field: `models[${modelLabel(m, i)}]`, rel: '', who: id ?? `the model at index ${i}` };
      out.push(...objectProblems(m, place, MODEL_FIELDS, 'a model object'));
    });

  if (!isObject(root.aliases))
    out.push({
      field: 'aliases',
      message: `aliases must be an object of alias -> model id, not ${show(root.aliases)}`,
    });
  else
    for (const [alias, target] of Object.entries(root.aliases))
      if (typeof target !== 'string')
        out.push({
          field: `aliases[${alias}]`,
          message: `alias ${alias}: must name a model id (a string), not ${show(target)}`,
        });

  if (!Array.isArray(root.markups))
    out.push({ field: 'markups', message: `markups must be an array of markup objects, not ${show(root.markups)}` });
  else
    root.markups.forEach((mk, i) => {
      const scope = isObject(mk) ? markupScope(mk) : String(i);
      const place = {
        field: `markups[${scope}]`,
        rel: '',
        who: isObject(mk) ? `markup ${scope}` : `the markup at index ${i}`,
      };
      out.push(...objectProblems(mk, place, MARKUP_FIELDS, 'a markup object'));
    });
  return out;
}

/** A duplicate key's place, named as other problems name it (`models[gpt-4o].prices.input_per_mtok`). */
function fieldOfPath(path: readonly (string | number)[], root: unknown): string {
  const [top, second, ...rest] = path;
  let field = String(top ?? 'document');
  if (second !== undefined) {
    const list = isObject(root) ? root[String(top)] : undefined;
    const item = Array.isArray(list) && typeof second === 'number' ? list[second] : undefined;
    if (top === 'models' && typeof second === 'number') field += `[${modelLabel(item, second)}]`;
    else if (top === 'markups' && typeof second === 'number')
      field += `[${isObject(item) ? markupScope(item) : second}]`;
    else field += `[${second}]`;
  }
  for (const p of rest) field += typeof p === 'number' ? `[${p}]` : `.${p}`;
  return field;
}

// ---------------------------------------------------------------------------------------------
// What the values mean.

/**
 * Every problem with what a well-shaped document says (all of them, in document order): model ids
 * and their prices (price-rules.ts, no date: a book states what is in force), aliases, markups.
 */
export function bookProblems(doc: BookDocument): BookProblem[] {
  const out: BookProblem[] = [];
  const byId = new Map<string, CatalogueEntry>();
  const listed = new Map<string, number>();
  for (const m of doc.models) {
    byId.set(m.id, m);
    listed.set(m.id, (listed.get(m.id) ?? 0) + 1);
  }
  const isAlias = (name: string) => Object.hasOwn(doc.aliases, name);

  doc.models.forEach((m, i) => {
    const at = `models[${modelLabel(m, i)}]`;
    const who = m.id === '' ? `the model at index ${i}` : m.id;
    const times = listed.get(m.id) ?? 0;
    if (times > 1) {
      listed.set(m.id, 0); // reported once, at its first listing
      out.push({ field: `${at}.id`, message: `${who}: listed ${times} times; a model id is listed once` });
    }
    if (!MODEL_NAME.test(m.id))
      out.push({
        field: `${at}.id`,
        message: `${who}: id ${show(m.id)} is not a model name (a letter or digit, then letters, digits and ._:@/-, at most 128)`,
      });
    if (m.upstreamId === '')
      out.push({
        field: `${at}.upstreamId`,
        message: `${who}: upstreamId is empty; it is the name the provider knows the model by`,
      });
    if (!isProvider(m.provider))
      out.push({
        field: `${at}.provider`,
        message: `${who}: provider ${show(m.provider)} is not one of ${names(PROVIDERS)}`,
      });
    if (!isKind(m.kind)) {
      out.push({ field: `${at}.kind`, message: `${who}: kind ${show(m.kind)} is not one of ${names(MODEL_KINDS)}` });
      return; // its prices cannot be checked without a kind
    }
    for (const p of [...priceMapProblems(m, m.prices), priceProblem(m), visionProblem(m)])
      if (p) out.push({ field: `${at}.${p.field}`, message: p.message });
  });

  for (const [alias, target] of Object.entries(doc.aliases)) {
    const field = `aliases[${alias}]`;
    if (!MODEL_NAME.test(alias))
      out.push({
        field,
        message: `alias ${show(alias)}: not a model name (a letter or digit, then letters, digits and ._:@/-, at most 128)`,
      });
    if (byId.has(alias))
      out.push({ field, message: `alias ${alias}: ${alias} is a model in the book; an alias cannot replace a model` });
    const model = byId.get(target);
    if (!model)
      out.push({
        field,
        message: isAlias(target)
          ? `alias ${alias}: points at ${target}, which is itself an alias; point it at the model (${doc.aliases[target]})`
          : `alias ${alias}: points at ${show(target)}, which is not a model in the book`,
      });
    else if (!model.enabled)
      out.push({
        field,
        message: `alias ${alias}: points at ${target}, which is disabled; an alias serves an enabled model`,
      });
  }

  const scopes = new Map<string, number>();
  for (const mk of doc.markups) {
    const scope = markupScope(mk);
    const at = `markups[${scope}]`;
    const who = `markup ${scope}`;
    if (typeof mk.markup !== 'string' || markupPpm(mk.markup) === undefined)
      out.push({
        field: `${at}.markup`,
        message: `${who}: markup ${show(mk.markup)} is not a markup: a decimal fraction with at most 6 places, 0 or more and below 10000 ("0.2" is 20%)`,
      });
    if (mk.provider !== undefined && mk.model !== undefined)
      out.push({
        field: at,
        message: `${who}: a markup is for a model or a provider (or neither: every model), not both`,
      });
    if (mk.provider !== undefined && !isProvider(mk.provider))
      out.push({
        field: `${at}.provider`,
        message: `${who}: provider ${show(mk.provider)} is not one of ${names(PROVIDERS)}`,
      });
    if (mk.model !== undefined && !byId.has(mk.model))
      out.push({
        field: `${at}.model`,
        message: isAlias(mk.model)
          ? `${who}: ${mk.model} is an alias; a markup names the model that serves it (${doc.aliases[mk.model]})`
          : `${who}: model ${show(mk.model)} is not a model in the book`,
      });
    if (mk.group !== undefined && (typeof mk.group !== 'string' || !GROUP.test(mk.group)))
      out.push({
        field: `${at}.group`,
        message: `${who}: group ${show(mk.group)} is not an account group (1 to 32 of a-z, 0-9, _ and -; leave it out for every account)`,
      });
    scopes.set(scope, (scopes.get(scope) ?? 0) + 1);
  }
  for (const [scope, n] of scopes)
    if (n > 1)
      out.push({ field: `markups[${scope}]`, message: `markup ${scope}: given ${n} times; a scope has one markup` });
  return out;
}

// ---------------------------------------------------------------------------------------------
// The canonical text.

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A model's fields in the order the canonical text writes them (the compiler keeps the list complete). */
const MODEL_FIELD_ORDER = Object.keys({
  id: true,
  kind: true,
  provider: true,
  upstreamId: true,
  enabled: true,
  responsesPassthrough: true,
  contextWindow: true,
  maxOutputTokens: true,
  longContextAboveTokens: true,
  reasoningBeyondCap: true,
  vision: true,
  prices: true,
} satisfies { [K in keyof CatalogueEntry]-?: true });
const VISION_FIELD_ORDER = [
  'kind',
  'multiplier',
  'baseTokens',
  'tileTokens',
  'maxEdge',
  'maxPatches',
  'high',
  'original',
];
const BUDGET_FIELD_ORDER = ['patches', 'maxEdge'];

/**
 * `o`'s fields named in `order`, in that order, and no others: an object that carries more (a
 * catalogue's ResolvedModel, with its provider's configuration) writes only what a book holds.
 */
function ordered<T extends object>(o: T, order: readonly string[]): T {
  const out: Record<string, unknown> = {};
  for (const k of order) {
    const v = (o as Record<string, unknown>)[k];
    if (v !== undefined) out[k] = v;
  }
  return out as T;
}

/** A model with its fields in canonical order, prices sorted by key (the same model, written one way). */
export function canonicalEntry(e: CatalogueEntry): CatalogueEntry {
  const out = ordered(e, MODEL_FIELD_ORDER);
  out.prices = Object.fromEntries(Object.entries(e.prices).sort(([a], [b]) => byText(a, b)));
  if (e.vision) {
    const v = ordered(e.vision, VISION_FIELD_ORDER) as Record<string, unknown>;
    for (const k of ['high', 'original']) if (isObject(v[k])) v[k] = ordered(v[k], BUDGET_FIELD_ORDER);
    out.vision = v as unknown as VisionBilling;
  }
  return out;
}

const MARKUP_FIELD_ORDER = ['provider', 'model', 'group', 'markup'];

/**
 * The canonical text of a document: `$schema` first, models sorted by id (each model's fields in
 * a fixed order, its prices sorted by key), aliases sorted by name, markups sorted by (model,
 * provider, group) with the broader scope first; JSON indented by 2 spaces, ending in a newline.
 */
export function formatBookDocument(doc: BookDocument): string {
  const models = doc.models.map(canonicalEntry).map((m) => ({ m, text: JSON.stringify(m) }));
  models.sort((a, b) => byText(a.m.id, b.m.id) || byText(a.text, b.text));
  const aliases = Object.fromEntries(Object.entries(doc.aliases).sort(([a], [b]) => byText(a, b)));
  const markupKey = (m: BookMarkup) => [m.model ?? '', m.provider ?? '', m.group ?? '', m.markup];
  const markups = doc.markups
    .map((m) => ordered(m, MARKUP_FIELD_ORDER))
    .sort((a, b) => {
      const ka = markupKey(a);
      const kb = markupKey(b);
      for (let i = 0; i < ka.length; i++) {
        const c = byText(ka[i]!, kb[i]!);
        if (c !== 0) return c;
      }
      return 0;
    });
  const text = JSON.stringify({ $schema: BOOK_SCHEMA_REF, models: models.map((x) => x.m), aliases, markups }, null, 2);
  return `${text}\n`;
}

// ---------------------------------------------------------------------------------------------
// JSON with positions: JSON.parse says where a syntax error is only sometimes, and keeps the last
// of two equal keys without a word (an alias or a price given twice would vanish silently).

class JsonSyntaxError extends Error {
  readonly at: number;
  constructor(message: string, at: number) {
    super(message);
    this.at = at;
  }
}

interface ParsedJson {
  value: unknown;
  /** Each key given again in the same object: the object's path and the key, and where the repeat is. */
  duplicates: { path: (string | number)[]; at: number }[];
}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const MAX_DEPTH = 64;

function parseJson(text: string): ParsedJson {
  let i = text.startsWith('\uFEFF') ? 1 : 0;
  const duplicates: ParsedJson['duplicates'] = [];
  const fail = (message: string): never => {
    throw new JsonSyntaxError(message, i);
  };
  const space = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  };
  const string = (): string => {
    STRING.lastIndex = i;
    const m = STRING.exec(text);
    if (!m) return fail('a string that is not closed, or holds a bad escape or a raw control character');
    i += m[0].length;
    return JSON.parse(m[0]) as string;
  };
  const value = (path: (string | number)[]): unknown => {
    if (path.length > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`);
    space();
    const c = text[i];
    if (c === '{') {
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
        if (seen.has(key)) duplicates.push({ path: [...path, key], at });
        seen.add(key);
        space();
        if (text[i] !== ':') fail(`expected ':' after the property name ${JSON.stringify(key)}`);
        i++;
        // Defined, not assigned: a key named __proto__ is a field like any other (and refused as unknown).
        Object.defineProperty(obj, key, {
          value: value([...path, key]),
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
    }
    if (c === '[') {
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
        arr.push(value([...path, arr.length]));
        space();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return arr;
        } else fail("expected ',' or ']' after an array element");
      }
    }
    if (c === '"') return string();
    NUMBER.lastIndex = i;
    const n = NUMBER.exec(text);
    if (n) {
      i += n[0].length;
      return Number(n[0]);
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
  const root = value([]);
  space();
  if (i < text.length) fail('unexpected text after the document');
  return { value: root, duplicates };
}

function lineAndColumn(text: string, at: number): string {
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  const column = at - (before.lastIndexOf('\n') + 1) + 1;
  return `line ${line}, column ${column}`;
}
