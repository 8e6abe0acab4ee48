// Invitations (docs/organisations.md#invitations): a one-time link an admin makes, expiring,
// single use and revocable. Only the SHA-256 of its token is stored (the token is 256 random
// bits), so a copy of the table invites nobody. Redeeming is one UPDATE that claims the row only
// while it is open, so of any number of concurrent tries exactly one wins; the member it makes
// (or the member who redeems it) joins in the same transaction.
import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/db.ts';
import { badRequest, notFound } from '../errors/errors.ts';
import { newId } from '../billing/ids.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';
import { decodeCursor, page, pageSize } from './paging.ts';
import type { Role } from './roles.ts';
import { liveTeam, teamNotFound } from './teams.ts';
import { memberByTelegram } from './organisations.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** What an invitation token looks like: `inv-` and 43 base64url characters. */
const TOKEN_SHAPE = /^inv-[A-Za-z0-9_-]{43}$/;
const digest = (token: string) => createHash('sha256').update(token, 'utf8').digest();

export const DEFAULT_VALID_HOURS = 72;
export const MAX_VALID_HOURS = 720;

export type InvitationState = 'open' | 'used' | 'expired' | 'revoked';

export interface InvitationRow {
  id: string;
  role: Role;
  teamId: string;
  note: string;
  createdBy: string;
  createdAt: Date;
  expiresAt: Date;
  state: InvitationState;
  usedBy: string;
  atMicros: string;
}

const COLUMNS = `id, role, COALESCE(team_id, '') AS team_id, note, created_by, created_at, expires_at, used_by,
  (extract(epoch FROM created_at) * 1000000)::bigint::text AS at_us,
  CASE WHEN used_at IS NOT NULL THEN 'used' WHEN revoked_at IS NOT NULL THEN 'revoked'
       WHEN expires_at <= now() THEN 'expired' ELSE 'open' END AS state`;

const rowOf = (r: Row): InvitationRow => ({
  id: r.id as string,
  role: r.role as Role,
  teamId: r.team_id as string,
  note: r.note as string,
  createdBy: r.created_by as string,
  createdAt: r.created_at as Date,
  expiresAt: r.expires_at as Date,
  state: r.state as InvitationState,
  usedBy: (r.used_by as string | null) ?? '',
  atMicros: r.at_us as string,
});

export const invitationNotFound = () =>
  notFound('invitation_not_found', 'No invitation of this organisation has this id.');

/** One answer for a token that is malformed, unknown, used, expired or revoked: none can be told apart. */
export const invitationNotUsable = () =>
  notFound(
    'invitation_not_usable',
    'This invitation link is not valid: it was used, revoked or has expired, or it was mistyped. Ask for a new one.',
  );

export async function createInvitation(
  db: Db,
  actor: Actor,
  accountId: string,
  opts: { role: Role; teamId: string; note: string; validHours: number; createdBy: string },
): Promise<{ invitation: InvitationRow; token: string }> {
  const hours = opts.validHours <= 0 ? DEFAULT_VALID_HOURS : opts.validHours;
  if (hours > MAX_VALID_HOURS)
    throw badRequest(`valid_hours is at most ${MAX_VALID_HOURS} (30 days)`, 'invalid_value', 'valid_hours');
  const token = `inv-${randomBytes(32).toString('base64url')}`;
  const id = newId('inv');
  return db.transaction(async (trx) => {
    if (opts.teamId && !(await liveTeam(trx, accountId, opts.teamId))) throw teamNotFound();
    const r = rowsOf(
      await trx.raw(
        `INSERT INTO invitations (id, token_hash, account_id, role, team_id, note, created_by, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, now() + make_interval(hours => ?)) RETURNING ${COLUMNS}`,
        [id, digest(token), accountId, opts.role, opts.teamId || null, opts.note, opts.createdBy, hours],
      ),
    )[0]!;
    await audit(trx, actor, {
      accountId,
      action: 'invitation.created',
      target: id,
      after: { role: opts.role, team: opts.teamId || undefined, hours, note: opts.note || undefined },
    });
    return { invitation: rowOf(r), token };
  });
}

export async function listInvitations(
  db: Db,
  accountId: string,
  opts: { pageSize: number; cursor: string },
): Promise<{ invitations: InvitationRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize);
  const after = decodeCursor(opts.cursor);
  const rows = rowsOf(
    await db.raw(
      `SELECT ${COLUMNS} FROM invitations WHERE account_id = ?
         AND (CAST(? AS bigint) IS NULL OR (created_at, id) < ((TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond'), CAST(? AS text)))
       ORDER BY created_at DESC, id DESC LIMIT ?`,
      [accountId, after?.atMicros ?? null, after?.atMicros ?? null, after?.id ?? '', size + 1],
    ),
  );
  const p = page(rows.map(rowOf), size, (i) => ({ atMicros: i.atMicros, id: i.id }));
  return { invitations: p.rows, nextCursor: p.nextCursor };
}

/** Revokes an open invitation; a used, expired or revoked one is answered as it is. */
export async function revokeInvitation(db: Db, actor: Actor, accountId: string, id: string): Promise<InvitationRow> {
  return db.transaction(async (trx) => {
    const revoked = rowsOf(
      await trx.raw(
        `UPDATE invitations SET revoked_at = now()
         WHERE account_id = ? AND id = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
         RETURNING ${COLUMNS}`,
        [accountId, id],
      ),
    )[0];
    if (revoked) {
      await audit(trx, actor, { accountId, action: 'invitation.revoked', target: id });
      return rowOf(revoked);
    }
    const r = rowsOf(
      await trx.raw(`SELECT ${COLUMNS} FROM invitations WHERE account_id = ? AND id = ?`, [accountId, id]),
    )[0];
    if (!r) throw invitationNotFound();
    return rowOf(r);
  });
}

export interface Redeemed {
  accountId: string;
  organisationName: string;
  memberId: string;
  role: Role;
}

/**
 * Redeems `token`: the member `as` (a member redeeming it themselves, or a Telegram user's
 * member, made if there is none) or a new member named `name` joins with the invitation's role
 * and team. A member already in the organisation keeps their role; the invitation is used all
 * the same. Any failure leaves the invitation open.
 */
export async function redeemInvitation(
  db: Db,
  actor: Actor,
  token: string,
  who: { memberId?: string; telegramUser?: string; name: string },
): Promise<Redeemed> {
  if (!TOKEN_SHAPE.test(token)) throw invitationNotUsable();
  return db.transaction(async (trx) => {
    const memberId = await redeemer(trx, who);
    const inv = rowsOf(
      await trx.raw(
        `UPDATE invitations SET used_at = now(), used_by = ?
         WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
         RETURNING id, account_id, role, team_id`,
        [memberId, digest(token)],
      ),
    )[0];
    if (!inv) throw invitationNotUsable();
    const accountId = inv.account_id as string;
    const joined = rowsOf(
      await trx.raw(
        `INSERT INTO memberships (account_id, member_id, role) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING role`,
        [accountId, memberId, inv.role as string],
      ),
    )[0];
    if (inv.team_id && (await liveTeam(trx, accountId, inv.team_id as string)))
      await trx.raw(
        `INSERT INTO team_members (account_id, team_id, member_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
        [accountId, inv.team_id as string, memberId],
      );
    const role = joined
      ? (inv.role as Role)
      : (rowsOf(
          await trx.raw(`SELECT role FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, memberId]),
        )[0]!.role as Role);
    await audit(
      trx,
      actor,
      {
        accountId,
        action: joined ? 'member.added' : 'invitation.used_by_member',
        target: memberId,
        after: { role, invitation: inv.id, team: (inv.team_id as string | null) ?? undefined },
      },
      `member:${memberId}`,
    );
    const name = rowsOf(await trx.raw(`SELECT label FROM accounts WHERE id = ?`, [accountId]))[0]!.label as string;
    return { accountId, organisationName: name, memberId, role };
  });
}

/** Who redeems: the member given, the Telegram user's member (made now if new), or a new member. */
async function redeemer(
  trx: Pick<Db, 'raw'>,
  who: { memberId?: string; telegramUser?: string; name: string },
): Promise<string> {
  if (who.memberId) return who.memberId;
  if (who.telegramUser) {
    const found = await memberByTelegram(trx, who.telegramUser);
    if (found) return found;
  }
  if (!who.name)
    throw badRequest('name is required: the name the new member goes by', 'missing_required_parameter', 'name');
  const id = newId('mem');
  await trx.raw(`INSERT INTO members (id, name, telegram_user) VALUES (?, ?, ?)`, [
    id,
    who.name,
    who.telegramUser || null,
  ]);
  return id;
}
