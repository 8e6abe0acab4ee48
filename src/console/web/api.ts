// The console's JSON API (/console/api, docs/console.md#api) as the page calls it: one named
// function per endpoint (`api.requests(filters, cursor)`, `api.topUp(id, …)`), typed with the
// answers the server's mappers are typed with (wire-types.ts), so no page spells an API address.
// The session cookie goes along by itself (same origin), every state change carries the
// session's CSRF token in x-csrf-token, and a 401 anywhere means the session is gone: the page
// shows the sign-in form. The key is posted once, at sign-in, and is kept nowhere (no storage, no
// URL): only in the HttpOnly cookie's session on the server.
import type {
  AccountDetail,
  AccountRow,
  ApplyAnswer,
  Balance,
  BookAnswer,
  BookHistory,
  CooldownEndAnswer,
  CooldownEndRequest,
  CredentialAnswer,
  CredentialRequest,
  DeploymentChangeRequest,
  NewDeploymentRequest,
  NewProviderRequest,
  BookPreview,
  BookPreviewRequest,
  DailyUsage,
  DeploymentList,
  ErrorAnswer,
  LedgerRow,
  InvitationRequest,
  InvitationRow,
  LimitsAnswer,
  LimitsRequest,
  MarginBy,
  MarginReport,
  Me,
  MemberRow,
  ModelList,
  NewInvitation,
  NewKeyRequest,
  NewOrgKey,
  Organisation,
  OrgKeyRow,
  OrgRole,
  Page,
  AuditRow,
  BudgetRequest,
  BudgetRow,
  RaiseRequest,
  RedeemAnswer,
  RedeemRequest,
  RemoveMemberAnswer,
  RemoveMemberRequest,
  RevokedKey,
  SignInLink,
  SpendBy,
  SpendReport,
  TeamRow,
  PriceHistory,
  ProviderList,
  ProviderTest,
  RefundAnswer,
  RequestFilters,
  RequestRow,
  ResetAnswer,
  ResetRequest,
  RevokeAnswer,
  RotatedKey,
  SessionAnswer,
  SessionEnded,
  SignInRequest,
  TopUpAnswer,
  TopUpRequest,
  VideoRow,
} from './wire-types.ts';

const API = '/console/api';

/** An answer other than 2xx, with the API's own code and message. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfter: number | undefined;
  constructor(status: number, code: string, message: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

let csrf = '';
const signedOutListeners = new Set<() => void>();

/** The CSRF token of the session, from sign-in or /me (kept in memory only). */
export function setCsrf(token: string): void {
  csrf = token;
}

/** Called when an answer says the session is gone (401). */
export function onSignedOut(listener: () => void): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

async function call<T>(method: string, path: string, body?: unknown, opts: { signIn?: boolean } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  // The session this request was made in: a 401 ends it only if it is still the page's (a request
  // made before sign-in that answers after it says nothing of the new session).
  const sentIn = csrf;
  let res: Response;
  try {
    res = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'The gateway could not be reached. Check the connection and try again.');
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = undefined;
  }
  if (res.ok) return parsed as T;
  const error = (parsed as Partial<ErrorAnswer> | undefined)?.error;
  const retry = Number(res.headers.get('retry-after'));
  const err = new ApiError(
    res.status,
    error?.code ?? `http_${res.status}`,
    error?.message ?? `The gateway answered ${res.status}.`,
    Number.isFinite(retry) && retry > 0 ? retry : undefined,
  );
  // Only a session the page had can end (at start, without one, /me's 401 is just "sign in").
  if (res.status === 401 && sentIn && sentIn === csrf && !opts.signIn) for (const l of signedOutListeners) l();
  throw err;
}

/** "?a=1&b=2" from the set values only (empty strings left out). */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * A GET, not yet sent: the page asks for it when it draws (data.ts, useApi), or at start beside
 * /me (prefetch), and the two meet by `path`.
 */
export interface Read<T> {
  /** The API path with its query: two reads of one path are one answer. */
  readonly path: string;
  load(): Promise<T>;
}

const read = <T>(path: string): Read<T> => ({ path, load: () => call<T>('GET', path) });
const post = <T>(path: string, body: unknown): Promise<T> => call<T>('POST', path, body);

/** Rows per page of the request log. */
export const REQUESTS_PAGE_SIZE = 50;

/** The request log's filters, in the order the address has always had them. */
const filterQuery = (f: RequestFilters) => ({
  model: f.model,
  route: f.route,
  status: f.status,
  from: f.from,
  to: f.to,
});

const accountPath = (id: string) => `/admin/accounts/${encodeURIComponent(id)}`;

/**
 * Whose request log, ledger and daily usage: the session's own (a key holder's or member's, as
 * their scope allows), an account's (the operator's view of it, under /admin/accounts/:id) or an
 * organisation's (the operator's, under /admin/organisations/:id). All answer the same shapes.
 */
export type AccountScope = 'own' | { accountId: string } | { organisationId: string };

const organisationPath = (id: string) => `/admin/organisations/${encodeURIComponent(id)}`;

const under = (scope: AccountScope) =>
  scope === 'own' ? '' : 'accountId' in scope ? accountPath(scope.accountId) : organisationPath(scope.organisationId);

/** Whose organisation pages: the member's own (under /org), or one the operator opened. */
export type OrgScope = 'own' | { organisationId: string };

const org = (scope: OrgScope) => (scope === 'own' ? '/org' : organisationPath(scope.organisationId));
const id = encodeURIComponent;

/** Which keys: the session member's own (`mine`), a member's or a team's, or every key; revoked ones too. */
export interface KeyFilter {
  mine?: boolean;
  member_id?: string;
  team_id?: string;
  revoked?: boolean;
}

/** Every endpoint of the console API, by what it does. */
export const api = {
  me: () => read<Me>('/me'),
  /** Exchanges a key, an admin token or a one-time link token for a session (the cookie). */
  signIn: (credential: SignInRequest) => call<SessionAnswer>('POST', '/session', credential, { signIn: true }),
  signOut: () => call<SessionEnded>('POST', '/session/end', {}, { signIn: true }),

  balance: () => read<Balance>('/balance'),
  dailyUsage: (scope: AccountScope, days: number) => read<DailyUsage>(`${under(scope)}/usage/daily?days=${days}`),
  requests: (scope: AccountScope, filters: RequestFilters, cursor = '') =>
    read<Page<RequestRow>>(
      `${under(scope)}/requests${query({ ...filterQuery(filters), cursor, limit: REQUESTS_PAGE_SIZE })}`,
    ),
  /** The address of the CSV download of every request the filters select (a link's href). */
  requestsCsvHref: (scope: AccountScope, filters: RequestFilters) =>
    `${API}${under(scope)}/requests.csv${query(filterQuery(filters))}`,
  /** `kinds`: a comma list (topup,refund), '' for every entry. */
  ledger: (scope: AccountScope, kinds: string, cursor = '') =>
    read<Page<LedgerRow>>(`${under(scope)}/ledger${query({ kind: kinds, cursor })}`),
  models: () => read<ModelList>('/models'),
  rotateKey: () => post<RotatedKey>('/key/rotate', { confirm: true }),

  accounts: (q: string, cursor = '') => read<Page<AccountRow>>(`/admin/accounts${query({ q, cursor })}`),
  account: (id: string) => read<AccountDetail>(accountPath(id)),
  topUp: (accountId: string, body: TopUpRequest) => post<TopUpAnswer>(`${accountPath(accountId)}/topup`, body),
  refund: (externalId: string) => post<RefundAnswer>('/admin/refunds', { external_id: externalId }),
  setKeyLimits: (keyId: string, limits: LimitsRequest) =>
    post<LimitsAnswer>(`/admin/keys/${encodeURIComponent(keyId)}/limits`, limits),
  revokeKey: (keyId: string) => post<RevokeAnswer>(`/admin/keys/${encodeURIComponent(keyId)}/revoke`, {}),
  margin: (range: { from: string; to: string }, by: MarginBy) =>
    read<MarginReport>(`/admin/margin${query({ ...range, by })}`),
  book: () => read<BookAnswer>('/admin/book'),
  priceHistory: (modelId: string) => read<PriceHistory>(`/admin/models/${encodeURIComponent(modelId)}/history`),
  previewBook: (body: BookPreviewRequest) => post<BookPreview>('/admin/book/preview', body),
  /**
   * Applies the book document, or with `dryRun` only says what it would change (and the version it
   * saw); `basedOn` that version refuses the apply once the book is another.
   */
  applyBook: (document: string, dryRun: boolean, basedOn = '') =>
    post<ApplyAnswer>('/admin/book/apply', { document, dry_run: dryRun, based_on: basedOn }),
  /** The book's versions, newest first, of the kinds named (a comma list). */
  bookHistory: (kinds: string, limit: number) =>
    read<BookHistory>(`/admin/book/history${query({ kind: kinds, limit })}`),
  providers: () => read<ProviderList>('/admin/providers'),
  /** One authenticated call to the provider with its credential on the gateway that answers. */
  testProvider: (id: string) => post<ProviderTest>(`/admin/providers/${encodeURIComponent(id)}/test`, {}),
  /** A change of the book (a dry run: its preview). */
  addProvider: (body: NewProviderRequest) => post<ApplyAnswer>('/admin/providers', body),
  /** The secret travels once, to be sealed; the answer is the credential's state only. */
  setCredential: (providerId: string, body: CredentialRequest) =>
    post<CredentialAnswer>(`/admin/providers/${encodeURIComponent(providerId)}/credential`, body),
  deployments: () => read<DeploymentList>('/admin/deployments'),
  addDeployment: (body: NewDeploymentRequest) => post<ApplyAnswer>('/admin/deployments/add', body),
  changeDeployment: (body: DeploymentChangeRequest) => post<ApplyAnswer>('/admin/deployments/change', body),
  /** Not a book change: the cooldown ends on every instance. */
  endCooldown: (body: CooldownEndRequest) => post<CooldownEndAnswer>('/admin/deployments/end-cooldown', body),
  videos: (cursor = '') => read<Page<VideoRow>>(`/admin/videos${query({ cursor })}`),
  organisations: (q: string, cursor = '') => read<Page<Organisation>>(`/admin/organisations${query({ q, cursor })}`),

  /** Redeems an invitation link's token: a new member, signed in at once. */
  redeemInvitation: (body: RedeemRequest) => call<RedeemAnswer>('POST', '/invitation', body, { signIn: true }),
  organisation: (scope: OrgScope) => read<Organisation>(org(scope)),
  renameOrganisation: (scope: OrgScope, name: string) => post<Organisation>(`${org(scope)}/rename`, { name }),
  spend: (scope: OrgScope, by: SpendBy, days: number) => read<SpendReport>(`${org(scope)}/spend${query({ by, days })}`),
  members: (scope: OrgScope, q: string, teamId = '', cursor = '') =>
    read<Page<MemberRow>>(`${org(scope)}/members${query({ q, team_id: teamId, cursor })}`),
  setRole: (scope: OrgScope, memberId: string, role: OrgRole) =>
    post<MemberRow>(`${org(scope)}/members/${id(memberId)}/role`, { role }),
  removeMember: (scope: OrgScope, memberId: string, body: RemoveMemberRequest) =>
    post<RemoveMemberAnswer>(`${org(scope)}/members/${id(memberId)}/remove`, body),
  signInLink: (scope: OrgScope, memberId: string) =>
    post<SignInLink>(`${org(scope)}/members/${id(memberId)}/sign-in-link`, {}),
  invitations: (scope: OrgScope, cursor = '') =>
    read<Page<InvitationRow>>(`${org(scope)}/invitations${query({ cursor })}`),
  createInvitation: (scope: OrgScope, body: InvitationRequest) =>
    post<NewInvitation>(`${org(scope)}/invitations`, body),
  revokeInvitation: (scope: OrgScope, invitationId: string) =>
    post<InvitationRow>(`${org(scope)}/invitations/${id(invitationId)}/revoke`, {}),
  teams: (scope: OrgScope, q: string, cursor = '') => read<Page<TeamRow>>(`${org(scope)}/teams${query({ q, cursor })}`),
  createTeam: (scope: OrgScope, name: string) => post<TeamRow>(`${org(scope)}/teams`, { name }),
  renameTeam: (scope: OrgScope, teamId: string, name: string) =>
    post<TeamRow>(`${org(scope)}/teams/${id(teamId)}/rename`, { name }),
  deleteTeam: (scope: OrgScope, teamId: string) =>
    post<{ deleted: boolean }>(`${org(scope)}/teams/${id(teamId)}/delete`, {}),
  addTeamMember: (scope: OrgScope, teamId: string, memberId: string) =>
    post<{ added: boolean }>(`${org(scope)}/teams/${id(teamId)}/members`, { member_id: memberId }),
  removeTeamMember: (scope: OrgScope, teamId: string, memberId: string) =>
    post<{ removed: boolean }>(`${org(scope)}/teams/${id(teamId)}/members/${id(memberId)}/remove`, {}),
  orgKeys: (scope: OrgScope, filter: KeyFilter, cursor = '') =>
    read<Page<OrgKeyRow>>(
      `${org(scope)}/keys${query({
        mine: filter.mine ? 1 : undefined,
        member_id: filter.member_id,
        team_id: filter.team_id,
        revoked: filter.revoked ? 1 : undefined,
        cursor,
      })}`,
    ),
  createOrgKey: (scope: OrgScope, body: NewKeyRequest) => post<NewOrgKey>(`${org(scope)}/keys`, body),
  revokeOrgKey: (scope: OrgScope, keyId: string) => post<RevokedKey>(`${org(scope)}/keys/${id(keyId)}/revoke`, {}),
  rotateOrgKey: (scope: OrgScope, keyId: string) => post<NewOrgKey>(`${org(scope)}/keys/${id(keyId)}/rotate`, {}),
  audit: (scope: OrgScope, cursor = '') => read<Page<AuditRow>>(`${org(scope)}/audit${query({ cursor })}`),
  /** The address of the audit log's CSV download (a link's href). */
  auditCsvHref: (scope: OrgScope) => `${API}${org(scope)}/audit.csv`,
  /** The budgets the session may see: every one, or those over the member's own requests. */
  budgets: (scope: OrgScope) => read<{ rows: BudgetRow[] }>(`${org(scope)}/budgets`),
  /** A new budget, or (with its id) a change of one. */
  setBudget: (scope: OrgScope, body: BudgetRequest, budgetId = '') =>
    post<BudgetRow>(budgetId ? `${org(scope)}/budgets/${id(budgetId)}/change` : `${org(scope)}/budgets`, body),
  deleteBudget: (scope: OrgScope, budgetId: string) =>
    post<{ deleted: boolean }>(`${org(scope)}/budgets/${id(budgetId)}/delete`, {}),
  raiseBudget: (scope: OrgScope, budgetId: string, body: RaiseRequest) =>
    post<BudgetRow>(`${org(scope)}/budgets/${id(budgetId)}/raise`, body),
  resetBudget: (scope: OrgScope, budgetId: string, body: ResetRequest) =>
    post<ResetAnswer>(`${org(scope)}/budgets/${id(budgetId)}/reset`, body),
};
