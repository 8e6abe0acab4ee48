// Members of an organisation: listing them, changing a role, removing one (docs/organisations.md).
// A removal is one transaction: the membership goes (and with it the member's team places), their
// personal keys of the organisation are revoked or handed over, their console sessions in it end,
// and the audit log says so. Key rows announce every change (migration 007), so every instance's
// key cache drops them at once; a revoked key is refused by the next hold on any instance.
import type { Db } from '../db/db.ts';
import { notFound } from '../errors/errors.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';
import { removalRefusal, roleChangeRefusal, ruleBroken, type Role } from './roles.ts';
import { decodeCursor, page, pageSize } from './paging.ts';
import { badRequest, gatewayError } from '../errors/errors.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export interface MemberRow {
  memberId: string;
  name: string;
  role: Role;
  teamIds: string[];
  liveKeys: number;
  joinedAt: Date;
  telegram: boolean;
  atMicros: string;
}

export const memberNotFound = () => notFound('member_not_found', 'No member of this organisation has this id.');

const forbidden = (message: string) =>
  gatewayError({ httpStatus: 403, type: 'permission_error', code: 'not_allowed', message });

/** The organisation's members, longest-standing first (`query`: text in the name; `teamId`: that team's only). */
export async function listMembers(
  db: Db,
  accountId: string,
  opts: { query: string; pageSize: number; cursor: string; memberId?: string; teamId?: string },
): Promise<{ members: MemberRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize);
  const after = decodeCursor(opts.cursor);
  const q = opts.query.trim();
  if (q.length > 200) throw badRequest('query is longer than 200 characters', 'invalid_value', 'query');
  const rows = rowsOf(
    await db.raw(
      `SELECT m.member_id, p.name, m.role, m.created_at, p.telegram_user IS NOT NULL AS telegram,
         (extract(epoch FROM m.created_at) * 1000000)::bigint::text AS at_us,
         ARRAY(SELECT tm.team_id FROM team_members tm JOIN teams t ON t.id = tm.team_id AND t.deleted_at IS NULL
               WHERE tm.account_id = m.account_id AND tm.member_id = m.member_id ORDER BY tm.team_id) AS team_ids,
         (SELECT count(*) FROM api_keys k WHERE k.account_id = m.account_id AND k.member_id = m.member_id
            AND k.revoked_at IS NULL)::int AS live_keys
       FROM memberships m JOIN members p ON p.id = m.member_id
       WHERE m.account_id = ? AND (? = '' OR p.name ILIKE ?) AND (? = '' OR m.member_id = ?)
         AND (? = '' OR EXISTS (SELECT 1 FROM team_members tm
                                WHERE tm.account_id = m.account_id AND tm.team_id = ? AND tm.member_id = m.member_id))
         AND (CAST(? AS bigint) IS NULL OR (m.created_at, m.member_id) > ((TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond'), CAST(? AS text)))
       ORDER BY m.created_at, m.member_id LIMIT ?`,
      [
        accountId,
        q,
        `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
        opts.memberId ?? '',
        opts.memberId ?? '',
        opts.teamId ?? '',
        opts.teamId ?? '',
        after?.atMicros ?? null,
        after?.atMicros ?? null,
        after?.id ?? '',
        size + 1,
      ],
    ),
  );
  const members = rows.map((r) => ({
    memberId: r.member_id as string,
    name: r.name as string,
    role: r.role as Role,
    teamIds: r.team_ids as string[],
    liveKeys: Number(r.live_keys),
    joinedAt: r.created_at as Date,
    telegram: Boolean(r.telegram),
    atMicros: r.at_us as string,
  }));
  const p = page(members, size, (m) => ({ atMicros: m.atMicros, id: m.memberId }));
  return { members: p.rows, nextCursor: p.nextCursor };
}

export async function memberOf(db: Db, accountId: string, memberId: string): Promise<MemberRow> {
  const found = (await listMembers(db, accountId, { query: '', pageSize: 1, cursor: '', memberId })).members[0];
  if (!found) throw memberNotFound();
  return found;
}

/** The last owner demoted or removed: the deferred trigger of migration 023 said so at commit. */
function lastOwner(err: unknown): boolean {
  return (err as { constraint?: string }).constraint === 'memberships_keep_an_owner';
}

const lastOwnerRefusal = () =>
  ruleBroken('last_owner', 'An organisation keeps at least one owner: make another member an owner first.');

/** `actorRole`: the changer's own role ('operator' for the operator). */
export async function setRole(
  db: Db,
  actor: Actor,
  actorRole: Role | 'operator',
  accountId: string,
  memberId: string,
  role: Role,
): Promise<void> {
  try {
    await db.transaction(async (trx) => {
      const r = rowsOf(
        await trx.raw(`SELECT role FROM memberships WHERE account_id = ? AND member_id = ? FOR UPDATE`, [
          accountId,
          memberId,
        ]),
      )[0];
      if (!r) throw memberNotFound();
      const from = r.role as Role;
      if (from === role) return;
      const refusal = roleChangeRefusal(actorRole, from, role);
      if (refusal) throw forbidden(`Not allowed: ${refusal}.`);
      await trx.raw(`UPDATE memberships SET role = ? WHERE account_id = ? AND member_id = ?`, [
        role,
        accountId,
        memberId,
      ]);
      // The bot lets an account's owner (accounts.owner) reach all its keys and top it up: an
      // owner no longer, their Telegram user loses that with the role, as on removal.
      if (from === 'owner')
        await trx.raw(
          `UPDATE accounts SET owner = NULL WHERE id = ? AND owner = (SELECT telegram_user FROM members WHERE id = ?)`,
          [accountId, memberId],
        );
      await audit(trx, actor, {
        accountId,
        action: 'member.role_changed',
        target: memberId,
        before: { role: from },
        after: { role },
      });
    });
  } catch (err) {
    if (lastOwner(err)) throw lastOwnerRefusal();
    throw err;
  }
}

export interface Removal {
  keysRevoked: number;
  keysHandedOver: number;
  sessionsEnded: number;
  /** The keys that changed (for this instance's caches). */
  keyIds: string[];
}

/** Removes a member; their live personal keys of the organisation are revoked, or handed to `to`. */
export async function removeMember(
  db: Db,
  actor: Actor,
  actorRole: Role | 'operator',
  accountId: string,
  memberId: string,
  to: { memberId?: string; teamId?: string },
): Promise<Removal> {
  try {
    return await db.transaction(async (trx) => {
      const r = rowsOf(
        await trx.raw(
          `SELECT m.role, p.telegram_user FROM memberships m JOIN members p ON p.id = m.member_id
           WHERE m.account_id = ? AND m.member_id = ? FOR UPDATE OF m`,
          [accountId, memberId],
        ),
      )[0];
      if (!r) throw memberNotFound();
      const refusal = removalRefusal(actorRole, r.role as Role);
      if (refusal) throw forbidden(`Not allowed: ${refusal}.`);
      await checkHeir(trx, accountId, memberId, to);
      const keys = rowsOf(
        to.memberId || to.teamId
          ? await trx.raw(
              `UPDATE api_keys SET member_id = CAST(? AS text), team_id = CAST(? AS text)
               WHERE account_id = ? AND member_id = ? AND revoked_at IS NULL RETURNING id`,
              [to.memberId || null, to.teamId || null, accountId, memberId],
            )
          : await trx.raw(
              `UPDATE api_keys SET revoked_at = now() WHERE account_id = ? AND member_id = ? AND revoked_at IS NULL RETURNING id`,
              [accountId, memberId],
            ),
      ).map((k) => k.id as string);
      const ended = rowsOf(
        await trx.raw(
          `UPDATE console_sessions SET ended_at = now() WHERE member_id = ? AND account_id = ? AND ended_at IS NULL RETURNING 1`,
          [memberId, accountId],
        ),
      ).length;
      await trx.raw(`DELETE FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, memberId]);
      // The bot knew the account as this user's (accounts.owner): it is theirs no longer.
      if (r.telegram_user)
        await trx.raw(`UPDATE accounts SET owner = NULL WHERE id = ? AND owner = ?`, [
          accountId,
          r.telegram_user as string,
        ]);
      const handed = Boolean(to.memberId || to.teamId);
      await audit(trx, actor, {
        accountId,
        action: 'member.removed',
        target: memberId,
        before: { role: r.role },
        after: handed
          ? { keys_handed_to: to.memberId ? `member:${to.memberId}` : `team:${to.teamId}`, keys: keys.length }
          : { keys_revoked: keys.length },
      });
      return {
        keysRevoked: handed ? 0 : keys.length,
        keysHandedOver: handed ? keys.length : 0,
        sessionsEnded: ended,
        keyIds: keys,
      };
    });
  } catch (err) {
    if (lastOwner(err)) throw lastOwnerRefusal();
    throw err;
  }
}

/** Whoever takes over a leaving member's keys is of the same organisation (and not the leaver). */
async function checkHeir(
  trx: Pick<Db, 'raw'>,
  accountId: string,
  leaving: string,
  to: { memberId?: string; teamId?: string },
): Promise<void> {
  if (to.memberId && to.teamId)
    throw badRequest('hand the keys to a member or to a team, not both', 'invalid_value', 'hand_keys_to_team_id');
  if (to.memberId) {
    if (to.memberId === leaving)
      throw badRequest('the keys cannot be handed to the member who leaves', 'invalid_value', 'hand_keys_to_member_id');
    const ok = rowsOf(
      await trx.raw(`SELECT 1 FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, to.memberId]),
    );
    if (ok.length === 0) throw memberNotFound();
  }
  if (to.teamId) {
    const ok = rowsOf(
      await trx.raw(`SELECT 1 FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL`, [
        accountId,
        to.teamId,
      ]),
    );
    if (ok.length === 0) throw notFound('team_not_found', 'No team of this organisation has this id.');
  }
}
