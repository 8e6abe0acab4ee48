// Teams of an organisation (docs/organisations.md#teams): a name, members (each a member of the
// organisation: the composite foreign keys of migration 023 make any other row impossible) and
// service keys of their own. A deleted team keeps its row, as its keys and usage rows name it.
import type { Db } from '../db/db.ts';
import { badRequest, conflict, notFound } from '../errors/errors.ts';
import { newId } from '../billing/ids.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';
import { memberNotFound } from './members.ts';
import { decodeCursor, page, pageSize } from './paging.ts';
import { ruleBroken } from './roles.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
type Runner = Pick<Db, 'raw'>;

export interface TeamRow {
  teamId: string;
  name: string;
  members: number;
  liveKeys: number;
  createdAt: Date;
  atMicros: string;
}

export const teamNotFound = () => notFound('team_not_found', 'No team of this organisation has this id.');
const nameTaken = (name: string) =>
  conflict('team_name_taken', `This organisation already has a team named '${name}'.`, { param: 'name' });
const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

export async function listTeams(
  db: Db,
  accountId: string,
  opts: { query: string; pageSize: number; cursor: string; teamId?: string },
): Promise<{ teams: TeamRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize);
  const after = decodeCursor(opts.cursor);
  const q = opts.query.trim();
  if (q.length > 200) throw badRequest('query is longer than 200 characters', 'invalid_value', 'query');
  const rows = rowsOf(
    await db.raw(
      `SELECT t.id, t.name, t.created_at, (extract(epoch FROM t.created_at) * 1000000)::bigint::text AS at_us,
         (SELECT count(*) FROM team_members tm WHERE tm.team_id = t.id)::int AS members,
         (SELECT count(*) FROM api_keys k WHERE k.team_id = t.id AND k.revoked_at IS NULL)::int AS live_keys
       FROM teams t
       WHERE t.account_id = ? AND t.deleted_at IS NULL AND (? = '' OR t.name ILIKE ?) AND (? = '' OR t.id = ?)
         AND (CAST(? AS bigint) IS NULL OR (t.created_at, t.id) > ((TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond'), CAST(? AS text)))
       ORDER BY t.created_at, t.id LIMIT ?`,
      [
        accountId,
        q,
        `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
        opts.teamId ?? '',
        opts.teamId ?? '',
        after?.atMicros ?? null,
        after?.atMicros ?? null,
        after?.id ?? '',
        size + 1,
      ],
    ),
  );
  const teams = rows.map((r) => ({
    teamId: r.id as string,
    name: r.name as string,
    members: Number(r.members),
    liveKeys: Number(r.live_keys),
    createdAt: r.created_at as Date,
    atMicros: r.at_us as string,
  }));
  const p = page(teams, size, (t) => ({ atMicros: t.atMicros, id: t.teamId }));
  return { teams: p.rows, nextCursor: p.nextCursor };
}

export async function teamOf(db: Db, accountId: string, teamId: string): Promise<TeamRow> {
  const t = (await listTeams(db, accountId, { query: '', pageSize: 1, cursor: '', teamId })).teams[0];
  if (!t) throw teamNotFound();
  return t;
}

/** Whether the team is a live team of the organisation. */
export async function liveTeam(db: Runner, accountId: string, teamId: string): Promise<boolean> {
  return (
    rowsOf(
      await db.raw(`SELECT 1 FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL`, [accountId, teamId]),
    ).length > 0
  );
}

export async function createTeam(db: Db, actor: Actor, accountId: string, name: string): Promise<string> {
  const id = newId('team');
  try {
    await db.transaction(async (trx) => {
      await trx.raw(`INSERT INTO teams (id, account_id, name) VALUES (?, ?, ?)`, [id, accountId, name]);
      await audit(trx, actor, { accountId, action: 'team.created', target: id, after: { name } });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(name);
    throw err;
  }
  return id;
}

export async function renameTeam(db: Db, actor: Actor, accountId: string, teamId: string, name: string): Promise<void> {
  try {
    await db.transaction(async (trx) => {
      const r = rowsOf(
        await trx.raw(`SELECT name FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL FOR UPDATE`, [
          accountId,
          teamId,
        ]),
      )[0];
      if (!r) throw teamNotFound();
      if (r.name === name) return;
      await trx.raw(`UPDATE teams SET name = ? WHERE id = ?`, [name, teamId]);
      await audit(trx, actor, {
        accountId,
        action: 'team.renamed',
        target: teamId,
        before: { name: r.name },
        after: { name },
      });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(name);
    throw err;
  }
}

/** Deletes a team without live keys (its members stay members of the organisation). */
export async function deleteTeam(db: Db, actor: Actor, accountId: string, teamId: string): Promise<void> {
  await db.transaction(async (trx) => {
    const r = rowsOf(
      await trx.raw(`SELECT name FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL FOR UPDATE`, [
        accountId,
        teamId,
      ]),
    )[0];
    if (!r) throw teamNotFound();
    const keys = rowsOf(
      await trx.raw(`SELECT count(*)::int AS n FROM api_keys WHERE team_id = ? AND revoked_at IS NULL`, [teamId]),
    )[0]!.n as number;
    if (keys > 0)
      throw ruleBroken(
        'team_has_keys',
        `The team still has ${keys} live key${keys === 1 ? '' : 's'}: revoke them first, so nothing keeps calling in its name.`,
      );
    await trx.raw(`DELETE FROM team_members WHERE team_id = ?`, [teamId]);
    await trx.raw(`UPDATE teams SET deleted_at = now() WHERE id = ?`, [teamId]);
    await audit(trx, actor, { accountId, action: 'team.deleted', target: teamId, before: { name: r.name } });
  });
}

/** Adds a member of the organisation to one of its teams; false when they were in it already. */
export async function addTeamMember(
  db: Db,
  actor: Actor,
  accountId: string,
  teamId: string,
  memberId: string,
): Promise<boolean> {
  return db.transaction(async (trx) => {
    if (!(await liveTeam(trx, accountId, teamId))) throw teamNotFound();
    const member = rowsOf(
      await trx.raw(`SELECT 1 FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, memberId]),
    );
    if (member.length === 0) throw memberNotFound();
    const added = rowsOf(
      await trx.raw(
        `INSERT INTO team_members (account_id, team_id, member_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1`,
        [accountId, teamId, memberId],
      ),
    ).length;
    if (added) await audit(trx, actor, { accountId, action: 'team.member_added', target: teamId, after: { memberId } });
    return added > 0;
  });
}

export async function removeTeamMember(
  db: Db,
  actor: Actor,
  accountId: string,
  teamId: string,
  memberId: string,
): Promise<boolean> {
  return db.transaction(async (trx) => {
    if (!(await liveTeam(trx, accountId, teamId))) throw teamNotFound();
    const removed = rowsOf(
      await trx.raw(`DELETE FROM team_members WHERE account_id = ? AND team_id = ? AND member_id = ? RETURNING 1`, [
        accountId,
        teamId,
        memberId,
      ]),
    ).length;
    if (removed)
      await audit(trx, actor, { accountId, action: 'team.member_removed', target: teamId, before: { memberId } });
    return removed > 0;
  });
}
