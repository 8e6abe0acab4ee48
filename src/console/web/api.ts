// The console's JSON API (/console/api, docs/console.md#api) as the page calls it: the session
// cookie goes along by itself (same origin), every state change carries the session's CSRF token
// in x-csrf-token, and a 401 anywhere means the session is gone: the page shows the sign-in form.
// The key is posted once, at sign-in, and is kept nowhere (no storage, no URL): only in the
// HttpOnly cookie's session on the server.
import type { Int } from './format.ts';

export const API = '/console/api';

export type Role = 'holder' | 'operator';

export interface Me {
  role: Role;
  account_id?: string;
  key_id?: string;
  key_prefix?: string;
  group?: string;
  csrf: string;
  expires_at: string;
}

export interface SessionAnswer {
  role: Role;
  csrf: string;
  expires_at: string;
}

export interface Balance {
  balance_nano: string;
  held_nano: string;
  available_nano: string;
}

export interface DailyUsageRow {
  day: string;
  model: string;
  requests: Int;
  input_tokens: Int;
  output_tokens: Int;
  cost_nano: string;
}

export interface DailyUsage {
  from: string;
  to: string;
  rows: DailyUsageRow[];
}

export interface RequestRow {
  created_at: string;
  request_id: string;
  route: string;
  model: string;
  requested_model: string;
  input_tokens: Int;
  output_tokens: Int;
  cached_tokens: Int;
  cost_nano: string;
  status: string;
  http_status: Int;
  latency_ms: Int;
  key_prefix: string;
}

export interface Page<T> {
  rows: T[];
  next_cursor: string;
}

export interface LedgerRow {
  id: string;
  kind: string;
  amount_nano: string;
  balance_after_nano?: string;
  external_id?: string;
  request_id?: string;
  cause: string;
  created_at: string;
}

export interface ModelPrices {
  id: string;
  kind: string;
  provider: string;
  aliases: string[];
  pricing: Record<string, string>;
}

export interface AccountRow {
  account_id: string;
  label: string;
  owner: string;
  group: string;
  balance_nano: string;
  held_nano: string;
  spend_30d_nano: string;
  last_used_at: string | null;
  keys: Int;
}

export interface KeyRow {
  key_id: string;
  prefix: string;
  label: string;
  created_at: string;
  revoked_at: string | null;
  rpm: Int | null;
  tpm: Int | null;
}

export interface AccountDetail extends AccountRow {
  available_nano?: string;
  keys_list?: KeyRow[];
}

export interface MarginRow {
  key: string;
  requests: Int;
  revenue_nano: string;
  provider_cost_nano: string;
  margin_nano: string;
}

export interface MarginReport {
  rows: MarginRow[];
  total: MarginRow | null;
}

export interface Markup {
  id: Int;
  provider: string;
  model_id: string;
  account_group: string;
  markup: string;
  effective_from: string | null;
  created_at?: string | null;
  source?: string;
  reason?: string;
}

export interface BookAnswer {
  document: string;
  markups: { in_force: Markup[]; scheduled: Markup[] };
}

export interface PriceVersion {
  id: Int;
  prices: Record<string, string>;
  effective_from: string | null;
  created_at: string | null;
  source: string;
  reason: string;
}

export interface PriceHistory {
  versions: PriceVersion[];
}

export interface PreviewRow {
  model_id: string;
  requests: Int;
  revenue_nano: string;
  provider_cost_nano: string;
  proposed_revenue_nano: string;
  proposed_provider_cost_nano: string;
  inexact_requests: Int;
}

export interface BookPreview {
  rows: PreviewRow[];
  total: PreviewRow | null;
  from: string | null;
  to: string | null;
}

export interface BookChange {
  kind: string;
  subject: string;
  detail: string;
}

export interface ApplyAnswer {
  changes: BookChange[];
  applied: boolean;
}

export interface VideoRow {
  id: string;
  account_id: string;
  model: string;
  status: string;
  created_at: string;
  temporal_url: string;
}

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
  const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
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

export const get = <T>(path: string): Promise<T> => call<T>('GET', path);
export const post = <T>(path: string, body: unknown = {}): Promise<T> => call<T>('POST', path, body);

/** Exchanges a key, an admin token or a one-time link token for a session (the cookie). */
export const signIn = (credential: { key: string } | { admin_token: string } | { link: string }) =>
  call<SessionAnswer>('POST', '/session', credential, { signIn: true });

export const signOut = () => call<unknown>('POST', '/session/end', {}, { signIn: true });

/** "?a=1&b=2" from the set values only (empty strings left out). */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
