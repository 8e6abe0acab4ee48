// The Providers page's changes of the book (docs/console.md#changing-providers-and-deployments):
// add a provider, add a deployment, change one's weight, priority, upstream model, limits, prices
// or traffic (enabled, draining, disabled). Each is the book in force (ExportBook) with that one
// edit made, applied by ApplyBook: the same one write path as the price book page's Apply and the
// CLI's `catalogue apply`, so the same checks refuse it, the dry run is its preview (what it
// changes, what it leaves to do, the version it was seen against), `based_on` makes the apply
// refused when the book changed since that preview, and each version it writes is in the book's
// history with source `console:operator` and the reason given.
import type { BookDocument } from '../catalogue/book-document.ts';
import type { Deployment, DeploymentLimits, ProviderDefinition } from '../catalogue/providers.ts';
import type { CatalogueEntry } from '../catalogue/models.ts';
import { type Catalogue, OPERATOR_CAUSE } from './kit.ts';
import { applyAnswer, ConsoleError, invalid, type Unchecked } from './wire.ts';
import type {
  ApplyAnswer,
  BookWriteOptions,
  DeploymentChangeRequest,
  DeploymentTraffic,
  NewDeploymentRequest,
  NewProviderRequest,
} from './web/wire-types.ts';

/** How a change from the console is written: a dry run or not, on which version, why; always by the operator. */
export interface WriteOptions {
  dryRun: boolean;
  basedOn: string;
  reason: string;
  source: string;
}

const REASON_MAX = 500;

/** The write options of a request, checked; `reason` when it gives none (the history says what was done). */
export function writeOptions(body: Unchecked<BookWriteOptions>, reason = ''): WriteOptions {
  if (body.dry_run !== undefined && typeof body.dry_run !== 'boolean') throw invalid('dry_run', 'true or false');
  if (body.reason !== undefined && (typeof body.reason !== 'string' || body.reason.length > REASON_MAX))
    throw invalid('reason', `a string of at most ${REASON_MAX} characters`);
  if (body.based_on !== undefined && (typeof body.based_on !== 'string' || !/^[0-9a-f]{0,64}$/.test(body.based_on)))
    throw invalid('based_on', 'the version a preview (a dry run) answered, as it was given');
  return {
    dryRun: body.dry_run === true,
    basedOn: typeof body.based_on === 'string' ? body.based_on : '',
    reason: typeof body.reason === 'string' && body.reason.trim() !== '' ? body.reason.trim() : reason,
    source: OPERATOR_CAUSE,
  };
}

/**
 * The book in force with `edit` made, applied (or, on a dry run, only seen) through ApplyBook. An
 * apply without `based_on` is based on the book just read, so nothing written between the read
 * and the write is undone by it.
 */
export async function applyEdit(
  catalogue: Catalogue,
  options: WriteOptions,
  edit: (doc: BookDocument) => void,
): Promise<ApplyAnswer> {
  const book = await catalogue.exportBook({});
  const doc = JSON.parse(book.document) as BookDocument;
  edit(doc);
  const r = await catalogue.applyBook({
    document: JSON.stringify(doc),
    dryRun: options.dryRun,
    reason: options.reason,
    source: options.source,
    basedOn: options.basedOn || book.version,
  });
  return applyAnswer(r);
}

// --- Reading a request's fields ---------------------------------------------------------------

const text = (v: unknown, field: string, what: string, max = 2048): string => {
  if (typeof v !== 'string' || v === '' || v.length > max) throw invalid(field, what);
  return v;
};

/** A whole number the book checks the range of; `undefined` when left out. */
const wholeNumber = (v: unknown, field: string): number | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalid(field, 'a whole number');
  return v;
};

/** A JSON object of the request, or undefined when left out. */
const object = (v: unknown, field: string, what: string): Record<string, unknown> | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(field, what);
  return v as Record<string, unknown>;
};

// --- Providers ----------------------------------------------------------------------------------

/** The book's entry for a provider the form describes (its meaning checked by the book). */
export function providerEntry(body: Unchecked<NewProviderRequest>): ProviderDefinition {
  const p = object(body.provider, 'provider', 'an object {id, dialect, base_url, …}');
  if (!p) throw invalid('provider', 'an object {id, dialect, base_url, …}');
  const apiVersion = p.api_version === undefined || p.api_version === '' ? undefined : p.api_version;
  const timeoutMs = p.timeout_ms === undefined || p.timeout_ms === null ? undefined : p.timeout_ms;
  if (p.auth !== undefined && p.auth !== '' && p.auth !== 'none') throw invalid('provider.auth', '"none" or left out');
  return {
    id: text(p.id, 'provider.id', 'the new provider’s id (a-z, 0-9, - and _)', 64),
    dialect: text(p.dialect, 'provider.dialect', 'openai, azure-openai, anthropic, cohere or bfl', 64) as never,
    baseUrl: text(p.base_url, 'provider.base_url', 'an http(s) URL'),
    ...(apiVersion !== undefined ? { apiVersion: text(apiVersion, 'provider.api_version', 'a string', 64) } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs: wholeNumber(timeoutMs, 'provider.timeout_ms')! } : {}),
    ...(p.auth === 'none' ? { auth: 'none' as const } : {}),
  };
}

/** Adds `entry` to the book; a provider of that id is refused (this form adds, it does not replace). */
export const addProvider =
  (entry: ProviderDefinition) =>
  (doc: BookDocument): void => {
    const list = doc.providers ?? [];
    if (list.some((p) => p.id === entry.id))
      throw new ConsoleError(409, 'provider_exists', `The book has a provider '${entry.id}' already.`);
    doc.providers = [...list, entry];
  };

// --- Deployments --------------------------------------------------------------------------------

/** The model of the book named `id` (its own id, not an alias), with its deployments listed. */
function modelOf(doc: BookDocument, id: string): CatalogueEntry & { deployments: Deployment[] } {
  const m = doc.models.find((x) => x.id === id);
  if (!m) throw new ConsoleError(404, 'model_not_found', `The book has no model '${id}' (name a model, not an alias).`);
  // A model without a list is served by one deployment on its own provider: the list says so now.
  m.deployments ??= [{ id: m.provider, provider: m.provider }];
  return m as CatalogueEntry & { deployments: Deployment[] };
}

function deploymentOf(doc: BookDocument, model: string, id: string): Deployment {
  const d = modelOf(doc, model).deployments.find((x) => x.id === id);
  if (!d)
    throw new ConsoleError(
      404,
      'deployment_not_found',
      `${model} has no deployment '${id}' in the book (one a <NAME>_FALLBACK_* setting adds is not the book's).`,
    );
  return d;
}

/** A new deployment as the book writes it, from the form's fields. */
export function deploymentEntry(body: Unchecked<NewDeploymentRequest>): Deployment {
  const d = object(body.deployment, 'deployment', 'an object {id, provider, …}');
  if (!d) throw invalid('deployment', 'an object {id, provider, …}');
  const upstream = d.upstream_id === undefined || d.upstream_id === '' ? undefined : d.upstream_id;
  const weight = wholeNumber(d.weight, 'deployment.weight');
  const priority = wholeNumber(d.priority, 'deployment.priority');
  return {
    id: text(d.id, 'deployment.id', 'the new deployment’s id (a-z, 0-9, ., - and _)', 64),
    provider: text(d.provider, 'deployment.provider', 'a provider of the book', 64),
    ...(upstream !== undefined ? { upstreamId: text(upstream, 'deployment.upstream_id', 'a string', 256) } : {}),
    ...(weight !== undefined ? { weight } : {}),
    ...(priority !== undefined ? { priority } : {}),
  };
}

export const addDeployment =
  (model: string, entry: Deployment) =>
  (doc: BookDocument): void => {
    const m = modelOf(doc, model);
    if (m.deployments.some((d) => d.id === entry.id))
      throw new ConsoleError(409, 'deployment_exists', `${model} has a deployment '${entry.id}' already.`);
    m.deployments.push(entry);
  };

/** The fields a deployment change may name, and what the page calls them. */
const CHANGEABLE = ['weight', 'priority', 'upstream_id', 'limits', 'prices', 'state'] as const;

/** What a deployment change sets: each field given, checked for its type (the book checks its meaning). */
export function deploymentChange(body: Unchecked<DeploymentChangeRequest>): {
  fields: string[];
  set: (d: Deployment) => void;
} {
  const fields = CHANGEABLE.filter((k) => body[k] !== undefined);
  if (fields.length === 0) throw invalid('body', `name at least one of ${CHANGEABLE.join(', ')} to change`);
  const weight = wholeNumber(body.weight, 'weight');
  const priority = wholeNumber(body.priority, 'priority');
  const upstream = body.upstream_id;
  if (upstream !== undefined && (typeof upstream !== 'string' || upstream.length > 256))
    throw invalid('upstream_id', 'the provider’s name for the model, or "" for the model’s own');
  const limits = body.limits === null ? null : limitsOf(body.limits);
  const prices = body.prices === null ? null : pricesOf(body.prices);
  const state = stateOf(body.state);
  // Each field given replaces the deployment's; "" / null / enabled leave the field out (the default).
  const set = (d: Deployment) => {
    const out = d as unknown as Record<string, unknown>;
    const put = (k: keyof Deployment, v: unknown) => {
      if (v === undefined) return;
      if (v === null) delete out[k];
      else out[k] = v;
    };
    put('weight', weight);
    put('priority', priority);
    put('upstreamId', upstream === '' ? null : upstream);
    put('limits', limits);
    put('prices', prices);
    put('state', state === 'enabled' ? null : state);
  };
  return { fields, set };
}

const TRAFFIC = new Set<unknown>(['enabled', 'draining', 'disabled']);

function stateOf(v: unknown): DeploymentTraffic | undefined {
  if (v === undefined) return undefined;
  if (!TRAFFIC.has(v)) throw invalid('state', 'enabled, draining or disabled');
  return v as DeploymentTraffic;
}

export const changeDeployment =
  (model: string, id: string, set: (d: Deployment) => void) =>
  (doc: BookDocument): void =>
    set(deploymentOf(doc, model, id));

/** `limits`: each of rpm, tpm and concurrency a whole number, or null / left out for none; none at all: no limits. */
function limitsOf(v: unknown): DeploymentLimits | null | undefined {
  const o = object(v, 'limits', 'an object {rpm, tpm, concurrency}, or null for none');
  if (!o) return undefined;
  const out: DeploymentLimits = {};
  for (const [k, x] of Object.entries(o)) {
    if (k !== 'rpm' && k !== 'tpm' && k !== 'concurrency') throw invalid(`limits.${k.slice(0, 32)}`, 'not a limit');
    if (x !== null) out[k] = wholeNumber(x, `limits.${k}`)!;
  }
  return Object.keys(out).length > 0 ? out : null;
}

/** `prices`: the deployment's own, USD per unit as decimal strings (never numbers: no float touches money); {} or null: the model's. */
function pricesOf(v: unknown): Record<string, string> | null | undefined {
  const o = object(v, 'prices', 'an object of decimal strings, or null for the model’s prices');
  if (!o) return undefined;
  for (const [k, x] of Object.entries(o))
    if (typeof x !== 'string')
      throw invalid(`prices.${k.slice(0, 64)}`, 'a decimal string of USD (e.g. "2.50"), never a number');
  return Object.keys(o).length > 0 ? (o as Record<string, string>) : null;
}

const TRAFFIC_WORD: Record<DeploymentTraffic, string> = {
  enabled: 'enabled',
  draining: 'drained',
  disabled: 'disabled',
};

/** The deployment change's reason when none is given: what it changed, for the history. */
export function changeReason(model: string, id: string, fields: readonly string[], state: unknown): string {
  if (fields.length === 1 && fields[0] === 'state' && TRAFFIC.has(state))
    return `console: deployment ${model}/${id} ${TRAFFIC_WORD[state as DeploymentTraffic]}`;
  return `console: ${fields.join(', ')} of deployment ${model}/${id}`;
}
