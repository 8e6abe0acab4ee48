// Known keys in memory, so a request for a key without rate limits makes no database round
// trip at all. Safely bounded with N instances: every change to a key row is announced at commit
// by a trigger (migration 007) on the channel `api_keys_changed`, and each instance listens on a
// connection of its own and drops the entry, as soon as PostgreSQL delivers the notice
// (milliseconds; longer on a saturated machine). While that connection is down, or the newest
// heartbeat notice it has heard back was sent over 3 s ago, the cache is off (every request asks
// the database),
// and it starts empty when the connection is back, so a notice missed in between can never
// leave a revoked key cached. No entry outlives KEY_CACHE_MAX_AGE_MS whatever happens.
//
// Only keys the database confirmed are cached (a wrong key always costs a statement), and an
// entry is filled only if no notification for that key arrived while its lookup ran (nor did
// the listener reconnect), so a lookup that read the row just before a revoke committed cannot
// cache the old state after the revoke's notice. Other keys' changes do not stop it: under a
// steady trickle of key changes elsewhere, a key would otherwise rarely get cached at all.
import pg from 'pg';
import type { Logger } from 'pino';

export interface CachedKey {
  keyId: string;
  accountId: string;
  /**
   * The account's price group. A group change announces each of the account's keys on this
   * channel (src/billing/account-groups.ts), so an entry never serves an old group for longer
   * than it would serve a revoked key.
   */
  group: string;
  /** Whose key it is: a member's or a team's ('' for the other). A key moved announces itself like any key change. */
  memberId: string;
  teamId: string;
  /** Whose rate window it counts in (see RateDecision.windowId). */
  windowId?: string;
  /** Effective limits (the key's own or the defaults); 0 means unlimited. */
  rpm: number;
  tpm: number;
  /** Requests in flight at once (src/billing/in-flight.ts). */
  maxInFlight: number;
  /**
   * Its team's and member's bounds on requests in flight, and the models it may call: a change
   * of any announces the keys it concerns on this channel (src/organisations/key-limits.ts).
   */
  teamMaxInFlight: number;
  memberMaxInFlight: number;
  allowedModels: readonly string[] | null;
}

export const KEY_CHANNEL = 'api_keys_changed';
/** The listener's application_name, so operators (and tests) can find its connection. */
export const KEY_LISTENER_APP = 'gateway-key-listener';
const MAX_ENTRIES = 100_000;
/**
 * The listener notifies itself this often, each notice carrying when it was sent. Notices arrive
 * in commit order, so once a heartbeat sent at S is heard, every key change committed before S
 * has been heard too. Entries are served only while the newest heartbeat heard was sent within
 * HEARTBEAT_LOST_MS: a change is therefore never served stale for longer than that after its
 * commit, however late notices arrive (a bound on silence alone let a 1 s check interval and a
 * steady delivery lag stretch it).
 */
const HEARTBEAT_MS = 1_000;
const HEARTBEAT_LOST_MS = 3_000;
/**
 * A heartbeat tick this much later than due means the process itself did not run (a long
 * synchronous step: the first start unpacks the Temporal CLI; a loaded machine), not that the
 * listener went quiet: its notices may be waiting unread. Such a tick judges nothing; silence
 * counts again from it.
 */
const LATE_TICK_MS = HEARTBEAT_MS + 1_000;

export class KeyCache {
  private readonly entries = new Map<string, CachedKey & { at: number }>();
  private live = false;
  /** Counts notifications and resets; `mark()` reads it. */
  private seq = 0;
  /** The last reset (reconnect, cache off, forgetting `changed`): lookups marked before it must not fill. */
  private resetAt = 0;
  /** The `seq` of each key's latest change notice: a lookup of that key marked before it must not fill. */
  private readonly changed = new Map<string, number>();
  /** The same for keys changed through this instance, by key id (see forgetKey). */
  private readonly changedIds = new Map<string, number>();
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly nonce = `ping:${process.pid}:${Math.random().toString(36).slice(2)}`;
  /** When the newest of this listener's own heartbeats heard back was sent (or it began to listen). */
  private heardSentAt = 0;
  private readonly now: () => number;
  private readonly databaseUrl: string;
  private readonly maxAgeMs: number;
  private readonly log: Logger;
  private readonly lookups: ((result: string) => { inc(): void }) | undefined;

  constructor(opts: {
    databaseUrl: string;
    maxAgeMs: number;
    log: Logger;
    lookups?: (result: string) => { inc(): void };
    now?: () => number;
  }) {
    this.now = opts.now ?? (() => performance.now());
    this.databaseUrl = opts.databaseUrl;
    this.maxAgeMs = opts.maxAgeMs;
    this.log = opts.log;
    this.lookups = opts.lookups;
  }

  /** Connects the listener; the cache is used once it listens (and again after each reconnect). */
  async start(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      keepAlive: true,
      application_name: KEY_LISTENER_APP,
    });
    this.client = client;
    const lost = (err?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      clearInterval(this.heartbeat);
      this.off();
      client.end().catch(() => {});
      if (this.closed) return;
      this.log.warn(
        { err: err?.message },
        'key change listener lost (reconnecting in 1 s): until it is back every key is checked in the database; requests are served and billed as usual',
      );
      this.retry = setTimeout(() => this.start().catch(() => {}), 1000);
      this.retry.unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.payload?.startsWith('ping:')) {
        if (msg.payload.startsWith(`${this.nonce}@`))
          this.heardSentAt = Math.max(this.heardSentAt, Number(msg.payload.slice(this.nonce.length + 1)));
        return;
      }
      if (!msg.payload) return this.reset();
      if (this.changed.size >= MAX_ENTRIES) this.reset();
      this.changed.set(msg.payload, ++this.seq);
      this.entries.delete(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_CHANNEL}`);
    } catch (err) {
      lost(err as Error);
      return;
    }
    if (this.client !== client) return;
    this.reset();
    this.live = true;
    // A connection can go quiet without an error (a half-open socket, a stalled server): the
    // listener notifies itself every second, and if its own notice stops coming back the cache
    // goes off and the listener reconnects. So a live cache has heard the channel recently.
    this.heardSentAt = this.now();
    // Silence is counted from the newest heartbeat heard, or from the last tick that came late.
    let lastTick = this.heardSentAt;
    let silentSince = this.heardSentAt;
    this.heartbeat = setInterval(() => {
      const now = this.now();
      if (now - lastTick > LATE_TICK_MS) silentSince = now;
      lastTick = now;
      if (now - Math.max(this.heardSentAt, silentSince) > HEARTBEAT_LOST_MS)
        return lost(new Error('the listener stopped hearing its own notices'));
      client.query('SELECT pg_notify($1, $2)', [KEY_CHANNEL, `${this.nonce}@${now}`]).catch(() => {});
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.heartbeat);
    this.off();
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  /** Listening, and heard its own heartbeat of at most HEARTBEAT_LOST_MS ago: entries are filled and served. */
  get usable(): boolean {
    return this.fresh();
  }

  private fresh(): boolean {
    return this.live && this.now() - this.heardSentAt <= HEARTBEAT_LOST_MS;
  }

  get(keyHashHex: string): CachedKey | undefined {
    if (!this.fresh()) {
      this.lookups?.('off').inc();
      return undefined;
    }
    let e = this.entries.get(keyHashHex);
    if (e && this.now() - e.at > this.maxAgeMs) {
      this.entries.delete(keyHashHex);
      e = undefined;
    }
    this.lookups?.(e ? 'hit' : 'miss').inc();
    return e;
  }

  /** Counts a key check made in the database outside `get` (src/billing/key-check.ts). */
  noteDatabaseLookup(): void {
    this.lookups?.(this.fresh() ? 'miss' : 'off').inc();
  }

  /** The entry, if any, without counting a lookup (for bookkeeping after the request). */
  peek(keyHashHex: string): CachedKey | undefined {
    return this.fresh() ? this.entries.get(keyHashHex) : undefined;
  }

  /** Call before the lookup; pass the result to `fill`. */
  mark(): number {
    return this.seq;
  }

  fill(keyHashHex: string, key: CachedKey, mark: number): void {
    if (
      !this.fresh() ||
      this.resetAt > mark ||
      (this.changed.get(keyHashHex) ?? 0) > mark ||
      (this.changedIds.get(key.keyId) ?? 0) > mark
    )
      return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(keyHashHex, { ...key, at: this.now() });
  }

  /**
   * A key this instance has just changed (rotated, revoked, re-limited; call after the commit):
   * forgotten at once, so this instance never serves the old state, without waiting for the
   * change notice to come back. Other instances still learn of it from the notice.
   */
  forgetKey(keyId: string): void {
    if (this.changedIds.size >= MAX_ENTRIES) this.reset();
    const seq = ++this.seq;
    this.changedIds.set(keyId, seq);
    for (const [hex, e] of this.entries) {
      if (e.keyId !== keyId) continue;
      this.entries.delete(hex);
      this.changed.set(hex, seq);
    }
  }

  private off(): void {
    this.live = false;
    this.reset();
  }

  /** Forgets every entry and spoils every lookup under way. */
  private reset(): void {
    this.resetAt = ++this.seq;
    this.changed.clear();
    this.changedIds.clear();
    this.entries.clear();
  }
}
