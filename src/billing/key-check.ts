// Who is calling: a gateway key's caller (its hash, key and account), asked once per request at
// the edge, before the gateway spends memory or CPU on it (its body, an upload, JSON parsing,
// the tokenizer), so a forged key, which passes the public checksum, costs one indexed lookup and
// nothing else.
//
// The answer needs no statement for keys the key cache holds, or that were confirmed in the
// last few seconds: this check only decides whether the gateway reads a request. Money never
// moves on it: every hold, lease and rate-limit statement checks the key again, so a key
// revoked a moment ago is still refused before anything is held or charged. What a request does
// take from it is the account's price group (which markups it pays): a group change is in force
// within the bounds below, not at once on every instance.
import type { Caller } from './caller.ts';
import type { KeyCache } from './key-cache.ts';
import { isWellFormedKey, keyHashHex, visiblePrefix } from './keys.ts';
import type { Ledger } from './ledger.ts';

/**
 * How long a confirmed key is taken as live, with the price group it was read with, without
 * asking again. So a group change (src/billing/account-groups.ts) reaches a key this check
 * confirmed within this bound; one the key cache holds, within the cache's (its notice).
 */
const CONFIRMED_MS = 5_000;
const MAX_CONFIRMED = 10_000;

export class KeyCheck {
  private readonly ledger: Ledger;
  private readonly cache: KeyCache | undefined;
  private readonly confirmed = new Map<string, { caller: Caller; at: number }>();

  constructor(ledger: Ledger, cache?: KeyCache) {
    this.ledger = ledger;
    this.cache = cache;
  }

  /** The caller of a live key, or undefined (missing, malformed, unknown or revoked key). */
  async authenticate(apiKey: string | undefined): Promise<Caller | undefined> {
    if (!apiKey || !isWellFormedKey(apiKey)) return undefined;
    const keyHash = this.ledger.hash(apiKey);
    const hex = keyHashHex(keyHash);
    const known = this.remembered(apiKey, keyHash, hex);
    if (known) return known;
    this.cache?.noteDatabaseLookup();
    const row = await this.ledger.findKey({ apiKey });
    if (!row) {
      this.confirmed.delete(hex);
      return undefined;
    }
    const caller = {
      keyHash,
      keyId: row.keyId,
      accountId: row.accountId,
      prefix: row.prefix,
      group: row.group,
      memberId: row.memberId,
      teamId: row.teamId,
    };
    this.remember(caller);
    return caller;
  }

  /**
   * `authenticate`'s answer when it needs no statement: the caller of a key the cache holds or a
   * check confirmed in the last few seconds; undefined means "ask `authenticate`". Synchronous,
   * so the HTTP facade lets a known key's request through without a promise.
   */
  known(apiKey: string | undefined): Caller | undefined {
    if (!apiKey || !isWellFormedKey(apiKey)) return undefined;
    const keyHash = this.ledger.hash(apiKey);
    return this.remembered(apiKey, keyHash, keyHashHex(keyHash));
  }

  private remembered(apiKey: string, keyHash: Buffer, hex: string): Caller | undefined {
    const cached = this.cache?.peek(hex);
    if (cached)
      return {
        keyHash,
        keyId: cached.keyId,
        accountId: cached.accountId,
        prefix: visiblePrefix(apiKey),
        group: cached.group,
        memberId: cached.memberId,
        teamId: cached.teamId,
      };
    const c = this.confirmed.get(hex);
    return c !== undefined && performance.now() - c.at < CONFIRMED_MS ? c.caller : undefined;
  }

  /**
   * A key this instance has just rotated or revoked: forgotten at once, so this instance never
   * lets it in again (other instances forget it within CONFIRMED_MS, or by the key cache's notice).
   */
  forget(keyId: string): void {
    for (const [hex, c] of this.confirmed) if (c.caller.keyId === keyId) this.confirmed.delete(hex);
  }

  /**
   * A statement has just found this caller's key live (e.g. a rate-limit admission). Pass the
   * group that statement read, not the edge's: a caller remembered again and again would
   * otherwise keep an old group for as long as its requests keep coming.
   */
  remember(caller: Caller): void {
    if (this.confirmed.size >= MAX_CONFIRMED) this.confirmed.clear();
    this.confirmed.set(keyHashHex(caller.keyHash), { caller, at: performance.now() });
  }
}
