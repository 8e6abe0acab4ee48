// Requests and tokens per minute, per key. State lives in PostgreSQL (rate_windows), so the
// limit holds across any number of gateway instances: the conditional upsert serialises on
// the row lock and never lets a minute's window count more than `rpm` requests.
//
// Grants: with the key cache on, an instance does not count every request in the database. It
// takes a grant of several requests from the window in one statement (an eighth of what the
// window has left, at most MAX_GRANT, never less than one) and admits that many in memory. The
// window still never admits more than `rpm` across all instances: grants come out of it. Near
// the limit grants shrink to one, so the last requests of a window are counted one by one and
// K concurrent requests over a limit of K succeed exactly K times. What an instance was granted
// but did not use stays counted until it is handed back (after RATE_LIMIT_GRANT_IDLE_MS without
// use, or at shutdown) or the minute ends: meanwhile other instances can be refused early, never
// admitted beyond the limit.
// Tokens settled by requests are added to the window in one statement per LIMITER_FLUSH_MS.
// A key and the keys it was rotated into share one window (api_keys.window_key_id), so a
// rotation starts no fresh minute.
import type { Logger } from 'pino';
import { retryIfConnectionLost, type Db } from '../db/db.ts';
import type { CachedKey, KeyCache } from './key-cache.ts';
import { keyHashHex } from './keys.ts';

export interface RateLimitDefaults {
  /** 0 means unlimited. */
  rpm: number;
  tpm: number;
  /** Unused requests of a grant go back to their window after this long without use (default 1 s). */
  grantIdleMs?: number;
  /** A key's requests in flight at once (src/billing/in-flight.ts); 0 means unlimited. Carried here: the same statement reads the key's own. */
  maxInFlight?: number;
}

export interface RateDecision {
  allowed: boolean;
  keyId: string;
  accountId: string;
  /** The account's price group, as this statement (or the key cache) read it: fresher than the edge's. */
  group: string;
  /** The key whose rate window this one counts in (itself, or the first key it was rotated from). */
  windowId: string;
  /** Whose key it is (a member's or a team's; '' for the other). */
  memberId: string;
  teamId: string;
  limitRequests: number;
  remainingRequests: number;
  limitTokens: number;
  remainingTokens: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
  /** The key's bound on requests in flight at once (its own or the default); 0 means unlimited. */
  maxInFlight: number;
  /** Its team's and its member's bounds on requests in flight (an organisation's settings); 0: none. */
  teamMaxInFlight: number;
  memberMaxInFlight: number;
  /** The models the key may call (catalogue ids or names asked for); null: any. */
  allowedModels: readonly string[] | null;
}

/** Requests one instance takes from a window at a time, at most; and the share of what is left. */
const MAX_GRANT = 64;
const GRANT_SHARE = 8;
const LIMITER_FLUSH_MS = 100;

/** What this instance holds of one key's current window. */
interface Grant {
  keyId: string;
  accountId: string;
  windowId: string;
  rpm: number;
  tpm: number;
  windowStart: string;
  /** performance.now() by which the window has surely ended (measured from before the statement). */
  endsAt: number;
  granted: number;
  used: number;
  maxInFlight: number;
  /** The window's counts as the granting statement left them. */
  windowRequests: number;
  windowTokens: number;
  /** Tokens settled here since. */
  localTokens: number;
  lastUsed: number;
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export class RateLimiter {
  private readonly db: Db;
  private readonly defaults: RateLimitDefaults;
  private readonly cache: KeyCache | undefined;
  private readonly log: Logger | undefined;
  private readonly grants = new Map<string, Grant>();
  private readonly claiming = new Map<string, Promise<unknown>>();
  /** Tokens to add to windows, by window id. */
  private pendingTokens = new Map<string, bigint>();
  private readonly timer: NodeJS.Timeout;

  constructor(db: Db, defaults: RateLimitDefaults, cache?: KeyCache, log?: Logger) {
    this.db = db;
    this.defaults = defaults;
    this.cache = cache;
    this.log = log;
    this.timer = setInterval(() => this.tick(), LIMITER_FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Admits one request for the key with this hash, or not (undefined: unknown or revoked key).
   * Tokens are checked against what the window has already used (settled requests add theirs),
   * so a burst of in-flight requests can pass the token limit by what they use; requests cannot.
   */
  async admit(keyHash: Buffer): Promise<RateDecision | undefined> {
    const hex = keyHashHex(keyHash);
    for (let round = 0; ; round++) {
      const cached = this.cache?.get(hex);
      // A cached key without limits needs nothing from the database.
      if (cached && cached.rpm === 0 && cached.tpm === 0) return unlimited(cached);
      if (cached) {
        const local = this.fromGrant(hex, cached);
        if (local) return local;
      }
      // One statement per key at a time: requests that arrive meanwhile wait for its grant.
      const busy = this.claiming.get(hex);
      if (busy && round < 2) {
        await busy.catch(() => {});
        continue;
      }
      const p = this.claim(keyHash, hex);
      if (this.cache) {
        this.claiming.set(hex, p);
        void p
          .catch(() => {})
          .finally(() => {
            if (this.claiming.get(hex) === p) this.claiming.delete(hex);
          });
      }
      return p;
    }
  }

  /** Counts a finished request's tokens in its key's window (written with the next batch). */
  addTokens(keyHash: Buffer, tokens: bigint): void {
    if (tokens <= 0n) return;
    const hex = keyHashHex(keyHash);
    const cached = this.cache?.peek(hex);
    const key =
      this.known.get(hex) ?? (cached && { windowId: cached.windowId ?? cached.keyId, tokenLimited: cached.tpm !== 0 });
    if (!key?.tokenLimited) return;
    const g = this.grants.get(hex);
    if (g) g.localTokens += Number(tokens);
    this.pendingTokens.set(key.windowId, (this.pendingTokens.get(key.windowId) ?? 0n) + tokens);
  }

  /** A key's own limits (null: the gateway's default for that limit; 0: unlimited). */
  async setLimits(
    keyId: string,
    rpm: number | null,
    tpm: number | null,
    maxInFlight: number | null = null,
  ): Promise<boolean> {
    const rows = rowsOf(
      await this.db.raw(
        `UPDATE api_keys SET rpm_limit = ?, tpm_limit = ?, max_in_flight = ? WHERE id = ? RETURNING id`,
        [rpm, tpm, maxInFlight, keyId],
      ),
    );
    this.keyChanged(keyId);
    return rows.length > 0;
  }

  /** A key changed through this instance (committed): its cached state goes now, not when the notice arrives. */
  keyChanged(keyId: string): void {
    this.cache?.forgetKey(keyId);
  }

  /** Drops windows nobody will ask about again. */
  async prune(): Promise<void> {
    await this.db.raw(`DELETE FROM rate_windows WHERE window_start < now() - interval '5 minutes'`);
  }

  /** Writes pending tokens and hands back unused grants (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([this.flushTokens(), ...[...this.grants.values()].map((g) => this.handBack(g))]);
  }

  private fromGrant(hex: string, key: CachedKey): RateDecision | undefined {
    const g = this.grants.get(hex);
    if (!g || g.rpm !== key.rpm || g.tpm !== key.tpm || g.keyId !== key.keyId || g.maxInFlight !== key.maxInFlight)
      return undefined;
    const now = performance.now();
    if (now >= g.endsAt) return undefined;
    if (g.rpm > 0 && g.used >= g.granted) return undefined;
    if (g.tpm > 0 && g.windowTokens + g.localTokens >= g.tpm) return undefined;
    g.used++;
    g.lastUsed = now;
    return {
      allowed: true,
      keyId: g.keyId,
      accountId: g.accountId,
      group: key.group,
      windowId: g.windowId,
      memberId: key.memberId,
      teamId: key.teamId,
      limitRequests: g.rpm,
      remainingRequests:
        g.rpm === 0 ? Number.MAX_SAFE_INTEGER : Math.max(0, g.rpm - g.windowRequests) + (g.granted - g.used),
      limitTokens: g.tpm,
      remainingTokens: g.tpm === 0 ? Number.MAX_SAFE_INTEGER : Math.max(0, g.tpm - g.windowTokens - g.localTokens),
      resetSeconds: Math.max(1, Math.ceil((g.endsAt - now) / 1000)),
      maxInFlight: g.maxInFlight,
      teamMaxInFlight: key.teamMaxInFlight,
      memberMaxInFlight: key.memberMaxInFlight,
      allowedModels: key.allowedModels,
    };
  }

  private async claim(keyHash: Buffer, hex: string): Promise<RateDecision | undefined> {
    const mark = this.cache?.mark() ?? 0;
    const sentAt = performance.now();
    // A connection the database dropped surfaces here first (often the request's first
    // statement). Running it again is safe: at worst requests are counted twice in the window.
    const r = rowsOf(await retryIfConnectionLost(() => this.claimStatement(keyHash)))[0];
    if (!r) return undefined; // unknown or revoked key: the caller answers 401
    const d = this.decide(hex, r);
    if (this.cache) {
      this.cache.fill(hex, keyOf(d), mark);
      if (d.allowed && (d.limitRequests > 0 || d.limitTokens > 0)) {
        const fresh: Grant = {
          keyId: d.keyId,
          accountId: d.accountId,
          windowId: d.windowId,
          rpm: d.limitRequests,
          tpm: d.limitTokens,
          maxInFlight: d.maxInFlight,
          windowStart: String(r.window_start),
          endsAt: sentAt + Number(r.reset_ms),
          granted: Number(r.grant),
          used: 1,
          windowRequests: Number(r.requests),
          windowTokens: Number(r.tokens ?? 0),
          localTokens: 0,
          lastUsed: performance.now(),
        };
        const prev = this.grants.get(hex);
        if (
          prev &&
          prev.windowStart === fresh.windowStart &&
          prev.windowId === fresh.windowId &&
          prev.rpm === fresh.rpm &&
          prev.tpm === fresh.tpm &&
          prev.maxInFlight === fresh.maxInFlight
        ) {
          // Another grant from the same window (claims that overlapped): both are ours to use.
          prev.granted += fresh.granted;
          prev.used += 1;
          prev.windowRequests = Math.max(prev.windowRequests, fresh.windowRequests);
          prev.windowTokens = Math.max(prev.windowTokens, fresh.windowTokens);
          prev.lastUsed = fresh.lastUsed;
        } else {
          if (prev) void this.handBack(prev);
          this.grants.set(hex, fresh);
        }
      }
    }
    if (!d.allowed) {
      // The window refused this claim, but what is left of it may sit in this instance's own
      // grant (a claim that overlapped this one, or one made while the key was not cached):
      // counted in the window, it is this request's to use. So K concurrent requests over a
      // limit of K still succeed K times. The key is live: this statement just read it.
      const local = this.fromGrant(hex, keyOf(d));
      if (local) return local;
    }
    return d;
  }

  /** One statement: the key, its limits, and a grant from the current window (none when the window is spent). */
  private claimStatement(keyHash: Buffer) {
    // A grant is used from memory only while the key is cached: without the cache (off, or its
    // listener reconnecting) every request runs this statement anyway, so it takes one. A bigger
    // grant would only be counted in the window unused, refusing requests below the limit.
    const most = this.cache?.usable ? MAX_GRANT : 1;
    return this.db.raw(
      `WITH k AS (
         SELECT id, account_id, member_id, team_id, COALESCE(window_key_id, id) AS wid, COALESCE(rpm_limit, ?) AS rpm, COALESCE(tpm_limit, ?) AS tpm,
                COALESCE(max_in_flight, ?) AS max_in_flight, allowed_models,
                (SELECT t.max_in_flight FROM teams t WHERE t.id = api_keys.team_id) AS team_max_in_flight,
                (SELECT m.max_in_flight FROM memberships m WHERE m.account_id = api_keys.account_id AND m.member_id = api_keys.member_id) AS member_max_in_flight
         FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL
       ), w AS (
         INSERT INTO rate_windows AS r (key_id, window_start, requests, last_grant)
         SELECT k.wid, date_trunc('minute', now()), g.n, g.n FROM k,
           LATERAL (SELECT CASE WHEN k.rpm = 0 THEN CAST(? AS int) ELSE GREATEST(1, LEAST(CAST(? AS int), k.rpm / ?)) END AS n) g
         WHERE k.rpm > 0 OR k.tpm > 0
         ON CONFLICT (key_id, window_start) DO UPDATE
           SET requests = r.requests + (CASE WHEN (SELECT rpm FROM k) = 0 THEN CAST(? AS int) ELSE GREATEST(1, LEAST(CAST(? AS int), ((SELECT rpm FROM k) - r.requests) / ?)) END),
               last_grant = (CASE WHEN (SELECT rpm FROM k) = 0 THEN CAST(? AS int) ELSE GREATEST(1, LEAST(CAST(? AS int), ((SELECT rpm FROM k) - r.requests) / ?)) END)
         WHERE ((SELECT rpm FROM k) = 0 OR r.requests < (SELECT rpm FROM k))
           AND ((SELECT tpm FROM k) = 0 OR r.tokens < (SELECT tpm FROM k))
         RETURNING r.requests, r.tokens, r.last_grant, r.window_start
       )
       SELECT k.id AS key_id, k.account_id, k.member_id, k.team_id, k.wid AS window_id, k.rpm, k.tpm::text AS tpm, k.max_in_flight,
              k.allowed_models, k.team_max_in_flight, k.member_max_in_flight, w.requests, w.tokens::text AS tokens, w.last_grant AS grant,
              (SELECT a.price_group FROM accounts a WHERE a.id = k.account_id) AS price_group,
              w.window_start::text AS window_start,
              (SELECT r.requests FROM rate_windows r WHERE r.key_id = k.wid AND r.window_start = date_trunc('minute', now())) AS seen,
              (SELECT r.tokens::text FROM rate_windows r WHERE r.key_id = k.wid AND r.window_start = date_trunc('minute', now())) AS seen_tokens,
              floor(extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now()) * 1000)::int AS reset_ms
       FROM k LEFT JOIN w ON true`,
      [
        this.defaults.rpm,
        this.defaults.tpm,
        this.defaults.maxInFlight ?? 0,
        keyHash,
        most,
        most,
        GRANT_SHARE,
        most,
        most,
        GRANT_SHARE,
        most,
        most,
        GRANT_SHARE,
      ],
    );
  }

  private decide(hex: string, r: Row): RateDecision {
    const rpm = Number(r.rpm);
    const tpm = Number(r.tpm);
    // A key without limits is not counted: its window row is never written (no hot row).
    const unlimited = rpm === 0 && tpm === 0;
    this.noteKey(hex, r.window_id as string, tpm !== 0);
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
      group: r.price_group as string,
      windowId: r.window_id as string,
      memberId: (r.member_id as string | null) ?? '',
      teamId: (r.team_id as string | null) ?? '',
      limitRequests: rpm,
      remainingRequests: rpm === 0 ? Number.MAX_SAFE_INTEGER : requestsExhausted ? 0 : Math.max(0, rpm - used),
      limitTokens: tpm,
      remainingTokens: tpm === 0 ? Number.MAX_SAFE_INTEGER : Math.max(0, tpm - tokens),
      resetSeconds: Math.max(1, Math.ceil(Number(r.reset_ms) / 1000)),
      maxInFlight: Number(r.max_in_flight),
      teamMaxInFlight: Number(r.team_max_in_flight ?? 0),
      memberMaxInFlight: Number(r.member_max_in_flight ?? 0),
      allowedModels: (r.allowed_models as string[] | null) ?? null,
    };
  }

  /** Keys seen by a statement: their window and whether a token limit applies (bounded; forgotten keys' tokens are not counted until seen again). */
  private readonly known = new Map<string, { windowId: string; tokenLimited: boolean }>();

  private noteKey(hex: string, windowId: string, tokenLimited: boolean): void {
    if (this.known.size >= 10_000) this.known.clear();
    this.known.set(hex, { windowId, tokenLimited });
  }

  private tick(): void {
    const now = performance.now();
    for (const [hex, g] of this.grants) {
      if (now >= g.endsAt) this.grants.delete(hex);
      else if (g.granted > g.used && now - g.lastUsed > (this.defaults.grantIdleMs ?? 1_000)) void this.handBack(g);
    }
    if (this.pendingTokens.size > 0) void this.flushTokens();
  }

  /** Returns what a grant did not use to its window, so other instances can have it. */
  private async handBack(g: Grant): Promise<void> {
    const unused = g.granted - g.used;
    if (unused <= 0 || g.rpm === 0) return;
    g.granted = g.used;
    await this.db
      .raw(
        `UPDATE rate_windows SET requests = requests - CAST(? AS int) WHERE key_id = ? AND window_start = CAST(? AS timestamptz) AND requests >= CAST(? AS int)`,
        [unused, g.windowId, g.windowStart, unused],
      )
      .catch((err) => this.log?.warn({ err }, 'handing back a rate grant failed; it lapses with its minute'));
  }

  private async flushTokens(): Promise<void> {
    if (this.pendingTokens.size === 0) return;
    const batch = this.pendingTokens;
    this.pendingTokens = new Map();
    try {
      await this.db.raw(
        `INSERT INTO rate_windows AS r (key_id, window_start, requests, tokens)
         SELECT t.key_id, date_trunc('minute', now()), 0, t.tokens FROM unnest(CAST(? AS text[]), CAST(? AS bigint[])) AS t(key_id, tokens)
         ON CONFLICT (key_id, window_start) DO UPDATE SET tokens = r.tokens + EXCLUDED.tokens`,
        [[...batch.keys()], [...batch.values()].map(String)],
      );
    } catch (err) {
      for (const [k, v] of batch) this.pendingTokens.set(k, (this.pendingTokens.get(k) ?? 0n) + v);
      this.log?.warn({ err }, 'token window update failed; retried with the next batch');
    }
  }
}

/** What a decision says of its key, as the key cache keeps it. */
function keyOf(d: RateDecision): CachedKey {
  return {
    keyId: d.keyId,
    accountId: d.accountId,
    group: d.group,
    windowId: d.windowId,
    memberId: d.memberId,
    teamId: d.teamId,
    rpm: d.limitRequests,
    tpm: d.limitTokens,
    maxInFlight: d.maxInFlight,
    teamMaxInFlight: d.teamMaxInFlight,
    memberMaxInFlight: d.memberMaxInFlight,
    allowedModels: d.allowedModels,
  };
}

function unlimited(k: CachedKey): RateDecision {
  return {
    allowed: true,
    keyId: k.keyId,
    accountId: k.accountId,
    group: k.group,
    windowId: k.windowId ?? k.keyId,
    memberId: k.memberId,
    teamId: k.teamId,
    limitRequests: 0,
    remainingRequests: Number.MAX_SAFE_INTEGER,
    limitTokens: 0,
    remainingTokens: Number.MAX_SAFE_INTEGER,
    resetSeconds: 60,
    maxInFlight: k.maxInFlight,
    teamMaxInFlight: k.teamMaxInFlight,
    memberMaxInFlight: k.memberMaxInFlight,
    allowedModels: k.allowedModels,
  };
}
