// The console API's JSON (docs/console.md#api), declared once: the server's mappers
// (src/console/wire.ts, api.ts, holder-routes.ts, operator-routes.ts) are typed with these, and
// so is the page (api.ts here), so a field renamed on one side fails to compile on the other.
// Amounts are nano-USD decimal strings, counts JSON numbers, times ISO 8601 strings or null.
// Types only: the server imports this file from the page's folder (the page imports nothing of
// the server's), so it must hold nothing that runs.

/**
 * Who a session is: a team key's holder (that key's own figures), a member of an organisation
 * (signed in with one of their own keys or a link: what their role there allows), the operator.
 */
export type Role = 'holder' | 'operator' | 'member';

/** A member's role in an organisation (docs/organisations.md#roles). */
export type OrgRole = 'owner' | 'admin' | 'billing' | 'member';

/** Every answer other than 2xx. */
export interface ErrorAnswer {
  error: { code: string; message: string };
}

/** A keyset page: `next_cursor` is '' after the last page. */
export interface Page<T> {
  rows: T[];
  next_cursor: string;
}

// --- The session -------------------------------------------------------------------------

/** POST /session: exactly one of the three. */
export type SignInRequest = { key: string } | { admin_token: string } | { link: string };

export interface SessionAnswer {
  role: Role;
  csrf: string;
  expires_at: string;
}

/** POST /session/end. */
export interface SessionEnded {
  ended: true;
}

/**
 * GET /me ('' for the operator's account, key and group; a member signed in by link has no key).
 * A member's session also names the member and their organisation with what their role there may
 * do (OrganisationService's allowed_actions: the page shows what this lists).
 */
export interface Me {
  role: Role;
  account_id: string;
  key_id: string;
  key_prefix: string;
  group: string;
  csrf: string;
  expires_at: string;
  /** '' unless a member's session. */
  member_id: string;
  member_name: string;
  organisation: MyOrganisation | null;
}

/** The organisation of a member's session, their role in it and what it allows them. */
export interface MyOrganisation {
  id: string;
  name: string;
  role: OrgRole;
  allowed_actions: string[];
}

// --- A key holder's account (and the operator's view of one) ------------------------------

/** GET /balance. */
export interface Balance {
  balance_nano: string;
  held_nano: string;
  available_nano: string;
}

export interface DailyUsageRow {
  day: string;
  model: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cost_nano: string;
}

/** GET /usage/daily: `from` and `to` the first and last UTC day included. */
export interface DailyUsage {
  from: string;
  to: string;
  rows: DailyUsageRow[];
}

/** The request log's filters (query parameters of /requests and /requests.csv; '' = any). */
export interface RequestFilters {
  model: string;
  route: string;
  status: string;
  from: string;
  to: string;
}

/** A row of GET /requests. */
export interface RequestRow {
  created_at: string | null;
  request_id: string;
  route: string;
  model: string;
  requested_model: string;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cost_nano: string;
  status: string;
  http_status: number;
  latency_ms: number;
  key_prefix: string;
  /**
   * The operator's rows only (a key holder's have neither field): the request's trace id, '' when
   * it was not traced or its trace not sampled; and the trace's address in the operator's trace UI
   * (TRACE_UI_URL), '' without a trace id or a UI address.
   */
  trace_id?: string;
  trace_url?: string;
  /**
   * The operator's rows only too: the deployment whose answer decided the request
   * (`<model>/<deployment>`, '' when none answered), its upstream attempts in order (at most 8: the
   * first 7 and the last, `attempts_omitted` left out between them), what the provider bills for
   * it and the margin (the cost less that; negative for a loss), nano-USD. A key holder's rows
   * have none of these: the operator's suppliers and costs are not theirs to see.
   */
  deployment?: string;
  attempts?: RequestAttempt[];
  attempts_omitted?: number;
  provider_cost_nano?: string;
  margin_nano?: string;
  /**
   * An organisation's rows only (a member's session, the operator's view of an organisation): whom
   * the request was charged to, the member and team of its key when it was made ('' for none),
   * with their names as they are now.
   */
  member_id?: string;
  member_name?: string;
  team_id?: string;
  team_name?: string;
}

/** A row of an organisation's request log: always with whom it was charged to. */
export interface OrganisationRequestRow extends RequestRow {
  member_id: string;
  member_name: string;
  team_id: string;
  team_name: string;
}

/** One upstream attempt of a request: the deployment tried and how it ended (`ok`, an HTTP status, `timeout`, `connection`, `caller_left`). */
export interface RequestAttempt {
  deployment: string;
  outcome: string;
}

/** A row of GET /ledger. */
export interface LedgerRow {
  id: string;
  kind: string;
  amount_nano: string;
  balance_after_nano: string;
  external_id: string;
  request_id: string;
  cause: string;
  created_at: string | null;
}

/** A model at the account's customer prices (USD per unit). */
export interface ModelPrices {
  id: string;
  kind: string;
  provider: string;
  aliases: string[];
  pricing: Record<string, string>;
}

/** GET /models. */
export interface ModelList {
  models: ModelPrices[];
}

/** POST /key/rotate. */
export interface RotateKeyRequest {
  confirm: true;
}

export interface RotatedKey {
  api_key: string;
  key_prefix: string;
  key_id: string;
}

// --- Organisations (a member's session, under /org; the operator's, under /admin/organisations/:id)

/** GET /org: the organisation's summary (GetOrganisation). */
export interface Organisation {
  id: string;
  name: string;
  balance_nano: string;
  held_nano: string;
  available_nano: string;
  members: number;
  teams: number;
  live_keys: number;
  created_at: string | null;
  /** The caller's role ('' for the operator). */
  my_role: OrgRole | '';
  /** What the caller may do here (the operator: everything). */
  allowed_actions: string[];
}

/** POST /org/rename. */
export interface RenameRequest {
  name: string;
}

/** How GET /org/spend groups. */
export type SpendBy = 'team' | 'member' | 'key' | 'model' | 'day';

export interface SpendRow {
  /** The team, member or key id, the model or the UTC day; '' for requests of no team (or no member). */
  key: string;
  /** The team's or member's name, the key's prefix; '' otherwise. */
  label: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost_nano: string;
}

/** GET /org/spend?by=&days=: over the last `days` UTC days (today included), `to` exclusive. */
export interface SpendReport {
  from: string;
  to: string;
  by: SpendBy;
  rows: SpendRow[];
  total: SpendRow | null;
}

export interface MemberRow {
  member_id: string;
  name: string;
  role: OrgRole;
  team_ids: string[];
  live_keys: number;
  joined_at: string | null;
  /** Tied to a Telegram user (which one is not shown). */
  telegram: boolean;
}

/** POST /org/members/:id/role. */
export interface SetRoleRequest {
  role: OrgRole;
}

/** POST /org/members/:id/remove: the member's keys are revoked, or handed to one member or team. */
export interface RemoveMemberRequest {
  hand_keys_to_member_id?: string;
  hand_keys_to_team_id?: string;
}

export interface RemoveMemberAnswer {
  keys_revoked: number;
  keys_handed_over: number;
  sessions_ended: number;
}

/** POST /org/members/:id/sign-in-link: the token of a one-time link (`/console/#link=<token>`), shown once. */
export interface SignInLink {
  token: string;
  expires_at: string | null;
}

export interface InvitationRow {
  id: string;
  role: OrgRole;
  team_id: string;
  note: string;
  created_by: string;
  created_at: string | null;
  expires_at: string | null;
  /** "open", "used", "expired" or "revoked". */
  state: string;
  used_by_member_id: string;
}

/** POST /org/invitations. */
export interface InvitationRequest {
  role: OrgRole;
  team_id?: string;
  note?: string;
  valid_hours?: number;
}

/** The new invitation and its token (the link is `/console/#invite=<token>`), shown once. */
export interface NewInvitation {
  invitation: InvitationRow;
  token: string;
}

export interface TeamRow {
  team_id: string;
  name: string;
  members: number;
  live_keys: number;
  created_at: string | null;
}

/** POST /org/teams, /org/teams/:id/rename. */
export interface TeamNameRequest {
  name: string;
}

/** POST /org/teams/:id/members. */
export interface TeamMemberRequest {
  member_id: string;
}

/** A key of the organisation: whose it is, a member's (personal) or a team's. */
export interface OrgKeyRow {
  key_id: string;
  prefix: string;
  name: string;
  member_id: string;
  member_name: string;
  team_id: string;
  team_name: string;
  created_at: string | null;
  revoked_at: string | null;
}

/** POST /org/keys: for the caller (neither set), a member or a team. */
export interface NewKeyRequest {
  member_id?: string;
  team_id?: string;
  name?: string;
}

/** A new or rotated key: `api_key` shown this once. */
export interface NewOrgKey {
  key: OrgKeyRow;
  api_key: string;
}

/** POST /org/keys/:id/revoke. */
export interface RevokedKey {
  revoked: boolean;
}

export interface AuditRow {
  id: string;
  /** "member:<id>", "operator", "telegram:<user id>" or "system". */
  actor: string;
  via: string;
  from_address: string;
  action: string;
  target: string;
  /** JSON text ('' for none). */
  before: string;
  after: string;
  at: string | null;
}

/** What a budget is over (docs/budgets.md#what-a-budget-is). */
export type BudgetScope = 'organisation' | 'team' | 'member' | 'key' | 'customer';
export type BudgetPeriod = 'day' | 'week' | 'month' | 'rolling' | 'lifetime';

/** A budget as it is set (POST /org/budgets, /org/budgets/:id/change). */
export interface BudgetRequest {
  scope: BudgetScope;
  /** The team, member or key id; '' for the organisation; a customer budget's '', 'key:<id>' or 'team:<id>'. */
  scope_id: string;
  name: string;
  /** USD, a plain decimal string ("20", "0.50"). */
  amount_usd: string;
  period: BudgetPeriod;
  /** An IANA time zone (day, week, month). */
  time_zone: string;
  /** A week's (0 Sunday … 6 Saturday) or a month's (1 … 28) first day. */
  start_day: number;
  rolling_hours: number;
  mode: 'hard' | 'soft';
  /** Alert thresholds in percent ([] for the default 50, 80, 100). */
  thresholds: number[];
}

/** A row of GET /org/budgets: the budget and its current window (ListBudgets). */
export interface BudgetRow extends BudgetRequest {
  budget_id: string;
  /** The team's, member's or key's name as it is now ('' for the organisation and customer budgets). */
  scope_name: string;
  amount_nano: string;
  /** The current window; window_end null for a lifetime budget. */
  window_start: string | null;
  window_end: string | null;
  /** Spent in the window, less what a reset forgave. */
  spent_nano: string;
  held_nano: string;
  /** amount + raise − spent − held, at least 0. */
  remaining_nano: string;
  /** The window's temporary raise. */
  raise_nano: string;
  forgiven_nano: string;
  /** '' (the budget's one window) or a customer budget's end customer. */
  subject: string;
}

/** POST /org/budgets/:id/raise: the current window's raise (replacing the last; "0" takes it back). */
export interface RaiseRequest {
  raise_usd: string;
  /** A customer budget's end customer; '' otherwise. */
  subject?: string;
}

/** POST /org/budgets/:id/reset. */
export interface ResetRequest {
  subject?: string;
}

/** What a reset forgave, and the window after. */
export interface ResetAnswer {
  budget: BudgetRow;
  forgiven_nano: string;
}

/** POST /invitation (no session): redeems an invitation link, making a new member signed in at once. */
export interface RedeemRequest {
  token: string;
  name: string;
  create_key?: boolean;
}

/** The new member's session (the cookie is set), their organisation and role, and their first key when asked. */
export interface RedeemAnswer extends SessionAnswer {
  organisation_id: string;
  organisation_name: string;
  member_id: string;
  org_role: OrgRole;
  /** '' unless create_key: shown this once. */
  api_key: string;
  key_id: string;
}

// --- The operator -------------------------------------------------------------------------

/** A row of GET /admin/accounts. */
export interface AccountRow {
  account_id: string;
  label: string;
  owner: string;
  group: string;
  balance_nano: string;
  held_nano: string;
  available_nano: string;
  spend_30d_nano: string;
  last_used_at: string | null;
  /** Live keys. */
  keys: number;
  created_at: string | null;
}

/** A key of an account: `rpm`/`tpm`/`max_in_flight` (requests in flight at once) null = the gateway's default, 0 = unlimited. */
export interface KeyRow {
  key_id: string;
  prefix: string;
  label: string;
  created_at: string | null;
  revoked_at: string | null;
  rpm: number | null;
  tpm: number | null;
  max_in_flight: number | null;
}

/** GET /admin/accounts/:id. */
export interface AccountDetail extends AccountRow {
  keys_list: KeyRow[];
}

/** POST /admin/accounts/:id/topup: applied once per `external_id`. */
export interface TopUpRequest {
  amount_usd: string;
  external_id: string;
}

export interface TopUpAnswer {
  applied: boolean;
  balance_nano: string;
}

/** POST /admin/refunds. */
export interface RefundRequest {
  external_id: string;
}

export interface RefundAnswer {
  applied: boolean;
  account_id: string;
  topup_nano: string;
  refunded_nano: string;
  balance_nano: string;
}

/** POST /admin/keys/:id/limits: rpm and tpm required, null for the gateway's default; max_in_flight too, or left out for the default. */
export interface LimitsRequest {
  rpm: number | null;
  tpm: number | null;
  max_in_flight?: number | null;
}

export interface LimitsAnswer {
  updated: boolean;
}

/** POST /admin/keys/:id/revoke. */
export interface RevokeAnswer {
  revoked: boolean;
}

export interface MarginRow {
  /** The day, model, account or deployment (`<model>/<deployment>`, or the model's id for rows without one), as grouped by. */
  key: string;
  requests: number;
  revenue_nano: string;
  provider_cost_nano: string;
  margin_nano: string;
}

/** What GET /admin/margin groups by (`account`: the organisation; `team`, `member`, `key`: whom each request was charged to). */
export type MarginBy = 'day' | 'model' | 'account' | 'deployment' | 'team' | 'member' | 'key';

/** GET /admin/margin: `to` exclusive. */
export interface MarginReport {
  from: string;
  to: string;
  by: string;
  rows: MarginRow[];
  total: MarginRow | null;
}

export interface Markup {
  id: number;
  provider: string;
  model_id: string;
  account_group: string;
  markup: string;
  effective_from: string | null;
  created_at: string | null;
  source: string;
  reason: string;
}

/** GET /admin/book: the book document as JSON text, its version, and the markups. */
export interface BookAnswer {
  document: string;
  /** The book in force's version (ExportBook's): a change based on it is refused once the book is another. */
  version: string;
  markups: { in_force: Markup[]; scheduled: Markup[] };
}

export interface PriceVersion {
  id: number;
  prices: Record<string, string>;
  effective_from: string | null;
  created_at: string | null;
  source: string;
  reason: string;
}

export interface ModelDefinition {
  id: number;
  definition_json: string;
  created_at: string | null;
  source: string;
  reason: string;
}

/** GET /admin/models/:id/history. */
export interface PriceHistory {
  versions: PriceVersion[];
  definitions: ModelDefinition[];
}

/** POST /admin/book/preview. */
export interface BookPreviewRequest {
  document: string;
  days: number;
}

export interface PreviewRow {
  model_id: string;
  requests: number;
  revenue_nano: string;
  provider_cost_nano: string;
  proposed_revenue_nano: string;
  proposed_provider_cost_nano: string;
  inexact_requests: number;
}

export interface BookPreview {
  from: string | null;
  to: string | null;
  rows: PreviewRow[];
  total: PreviewRow | null;
}

/**
 * What every change of the book made here takes besides its own fields: a dry run says what it
 * would change (the preview), `based_on` the version that preview answered (refused with 409
 * book_changed once the book is another), `reason` is kept with each version it writes.
 */
export interface BookWriteOptions {
  dry_run?: boolean;
  based_on?: string;
  reason?: string;
}

/** POST /admin/book/apply. */
export interface BookApplyRequest extends BookWriteOptions {
  document: string;
  effective_from?: string | null;
}

export interface BookChange {
  kind: string;
  subject: string;
  detail: string;
}

/** Something a change leaves to do (a deployment whose provider has no credential here); written all the same. */
export interface BookWarning {
  subject: string;
  message: string;
}

/**
 * The answer of every change of the book (the book page's Apply, the Providers page's actions):
 * what it changes (a dry run: would change), what it leaves to do, and the book's version (a dry
 * run: the one it was worked out against, for `based_on`; applied: the book's now).
 */
export interface ApplyAnswer {
  applied: boolean;
  changes: BookChange[];
  warnings: BookWarning[];
  version: string;
}

/** A row of GET /admin/book/history: one version written to the book. */
export interface BookVersionRow {
  /** provider, model (a definition), prices, alias or markup. */
  kind: string;
  id: number;
  subject: string;
  created_at: string | null;
  source: string;
  reason: string;
  /** What it holds, as JSON text ("null": a removal). */
  value_json: string;
}

/** GET /admin/book/history?kind=provider,model&limit=50: the newest first. */
export interface BookHistory {
  versions: BookVersionRow[];
}

/** A row of GET /admin/videos: `temporal_url` '' when the gateway does not know the UI's address. */
export interface VideoRow {
  id: string;
  account_id: string;
  key_id: string;
  model: string;
  status: string;
  seconds: number;
  cost_nano: string;
  created_at: string | null;
  completed_at: string | null;
  error_code: string;
  deleted: boolean;
  temporal_url: string;
}

// --- Providers and deployments (docs/providers.md) ----------------------------------------

/**
 * A provider's credential as the answering instance sees it: its form and state, never the
 * credential. `form`: "sealed" (in the database), "env" (the variable `env_name` of each gateway
 * process), "setting" (none stored: this instance's <NAME>_API_KEY) or "none".
 */
export interface ProviderCredential {
  form: string;
  env_name: string;
  /** Of the stored credential (each write adds one); 0 when none is stored. */
  version: number;
  updated_at: string | null;
  /** Who stored it. */
  source: string;
  /** Sealed under another credentials key (or none is available here): it cannot be used. */
  unreadable: boolean;
  /** This instance has a credential to call the provider with now. */
  usable: boolean;
  /** Why the stored credential cannot be used here, never quoting it ('' when it can). */
  problem: string;
}

/** A row of GET /admin/providers. */
export interface ProviderRow {
  id: string;
  /** openai, azure-openai, anthropic, cohere or bfl. */
  dialect: string;
  /** The book's. */
  base_url: string;
  /** The one this instance calls (a <NAME>_BASE_URL setting replaces the book's). */
  served_base_url: string;
  /** azure-openai only. */
  api_version: string;
  /** Time to the response headers; 0: the gateway's UPSTREAM_HEADERS_TIMEOUT_MS. */
  timeout_ms: number;
  credential: ProviderCredential;
  /** Models with a deployment on it. */
  models: number;
  /** Of those, the ones this instance serves on it now. */
  served_models: number;
}

/** GET /admin/providers (ListProviders). */
export interface ProviderList {
  providers: ProviderRow[];
}

/** POST /admin/providers/:id/test (TestProvider): one authenticated GET with its credential. */
export interface ProviderTest {
  /** The provider answered 2xx. */
  ok: boolean;
  /** 0 when nothing answered (no credential, a connection error, the time limit). */
  http_status: number;
  latency_ms: number;
  /** "200 OK", "401 Unauthorized", or what failed; never the credential or the answer's body. */
  message: string;
  /** The URL called (no credential is ever in a URL). */
  url: string;
}

/** A deployment of a model, with its live state on the answering instance. */
export interface DeploymentRow {
  /** `<model>/<deployment>`: the name in usage rows, metrics and the margin report. */
  key: string;
  id: string;
  provider: string;
  upstream_id: string;
  weight: number;
  priority: number;
  /** It has prices of its own (what it costs the operator). */
  own_prices: boolean;
  /** This instance can call it (its provider has a credential here). */
  served: boolean;
  /** Not in the book: added by a <NAME>_FALLBACK_* setting of this instance. */
  from_setting: boolean;
  /** "open", "trial" (one request let through after a cooldown) or "cooling". */
  admission: string;
  /** While cooling: until when. */
  cool_until: string | null;
  consecutive_fails: number;
  cooldowns: number;
  /** Smoothed time to the response headers (ms); null until measured. */
  latency_ms: number | null;
  /** The median time to the response headers of its recent calls (ms); null until measured. */
  p50_latency_ms: number | null;
  /** Failures among its recent calls, 0 to 1; null until called. */
  error_rate: number | null;
  /** Its limits per minute (0: none), and what the current minute has used of them on every instance. */
  rpm: number;
  tpm: number;
  window_requests: number;
  window_tokens: number;
  /** Its concurrency limit (0: none), and its requests in flight on every instance now. */
  concurrency: number;
  in_flight: number;
  /** The book's word on its traffic: "enabled", "draining" (tried after every other) or "disabled". */
  state: DeploymentTraffic;
  /** What error_rate counts: its last answers on this instance (at most 50), the failed ones, when the oldest was sent. */
  recent_answers: number;
  recent_failures: number;
  recent_since: string | null;
}

export type DeploymentTraffic = 'enabled' | 'draining' | 'disabled';

/** POST /admin/providers: a provider added to the book (a book change: dry run, based_on, reason). */
export interface NewProviderRequest extends BookWriteOptions {
  provider: {
    id: string;
    /** openai, azure-openai, anthropic, cohere or bfl. */
    dialect: string;
    base_url: string;
    /** azure-openai only (and required there). */
    api_version?: string;
    /** Time to the response headers; null or left out: the gateway's UPSTREAM_HEADERS_TIMEOUT_MS. */
    timeout_ms?: number | null;
    /** "none": a server that checks no credential. */
    auth?: 'none' | '';
  };
}

/** POST /admin/providers/:id/credential: exactly one; the secret is sealed and never sent back. */
export type CredentialRequest = { secret: string } | { env_name: string };

export interface CredentialAnswer {
  provider_id: string;
  credential: ProviderCredential;
}

/** The limits of an upstream key, each a whole number above 0, or null (or left out) for none. */
export interface DeploymentLimitsJson {
  rpm?: number | null;
  tpm?: number | null;
  concurrency?: number | null;
}

/**
 * POST /admin/deployments/change: one deployment of one model, the fields given changed (at least
 * one). `limits` and `prices` replace the deployment's own whole (null: none, the model's prices);
 * `upstream_id` "" is the model's.
 */
export interface DeploymentChangeRequest extends BookWriteOptions {
  model: string;
  deployment: string;
  weight?: number;
  priority?: number;
  upstream_id?: string;
  limits?: DeploymentLimitsJson | null;
  /** USD per unit as decimal strings, keys of the model's prices. */
  prices?: Record<string, string> | null;
  state?: DeploymentTraffic;
}

/** POST /admin/deployments/add: a deployment added to a model. */
export interface NewDeploymentRequest extends BookWriteOptions {
  model: string;
  deployment: { id: string; provider: string; upstream_id?: string; weight?: number; priority?: number };
}

/** POST /admin/deployments/end-cooldown: not a book change. */
export interface CooldownEndRequest {
  model: string;
  deployment: string;
}

export interface CooldownEndAnswer {
  /** The answering instance had it cooling (or waiting for its trial); every instance is told either way. */
  was_cooling: boolean;
  deployment: DeploymentRow;
}

export interface ModelDeployments {
  model_id: string;
  /** weighted, cheapest or fastest. */
  strategy: string;
  enabled: boolean;
  available: boolean;
  deployments: DeploymentRow[];
}

/** GET /admin/deployments?model= (ListDeployments). */
export interface DeploymentList {
  models: ModelDeployments[];
}
