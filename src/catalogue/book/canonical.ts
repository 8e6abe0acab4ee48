// The one canonical text of a document, so export -> apply -> export gives the same bytes and two
// books differ in text only where they differ in meaning.

import type { CatalogueEntry, VisionBilling } from '../models.ts';
import type { Deployment, ProviderDefinition } from '../providers.ts';
import { BOOK_SCHEMA_REF, type BookDocument, type BookMarkup } from './document.ts';
import { isObject } from './limits.ts';

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
  state: true,
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
  auth: true,
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
