// The catalogue at run time: the book's providers and models joined with the credentials this
// instance has, each model's deployments resolved, and the model aliases. Lookups are by the id
// callers use, or an alias of it.
import type { Config } from '../config/config.ts';
import { parseDecimal } from '../money/money.ts';
import type { CatalogueEntry } from './models.ts';
import { MODELS, shippedBook } from './shipped-book.ts';
import { applyAliasSetting, modelAliases } from './aliases.ts';
import { priceProblem, visionProblem } from './price-rules.ts';
import type { BookState, MarkupVersion, PriceVersion } from './price-book.ts';
import { applicableMarkup } from './book-diff.ts';
import { gatewayError } from '../errors/errors.ts';
import { NO_MARKUP, parseMarkup, type Markup } from '../billing/markup.ts';
import { setSecrets } from '../secrets/scrub.ts';
import {
  deploymentsOf,
  trimmedBase,
  type DeploymentLimits,
  type Dialect,
  type ProviderAuth,
  type ProviderDefinition,
  type RoutingStrategy,
} from './providers.ts';

/** A provider as this instance calls it: the book's definition, with this instance's base URL setting over it. */
export interface ResolvedProvider {
  id: string;
  dialect: Dialect;
  baseUrl: string;
  apiVersion?: string;
  headers: Readonly<Record<string, string>>;
  timeoutMs?: number;
  /** `none`: called without a credential, and never sent one (docs/providers.md#a-server-that-needs-no-credential). */
  auth?: ProviderAuth;
  /** Not in the book: added by this instance's `<NAME>_FALLBACK_*` setting. */
  fromSetting?: true;
}

/** One place a model is served. */
export interface ResolvedDeployment {
  /** `<model>/<deployment>`: names it in health, metrics and usage rows. */
  key: string;
  id: string;
  provider: ResolvedProvider;
  upstreamId: string;
  weight: number;
  priority: number;
  limits?: DeploymentLimits;
  /** What it costs the operator: the model's prices with the deployment's own over them. */
  providerPrices: Readonly<Record<string, string>>;
  /** Its prices differ from the model's. */
  ownPrices: boolean;
  /** The book drains it: tried only after every other deployment of its model. */
  draining?: true;
}

export interface ResolvedModel extends CatalogueEntry {
  available: boolean;
  /** For operators (logs, the admin CatalogueService): names the missing setting. */
  unavailableReason: string;
  /** The dialect of the model's own provider: the form its requests take. */
  dialect: Dialect;
  /** Where it is served, in the book's order; only those whose provider has a credential here (or needs none). */
  served: readonly ResolvedDeployment[];
  strategy: RoutingStrategy;
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

/** Every provider credential the catalogue serves with, as the credential scrubber knows them (src/secrets/scrub.ts). */
const SCRUBBED_SOURCE = 'provider credentials';

/** The provider a `<NAME>_FALLBACK_*` setting adds, and the deployment it gives each of that provider's models. */
const FALLBACK_SUFFIX = '-fallback';

export class Catalogue {
  private byId = new Map<string, ResolvedModel>();
  private byAlias = new Map<string, ResolvedModel>();
  private providersById = new Map<string, ResolvedProvider>();
  /** Each provider's credential on this instance (settings, then the credential store over them). */
  private secrets = new Map<string, string>();
  private stored = new Map<string, string>();
  /** The last book installed, to install again when credentials change. */
  private last: Parameters<Catalogue['install']> | undefined;
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
    this.secrets = this.settingSecrets();
    setSecrets(SCRUBBED_SOURCE, this.secrets.values());
    this.install(shippedBook().providers ?? [], entries, undefined, aliases, []);
  }

  /** Credentials from settings: `<NAME>_API_KEY` for the shipped providers, and their `<NAME>_FALLBACK_*`. */
  private settingSecrets(): Map<string, string> {
    const out = new Map<string, string>();
    for (const pc of Object.values(this.config.providers)) {
      if (pc.apiKey) out.set(pc.name, pc.apiKey);
      if (pc.fallback) out.set(pc.name + FALLBACK_SUFFIX, pc.fallback.apiKey);
    }
    return out;
  }

  /**
   * The credential store's secrets (credentials.ts), over the settings': a provider gets served
   * once it has one. Models keep their objects; a call reads its provider's credential when it
   * is made, so a replaced credential is used from the next call on.
   */
  setStoredSecrets(stored: ReadonlyMap<string, string>): void {
    const before = this.secrets;
    this.stored = new Map(stored);
    this.secrets = new Map([...this.settingSecrets(), ...this.stored]);
    // Scrubbed from provider text from now on; a replaced value stays scrubbed for calls still answering with it.
    setSecrets(SCRUBBED_SOURCE, this.secrets.values());
    // Which providers have a credential decides which deployments serve; a new value of one needs nothing more.
    const sameProviders = before.size === this.secrets.size && [...before.keys()].every((k) => this.secrets.has(k));
    if (!sameProviders && this.last) this.install(...this.last);
  }

  /** The credential a call to `providerId` carries now; undefined when there is none. */
  secretOf(providerId: string): string | undefined {
    return this.secrets.get(providerId);
  }

  /** Whether this instance can call the provider: it has a credential here, or the book says it needs none. */
  credentialUsable(providerId: string): boolean {
    return this.providersById.get(providerId)?.auth === 'none' || this.secrets.has(providerId);
  }

  /** Whether a credential of the provider comes from the credential store (else from a setting). */
  storedSecret(providerId: string): boolean {
    return this.stored.has(providerId);
  }

  providers(): ResolvedProvider[] {
    return [...this.providersById.values()];
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
    this.install([...state.providers.values()], entries, state.prices, aliases, state.markups);
    this.loadedAt = state.takenAt;
  }

  private install(
    providerList: readonly ProviderDefinition[],
    entries: readonly CatalogueEntry[],
    versions: ReadonlyMap<string, PriceVersion> | undefined,
    aliases: Readonly<Record<string, string>>,
    markups: readonly MarkupVersion[],
  ): void {
    const providers = this.resolveProviders(providerList);
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
      const own = providers.get(e.provider);
      if (!own) throw new Error(`catalogue entry ${e.id}: provider ${e.provider} is not in the book`);
      const served = this.deploymentsServing(e, providers);
      const reason = !e.enabled
        ? 'disabled in the catalogue'
        : !priced
          ? 'no price in force in the price book'
          : served.length > 0
            ? ''
            : deploymentsOf(e).every((d) => d.state === 'disabled')
              ? ALL_DISABLED
              : this.missingCredential(e);
      byId.set(e.id, {
        ...e,
        prices: { ...e.prices },
        available: reason === '',
        unavailableReason: reason,
        dialect: own.dialect,
        served,
        strategy: e.routing ?? 'weighted',
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
    this.providersById = providers;
    this.last = [providerList, entries, versions, aliases, markups];
  }

  /** The book's providers, with this instance's `<NAME>_BASE_URL` over the shipped ones', and a provider per `<NAME>_FALLBACK_*` setting. */
  private resolveProviders(list: readonly ProviderDefinition[]): Map<string, ResolvedProvider> {
    const out = new Map<string, ResolvedProvider>();
    for (const p of list) {
      const setting = (this.config.providers as Record<string, Config['providers'][keyof Config['providers']]>)[p.id];
      const resolved: ResolvedProvider = {
        id: p.id,
        dialect: p.dialect,
        baseUrl: trimmedBase(setting?.baseUrlSet ? setting.baseUrl : p.baseUrl),
        headers: { ...p.headers },
        ...(p.apiVersion !== undefined ? { apiVersion: p.apiVersion } : {}),
        ...(p.timeoutMs !== undefined ? { timeoutMs: p.timeoutMs } : {}),
        ...(p.auth !== undefined ? { auth: p.auth } : {}),
      };
      out.set(p.id, resolved);
      if (setting?.fallback) {
        const id = p.id + FALLBACK_SUFFIX;
        if (!list.some((x) => x.id === id))
          out.set(id, { ...resolved, id, baseUrl: trimmedBase(setting.fallback.baseUrl), fromSetting: true });
      }
    }
    return out;
  }

  /** The model's deployments whose provider has a credential here (or needs none); a `<NAME>_FALLBACK_*` setting adds one of priority 1 below the model's own. */
  private deploymentsServing(e: CatalogueEntry, providers: Map<string, ResolvedProvider>): ResolvedDeployment[] {
    const listed = deploymentsOf(e);
    const fallback = e.deployments === undefined && providers.has(e.provider + FALLBACK_SUFFIX);
    const all = fallback
      ? [...listed, { id: 'fallback', provider: e.provider + FALLBACK_SUFFIX, priority: 1 }]
      : listed;
    const out: ResolvedDeployment[] = [];
    for (const d of all) {
      const provider = providers.get(d.provider);
      if (!provider || (provider.auth !== 'none' && !this.secrets.has(d.provider)) || d.state === 'disabled') continue;
      out.push({
        key: `${e.id}/${d.id}`,
        id: d.id,
        provider,
        upstreamId: d.upstreamId ?? e.upstreamId,
        weight: d.weight ?? 1,
        priority: d.priority ?? 0,
        ...(d.limits ? { limits: d.limits } : {}),
        providerPrices: { ...e.prices, ...d.prices },
        ownPrices: d.prices !== undefined && Object.keys(d.prices).length > 0,
        ...(d.state === 'draining' ? { draining: true as const } : {}),
      });
    }
    return out;
  }

  /** Why no deployment of `e` can serve: the setting or credential each provider of a deployment in traffic lacks. */
  private missingCredential(e: CatalogueEntry): string {
    const names = [...new Set(deploymentsOf(e).flatMap((d) => (d.state === 'disabled' ? [] : [d.provider])))];
    return names
      .map((p) =>
        Object.hasOwn(this.config.providers, p)
          ? `${p.toUpperCase()}_API_KEY is not set`
          : `provider ${p} has no credential (providers set-credential)`,
      )
      .join('; ');
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
  if (!model.enabled) return `The model '${model.id}' is disabled on this gateway.`;
  const why = model.unavailableReason === ALL_DISABLED ? 'it is out of service' : 'its provider is not configured';
  return `The model '${model.id}' is not available on this gateway right now: ${why}.`;
}

/** Why a model with deployments serves none: the book disabled every one of them. */
const ALL_DISABLED = 'every deployment is disabled in the book';

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
