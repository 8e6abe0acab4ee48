// What a well-shaped document's values mean: prices, references, scopes, one problem each.

import { markupPpm } from '../../billing/markup.ts';
import type { CatalogueEntry } from '../models.ts';
import { priceMapProblems, priceProblem, visionProblem } from '../price-rules.ts';
import {
  baseUrlProblem,
  deploymentsOf,
  dialectServes,
  DEPLOYMENT_ID,
  DIALECTS,
  PROVIDER_ID,
  sameFamily,
  type ProviderDefinition,
} from '../providers.ts';
import type { BookDocument, BookProblem } from './document.ts';
import { BOOK_LIMITS, capped, clip, full, GROUP, MODEL_NAME, show } from './limits.ts';
import { isKind, labelId, MODEL_KINDS, markupScope, modelLabel, names } from './shape.ts';

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
    else if (weight > BOOK_LIMITS.weight)
      out.push({ field: `${place}.weight`, message: `${whose}: weight ${weight} is above ${BOOK_LIMITS.weight}` });
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
