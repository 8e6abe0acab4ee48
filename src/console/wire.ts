// The console API's JSON (docs/console.md#api): what the services answer, written for the page
// (amounts as nano-USD decimal strings, times as ISO 8601 or null, counts as numbers), the
// request log's filters read from a query string, the CSV export's lines, and the API's errors.
// The shapes are the page's own (web/wire-types.ts): each mapper is typed with one, so the server
// and the page cannot disagree on a field without the compiler saying so.
import { timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type {
  AccountKey,
  AccountSummary,
  LedgerEntry,
  MarginRow,
  UsageRecord,
  UsageSummaryRow,
  VideoJobSummary,
} from '../gen/gateway/v1/billing_pb.js';
import {
  type ApplyBookResponse,
  type BookChange,
  type BookVersion,
  type Deployment,
  type Markup,
  type Model,
  type ModelDefinitionVersion,
  type ModelDeployments,
  ModelKind,
  type PreviewRow,
  type PriceVersion,
  type Provider,
  type ProviderCredential,
  type TestProviderResponse,
} from '../gen/gateway/v1/catalogue_pb.js';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListUsageRequestSchema } from '../gen/gateway/v1/billing_pb.js';
import type {
  AccountRow,
  ApplyAnswer,
  BookChange as BookChangeJson,
  BookVersionRow,
  DeploymentTraffic,
  DailyUsageRow,
  KeyRow,
  LedgerRow,
  MarginRow as MarginRowJson,
  Markup as MarkupJson,
  DeploymentRow,
  ModelDefinition,
  ModelDeployments as ModelDeploymentsJson,
  ModelPrices,
  PreviewRow as PreviewRowJson,
  PriceVersion as PriceVersionJson,
  ProviderCredential as ProviderCredentialJson,
  ProviderRow,
  ProviderTest,
  RequestFilters,
  RequestRow,
  VideoRow,
} from './web/wire-types.ts';

/** An answer other than 2xx, in the API's shape `{"error": {"code", "message"}}`. */
export class ConsoleError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfterSeconds: number | undefined;
  constructor(status: number, code: string, message: string, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export const invalid = (param: string, message: string) =>
  new ConsoleError(400, 'invalid_value', `${param}: ${message}`);

/** ISO 8601 to the millisecond, the rest cut off (not rounded: a time is never shown later than it was). */
export const iso = (t: Timestamp | undefined): string | null =>
  t ? new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1_000_000)).toISOString() : null;

export type Query = Record<string, unknown>;

/** A query parameter given once, or undefined; repeated or empty is refused or unset. */
export function param(q: Query, name: string, maxLength = 200): string | undefined {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw invalid(name, 'give it once');
  if (v.length > maxLength) throw invalid(name, `longer than ${maxLength} characters`);
  return v;
}

/** An integer parameter in [min, max], or `fallback` when absent. */
export function intParam(q: Query, name: string, fallback: number, min: number, max: number): number {
  const v = param(q, name, 12);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw invalid(name, `a whole number from ${min} to ${max}`);
  return Number(v);
}

const DAY_MS = 86_400_000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * A time parameter: an ISO 8601 time (with a zone, or taken as UTC) or a date YYYY-MM-DD. A date
 * as the end of a range (`end`) means the whole day: the next day's 00:00 UTC, exclusive.
 */
export function timeParam(q: Query, name: string, end: boolean): Date | undefined {
  const v = param(q, name, 40);
  if (v === undefined) return undefined;
  const d = DATE.exec(v);
  let t: number;
  if (d) {
    t = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]));
    if (new Date(t).toISOString().slice(0, 10) !== v) throw invalid(name, 'not a calendar date');
    if (end) t += DAY_MS;
  } else {
    if (!/^\d{4}-\d{2}-\d{2}T/.test(v)) throw invalid(name, 'an ISO 8601 time or a date YYYY-MM-DD');
    t = Date.parse(/(?:Z|[+-]\d{2}:?\d{2})$/i.test(v) ? v : `${v}Z`);
    if (Number.isNaN(t)) throw invalid(name, 'an ISO 8601 time or a date YYYY-MM-DD');
  }
  const year = new Date(t).getUTCFullYear();
  if (year < 1 || year > 9999) throw invalid(name, 'a time between the years 1 and 9999');
  return new Date(t);
}

/** The next UTC midnight after `now`: the end of today. */
export const endOfUtcDay = (now = new Date()): Date =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) + DAY_MS);

export const dayOf = (d: Date): string => d.toISOString().slice(0, 10);
export const addDays = (d: Date, days: number): Date => new Date(d.getTime() + days * DAY_MS);

/** The request log's filters and page from a query string, as ListUsage takes them (the account set by the caller). */
export function usageQuery(q: Query): MessageInitShape<typeof ListUsageRequestSchema> {
  // The filters' names are the page's (RequestFilters).
  const filter = (name: keyof RequestFilters, maxLength: number) => param(q, name, maxLength);
  const status = filter('status', 5);
  if (status !== undefined && status !== 'ok' && status !== 'error' && !/^[1-5]\d{2}$/.test(status))
    throw invalid('status', '"ok", "error" or an HTTP status such as 429');
  const from = timeParam(q, 'from' satisfies keyof RequestFilters, false);
  const to = timeParam(q, 'to' satisfies keyof RequestFilters, true);
  return {
    model: filter('model', 100) ?? '',
    route: filter('route', 100) ?? '',
    status: status ?? '',
    ...(from ? { from: timestampFromDate(from) } : {}),
    ...(to ? { to: timestampFromDate(to) } : {}),
    cursor: param(q, 'cursor', 400) ?? '',
    limit: intParam(q, 'limit', 50, 1, 200),
  };
}

export const requestRow = (r: UsageRecord): RequestRow => ({
  created_at: iso(r.createdAt),
  request_id: r.requestId,
  route: r.route,
  model: r.model,
  requested_model: r.requestedModel,
  input_tokens: Number(r.inputTokens),
  output_tokens: Number(r.outputTokens),
  cached_tokens: Number(r.cachedTokens),
  cost_nano: r.costNano.toString(),
  status: r.status,
  http_status: r.httpStatus,
  latency_ms: r.latencyMs,
  key_prefix: r.keyPrefix,
});

/**
 * A trace's address in the operator's trace UI: the TRACE_UI_URL template with each `{trace_id}`
 * replaced by the id; '' without a template, or when the id is not a trace id (32 lowercase hex),
 * so nothing else is ever put into the address.
 */
export function traceUrl(template: string | undefined, traceId: string): string {
  if (template === undefined || !/^[0-9a-f]{32}$/.test(traceId)) return '';
  return template.split('{trace_id}').join(traceId);
}

/**
 * The operator's request row: the holder's, with the request's trace id and its trace's address
 * ('' for none), the deployment that answered, the attempts, the provider's cost and the margin.
 */
export const operatorRequestRow = (r: UsageRecord, traceUiUrl: string | undefined): RequestRow => ({
  ...requestRow(r),
  trace_id: r.traceId,
  trace_url: traceUrl(traceUiUrl, r.traceId),
  deployment: r.deployment,
  attempts: r.attempts.map((a) => ({ deployment: a.deployment, outcome: a.outcome })),
  attempts_omitted: r.attemptsOmitted,
  provider_cost_nano: r.providerCostNano.toString(),
  margin_nano: r.marginNano.toString(),
});

export const dailyUsageRow = (row: UsageSummaryRow): DailyUsageRow => ({
  day: row.day,
  model: row.model,
  requests: Number(row.requests),
  input_tokens: Number(row.inputTokens),
  output_tokens: Number(row.outputTokens),
  cached_tokens: Number(row.cachedTokens),
  cost_nano: row.costNano.toString(),
});

// The request log's CSV (src/billing/usage-csv.ts), under the names the console's files use.
export { USAGE_CSV_HEADER as CSV_HEADER, usageCsvLine as csvLine, csvText } from '../billing/usage-csv.ts';

export const ledgerRow = (e: LedgerEntry): LedgerRow => ({
  id: e.id,
  kind: e.kind,
  amount_nano: e.amountNano.toString(),
  balance_after_nano: e.balanceAfterNano.toString(),
  external_id: e.externalId,
  request_id: e.requestId,
  cause: e.cause,
  created_at: iso(e.createdAt),
});

/** A comma list of ledger kinds (`kind=topup,refund`), as ListLedger takes them. */
export function ledgerKinds(q: Query): string[] {
  const v = param(q, 'kind', 40);
  if (v === undefined) return [];
  const kinds = v.split(',').map((k) => k.trim());
  for (const k of kinds)
    if (!['topup', 'charge', 'refund'].includes(k)) throw invalid('kind', 'topup, charge or refund');
  return kinds;
}

const KIND_NAMES: Record<number, string> = {
  [ModelKind.CHAT]: 'chat',
  [ModelKind.EMBEDDING]: 'embedding',
  [ModelKind.IMAGE]: 'image',
  [ModelKind.TRANSCRIPTION]: 'transcription',
  [ModelKind.SPEECH]: 'speech',
  [ModelKind.VIDEO]: 'video',
};

/** A model with the customer prices of the account group it was listed for. */
export const modelEntry = (m: Model): ModelPrices => ({
  id: m.id,
  kind: KIND_NAMES[m.kind] ?? 'unspecified',
  provider: m.provider,
  aliases: [...m.aliases].sort(),
  pricing: { ...m.customerPrices },
});

export const accountRow = (a: AccountSummary): AccountRow => ({
  account_id: a.accountId,
  label: a.label,
  owner: a.owner,
  group: a.group,
  balance_nano: a.balanceNano.toString(),
  held_nano: a.heldNano.toString(),
  available_nano: a.availableNano.toString(),
  spend_30d_nano: a.spend30dNano.toString(),
  last_used_at: iso(a.lastUsedAt),
  keys: a.liveKeys,
  created_at: iso(a.createdAt),
});

export const keyRow = (k: AccountKey, label: string): KeyRow => ({
  key_id: k.keyId,
  prefix: k.prefix,
  label,
  created_at: iso(k.createdAt),
  revoked_at: iso(k.revokedAt),
  rpm: k.requestsPerMinute ?? null,
  tpm: k.tokensPerMinute === undefined ? null : Number(k.tokensPerMinute),
  max_in_flight: k.maxInFlight ?? null,
});

export const marginRow = (r: MarginRow): MarginRowJson => ({
  key: r.key,
  requests: Number(r.requests),
  revenue_nano: r.revenueNano.toString(),
  provider_cost_nano: r.providerCostNano.toString(),
  margin_nano: r.marginNano.toString(),
});

export const markupRow = (m: Markup): MarkupJson => ({
  id: Number(m.id),
  provider: m.provider,
  model_id: m.modelId,
  account_group: m.accountGroup,
  markup: m.markup,
  effective_from: iso(m.effectiveFrom),
  created_at: iso(m.createdAt),
  source: m.source,
  reason: m.reason,
});

export const previewRow = (r: PreviewRow): PreviewRowJson => ({
  model_id: r.modelId,
  requests: Number(r.requests),
  revenue_nano: r.revenueNano.toString(),
  provider_cost_nano: r.providerCostNano.toString(),
  proposed_revenue_nano: r.proposedRevenueNano.toString(),
  proposed_provider_cost_nano: r.proposedProviderCostNano.toString(),
  inexact_requests: Number(r.inexactRequests),
});

export const priceVersion = (v: PriceVersion): PriceVersionJson => ({
  id: Number(v.id),
  prices: { ...v.prices },
  effective_from: iso(v.effectiveFrom),
  created_at: iso(v.createdAt),
  source: v.source,
  reason: v.reason,
});

export const modelDefinition = (d: ModelDefinitionVersion): ModelDefinition => ({
  id: Number(d.id),
  definition_json: d.definitionJson,
  created_at: iso(d.createdAt),
  source: d.source,
  reason: d.reason,
});

export const bookChange = (c: BookChange): BookChangeJson => ({ kind: c.kind, subject: c.subject, detail: c.detail });

export const applyAnswer = (r: ApplyBookResponse): ApplyAnswer => ({
  applied: r.applied,
  changes: r.changes.map(bookChange),
  warnings: r.warnings.map((w) => ({ subject: w.subject, message: w.message })),
  version: r.version,
});

export const bookVersionRow = (v: BookVersion): BookVersionRow => ({
  kind: v.kind,
  id: Number(v.id),
  subject: v.subject,
  created_at: iso(v.createdAt),
  source: v.source,
  reason: v.reason,
  value_json: v.valueJson,
});

/** A video job, with its workflow's page in the Temporal UI ('' when unknown). */
export const videoRow = (j: VideoJobSummary, temporalUrl: string): VideoRow => ({
  id: j.id,
  account_id: j.accountId,
  key_id: j.keyId,
  model: j.model,
  status: j.status,
  seconds: j.seconds,
  cost_nano: j.costNano.toString(),
  created_at: iso(j.createdAt),
  completed_at: iso(j.completedAt),
  error_code: j.errorCode,
  deleted: j.deleted,
  temporal_url: temporalUrl,
});

// Providers and deployments. Only these fields leave the gateway: a provider's headers and its
// definition's JSON are not sent (the book refuses a credential header, but a proxy's routing
// header is nobody's business here), and no field of these messages carries a credential.

const noCredential: ProviderCredentialJson = {
  form: 'none',
  env_name: '',
  version: 0,
  updated_at: null,
  source: '',
  unreadable: false,
  usable: false,
  problem: '',
};

export const providerCredential = (c: ProviderCredential | undefined): ProviderCredentialJson =>
  c
    ? {
        form: c.form,
        env_name: c.envName,
        version: Number(c.version),
        updated_at: iso(c.updatedAt),
        source: c.source,
        unreadable: c.unreadable,
        usable: c.usable,
        problem: c.problem,
      }
    : noCredential;

export const providerRow = (p: Provider): ProviderRow => ({
  id: p.id,
  dialect: p.dialect,
  base_url: p.baseUrl,
  served_base_url: p.servedBaseUrl,
  api_version: p.apiVersion,
  timeout_ms: Number(p.timeoutMs),
  credential: providerCredential(p.credential),
  models: p.models,
  served_models: p.servedModels,
});

export const providerTest = (r: TestProviderResponse): ProviderTest => ({
  ok: r.ok,
  http_status: r.httpStatus,
  latency_ms: Number(r.latencyMs),
  message: r.message,
  url: r.url,
});

const optionalNumber = (v: bigint | number | undefined): number | null => (v === undefined ? null : Number(v));

export const deploymentRow = (d: Deployment): DeploymentRow => ({
  key: d.key,
  id: d.id,
  provider: d.provider,
  upstream_id: d.upstreamId,
  weight: d.weight,
  priority: d.priority,
  own_prices: d.ownPrices,
  served: d.served,
  from_setting: d.fromSetting,
  admission: d.admission,
  cool_until: iso(d.coolUntil),
  consecutive_fails: d.consecutiveFails,
  cooldowns: d.cooldowns,
  latency_ms: optionalNumber(d.latencyMs),
  p50_latency_ms: optionalNumber(d.p50LatencyMs),
  error_rate: optionalNumber(d.errorRate),
  rpm: d.rpm,
  tpm: Number(d.tpm),
  window_requests: d.windowRequests,
  window_tokens: Number(d.windowTokens),
  concurrency: d.concurrency,
  in_flight: d.inFlight,
  state: (d.state || 'enabled') as DeploymentTraffic,
  recent_answers: d.recentAnswers,
  recent_failures: d.recentFailures,
  recent_since: iso(d.recentSince),
});

export const modelDeployments = (m: ModelDeployments): ModelDeploymentsJson => ({
  model_id: m.modelId,
  strategy: m.strategy,
  enabled: m.enabled,
  available: m.available,
  deployments: m.deployments.map(deploymentRow),
});

/** A request body's fields as sent: any may be missing or of another type until checked. */
export type Unchecked<T> = { [K in keyof T]?: unknown };

/** The JSON body of a POST: an object (its fields those of `T`, unchecked), or a 400. */
export function jsonObject<T = Record<string, unknown>>(body: unknown): Unchecked<T> {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : '';
  let parsed: unknown;
  try {
    parsed = text === '' ? {} : JSON.parse(text);
  } catch {
    throw new ConsoleError(400, 'invalid_json', 'The body is not valid JSON.');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConsoleError(400, 'invalid_json', 'The body must be a JSON object.');
  return parsed as Unchecked<T>;
}
