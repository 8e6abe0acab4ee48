// The catalogue at run time: the declarative list joined with which providers have
// credentials, and the model aliases. Lookups are by the id callers use, or an alias of it.
import type { Config, ProviderConfig } from '../config/config.ts';
import { parseDecimal } from '../billing/money.ts';
import { MODELS, type CatalogueEntry } from './models.ts';
import { modelAliases } from './aliases.ts';
import { PRICED_TIERS } from '../billing/pricing.ts';
import type { PriceVersion } from './price-book.ts';
import { gatewayError } from '../rpc/errors.ts';

export interface ResolvedModel extends CatalogueEntry {
  available: boolean;
  /** For operators (logs, the admin CatalogueService): names the missing setting. */
  unavailableReason: string;
  providerConfig: ProviderConfig;
  /** The price book version `prices` come from (price-book.ts); 0 before the book is read. */
  priceVersion: bigint;
}

export interface ModelAlias {
  alias: string;
  model: ResolvedModel;
}

export class Catalogue {
  private readonly byId = new Map<string, ResolvedModel>();
  private readonly byAlias = new Map<string, ResolvedModel>();

  constructor(
    config: Config,
    entries: readonly CatalogueEntry[] = MODELS,
    aliases: Readonly<Record<string, string>> = modelAliases(config.modelAliases),
  ) {
    for (const e of entries) {
      for (const p of Object.values(e.prices)) parseDecimal(p); // a bad price fails the start, not a request
      const problem = priceProblem(e) ?? visionProblem(e);
      if (problem) throw new Error(`catalogue entry ${e.id}: ${problem}`);
      if (this.byId.has(e.id)) throw new Error(`catalogue lists ${e.id} twice`);
      const pc = config.providers[e.provider];
      const reason = !e.enabled
        ? 'disabled in the catalogue'
        : pc.apiKey
          ? ''
          : `${e.provider.toUpperCase()}_API_KEY is not set`;
      this.byId.set(e.id, {
        ...e,
        available: reason === '',
        unavailableReason: reason,
        providerConfig: pc,
        priceVersion: 0n,
      });
    }
    // A bad alias fails the start: one that hides a model, or points at nothing (or at another alias).
    for (const [alias, target] of Object.entries(aliases)) {
      if (this.byId.has(alias))
        throw new Error(`MODEL_ALIASES: '${alias}' is a catalogue model; an alias cannot replace it`);
      const model = this.byId.get(target);
      if (!model) throw new Error(`MODEL_ALIASES: '${alias}' points at '${target}', which is not in the catalogue`);
      this.byAlias.set(alias, model);
    }
  }

  /**
   * Prices from the price book's versions in force (price-book.ts): each model's map replaced by
   * its version's, checked as the shipped ones are. A model keeps its object until then: a request
   * that resolved it goes on at the prices (and version) it was planned with.
   */
  applyPrices(versions: ReadonlyMap<string, PriceVersion>): void {
    // Every changed model checked first: a bad version changes nothing at all.
    const changed: ResolvedModel[] = [];
    for (const [id, m] of this.byId) {
      const v = versions.get(id);
      if (!v || v.id === m.priceVersion) continue;
      for (const p of Object.values(v.prices)) parseDecimal(p);
      const priced = { ...m, prices: { ...v.prices }, priceVersion: v.id };
      const problem = priceProblem(priced);
      if (problem) throw new Error(`price book version ${v.id} of ${id}: ${problem}`);
      changed.push(priced);
    }
    for (const m of changed) this.byId.set(m.id, m);
    for (const [alias, m] of this.byAlias) this.byAlias.set(alias, this.byId.get(m.id)!);
  }

  /** The model named `name`, or the one its alias points at. The result's `id` is the model that serves. */
  get(name: string): ResolvedModel | undefined {
    return this.byId.get(name) ?? this.byAlias.get(name);
  }

  list(): ResolvedModel[] {
    return [...this.byId.values()];
  }

  aliases(): ModelAlias[] {
    return [...this.byAlias].map(([alias, model]) => ({ alias, model }));
  }
}

/** A chat entry's variant prices must be whole, and tier and long-context variants do not combine. */
function priceProblem(e: CatalogueEntry): string | undefined {
  if (e.kind !== 'chat') return undefined;
  const prefixes = [...PRICED_TIERS.map((t) => `${t}_`), 'long_'];
  for (const p of prefixes) {
    const has = Object.keys(e.prices).some((k) => k.startsWith(p));
    if (has && (e.prices[`${p}input_per_mtok`] === undefined || e.prices[`${p}output_per_mtok`] === undefined))
      return `${p}input_per_mtok and ${p}output_per_mtok are both needed`;
  }
  const tiered = PRICED_TIERS.some((t) => e.prices[`${t}_input_per_mtok`] !== undefined);
  if (tiered && e.prices.long_input_per_mtok !== undefined)
    return 'a model has tier prices or long-context prices, not both';
  if ((e.prices.long_input_per_mtok !== undefined) !== (e.longContextAboveTokens !== undefined))
    return 'long_ prices and longContextAboveTokens go together';
  return undefined;
}

/** A chat entry says how its provider bills an input image, in positive whole numbers and a decimal multiplier. */
function visionProblem(e: CatalogueEntry): string | undefined {
  if (e.kind !== 'chat') return undefined;
  const v = e.vision;
  if (!v) return 'a chat model needs `vision`: how its provider bills an input image (the hold counts images by it)';
  const whole = (...n: number[]) => n.every((x) => Number.isSafeInteger(x) && x > 0);
  switch (v.kind) {
    case 'tiles':
      return whole(v.baseTokens, v.tileTokens) ? undefined : 'vision tile tokens must be positive integers';
    case 'patches':
      parseDecimal(v.multiplier);
      return whole(v.high.patches, v.high.maxEdge, ...(v.original ? [v.original.patches, v.original.maxEdge] : []))
        ? undefined
        : 'vision patch budgets must be positive integers';
    case 'claude':
      return whole(v.maxEdge, v.maxPatches) ? undefined : 'vision maxEdge and maxPatches must be positive integers';
    default:
      return undefined;
  }
}

/**
 * Why a model cannot serve, as callers are told it: the reason in general terms, never the
 * setting that is missing (error bodies carry no configuration).
 */
export function unavailableToCallers(model: ResolvedModel): string {
  return model.enabled
    ? `The model '${model.id}' is not available on this gateway right now: its provider is not configured.`
    : `The model '${model.id}' is disabled on this gateway.`;
}

/** The 400 for a request naming a model that cannot serve now (`prefix`: the route's own message style, e.g. "model: "). */
export function modelNotAvailable(model: ResolvedModel, prefix = '') {
  return gatewayError({
    httpStatus: 400,
    type: 'invalid_request_error',
    code: 'model_not_available',
    param: 'model',
    message: `${prefix}${unavailableToCallers(model)}`,
  });
}
