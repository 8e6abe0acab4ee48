// Known keys in memory, so a request for a key without rate limits makes no database round
// trip at all. Safely bounded with N instances: every change to a key row is announced at commit
// by a trigger (migration 007) on the channel `api_keys_changed`, and each instance listens on a
// connection of its own and drops the entry, as soon as PostgreSQL delivers the notice
// (milliseconds; longer on a saturated machine). While that connection is down, or has not
// heard its own heartbeat notice for 3 s, the cache is off (every request asks the database),
// and it starts empty when the connection is back, so a notice missed in between can never
// leave a revoked key cached. No entry outlives KEY_CACHE_MAX_AGE_MS whatever happens.
//
// Only keys the database confirmed are cached (a wrong key always costs a statement), and an
// entry is filled only if no notification arrived while its lookup ran, so a lookup that read
// the row just before a revoke committed cannot cache the old state after the revoke's notice.
import pg from 'pg';
import type { Logger } from 'pino';

export interface CachedKey {
  keyId: string;
  accountId: string;
  /** Whose rate window it counts in (see RateDecision.windowId). */
  windowId?: string;
  /** Effective limits (the key's own or the defaults); 0 means unlimited. */
  rpm: number;
  tpm: number;
}

export const KEY_CHANNEL = 'api_keys_changed';
/** The listener's application_name, so operators (and tests) can find its connection. */
export const KEY_LISTENER_APP = 'gateway-key-listener';
const MAX_ENTRIES = 100_000;
/** The listener notifies itself this often; a notice not back within HEARTBEAT_LOST_MS means it is not hearing. */
const HEARTBEAT_MS = 1_000;
const HEARTBEAT_LOST_MS = 3_000;

export class KeyCache {
  private readonly entries = new Map<string, CachedKey & { at: number }>();
  private live = false;
  /** Bumped by every notification and reconnect: a lookup started before a bump must not fill. */
  private generation = 0;
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly nonce = `ping:${process.pid}:${Math.random().toString(36).slice(2)}`;
  private readonly databaseUrl: string;
  private readonly maxAgeMs: number;
  private readonly log: Logger;
  private readonly lookups: ((result: string) => { inc(): void }) | undefined;

  constructor(opts: { databaseUrl: string; maxAgeMs: number; log: Logger; lookups?: (result: string) => { inc(): void } }) {
    this.databaseUrl = opts.databaseUrl;
    this.maxAgeMs = opts.maxAgeMs;
    this.log = opts.log;
    this.lookups = opts.lookups;
  }

  /** Connects the listener; the cache is used once it listens (and again after each reconnect). */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl, keepAlive: true, application_name: KEY_LISTENER_APP });
    this.client = client;
    let heardAt = performance.now();
    const lost = (err?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      clearInterval(this.heartbeat);
      this.off();
      client.end().catch(() => {});
      if (this.closed) return;
      this.log.warn({ err: err?.message }, 'key change listener lost; keys are checked in the database until it is back');
      this.retry = setTimeout(() => this.start().catch(() => {}), 1000);
      this.retry.unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.payload?.startsWith('ping:')) {
        if (msg.payload === this.nonce) heardAt = performance.now();
        return;
      }
      this.generation++;
      if (msg.payload) this.entries.delete(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_CHANNEL}`);
    } catch (err) {
      lost(err as Error);
      return;
    }
    if (this.client !== client) return;
    this.entries.clear();
    this.generation++;
    this.live = true;
    // A connection can go quiet without an error (a half-open socket, a stalled server): the
    // listener notifies itself every second, and if its own notice stops coming back the cache
    // goes off and the listener reconnects. So a live cache has heard the channel recently.
    heardAt = performance.now();
    this.heartbeat = setInterval(() => {
      if (performance.now() - heardAt > HEARTBEAT_LOST_MS) return lost(new Error('the listener stopped hearing its own notices'));
      client.query('SELECT pg_notify($1, $2)', [KEY_CHANNEL, this.nonce]).catch(() => {});
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

  get(keyHashHex: string): CachedKey | undefined {
    if (!this.live) {
      this.lookups?.('off').inc();
      return undefined;
    }
    let e = this.entries.get(keyHashHex);
    if (e && performance.now() - e.at > this.maxAgeMs) {
      this.entries.delete(keyHashHex);
      e = undefined;
    }
    this.lookups?.(e ? 'hit' : 'miss').inc();
    return e;
  }

  /** Counts a key check made in the database outside `get` (src/billing/key-check.ts). */
  noteDatabaseLookup(): void {
    this.lookups?.(this.live ? 'miss' : 'off').inc();
  }

  /** The entry, if any, without counting a lookup (for bookkeeping after the request). */
  peek(keyHashHex: string): CachedKey | undefined {
    return this.live ? this.entries.get(keyHashHex) : undefined;
  }

  /** Call before the lookup; pass the result to `fill`. */
  mark(): number {
    return this.generation;
  }

  fill(keyHashHex: string, key: CachedKey, mark: number): void {
    if (!this.live || mark !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(keyHashHex, { ...key, at: performance.now() });
  }

  private off(): void {
    this.live = false;
    this.generation++;
    this.entries.clear();
  }
}
