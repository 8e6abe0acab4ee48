// The catalogue at run time: the declarative list joined with which providers have
// credentials, and the model aliases. Lookups are by the id callers use, or an alias of it.
import type { Config, ProviderConfig } from '../config/config.ts';
import { parseDecimal } from '../money/money.ts';
import type { CatalogueEntry } from './models.ts';
import { MODELS } from './shipped-book.ts';
import { applyAliasSetting, modelAliases } from './aliases.ts';
import { priceProblem, visionProblem } from './price-rules.ts';
import type { BookState, MarkupVersion, PriceVersion } from './price-book.ts';
import { applicableMarkup } from './book-diff.ts';
import { gatewayError } from '../errors/errors.ts';
import { NO_MARKUP, parseMarkup, type Markup } from '../billing/markup.ts';

export interface ResolvedModel extends CatalogueEntry {
  available: boolean;
  /** For operators (logs, the admin CatalogueService): names the missing setting. */
  unavailableReason: string;
  providerConfig: ProviderConfig;
  /** The price book version `prices` come from (price-book.ts); 0 before the book is read. */
  priceVersion: bigint;
  /** The markup in force for each account group on this model ('' = every group without one of its own). */
  markups: ReadonlyMap<string, Markup>;
}

/** What `group` pays on `model` over its provider's prices (markupFor(m, g) is fixed with the model object, as its prices are). */
export function markupFor(model: ResolvedModel, group: string): Markup {
  return model.markups.get(group) ?? model.markups.get('') ?? NO_MARKUP;
}

export interface ModelAlias {
  alias: string;
  model: ResolvedModel;
}

export class Catalogue {
  private byId = new Map<string, ResolvedModel>();
  private byAlias = new Map<string, ResolvedModel>();
  /** When the book snapshot served was taken (none before the first load). */
  private loadedAt: Date | undefined;
  private readonly config: Config;

  /** The shipped catalogue (or `entries`) at its shipped prices: what serves until the book is read (load). */
  constructor(
    config: Config,
    entries: readonly CatalogueEntry[] = MODELS,
    aliases: Readonly<Record<string, string>> = modelAliases(config.modelAliases),
  ) {
    this.config = config;
    this.install(entries, undefined, aliases, []);
  }

  /**
   * Serves the book in force (price-book.ts): every model's definition, prices and markups, and
   * the aliases (with this instance's MODEL_ALIASES changes on top). Checked whole first: a bad
   * book changes nothing. A model keeps its object until then: a request that resolved it goes on
   * at the prices, markups and versions it was planned with.
   */
  load(state: BookState): void {
    // A refresh that began reading before a write and ended after the writer loaded its change
    // would put the older book back: the snapshot served is never replaced by an older one.
    if (this.loadedAt !== undefined && state.takenAt < this.loadedAt) return;
    const entries = [...state.definitions.values()].map((d) => ({
      ...d,
      prices: state.prices.get(d.id)?.prices ?? {},
    }));
    const aliases = applyAliasSetting(Object.fromEntries(state.aliases), this.config.modelAliases);
    this.install(entries, state.prices, aliases, state.markups);
    this.loadedAt = state.takenAt;
  }

  private install(
    entries: readonly CatalogueEntry[],
    versions: ReadonlyMap<string, PriceVersion> | undefined,
    aliases: Readonly<Record<string, string>>,
    markups: readonly MarkupVersion[],
  ): void {
    const byId = new Map<string, ResolvedModel>();
    const byAlias = new Map<string, ResolvedModel>();
    for (const e of entries) {
      const version = versions?.get(e.id);
      const priced = versions === undefined || version !== undefined;
      if (priced) {
        for (const p of Object.values(e.prices)) parseDecimal(p); // a bad price fails here, not a request
        const problem = priceProblem(e) ?? visionProblem(e);
        if (problem) throw new Error(`catalogue entry ${e.id}: ${problem.field}: ${problem.message}`);
      }
      if (byId.has(e.id)) throw new Error(`catalogue lists ${e.id} twice`);
      const pc = this.config.providers[e.provider];
      const reason = !e.enabled
        ? 'disabled in the catalogue'
        : !priced
          ? 'no price in force in the price book'
          : pc.apiKey
            ? ''
            : `${e.provider.toUpperCase()}_API_KEY is not set`;
      byId.set(e.id, {
        ...e,
        prices: { ...e.prices },
        available: reason === '',
        unavailableReason: reason,
        providerConfig: pc,
        priceVersion: version?.id ?? 0n,
        markups: markupTable(e, markups),
      });
    }
    // A bad alias fails: one that hides a model, or points at nothing (or at another alias).
    for (const [alias, target] of Object.entries(aliases)) {
      if (byId.has(alias)) throw new Error(`alias '${alias}' is a catalogue model; an alias cannot replace it`);
      const model = byId.get(target);
      if (!model) throw new Error(`alias '${alias}' points at '${target}', which is not in the catalogue`);
      byAlias.set(alias, model);
    }
    this.byId = byId;
    this.byAlias = byAlias;
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

/**
 * Each account group's markup on `model` (book-diff.ts applicableMarkup). Groups whose markup is
 * everyone's are left out: they pay the '' entry.
 */
function markupTable(model: CatalogueEntry, markups: readonly MarkupVersion[]): Map<string, Markup> {
  const table = new Map<string, Markup>();
  for (const g of new Set(['', ...markups.map((m) => m.group)])) {
    const hit = applicableMarkup(markups, (m) => m, model, g);
    if (hit && (g === '' || hit.group === g)) table.set(g, parseMarkup(hit.id, hit.markup!));
  }
  return table;
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
