// What an organisation's owners and admins bound besides money (docs/budgets.md#keys-teams-and-members):
// the models a key may call, and a team's or a member's requests in flight at once. Each change
// is audited and announced on the key channel for every key it concerns, so every instance's key
// cache (where the limits travel with the key) drops them at commit.
import type { Db } from '../db/db.ts';
import { badRequest, notFound } from '../errors/errors.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export const MAX_KEY_MODELS = 200;
const MAX_IN_FLIGHT_BOUND = 100_000;

/** The names checked: each 1 to 200 printable characters, at most MAX_KEY_MODELS, repeats dropped. */
export function checkModelList(models: readonly string[]): string[] {
  if (models.length > MAX_KEY_MODELS)
    throw badRequest(`a key lists at most ${MAX_KEY_MODELS} models`, 'invalid_value', 'models');
  const out = new Set<string>();
  for (const m of models) {
    const name = m.trim();
    if (name === '' || name.length > 200 || /[\p{Cc}\s]/u.test(name))
      throw badRequest(
        `a model is named by its id or an alias: 1 to 200 characters, no spaces; not ${JSON.stringify(m.slice(0, 40))}`,
        'invalid_value',
        'models',
      );
    out.add(name);
  }
  return [...out];
}

/** Sets the models a key of the organisation may call (none: any); 404 for a key that is not its. */
export async function setKeyModels(
  db: Db,
  actor: Actor,
  accountId: string,
  keyId: string,
  models: readonly string[],
): Promise<string[]> {
  const list = checkModelList(models);
  await db.transaction(async (trx) => {
    const before = rowsOf(
      await trx.raw(
        `SELECT allowed_models FROM api_keys WHERE account_id = ? AND id = ? AND revoked_at IS NULL FOR UPDATE`,
        [accountId, keyId],
      ),
    )[0];
    if (!before) throw notFound('key_not_found', 'No live key of this organisation has this id.', { param: 'key_id' });
    // The key row's trigger announces the change (migration 007).
    await trx.raw(`UPDATE api_keys SET allowed_models = CAST(? AS text[]) WHERE id = ?`, [
      list.length ? list : null,
      keyId,
    ]);
    await audit(trx, actor, {
      accountId,
      action: 'key.models_set',
      target: keyId,
      before: { models: before.allowed_models ?? 'any' },
      after: { models: list.length ? list : 'any' },
    });
  });
  return list;
}

/** Sets a team's or a member's bound on requests in flight (0: none); the keys it concerns are announced. */
export async function setInFlightBound(
  db: Db,
  actor: Actor,
  accountId: string,
  scope: string,
  scopeId: string,
  maxInFlight: number,
): Promise<string[]> {
  if (scope !== 'team' && scope !== 'member') throw badRequest('scope is team or member', 'invalid_value', 'scope');
  if (!Number.isInteger(maxInFlight) || maxInFlight < 0 || maxInFlight > MAX_IN_FLIGHT_BOUND)
    throw badRequest(`max_in_flight is from 0 (none) to ${MAX_IN_FLIGHT_BOUND}`, 'invalid_value', 'max_in_flight');
  return db.transaction(async (trx) => {
    const [update, keysOf] =
      scope === 'team'
        ? [
            `UPDATE teams t SET max_in_flight = ? FROM (SELECT max_in_flight AS was FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL FOR UPDATE) b
             WHERE t.account_id = ? AND t.id = ? RETURNING b.was`,
            'team_id',
          ]
        : [
            `UPDATE memberships m SET max_in_flight = ? FROM (SELECT max_in_flight AS was FROM memberships WHERE account_id = ? AND member_id = ? FOR UPDATE) b
             WHERE m.account_id = ? AND m.member_id = ? RETURNING b.was`,
            'member_id',
          ];
    const bound = maxInFlight === 0 ? null : maxInFlight;
    const was = rowsOf(await trx.raw(update, [bound, accountId, scopeId, accountId, scopeId]))[0];
    if (!was)
      throw notFound(`${scope}_not_found`, `No ${scope} of this organisation has this id.`, { param: 'scope_id' });
    const keys = rowsOf(
      await trx.raw(
        `SELECT id, pg_notify('api_keys_changed', encode(key_hash, 'hex')) FROM api_keys
         WHERE account_id = ? AND ${keysOf} = ? AND revoked_at IS NULL`,
        [accountId, scopeId],
      ),
    );
    await audit(trx, actor, {
      accountId,
      action: `${scope}.in_flight_set`,
      target: scopeId,
      before: { max_in_flight: was.was ?? 0 },
      after: { max_in_flight: maxInFlight },
    });
    return keys.map((k) => k.id as string);
  });
}
