// The pre-body key check's memory (KeyCheck.knownLive), which lets the HTTP facade pass a known
// key's request on without a call: it says yes only for keys a statement has confirmed, and
// only for a few seconds after that, revocations included.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDb } from '../src/db/db.ts';
import { Ledger } from '../src/billing/ledger.ts';
import { KeyCheck } from '../src/billing/key-check.ts';
import { generateKey } from '../src/billing/keys.ts';
import { billing, newKey } from './support/context.ts';

const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 2 });
const ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
afterAll(() => knex.destroy());

describe('KeyCheck.knownLive', () => {
  it('says yes only after a statement confirmed the key; never for malformed or unknown keys', async () => {
    const keys = new KeyCheck(ledger);
    const key = await newKey('1');
    expect(keys.knownLive(undefined)).toBe(false);
    expect(keys.knownLive('')).toBe(false);
    expect(keys.knownLive(`${key.apiKey.slice(0, -1)}x`)).toBe(false);
    // Live, but not yet confirmed by this check: the facade must ask.
    expect(keys.knownLive(key.apiKey)).toBe(false);
    expect(await keys.live(key.apiKey)).toBe(true);
    expect(keys.knownLive(key.apiKey)).toBe(true);

    const stranger = generateKey();
    expect(await keys.live(stranger)).toBe(false);
    expect(keys.knownLive(stranger)).toBe(false);
  });

  it('forgets a confirmed key within its 5 s window, so a revoked key is asked about again', async () => {
    const keys = new KeyCheck(ledger);
    const key = await newKey('1');
    expect(await keys.live(key.apiKey)).toBe(true);
    await billing().revokeKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
    const revokedAt = performance.now();
    // Until the window ends the memory may still say yes; money never moves on this answer.
    while (keys.knownLive(key.apiKey)) {
      expect(performance.now() - revokedAt).toBeLessThan(5_500);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await keys.live(key.apiKey)).toBe(false);
    expect(keys.knownLive(key.apiKey)).toBe(false);
  }, 15_000);
});
