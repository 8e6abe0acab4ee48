// Stored responses belong to the account that created them. The provider keeps a stored response
// (and its output items) in the one account the gateway serves every tenant from, and lets
// anyone who names its id continue it or read its items. So the gateway records which account
// created each stored response it relays, and lets only that account name it again:
// previous_response_id, item_reference items, reasoning items without their encrypted content
// and image generation calls without their image (the provider fills those in from storage by
// id). Items passed back with their content carry the caller's own bytes and are not checked. An id the caller's account did not
// create is refused exactly as the provider refuses an id it does not know, before any hold or
// upstream call, so nobody can tell another account's id from one that never existed. The
// account owns them, not the key: a rotated key keeps them.
import type { Db } from '../db/db.ts';
import { gatewayError } from '../errors/errors.ts';

type Json = Record<string, unknown>;

/** OpenAI keeps stored responses for 30 days; a day more, so the gateway never forgets one first. */
export const RETENTION_DAYS = 31;
/** Rows one sweep deletes at most. */
const PRUNE_BATCH = 5_000;
/** Output item ids recorded per response at most (a response has a handful). */
const MAX_ITEMS = 1_000;

const rowsOf = (r: unknown): Json[] => (r as { rows: Json[] }).rows;

interface PendingRecord {
  rows: [string, string][];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class ResponseOwners {
  private readonly db: Db;
  private pending: PendingRecord[] = [];
  private flushing = false;

  constructor(db: Db) {
    this.db = db;
  }

  /**
   * Records that `accountId` created these ids (a response and its output items); resolves once
   * committed. One statement at a time per instance: records that arrive while one runs go
   * together in the next (group commit), so a statement per stored response at most.
   */
  record(accountId: string, ids: string[]): Promise<void> {
    const unique = [...new Set(ids)].slice(0, MAX_ITEMS + 1);
    if (unique.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.pending.push({ rows: unique.map((id) => [id, accountId]), resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0);
      try {
        await this.db.raw(
          `INSERT INTO response_owners (object_id, account_id)
           SELECT r->>0, r->>1 FROM jsonb_array_elements(CAST(? AS jsonb)) AS r
           ON CONFLICT DO NOTHING`,
          [JSON.stringify(batch.flatMap((b) => b.rows))],
        );
        for (const b of batch) b.resolve();
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    this.flushing = false;
  }

  /** The ids among `ids` created by the account of the live key whose hash is `keyHash`: one statement. */
  async ownedBy(keyHash: Buffer, ids: string[]): Promise<Set<string>> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT o.object_id FROM api_keys k JOIN response_owners o ON o.account_id = k.account_id
       WHERE k.key_hash = ? AND k.revoked_at IS NULL
         AND o.object_id IN (SELECT jsonb_array_elements_text(CAST(? AS jsonb)))`,
        [keyHash, JSON.stringify([...new Set(ids)])],
      ),
    );
    return new Set(rows.map((r) => r.object_id as string));
  }

  /** Forgets rows older than the provider's retention, a bounded batch at a time (the hold sweeper calls it). */
  async prune(): Promise<void> {
    await this.db.raw(
      `DELETE FROM response_owners WHERE ctid IN (
         SELECT ctid FROM response_owners WHERE created_at < now() - interval '${RETENTION_DAYS} days' LIMIT ${PRUNE_BATCH})`,
    );
  }
}

/** The ids a Responses request asks the provider to read from storage, which must be the caller's. */
export interface StoredRefs {
  previousResponseId?: string;
  itemIds: string[];
}

export function storedRefs(body: Json): StoredRefs | undefined {
  const refs: StoredRefs = { itemIds: [] };
  const prev = body.previous_response_id;
  if (prev != null) refs.previousResponseId = typeof prev === 'string' ? prev : JSON.stringify(prev);
  for (const item of (Array.isArray(body.input) ? body.input : []) as Json[]) {
    if (!item || typeof item !== 'object') continue;
    const byId =
      item.type === 'item_reference' ||
      (item.type === 'reasoning' && item.encrypted_content == null) ||
      (item.type === 'image_generation_call' && item.result == null);
    if (byId) refs.itemIds.push(typeof item.id === 'string' ? item.id : JSON.stringify(item.id ?? null));
  }
  return refs.previousResponseId !== undefined || refs.itemIds.length > 0 ? refs : undefined;
}

/** Ids a stored response makes nameable later: its own and its output items'. */
export function storedIds(response: Json): string[] {
  const ids = typeof response.id === 'string' ? [response.id] : [];
  for (const item of (Array.isArray(response.output) ? response.output : []) as Json[]) {
    if (item && typeof item.id === 'string') ids.push(item.id);
  }
  return ids;
}

/**
 * The provider's own answer for the first id in `refs` the caller's account did not create, or
 * undefined when it created them all.
 */
export async function unknownStoredRef(owners: ResponseOwners, keyHash: Buffer, refs: StoredRefs, body: Json) {
  const ids = [...(refs.previousResponseId !== undefined ? [refs.previousResponseId] : []), ...refs.itemIds];
  const owned = await owners.ownedBy(keyHash, ids);
  if (refs.previousResponseId !== undefined && !owned.has(refs.previousResponseId))
    return previousResponseNotFound(refs.previousResponseId);
  const item = refs.itemIds.find((id) => !owned.has(id));
  return item === undefined ? undefined : itemNotFound(item, body.store === false);
}

/** OpenAI's answer for a previous_response_id it does not know. */
export const previousResponseNotFound = (id: string) =>
  gatewayError({
    httpStatus: 400,
    type: 'invalid_request_error',
    code: 'previous_response_not_found',
    param: 'previous_response_id',
    message: `Previous response with id '${id.slice(0, 512)}' not found.`,
  });

/** OpenAI's answer for an input item it cannot find by id. */
export const itemNotFound = (id: string, storeFalse: boolean) =>
  gatewayError({
    httpStatus: 404,
    type: 'invalid_request_error',
    param: 'input',
    message: `Item with id '${id.slice(0, 512)}' not found.${storeFalse ? ' Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.' : ''}`,
  });
