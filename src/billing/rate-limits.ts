// Requests and tokens per minute, per key. State lives in PostgreSQL (rate_windows), so the
// limit holds across any number of gateway instances: the conditional upsert serialises on
// the row lock and admits exactly `rpm` requests in a minute window.
import type { Db } from '../db/db.ts';
import type { KeyCache } from './key-cache.ts';

export interface RateLimitDefaults {
  /** 0 means unlimited. */
  rpm: number;
  tpm: number;
}

export interface RateDecision {
  allowed: boolean;
  keyId: string;
  accountId: string;
  limitRequests: number;
  remainingRequests: number;
  limitTokens: number;
  remainingTokens: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export class RateLimiter {
  private readonly db: Db;
  private readonly defaults: RateLimitDefaults;
  private readonly cache: KeyCache | undefined;

  constructor(db: Db, defaults: RateLimitDefaults, cache?: KeyCache) {
    this.db = db;
    this.defaults = defaults;
    this.cache = cache;
  }

  /**
   * Admits one request for the key with this hash, or not. Tokens are checked against what the
   * window has already used (settled requests add their real tokens via `addTokens`), so a
   * burst of in-flight requests can pass the token limit by what they use; requests cannot.
   */
  async admit(keyHash: Buffer): Promise<RateDecision | undefined> {
    // A cached key without limits needs nothing from the database; a key with limits always
    // counts its request in the shared window.
    const hex = this.cache ? keyHash.toString('hex') : '';
    const cached = this.cache?.get(hex);
    if (cached && cached.rpm === 0 && cached.tpm === 0) return unlimited(cached);
    const mark = this.cache?.mark() ?? 0;
    // A connection the database dropped surfaces here first (the request's first statement).
    // Running it again is safe: at worst a request is counted twice in its window.
    const run = async (attempt: number): Promise<unknown> => {
      try {
        return await this.admitStatement(keyHash);
      } catch (err) {
        if (attempt < 3 && /Connection terminated|not queryable/.test((err as Error).message)) return run(attempt + 1);
        throw err;
      }
    };
    const d = this.decide(keyHash, rowsOf(await run(1)));
    if (d && this.cache) this.cache.fill(hex, { keyId: d.keyId, accountId: d.accountId, rpm: d.limitRequests, tpm: d.limitTokens }, mark);
    return d;
  }

  private admitStatement(keyHash: Buffer) {
    return this.db.raw(
        `WITH k AS (
           SELECT id, account_id, COALESCE(rpm_limit, ?) AS rpm, COALESCE(tpm_limit, ?) AS tpm FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL
         ), w AS (
           INSERT INTO rate_windows AS r (key_id, window_start, requests)
           SELECT k.id, date_trunc('minute', now()), 1 FROM k WHERE k.rpm > 0 OR k.tpm > 0
           ON CONFLICT (key_id, window_start) DO UPDATE SET requests = r.requests + 1
           WHERE ((SELECT rpm FROM k) = 0 OR r.requests < (SELECT rpm FROM k))
             AND ((SELECT tpm FROM k) = 0 OR r.tokens < (SELECT tpm FROM k))
           RETURNING r.requests, r.tokens
         )
         SELECT k.id AS key_id, k.account_id, k.rpm, k.tpm::text AS tpm, w.requests, w.tokens::text AS tokens,
                (SELECT r.requests FROM rate_windows r WHERE r.key_id = k.id AND r.window_start = date_trunc('minute', now())) AS seen,
                (SELECT r.tokens::text FROM rate_windows r WHERE r.key_id = k.id AND r.window_start = date_trunc('minute', now())) AS seen_tokens,
                ceil(extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now()))::int AS reset
         FROM k LEFT JOIN w ON true`,
        [this.defaults.rpm, this.defaults.tpm, keyHash],
      );
  }

  private decide(keyHash: Buffer, rows: Row[]): RateDecision | undefined {
    const r = rows[0];
    if (!r) return undefined; // unknown or revoked key: the caller answers 401
    const rpm = Number(r.rpm);
    const tpm = Number(r.tpm);
    // A key without limits is not counted: its window row is never written (no hot row).
    const unlimited = rpm === 0 && tpm === 0;
    this.noteTokenLimit(keyHash, tpm !== 0);
    const allowed = unlimited || r.requests != null;
    const used = allowed ? Number(r.requests) : Number(r.seen ?? 0);
    const tokens = Number((allowed ? r.tokens : r.seen_tokens) ?? 0);
    // A refusal not caused by tokens means the request count is at its limit, whatever the
    // statement's snapshot (`seen`) says: concurrent increments may postdate it.
    const requestsExhausted = !allowed && !(tpm !== 0 && tokens >= tpm);
    return {
      allowed,
      keyId: r.key_id as string,
      accountId: r.account_id as string,
      limitRequests: rpm,
      remainingRequests: rpm === 0 ? Number.MAX_SAFE_INTEGER : requestsExhausted ? 0 : Math.max(0, rpm - used),
      limitTokens: tpm,
      remainingTokens: tpm === 0 ? Number.MAX_SAFE_INTEGER : Math.max(0, tpm - tokens),
      resetSeconds: Math.max(1, Number(r.reset)),
    };
  }

  /** Keys seen by `admit` and whether a token limit applies to them (bounded; a miss only costs a statement). */
  private readonly tokenLimited = new Map<string, boolean>();

  private noteTokenLimit(keyHash: Buffer, limited: boolean): void {
    if (this.tokenLimited.size >= 10_000) this.tokenLimited.clear();
    this.tokenLimited.set(keyHash.toString('hex'), limited);
  }

  /** Counts a finished request's tokens in the current window (not for keys without a token limit). */
  async addTokens(keyHash: Buffer, tokens: bigint): Promise<void> {
    const hex = keyHash.toString('hex');
    if (tokens <= 0n || this.tokenLimited.get(hex) === false || this.cache?.get(hex)?.tpm === 0) return;
    await this.db.raw(
      `INSERT INTO rate_windows AS r (key_id, window_start, tokens)
       SELECT id, date_trunc('minute', now()), CAST(? AS bigint) FROM api_keys WHERE key_hash = ?
       ON CONFLICT (key_id, window_start) DO UPDATE SET tokens = r.tokens + EXCLUDED.tokens`,
      [tokens.toString(), keyHash],
    );
  }

  async setLimits(keyId: string, rpm: number | null, tpm: number | null): Promise<boolean> {
    const rows = rowsOf(await this.db.raw(`UPDATE api_keys SET rpm_limit = ?, tpm_limit = ? WHERE id = ? RETURNING id`, [rpm, tpm, keyId]));
    return rows.length > 0;
  }

  /** Drops windows nobody will ask about again. */
  async prune(): Promise<void> {
    await this.db.raw(`DELETE FROM rate_windows WHERE window_start < now() - interval '5 minutes'`);
  }
}

function unlimited(k: { keyId: string; accountId: string }): RateDecision {
  return {
    allowed: true, keyId: k.keyId, accountId: k.accountId, limitRequests: 0, remainingRequests: Number.MAX_SAFE_INTEGER,
    limitTokens: 0, remainingTokens: Number.MAX_SAFE_INTEGER, resetSeconds: 60,
  };
}
