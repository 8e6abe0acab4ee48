// The edge's key check (KeyCheck): it names the caller of a live key (its key and account), and
// its memory (KeyCheck.known), which lets the HTTP facade pass a known key's request on without a
// statement, answers only for keys a statement has confirmed, and only for a few seconds after
// that, revocations included.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDb } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { KeyCheck } from '../../src/billing/key-check.ts';
import { generateKey, visiblePrefix } from '../../src/billing/keys.ts';
import { billing, db, mistyped, newKey } from '../support/context.ts';

const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 2 });
const ledger = new Ledger(knex, await Ledger.loadSecret(knex, undefined));
afterAll(() => knex.destroy());

describe('KeyCheck', () => {
  it("names a live key's caller (key, account, prefix, hash, price group, member and team); remembers it only after a statement confirmed the key; never malformed or unknown keys", async () => {
    const keys = new KeyCheck(ledger);
    const key = await newKey('1');
    expect(keys.known(undefined)).toBeUndefined();
    expect(keys.known('')).toBeUndefined();
    expect(keys.known(mistyped(key.apiKey))).toBeUndefined();
    // Live, but not yet confirmed by this check: the facade must ask.
    expect(keys.known(key.apiKey)).toBeUndefined();
    const caller = await keys.authenticate(key.apiKey);
    // A key made by CreateKey is its account's owner's (an organisation of one): a member's, no team's.
    const owner = await db().query(`SELECT member_id FROM memberships WHERE account_id = $1 AND role = 'owner'`, [
      key.accountId,
    ]);
    expect(caller).toEqual({
      keyHash: ledger.hash(key.apiKey),
      keyId: key.keyId,
      accountId: key.accountId,
      prefix: visiblePrefix(key.apiKey),
      group: '',
      memberId: owner.rows[0].member_id,
      teamId: '',
    });
    expect(keys.known(key.apiKey)).toEqual(caller);

    const stranger = generateKey();
    expect(await keys.authenticate(stranger)).toBeUndefined();
    expect(keys.known(stranger)).toBeUndefined();
  });

  it('forgets at once a key this instance rotated or revoked (forget), and no other key', async () => {
    const keys = new KeyCheck(ledger);
    const [a, b] = [await newKey('1'), await newKey('1')];
    await keys.authenticate(a.apiKey);
    await keys.authenticate(b.apiKey);
    keys.forget(a.keyId);
    expect(keys.known(a.apiKey)).toBeUndefined();
    expect(keys.known(b.apiKey)?.keyId).toBe(b.keyId);
  });

  it('forgets a confirmed key within its 5 s window, so a revoked key is asked about again', async () => {
    const keys = new KeyCheck(ledger);
    const key = await newKey('1');
    expect(await keys.authenticate(key.apiKey)).toBeDefined();
    await billing().revokeKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
    const revokedAt = performance.now();
    // Until the window ends the memory may still answer; money never moves on this answer.
    while (keys.known(key.apiKey)) {
      expect(performance.now() - revokedAt).toBeLessThan(5_500);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await keys.authenticate(key.apiKey)).toBeUndefined();
    expect(keys.known(key.apiKey)).toBeUndefined();
  }, 15_000);
});
