// Is this a live gateway key? Asked before the gateway spends memory or CPU on a request (its
// body, an upload, JSON parsing, the tokenizer), so a forged key, which passes the public
// checksum, costs one indexed lookup and nothing else.
//
// The answer needs no statement for keys the key cache holds, or that were confirmed in the
// last few seconds: this check only decides whether the gateway reads a request. Money never
// moves on it: every hold, lease and rate-limit statement checks the key again, so a key
// revoked a moment ago is still refused before anything is held or charged.
import type { KeyCache } from './key-cache.ts';
import { isWellFormedKey } from './keys.ts';
import type { Ledger } from './ledger.ts';

/** How long a confirmed key is taken as live without asking again. */
const CONFIRMED_MS = 5_000;
const MAX_CONFIRMED = 10_000;

export class KeyCheck {
  private readonly ledger: Ledger;
  private readonly cache: KeyCache | undefined;
  private readonly confirmed = new Map<string, number>();

  constructor(ledger: Ledger, cache?: KeyCache) {
    this.ledger = ledger;
    this.cache = cache;
  }

  async live(apiKey: string | undefined): Promise<boolean> {
    if (!apiKey || !isWellFormedKey(apiKey)) return false;
    const hash = this.ledger.hash(apiKey);
    const hex = hash.toString('hex');
    if (this.remembered(hex)) return true;
    this.cache?.noteDatabaseLookup();
    if (!(await this.ledger.findKey({ apiKey }))) {
      this.confirmed.delete(hex);
      return false;
    }
    this.remember(hash);
    return true;
  }

  /**
   * `live`'s answer when it needs no statement: true for a key the cache holds or a check
   * confirmed in the last few seconds; false means "ask `live`". Synchronous, so the HTTP facade
   * lets a known key's request through without a promise or a call.
   */
  knownLive(apiKey: string | undefined): boolean {
    return !!apiKey && isWellFormedKey(apiKey) && this.remembered(this.ledger.hash(apiKey).toString('hex'));
  }

  private remembered(keyHashHex: string): boolean {
    if (this.cache?.peek(keyHashHex)) return true;
    const at = this.confirmed.get(keyHashHex);
    return at !== undefined && performance.now() - at < CONFIRMED_MS;
  }

  /** A statement has just found this key live (e.g. a rate-limit admission). */
  remember(keyHash: Buffer): void {
    if (this.confirmed.size >= MAX_CONFIRMED) this.confirmed.clear();
    this.confirmed.set(keyHash.toString('hex'), performance.now());
  }
}
