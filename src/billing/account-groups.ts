// Account price groups (docs/billing.md#account-groups): which markups an account's requests
// pay. A request takes its group from the key check at the edge, so a change has to reach what
// every instance remembers of the account's keys. It is announced on the key cache's channel for
// each of them in the change's own transaction, as migration 007's trigger announces a change to
// a key row, so every key cache drops them at commit; the key check's own memory of a key lapses
// within 5 s (src/billing/key-check.ts). The instance the change is made through forgets them at
// once.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { KeyRef, SetAccountGroupRequest, SetAccountGroupResponseSchema } from '../gen/gateway/v1/billing_pb.js';
import type { Db } from '../db/db.ts';
import { badRequest } from '../errors/errors.ts';
import type { KeyCheck } from './key-check.ts';
import { KEY_CHANNEL } from './key-cache.ts';
import type { KeyRow } from './ledger.ts';
import type { RateLimiter } from './rate-limits.ts';

/** Lower-case letters, digits, '-' and '_', at most 32; "" is the default group. */
export const PRICE_GROUP = /^[a-z0-9_-]{0,32}$/;

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/**
 * Puts an account in a price group and announces each of its live keys. The account row is
 * locked first, so a key being added to the account (a rotation) either commits before and is
 * announced, or waits and reads the new group. Returns the keys' ids; undefined for no account.
 */
export async function setPriceGroup(db: Db, accountId: string, group: string): Promise<string[] | undefined> {
  return db.transaction(async (trx) => {
    const found = rowsOf(await trx.raw('SELECT id FROM accounts WHERE id = ? FOR UPDATE', [accountId]));
    if (found.length === 0) return undefined;
    await trx.raw('UPDATE accounts SET price_group = ? WHERE id = ?', [group, accountId]);
    const keys = rowsOf(
      await trx.raw(
        `SELECT id, pg_notify(?, encode(key_hash, 'hex')) FROM api_keys WHERE account_id = ? AND revoked_at IS NULL`,
        [KEY_CHANNEL, accountId],
      ),
    );
    return keys.map((k) => k.id as string);
  });
}

export interface AccountGroupDeps {
  db: Db;
  limiter: RateLimiter;
  keys: KeyCheck;
  /** The service's key lookup: 404 key_not_found for no key (or another owner's). */
  resolve: (ref: KeyRef | undefined, includeRevoked?: boolean) => Promise<KeyRow>;
}

/** BillingService.SetAccountGroup. */
export async function setAccountGroup(
  req: SetAccountGroupRequest,
  deps: AccountGroupDeps,
): Promise<MessageInitShape<typeof SetAccountGroupResponseSchema>> {
  if (!PRICE_GROUP.test(req.group))
    throw badRequest(
      `group must be at most 32 lower-case letters, digits, '-' or '_' ("" for the default group), not ${JSON.stringify(req.group)}`,
      'invalid_value',
      'group',
    );
  // The account is what is grouped: a revoked key still names it, as for a top-up.
  const key = await deps.resolve(req.key, true);
  const keyIds = await setPriceGroup(deps.db, key.accountId, req.group);
  for (const id of keyIds ?? []) {
    deps.limiter.keyChanged(id);
    deps.keys.forget(id);
  }
  return { accountId: key.accountId, group: req.group };
}
