// A document's shape: each field there with its type and within its limit, nothing unknown
// (the schema the code keeps; book.schema.json is the same for editors).

import type { CatalogueEntry, ModelKindName, PatchBudget, ToolUseTokens, VisionBilling } from '../models.ts';
import {
  DEPLOYMENT_TRAFFIC,
  DIALECTS,
  headerProblem,
  PROVIDER_AUTHS,
  PROVIDER_LIMITS,
  ROUTING_STRATEGIES,
  type Deployment,
  type DeploymentLimits,
  type ProviderDefinition,
} from '../providers.ts';
import type { BookMarkup, BookProblem } from './document.ts';
import { BOOK_LIMITS, clip, full, isObject, show, tooLongMessage } from './limits.ts';

export const MODEL_KINDS: Record<ModelKindName, true> = {
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
export const names = (r: Record<string, true>) => Object.keys(r).join(', ');
export const isKind = (k: unknown): k is ModelKindName => typeof k === 'string' && Object.hasOwn(MODEL_KINDS, k);

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
  state: { optional: true, check: oneOf(DEPLOYMENT_TRAFFIC) },
  // A whole number out of range is of the right type: bookProblems names it.
  weight: {
    optional: true,
    check: mustBe((v) => Number.isSafeInteger(v), `a whole number from 0 to ${BOOK_LIMITS.weight}`),
  },
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
  auth: { optional: true, check: oneOf(PROVIDER_AUTHS) },
};

const MARKUP_FIELDS: { [K in keyof BookMarkup]-?: FieldSpec } = {
  provider: { optional: true, check: aProviderId },
  model: { optional: true, check: aString(BOOK_LIMITS.name, 'a model id') },
  group: { optional: true, check: aString(BOOK_LIMITS.group, 'an account group') },
  markup: { check: aString(BOOK_LIMITS.decimal, 'a decimal') },
};

/** A model's id, when it is one to name the model by: a string, not empty, within the limit. */
export function labelId(m: unknown): string | undefined {
  const id = isObject(m) ? m.id : undefined;
  return typeof id === 'string' && id !== '' && id.length <= BOOK_LIMITS.name ? id : undefined;
}

/** `models[<id>]`, or `models[<index>]` for a model without a usable id. */
export function modelLabel(m: unknown, index: number): string {
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

export function shapeProblems(root: unknown): BookProblem[] {
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
export function fieldOfPath(path: readonly (string | number)[], root: unknown): string {
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
