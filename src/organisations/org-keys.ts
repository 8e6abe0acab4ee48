// An organisation's keys (docs/organisations.md#keys): each a member's (personal) or a team's (a
// service key no single person owns). A key is made, rotated and revoked as the ledger makes keys
// (an HMAC of the secret stored, the secret shown once); what this adds is whose it is, and the
// audit log. A key of another organisation is answered as no key at all.
import type { Db } from '../db/db.ts';
import { notFound } from '../errors/errors.ts';
import { generateKey, visiblePrefix } from '../billing/keys.ts';
import { newId } from '../billing/ids.ts';
import type { Ledger } from '../billing/ledger.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';
import { decodeCursor, page, pageSize } from './paging.ts';
import { memberNotFound } from './members.ts';
import { teamNotFound } from './teams.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export interface OrgKeyRow {
  keyId: string;
  prefix: string;
  name: string;
  memberId: string;
  memberName: string;
  teamId: string;
  teamName: string;
  createdAt: Date;
  revokedAt: Date | null;
  atMicros: string;
}

export const orgKeyNotFound = () => notFound('key_not_found', 'No key of this organisation has this id.');

const COLUMNS = `k.id, k.prefix, k.name, COALESCE(k.member_id, '') AS member_id, COALESCE(p.name, '') AS member_name,
  COALESCE(k.team_id, '') AS team_id, COALESCE(t.name, '') AS team_name, k.created_at, k.revoked_at,
  (extract(epoch FROM k.created_at) * 1000000)::bigint::text AS at_us`;
const FROM = `api_keys k LEFT JOIN members p ON p.id = k.member_id LEFT JOIN teams t ON t.id = k.team_id`;

const rowOf = (r: Row): OrgKeyRow => ({
  keyId: r.id as string,
  prefix: r.prefix as string,
  name: r.name as string,
  memberId: r.member_id as string,
  memberName: r.member_name as string,
  teamId: r.team_id as string,
  teamName: r.team_name as string,
  createdAt: r.created_at as Date,
  revokedAt: (r.revoked_at as Date | null) ?? null,
  atMicros: r.at_us as string,
});

/** The organisation's keys, newest first; only a member's or a team's when asked. */
export async function listOrgKeys(
  db: Db,
  accountId: string,
  opts: { memberId: string; teamId: string; includeRevoked: boolean; pageSize: number; cursor: string; keyId?: string },
): Promise<{ keys: OrgKeyRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize);
  const after = decodeCursor(opts.cursor);
  const rows = rowsOf(
    await db.raw(
      `SELECT ${COLUMNS} FROM ${FROM}
       WHERE k.account_id = ? AND (? = '' OR k.member_id = ?) AND (? = '' OR k.team_id = ?) AND (? = '' OR k.id = ?)
         AND (? OR k.revoked_at IS NULL)
         AND (CAST(? AS bigint) IS NULL OR (k.created_at, k.id) < ((TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond'), CAST(? AS text)))
       ORDER BY k.created_at DESC, k.id DESC LIMIT ?`,
      [
        accountId,
        opts.memberId,
        opts.memberId,
        opts.teamId,
        opts.teamId,
        opts.keyId ?? '',
        opts.keyId ?? '',
        opts.includeRevoked,
        after?.atMicros ?? null,
        after?.atMicros ?? null,
        after?.id ?? '',
        size + 1,
      ],
    ),
  );
  const p = page(rows.map(rowOf), size, (k) => ({ atMicros: k.atMicros, id: k.keyId }));
  return { keys: p.rows, nextCursor: p.nextCursor };
}

/** One key of the organisation (revoked ones too), or a 404. */
export async function orgKey(db: Db, accountId: string, keyId: string): Promise<OrgKeyRow> {
  const k = (
    await listOrgKeys(db, accountId, {
      memberId: '',
      teamId: '',
      includeRevoked: true,
      pageSize: 1,
      cursor: '',
      keyId,
    })
  ).keys[0];
  if (!k) throw orgKeyNotFound();
  return k;
}

/** A new key for a member of the organisation or one of its teams; the secret is returned once. */
export async function createOrgKey(
  db: Db,
  ledger: Ledger,
  actor: Actor,
  accountId: string,
  holder: { memberId: string } | { teamId: string },
  name: string,
): Promise<{ key: OrgKeyRow; apiKey: string }> {
  const apiKey = generateKey();
  const keyId = newId('key');
  const memberId = 'memberId' in holder ? holder.memberId : null;
  const teamId = 'teamId' in holder ? holder.teamId : null;
  await db.transaction(async (trx) => {
    const ok = rowsOf(
      memberId
        ? await trx.raw(`SELECT 1 FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, memberId])
        : await trx.raw(`SELECT 1 FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL`, [
            accountId,
            teamId,
          ]),
    );
    if (ok.length === 0) throw memberId ? memberNotFound() : teamNotFound();
    await trx.raw(
      `INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id, team_id, name) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      [keyId, accountId, ledger.hash(apiKey), visiblePrefix(apiKey), memberId, teamId, name],
    );
    await audit(trx, actor, {
      accountId,
      action: 'key.created',
      target: keyId,
      after: { prefix: visiblePrefix(apiKey), ...(memberId ? { member: memberId } : { team: teamId }), name },
    });
  });
  return { key: await orgKey(db, accountId, keyId), apiKey };
}

export async function revokeOrgKey(db: Db, actor: Actor, accountId: string, keyId: string): Promise<boolean> {
  return db.transaction(async (trx) => {
    const done = rowsOf(
      await trx.raw(
        `UPDATE api_keys SET revoked_at = now() WHERE account_id = ? AND id = ? AND revoked_at IS NULL RETURNING prefix`,
        [accountId, keyId],
      ),
    )[0];
    if (done)
      await audit(trx, actor, { accountId, action: 'key.revoked', target: keyId, before: { prefix: done.prefix } });
    return Boolean(done);
  });
}

/** A new key for the same holder (same limits and rate window), the old one revoked at once. */
export async function rotateOrgKey(
  db: Db,
  ledger: Ledger,
  actor: Actor,
  accountId: string,
  keyId: string,
): Promise<{ key: OrgKeyRow; apiKey: string }> {
  const old = await orgKey(db, accountId, keyId);
  if (old.revokedAt) throw orgKeyNotFound();
  const r = await ledger.rotate(keyId);
  await db.transaction((trx) =>
    audit(trx, actor, {
      accountId,
      action: 'key.rotated',
      target: keyId,
      before: { prefix: old.prefix },
      after: { key: r.key.keyId, prefix: r.key.prefix },
    }),
  );
  return { key: await orgKey(db, accountId, r.key.keyId), apiKey: r.apiKey };
}
