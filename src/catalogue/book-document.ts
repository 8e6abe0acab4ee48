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
import type { CatalogueEntry, ModelKindName, PatchBudget, ToolUseTokens, VisionBilling } from './models.ts';
import { priceMapProblems, priceProblem, visionProblem } from './price-rules.ts';
import {
  baseUrlProblem,
  deploymentsOf,
  dialectServes,
  DEPLOYMENT_ID,
  DIALECTS,
  headerProblem,
  PROVIDER_ID,
  PROVIDER_LIMITS,
  ROUTING_STRATEGIES,
  sameFamily,
  type Deployment,
  type DeploymentLimits,
  type ProviderDefinition,
} from './providers.ts';

/** A markup over the provider's prices for one scope: a model, a provider's models, or (neither) every model. */
export interface BookMarkup {
  /** A provider id of the book; checked by bookProblems. */
  provider?: string;
  model?: string;
  /** The account group it applies to (accounts.price_group); absent: every account without one of its own. */
  group?: string;
  /** A decimal fraction: "0.2" is 20% over the provider's price (src/billing/markup.ts). */
  markup: string;
}

/** A whole book. Mutable, so a change can be made on a copy of the book in force and checked whole. */
export interface BookDocument {
  /**
   * Every provider (providers.ts). A document may leave the list out (one model's change, an
   * export from before providers were book data): the providers in force are kept.
   */
  providers?: ProviderDefinition[];
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
const VISION_KINDS: Record<VisionBilling['kind'], true> = {
  tiles: true,
  patches: true,
  claude: true,
  window: true,
  none: true,
};
const names = (r: Record<string, true>) => Object.keys(r).join(', ');
const isKind = (k: unknown): k is ModelKindName => typeof k === 'string' && Object.hasOwn(MODEL_KINDS, k);

/** The names a model or an alias can have: the ones MODEL_ALIASES accepts (src/config/config.ts). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;
/** An account group (accounts.price_group). */
const GROUP = /^[a-z0-9_-]{1,32}$/;

/**
 * How large a book and each thing in it may be (docs/price-book.md#limits): the document is
 * refused past `documentBytes` before it is parsed, and a string past its field's limit before
 * what it means is checked. The admin RPCs bound their own string fields by the same numbers
 * (service.ts), and the RPC port reads at least CATALOGUE_READ_MAX_BYTES of a CatalogueService
 * message, so a document past its limit reaches the service and is refused naming it. Lengths of
 * strings are in characters (UTF-16 code units), the document's in UTF-8 bytes.
 */
export const BOOK_LIMITS = {
  /** The whole document (ApplyBook, PreviewBook, `catalogue apply -f`), and UpsertModel's model_json. */
  documentBytes: 4 * 1024 * 1024,
  /** A model id, an alias, the model a markup names: MODEL_NAME's own bound. */
  name: 128,
  upstreamId: 256,
  /** A price key, and how many prices one model has (a kind is billed by at most 21). */
  priceKey: 64,
  prices: 64,
  /** Tools in a model's toolUse, each named by a key bounded as a price key. */
  tools: 64,
  /** A price, a markup or a vision multiplier: a decimal string. */
  decimal: 64,
  /** An account group: GROUP's own bound. */
  group: 32,
  schemaRef: 1024,
  /** Who made a change and why (WriteMeta), on every admin RPC that writes. */
  source: 64,
  reason: 1024,
  /** Problems one refusal lists; finding more stops there, so a huge bad document costs no more to refuse than a small one. */
  problems: 100,
} as const;

/** The least the RPC port reads of a CatalogueService message: a document at its limit, even with every byte escaped to two (Connect's JSON), and the other fields. */
export const CATALOGUE_READ_MAX_BYTES = 2 * BOOK_LIMITS.documentBytes + 64 * 1024;

/** How much of a value past its limit an error quotes. */
const QUOTED_PREFIX = 64;

/** The first QUOTED_PREFIX characters of `s`, not splitting a surrogate pair. */
function prefixOf(s: string): string {
  const last = s.charCodeAt(QUOTED_PREFIX - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? QUOTED_PREFIX - 1 : QUOTED_PREFIX);
}

/**
 * `s` as a message or a field name quotes it: whole up to `max` characters (a valid name, which
 * is what people look for), else its first characters, '…' and its length, so no refusal is
 * larger than the limits it names, whatever it quotes.
 */
export function clip(s: string, max: number = BOOK_LIMITS.name): string {
  return s.length <= max ? s : `${prefixOf(s)}… (${s.length} characters)`;
}

/** The refusal of a text past BOOK_LIMITS.documentBytes, naming the limit; `what` says what the text is. */
export function documentSizeProblem(text: string, what = 'the document', field = 'document'): BookProblem | undefined {
  // A character is 1 to 3 UTF-8 bytes: a short text needs no counting.
  if (text.length * 3 <= BOOK_LIMITS.documentBytes) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= BOOK_LIMITS.documentBytes) return undefined;
  return {
    field,
    message: `${what} is ${bytes} bytes; a price book document is at most ${BOOK_LIMITS.documentBytes} bytes (${BOOK_LIMITS.documentBytes / 1024 / 1024} MiB, docs/price-book.md#limits)`,
  };
}

/** `s` past `max` characters: the refusal naming the limit and quoting only the start of `s`. */
export function tooLongMessage(s: string, max: number): string {
  return `is ${s.length} characters long (${show(s)}); at most ${max} characters`;
}

// ---------------------------------------------------------------------------------------------
// Parsing: the JSON, then its shape.

/**
 * Reads a book document: one past BOOK_LIMITS.documentBytes is refused unread; then a JSON syntax
 * error (with its line and column), or every field that is missing, unknown, of the wrong type or
 * past its limit (up to BOOK_LIMITS.problems of them).
 */
export function parseBookDocument(text: string): ParsedBookDocument {
  const tooLarge = documentSizeProblem(text);
  if (tooLarge) return { problems: [tooLarge] };
  let json: ParsedJson;
  try {
    json = parseJson(text);
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    return { problems: [{ field: 'document', message: `${lineAndColumn(text, e.at)}: ${e.message}` }] };
  }
  const position = positionsIn(text);
  const problems = json.duplicates.map(({ path, at }) => {
    const field = fieldOfPath(path, json.value);
    return {
      field,
      message: `${field} is given twice (the second at ${position(at)}); a key appears once in an object`,
    };
  });
  problems.push(...shapeProblems(json.value));
  if (problems.length > 0) return { problems: capped(problems) };
  const root = json.value as Record<string, unknown>;
  return {
    doc: {
      ...(root.providers !== undefined ? { providers: root.providers as ProviderDefinition[] } : {}),
      models: root.models as CatalogueEntry[],
      aliases: root.aliases as Record<string, string>,
      markups: root.markups as BookMarkup[],
    },
  };
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A value as a message quotes it: a string's start when it is long (whatever its size), anything else as JSON cut at 40 characters. */
const show = (v: unknown) => {
  if (typeof v === 'string') return v.length > QUOTED_PREFIX ? `${JSON.stringify(prefixOf(v))}…` : JSON.stringify(v);
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

/** The last problem of a list cut at BOOK_LIMITS.problems: there were more (a refusal tells them apart by identity). */
export const MORE_PROBLEMS: BookProblem = Object.freeze({
  field: 'document',
  message: `more problems than the ${BOOK_LIMITS.problems} listed; fix these and check the document again`,
});

/** At most BOOK_LIMITS.problems of `problems`, then MORE_PROBLEMS when there were more. */
function capped(problems: BookProblem[]): BookProblem[] {
  return problems.length <= BOOK_LIMITS.problems
    ? problems
    : [...problems.slice(0, BOOK_LIMITS.problems), MORE_PROBLEMS];
}
const full = (problems: readonly BookProblem[]) => problems.length > BOOK_LIMITS.problems;

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

/** A string of at most `max` characters: `what` names it in the refusal of a longer one. */
const aString =
  (max: number, what: string): FieldSpec['check'] =>
  (v, at) =>
    typeof v !== 'string'
      ? [{ field: at.field, message: `${at.who}: ${at.rel} must be a string, not ${show(v)}` }]
      : v.length > max
        ? [{ field: at.field, message: `${at.who}: ${at.rel} ${tooLongMessage(v, max)} (${what})` }]
        : [];
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
    if (full(out)) break;
    if (!Object.hasOwn(spec, key))
      out.push({
        field: child(at, clip(key)).field,
        message: `${at.who}: unknown field '${child(at, clip(key)).rel}' (${what} has ${Object.keys(spec).join(', ')})`,
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
    multiplier: { check: aString(BOOK_LIMITS.decimal, 'a decimal') },
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

const SYSTEM_PROMPT_FIELDS: Record<keyof ToolUseTokens['systemPrompt'], FieldSpec> = {
  auto: { check: aCount },
  any: { check: aCount },
};
const toolTokens: FieldSpec['check'] = (v, at) => {
  if (!isObject(v))
    return [
      {
        field: at.field,
        message: `${at.who}: ${at.rel} must be an object of whole numbers by tool name, not ${show(v)}`,
      },
    ];
  const names = Object.keys(v);
  if (names.length > BOOK_LIMITS.tools)
    return [
      { field: at.field, message: `${at.who}: ${at.rel} has ${names.length} tools; at most ${BOOK_LIMITS.tools}` },
    ];
  const out: BookProblem[] = [];
  for (const [name, n] of Object.entries(v)) {
    if (full(out)) break;
    // A tool name is a key like a price's, and bounded the same (BOOK_LIMITS).
    const place = child(at, clip(name, BOOK_LIMITS.priceKey));
    if (name.length > BOOK_LIMITS.priceKey)
      out.push({ field: place.field, message: `${at.who}: tool name ${tooLongMessage(name, BOOK_LIMITS.priceKey)}` });
    else out.push(...aCount(n, place));
  }
  return out;
};
const TOOL_USE_FIELDS: Record<keyof ToolUseTokens, FieldSpec> = {
  systemPrompt: { check: (v, at) => objectProblems(v, at, SYSTEM_PROMPT_FIELDS, 'an {auto, any} object') },
  tools: { check: toolTokens },
};
const toolUse: FieldSpec['check'] = (v, at) => objectProblems(v, at, TOOL_USE_FIELDS, 'a toolUse object');

const prices: FieldSpec['check'] = (v, at) => {
  if (!isObject(v))
    return [{ field: at.field, message: `${at.who}: prices must be an object of decimal USD strings, not ${show(v)}` }];
  const keys = Object.keys(v);
  if (keys.length > BOOK_LIMITS.prices)
    return [
      {
        field: at.field,
        message: `${at.who}: prices has ${keys.length} keys; a model has at most ${BOOK_LIMITS.prices} (its kind is billed by fewer)`,
      },
    ];
  const out: BookProblem[] = [];
  for (const key of keys) {
    const price = v[key];
    const place = child(at, clip(key, BOOK_LIMITS.priceKey));
    if (key.length > BOOK_LIMITS.priceKey)
      out.push({ field: place.field, message: `${at.who}: price key ${tooLongMessage(key, BOOK_LIMITS.priceKey)}` });
    else if (typeof price !== 'string')
      out.push({
        field: place.field,
        message: `${at.who}: ${place.rel} must be a decimal USD string (e.g. "2.50"), not ${show(price)}`,
      });
    else if (price.length > BOOK_LIMITS.decimal)
      out.push({
        field: place.field,
        message: `${at.who}: ${place.rel} ${tooLongMessage(price, BOOK_LIMITS.decimal)} (a price)`,
      });
  }
  return out;
};

const aProviderId = aString(BOOK_LIMITS.name, 'a provider id');

const LIMIT_FIELDS: { [K in keyof DeploymentLimits]-?: FieldSpec } = {
  rpm: { optional: true, check: aPositiveCount },
  tpm: { optional: true, check: aPositiveCount },
  concurrency: { optional: true, check: aPositiveCount },
};
const DEPLOYMENT_FIELDS: { [K in keyof Deployment]-?: FieldSpec } = {
  id: { check: aString(BOOK_LIMITS.name, 'a deployment id') },
  provider: { check: aProviderId },
  upstreamId: { optional: true, check: aString(BOOK_LIMITS.upstreamId, "the provider's name for the model") },
  // A weight below 0 is a number of the right type: bookProblems names it.
  weight: { optional: true, check: mustBe((v) => Number.isSafeInteger(v), 'a whole number') },
  priority: { optional: true, check: aCount },
  limits: {
    optional: true,
    check: (v, at) => objectProblems(v, at, LIMIT_FIELDS, 'a limits object {rpm, tpm, concurrency}'),
  },
  prices: { optional: true, check: (v, at) => prices(v, at) },
};
const deployments: FieldSpec['check'] = (v, at) => {
  if (!Array.isArray(v))
    return [
      { field: at.field, message: `${at.who}: deployments must be an array of deployment objects, not ${show(v)}` },
    ];
  if (v.length > PROVIDER_LIMITS.deployments)
    return [
      {
        field: at.field,
        message: `${at.who}: ${v.length} deployments; a model has at most ${PROVIDER_LIMITS.deployments}`,
      },
    ];
  const out: BookProblem[] = [];
  for (const [i, d] of v.entries()) {
    const id = isObject(d) && typeof d.id === 'string' ? clip(d.id) : String(i);
    const place = { field: `${at.field}[${id}]`, rel: `${at.rel}[${id}]`, who: at.who };
    out.push(...objectProblems(d, place, DEPLOYMENT_FIELDS, 'a deployment object'));
  }
  return out;
};

/** Every field of a CatalogueEntry (the compiler keeps this table and the type together). */
const MODEL_FIELDS: { [K in keyof CatalogueEntry]-?: FieldSpec } = {
  id: { check: aString(BOOK_LIMITS.name, 'a model id') },
  kind: { check: oneOf(MODEL_KINDS) },
  provider: { check: aProviderId },
  deployments: { optional: true, check: deployments },
  routing: { optional: true, check: oneOf(ROUTING_STRATEGIES) },
  upstreamId: { check: aString(BOOK_LIMITS.upstreamId, "the provider's name for the model") },
  enabled: { check: aBoolean },
  responsesPassthrough: { optional: true, check: aBoolean },
  contextWindow: { check: aCount },
  maxOutputTokens: { check: aCount },
  prices: { check: prices },
  longContextAboveTokens: { optional: true, check: aPositiveCount },
  reasoningBeyondCap: { optional: true, check: aBoolean },
  vision: { optional: true, check: vision },
  toolUse: { optional: true, check: toolUse },
};

const headers: FieldSpec['check'] = (v, at) => {
  if (!isObject(v))
    return [{ field: at.field, message: `${at.who}: headers must be an object of strings, not ${show(v)}` }];
  const names = Object.keys(v);
  if (names.length > PROVIDER_LIMITS.headers)
    return [{ field: at.field, message: `${at.who}: ${names.length} headers; at most ${PROVIDER_LIMITS.headers}` }];
  const out: BookProblem[] = [];
  for (const name of names) {
    const problem = headerProblem(name, v[name]);
    if (problem) out.push({ field: child(at, clip(name, 64)).field, message: `${at.who}: header ${problem}` });
  }
  return out;
};
const PROVIDER_FIELDS: { [K in keyof ProviderDefinition]-?: FieldSpec } = {
  id: { check: aProviderId },
  dialect: { check: oneOf(DIALECTS) },
  baseUrl: { check: aString(PROVIDER_LIMITS.baseUrl, 'a URL') },
  apiVersion: { optional: true, check: aString(PROVIDER_LIMITS.apiVersion, 'an api-version') },
  headers: { optional: true, check: headers },
  timeoutMs: { optional: true, check: aPositiveCount },
};

const MARKUP_FIELDS: { [K in keyof BookMarkup]-?: FieldSpec } = {
  provider: { optional: true, check: aProviderId },
  model: { optional: true, check: aString(BOOK_LIMITS.name, 'a model id') },
  group: { optional: true, check: aString(BOOK_LIMITS.group, 'an account group') },
  markup: { check: aString(BOOK_LIMITS.decimal, 'a decimal') },
};

/** A model's id, when it is one to name the model by: a string, not empty, within the limit. */
function labelId(m: unknown): string | undefined {
  const id = isObject(m) ? m.id : undefined;
  return typeof id === 'string' && id !== '' && id.length <= BOOK_LIMITS.name ? id : undefined;
}

/** `models[<id>]`, or `models[<index>]` for a model without a usable id. */
function modelLabel(m: unknown, index: number): string {
  return labelId(m) ?? String(index);
}

/** The scope a markup is for, as fields name it: `default`, `provider:openai`, `model:gpt-4o`, then `@group` when it has one. */
export function markupScope(m: { provider?: unknown; model?: unknown; group?: unknown }): string {
  const text = (v: unknown) => (typeof v === 'string' ? clip(v) : show(v));
  const parts: string[] = [];
  if (m.model !== undefined) parts.push(`model:${text(m.model)}`);
  if (m.provider !== undefined) parts.push(`provider:${text(m.provider)}`);
  const scope = parts.length > 0 ? parts.join('+') : 'default';
  return m.group !== undefined ? `${scope}@${text(m.group)}` : scope;
}

const TOP_FIELDS = ['$schema', 'providers', 'models', 'aliases', 'markups'];

function shapeProblems(root: unknown): BookProblem[] {
  if (!isObject(root))
    return [
      {
        field: 'document',
        message: `a book document is a JSON object with providers, models, aliases and markups, not ${show(root)}`,
      },
    ];
  const out: BookProblem[] = [];
  for (const key of Object.keys(root))
    if (!TOP_FIELDS.includes(key))
      out.push({
        field: clip(key),
        message: `unknown field '${clip(key)}' in the book (it has ${TOP_FIELDS.join(', ')})`,
      });
  if (root.$schema !== undefined && typeof root.$schema !== 'string')
    out.push({ field: '$schema', message: `$schema must be a string, not ${show(root.$schema)}` });
  else if (typeof root.$schema === 'string' && root.$schema.length > BOOK_LIMITS.schemaRef)
    out.push({ field: '$schema', message: `$schema ${tooLongMessage(root.$schema, BOOK_LIMITS.schemaRef)}` });

  // Each list stops once the refusal is full: a document of a million bad models costs no more to refuse.
  if (root.providers !== undefined && !Array.isArray(root.providers))
    out.push({
      field: 'providers',
      message: `providers must be an array of provider objects, not ${show(root.providers)}`,
    });
  else
    for (const [i, p] of (root.providers ?? []).entries()) {
      if (full(out)) break;
      const id = labelId(p);
      const place = {
        field: `providers[${id ?? i}]`,
        rel: '',
        who: id ? `provider ${id}` : `the provider at index ${i}`,
      };
      out.push(...objectProblems(p, place, PROVIDER_FIELDS, 'a provider object'));
    }
  if (!Array.isArray(root.models))
    out.push({ field: 'models', message: `models must be an array of model objects, not ${show(root.models)}` });
  else
    for (const [i, m] of root.models.entries()) {
      if (full(out)) break;
      const id = labelId(m);
      const place = { field: `models[${modelLabel(m, i)}]`, rel: '', who: id ?? `the model at index ${i}` };
      out.push(...objectProblems(m, place, MODEL_FIELDS, 'a model object'));
    }

  if (!isObject(root.aliases))
    out.push({
      field: 'aliases',
      message: `aliases must be an object of alias -> model id, not ${show(root.aliases)}`,
    });
  else
    for (const [alias, target] of Object.entries(root.aliases)) {
      if (full(out)) break;
      const field = `aliases[${clip(alias)}]`;
      const who = `alias ${clip(alias)}`;
      if (alias.length > BOOK_LIMITS.name)
        out.push({ field, message: `${who}: the alias ${tooLongMessage(alias, BOOK_LIMITS.name)}` });
      if (typeof target !== 'string')
        out.push({ field, message: `${who}: must name a model id (a string), not ${show(target)}` });
      else if (target.length > BOOK_LIMITS.name)
        out.push({ field, message: `${who}: the model id it names ${tooLongMessage(target, BOOK_LIMITS.name)}` });
    }

  if (!Array.isArray(root.markups))
    out.push({ field: 'markups', message: `markups must be an array of markup objects, not ${show(root.markups)}` });
  else
    for (const [i, mk] of root.markups.entries()) {
      if (full(out)) break;
      const scope = isObject(mk) ? markupScope(mk) : String(i);
      const place = {
        field: `markups[${scope}]`,
        rel: '',
        who: isObject(mk) ? `markup ${scope}` : `the markup at index ${i}`,
      };
      out.push(...objectProblems(mk, place, MARKUP_FIELDS, 'a markup object'));
    }
  return out;
}

/** A duplicate key's place, named as other problems name it (`models[gpt-4o].prices.input_per_mtok`). */
function fieldOfPath(path: readonly (string | number)[], root: unknown): string {
  const [top, second, ...rest] = path;
  let field = typeof top === 'string' ? clip(top) : String(top ?? 'document');
  if (second !== undefined) {
    const list = isObject(root) ? root[String(top)] : undefined;
    const item = Array.isArray(list) && typeof second === 'number' ? list[second] : undefined;
    if (top === 'models' && typeof second === 'number') field += `[${modelLabel(item, second)}]`;
    else if (top === 'markups' && typeof second === 'number')
      field += `[${isObject(item) ? markupScope(item) : second}]`;
    else field += `[${typeof second === 'string' ? clip(second) : second}]`;
  }
  for (const p of rest) field += typeof p === 'number' ? `[${p}]` : `.${clip(p)}`;
  return field;
}

// ---------------------------------------------------------------------------------------------
// What the values mean.

/**
 * Every problem with what a well-shaped document says (all of them, in document order): model ids
 * and their prices (price-rules.ts, no date: a book states what is in force), aliases, markups.
 */
export function bookProblems(doc: BookDocument, providersInForce?: readonly ProviderDefinition[]): BookProblem[] {
  const out: BookProblem[] = [];
  const byId = new Map<string, CatalogueEntry>();
  for (const m of doc.models) byId.set(m.id, m);
  // A document without providers keeps those in force; with neither known (a model checked on
  // its own, away from the gateway) references to providers go unchecked.
  const providers = doc.providers ?? providersInForce;
  const dialects = providers && new Map(providers.map((p) => [p.id, p.dialect]));
  // Each list stops once the refusal is full (BOOK_LIMITS.problems); names are quoted clipped, as a
  // book built from an RPC's fields (service.ts) has not been through parseBookDocument's limits.
  if (doc.providers) providerProblems(doc.providers, out);
  modelProblems(doc, dialects, out);
  aliasProblems(doc, byId, out);
  markupProblems(doc, byId, dialects, out);
  return capped(out);
}

/** Each provider: an id listed once, a base URL, an api-version where its dialect takes one. */
function providerProblems(providers: readonly ProviderDefinition[], out: BookProblem[]): void {
  const listed = new Map<string, number>();
  for (const p of providers) listed.set(p.id, (listed.get(p.id) ?? 0) + 1);
  for (const [i, p] of providers.entries()) {
    if (full(out)) break;
    const at = `providers[${labelId(p) ?? i}]`;
    const who = `provider ${clip(p.id)}`;
    if ((listed.get(p.id) ?? 0) > 1) {
      out.push({
        field: `${at}.id`,
        message: `${who}: listed ${listed.get(p.id)} times; a provider id is listed once`,
      });
      listed.set(p.id, 0);
    }
    if (!PROVIDER_ID.test(p.id))
      out.push({
        field: `${at}.id`,
        message: `${who}: id ${show(p.id)} is not a provider id (a lower-case letter or digit, then a-z, 0-9, - and _, at most 64)`,
      });
    if (!Object.hasOwn(DIALECTS, p.dialect))
      out.push({
        field: `${at}.dialect`,
        message: `${who}: dialect ${show(p.dialect)} is not one of ${names(DIALECTS)}`,
      });
    const url = baseUrlProblem(p.baseUrl);
    if (url) out.push({ field: `${at}.baseUrl`, message: `${who}: baseUrl ${url}` });
    if (p.dialect === 'azure-openai' && !p.apiVersion)
      out.push({
        field: `${at}.apiVersion`,
        message: `${who}: an azure-openai provider needs apiVersion (the api-version every call carries, e.g. "2024-10-21")`,
      });
    if (p.dialect !== 'azure-openai' && p.apiVersion !== undefined)
      out.push({ field: `${at}.apiVersion`, message: `${who}: apiVersion is for azure-openai providers only` });
  }
}

/** Each deployment of `m`: an id once, a provider of the book speaking the model's family, weights and prices that make sense. */
function deploymentProblems(
  m: CatalogueEntry,
  at: string,
  who: string,
  dialects: ReadonlyMap<string, ProviderDefinition['dialect']> | undefined,
  out: BookProblem[],
): void {
  if (m.deployments?.length === 0) {
    out.push({
      field: `${at}.deployments`,
      message: `${who}: deployments is empty; a model is served by at least one (leave it out to serve on ${clip(m.provider)})`,
    });
    return;
  }
  const own = dialects?.get(m.provider);
  const seen = new Set<string>();
  const weights = new Map<number, number>();
  for (const d of deploymentsOf(m)) {
    const place = `${at}.deployments[${clip(d.id)}]`;
    const whose = `${who}: deployment ${clip(d.id)}`;
    if (!DEPLOYMENT_ID.test(d.id))
      out.push({
        field: `${place}.id`,
        message: `${whose}: id is not a deployment id (a-z, 0-9, ., - and _, at most 64)`,
      });
    if (seen.has(d.id))
      out.push({ field: `${place}.id`, message: `${whose}: listed twice; a deployment id is listed once per model` });
    seen.add(d.id);
    // A model without deployments is served on its own provider, whose problems are the model's.
    const dialect = m.deployments === undefined ? undefined : dialects?.get(d.provider);
    if (dialects && m.deployments !== undefined && dialect === undefined)
      out.push({
        field: `${place}.provider`,
        message: `${whose}: provider ${show(d.provider)} is not a provider in the book`,
      });
    else if (dialect && own && !sameFamily(dialect, own))
      out.push({
        field: `${place}.provider`,
        message: `${whose}: provider ${clip(d.provider)} speaks ${dialect}, and ${clip(m.id)}'s requests take ${own}'s form`,
      });
    else if (dialect && !dialectServes(dialect, m.kind))
      out.push({
        field: `${place}.provider`,
        message: `${whose}: a ${dialect} provider does not serve ${m.kind} models`,
      });
    if (d.upstreamId === '')
      out.push({
        field: `${place}.upstreamId`,
        message: `${whose}: upstreamId is empty; leave it out to use the model's`,
      });
    const weight = d.weight ?? 1;
    if (weight < 0) out.push({ field: `${place}.weight`, message: `${whose}: weight ${weight} is below 0` });
    weights.set(d.priority ?? 0, (weights.get(d.priority ?? 0) ?? 0) + Math.max(0, weight));
    const ownPrices = d.prices ?? {};
    for (const k of Object.keys(ownPrices))
      if (!Object.hasOwn(m.prices, k))
        out.push({
          field: `${place}.prices.${clip(k, BOOK_LIMITS.priceKey)}`,
          message: `${whose}: price ${clip(k, BOOK_LIMITS.priceKey)} is not one of the model's prices; a deployment's prices replace some of them`,
        });
    // Each of its prices checked as the model's price map with it in place (one the model lacks is refused above).
    if (Object.keys(ownPrices).length > 0)
      for (const p of priceMapProblems(m, { ...m.prices, ...ownPrices })) {
        const key = p.field.slice('prices.'.length);
        if (Object.hasOwn(ownPrices, key) && Object.hasOwn(m.prices, key))
          out.push({ field: `${place}.${p.field}`, message: `${whose}: ${p.message}` });
      }
  }
  for (const [priority, total] of weights)
    if (total === 0)
      out.push({
        field: `${at}.deployments`,
        message: `${who}: every deployment of priority ${priority} has weight 0; one of them needs a weight above 0 to take traffic`,
      });
}

/** Each model's id (listed once, a model name), upstream id, provider, kind and prices. */
function modelProblems(
  doc: BookDocument,
  dialects: ReadonlyMap<string, ProviderDefinition['dialect']> | undefined,
  out: BookProblem[],
): void {
  const listed = new Map<string, number>();
  for (const m of doc.models) listed.set(m.id, (listed.get(m.id) ?? 0) + 1);
  for (const [i, m] of doc.models.entries()) {
    if (full(out)) break;
    const at = `models[${modelLabel(m, i)}]`;
    const who = m.id === '' ? `the model at index ${i}` : clip(m.id);
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
    const dialect = dialects?.get(m.provider);
    if (dialects && dialect === undefined)
      out.push({
        field: `${at}.provider`,
        message: `${who}: provider ${show(m.provider)} is not a provider in the book (${[...dialects.keys()].map((p) => clip(p)).join(', ')})`,
      });
    if (!isKind(m.kind)) {
      out.push({ field: `${at}.kind`, message: `${who}: kind ${show(m.kind)} is not one of ${names(MODEL_KINDS)}` });
      continue; // its prices cannot be checked without a kind
    }
    if (dialect && !dialectServes(dialect, m.kind))
      out.push({ field: `${at}.provider`, message: `${who}: a ${dialect} provider does not serve ${m.kind} models` });
    deploymentProblems(m, at, who, dialects, out);
    for (const p of [...priceMapProblems(m, m.prices), priceProblem(m), visionProblem(m)])
      if (p) out.push({ field: `${at}.${p.field}`, message: p.message });
  }
}

/** Each alias: a model name, not a model's, pointing at an enabled model of the book. */
function aliasProblems(doc: BookDocument, byId: Map<string, CatalogueEntry>, out: BookProblem[]): void {
  const isAlias = (name: string) => Object.hasOwn(doc.aliases, name);
  for (const [name, to] of Object.entries(doc.aliases)) {
    if (full(out)) break;
    const alias = clip(name);
    const target = clip(to);
    const field = `aliases[${alias}]`;
    if (!MODEL_NAME.test(name))
      out.push({
        field,
        message: `alias ${show(name)}: not a model name (a letter or digit, then letters, digits and ._:@/-, at most 128)`,
      });
    if (byId.has(name))
      out.push({ field, message: `alias ${alias}: ${alias} is a model in the book; an alias cannot replace a model` });
    const model = byId.get(to);
    if (!model)
      out.push({
        field,
        message: isAlias(to)
          ? `alias ${alias}: points at ${target}, which is itself an alias; point it at the model (${clip(doc.aliases[to]!)})`
          : `alias ${alias}: points at ${show(to)}, which is not a model in the book`,
      });
    else if (!model.enabled)
      out.push({
        field,
        message: `alias ${alias}: points at ${target}, which is disabled; an alias serves an enabled model`,
      });
  }
}

/** Each markup: a markup rate, for a model or a provider of the book (not both), a group; one per scope. */
function markupProblems(
  doc: BookDocument,
  byId: Map<string, CatalogueEntry>,
  dialects: ReadonlyMap<string, unknown> | undefined,
  out: BookProblem[],
): void {
  const isAlias = (name: string) => Object.hasOwn(doc.aliases, name);
  const scopes = new Map<string, number>();
  for (const mk of doc.markups) {
    if (full(out)) break;
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
    if (mk.provider !== undefined && dialects && !dialects.has(mk.provider))
      out.push({
        field: `${at}.provider`,
        message: `${who}: provider ${show(mk.provider)} is not a provider in the book`,
      });
    if (mk.model !== undefined && !byId.has(mk.model))
      out.push({
        field: `${at}.model`,
        message: isAlias(mk.model)
          ? `${who}: ${clip(mk.model)} is an alias; a markup names the model that serves it (${clip(doc.aliases[mk.model]!)})`
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
  routing: true,
  deployments: true,
  responsesPassthrough: true,
  contextWindow: true,
  maxOutputTokens: true,
  longContextAboveTokens: true,
  reasoningBeyondCap: true,
  vision: true,
  toolUse: true,
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
const DEPLOYMENT_FIELD_ORDER = Object.keys({
  id: true,
  provider: true,
  upstreamId: true,
  weight: true,
  priority: true,
  limits: true,
  prices: true,
} satisfies { [K in keyof Deployment]-?: true });
const PROVIDER_FIELD_ORDER = Object.keys({
  id: true,
  dialect: true,
  baseUrl: true,
  apiVersion: true,
  headers: true,
  timeoutMs: true,
} satisfies { [K in keyof ProviderDefinition]-?: true });

/** A provider with its fields in canonical order and its headers sorted by name. */
export function canonicalProvider(p: ProviderDefinition): ProviderDefinition {
  const out = ordered(p, PROVIDER_FIELD_ORDER);
  if (p.headers) out.headers = Object.fromEntries(Object.entries(p.headers).sort(([a], [b]) => byText(a, b)));
  return out;
}

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
  if (e.deployments)
    out.deployments = e.deployments.map((d) => {
      const o = ordered(d, DEPLOYMENT_FIELD_ORDER);
      if (d.limits) o.limits = ordered(d.limits, ['rpm', 'tpm', 'concurrency']);
      if (d.prices) o.prices = Object.fromEntries(Object.entries(d.prices).sort(([a], [b]) => byText(a, b)));
      return o;
    });
  if (e.toolUse)
    out.toolUse = {
      systemPrompt: ordered(e.toolUse.systemPrompt, ['auto', 'any']),
      tools: Object.fromEntries(Object.entries(e.toolUse.tools).sort(([a], [b]) => byText(a, b))),
    };
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
  const providers = doc.providers?.map(canonicalProvider).sort((a, b) => byText(a.id, b.id));
  const text = JSON.stringify(
    { $schema: BOOK_SCHEMA_REF, providers, models: models.map((x) => x.m), aliases, markups },
    null,
    2,
  );
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

/** The characters after a backslash that make an escape (`\u` takes four hex digits besides). */
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't', 'u']);
const HEX4 = /^[0-9a-fA-F]{4}$/;
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
  const value = (): unknown => {
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
        arr.push(inside(arr.length));
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
  const root = value();
  space();
  if (i < text.length) fail('unexpected text after the document');
  return { value: root, duplicates };
}

function lineAndColumn(text: string, at: number): string {
  return positionsIn(text)(at);
}

/**
 * Names places in `text` as `line L, column C`, for offsets asked in increasing order (as a
 * document's duplicates are found): each call counts lines on from the last, so naming every
 * problem of a large document reads it once, not once per problem.
 */
function positionsIn(text: string): (at: number) => string {
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
