// Known keys in memory, so a request for a key without rate limits makes no database round
// trip at all. Correct with N instances: every change to a key row is announced at commit by a
// trigger (migration 007) on the channel `api_keys_changed`, and each instance listens on a
// connection of its own and drops the entry. While that connection is down the cache is off
// (every request asks the database), and it starts empty when the connection is back, so a
// notification missed during an outage can never leave a revoked key cached.
//
// Only keys the database confirmed are cached (a wrong key always costs a statement), and an
// entry is filled only if no notification arrived while its lookup ran, so a lookup that read
// the row just before a revoke committed cannot cache the old state after the revoke's notice.
import pg from 'pg';
import type { Logger } from 'pino';

export interface CachedKey {
  keyId: string;
  accountId: string;
  /** Effective limits (the key's own or the defaults); 0 means unlimited. */
  rpm: number;
  tpm: number;
}

export const KEY_CHANNEL = 'api_keys_changed';
const MAX_ENTRIES = 100_000;

export class KeyCache {
  private readonly entries = new Map<string, CachedKey & { at: number }>();
  private live = false;
  /** Bumped by every notification and reconnect: a lookup started before a bump must not fill. */
  private generation = 0;
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
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
    const client = new pg.Client({ connectionString: this.databaseUrl });
    this.client = client;
    const lost = (err?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
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
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
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
