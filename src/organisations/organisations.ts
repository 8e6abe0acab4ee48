// Organisations themselves (docs/organisations.md): an organisation is an account, its balance
// the one the ledger keeps; this adds its name, who belongs to it and in what role, and the
// figures its overview shows. Membership and role are read from the database on every call.
import type { Db } from '../db/db.ts';
import { newId } from '../billing/ids.ts';
import type { Actor } from './actor.ts';
import { audit } from './audit.ts';
import { isRole, type Role } from './roles.ts';
import { decodeCursor, page, pageSize } from './paging.ts';
import { badRequest } from '../errors/errors.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);
type Runner = Pick<Db, 'raw'>;

export interface OrganisationFigures {
  id: string;
  name: string;
  balanceNano: bigint;
  heldNano: bigint;
  members: number;
  teams: number;
  liveKeys: number;
  createdAt: Date;
  atMicros: string;
  /** The caller's role; undefined for the operator. */
  role?: Role;
}

// Held: requests in flight only (an instance's credit lease is not the customer's spending).
const FIGURES = `SELECT a.id, a.label, a.balance_nano::text AS balance, a.created_at,
    (extract(epoch FROM a.created_at) * 1000000)::bigint::text AS at_us,
    (SELECT COALESCE(sum(h.amount_nano), 0) FROM holds h
     WHERE h.account_id = a.id AND h.status = 'active' AND NOT starts_with(h.request_id, 'lease_'))::text AS held,
    (SELECT count(*) FROM memberships m WHERE m.account_id = a.id)::int AS members,
    (SELECT count(*) FROM teams t WHERE t.account_id = a.id AND t.deleted_at IS NULL)::int AS teams,
    (SELECT count(*) FROM api_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL)::int AS live_keys`;

function figuresOf(r: Row): OrganisationFigures {
  return {
    id: r.id as string,
    name: r.label as string,
    balanceNano: big(r.balance),
    heldNano: big(r.held),
    members: Number(r.members),
    teams: Number(r.teams),
    liveKeys: Number(r.live_keys),
    createdAt: r.created_at as Date,
    atMicros: r.at_us as string,
    ...(r.role && isRole(r.role as string) ? { role: r.role as Role } : {}),
  };
}

/** The member's role in the organisation, or undefined when they are not in it. */
export async function roleOf(db: Runner, accountId: string, memberId: string): Promise<Role | undefined> {
  const r = rowsOf(
    await db.raw(`SELECT role FROM memberships WHERE account_id = ? AND member_id = ?`, [accountId, memberId]),
  )[0];
  return r ? (r.role as Role) : undefined;
}

export async function organisationExists(db: Runner, accountId: string): Promise<boolean> {
  return rowsOf(await db.raw(`SELECT 1 FROM accounts WHERE id = ?`, [accountId])).length > 0;
}

export async function memberByTelegram(db: Runner, telegramUser: string): Promise<string | undefined> {
  const r = rowsOf(await db.raw(`SELECT id FROM members WHERE telegram_user = ?`, [telegramUser]))[0];
  return r ? (r.id as string) : undefined;
}

export async function memberName(db: Runner, memberId: string): Promise<string | undefined> {
  const r = rowsOf(await db.raw(`SELECT name FROM members WHERE id = ?`, [memberId]))[0];
  return r ? (r.name as string) : undefined;
}

/** Every organisation a member belongs to, with their role, by name. */
export async function membershipsOf(
  db: Runner,
  memberId: string,
): Promise<{ accountId: string; name: string; role: Role }[]> {
  const rows = rowsOf(
    await db.raw(
      `SELECT m.account_id, a.label, m.role FROM memberships m JOIN accounts a ON a.id = m.account_id
       WHERE m.member_id = ? ORDER BY a.label, a.id LIMIT 1000`,
      [memberId],
    ),
  );
  return rows.map((r) => ({ accountId: r.account_id as string, name: r.label as string, role: r.role as Role }));
}

export async function figures(db: Runner, accountId: string, memberId?: string): Promise<OrganisationFigures> {
  const r = rowsOf(
    await db.raw(
      `${FIGURES}, (SELECT role FROM memberships m WHERE m.account_id = a.id AND m.member_id = ?) AS role
       FROM accounts a WHERE a.id = ?`,
      [memberId ?? '', accountId],
    ),
  )[0];
  if (!r) throw new Error(`no organisation ${accountId}`);
  return figuresOf(r);
}

/**
 * The operator: every organisation, newest first (`query`: its id, or text in its name); a
 * member: those they belong to.
 */
export async function listOrganisations(
  db: Db,
  opts: { memberId?: string; query: string; pageSize: number; cursor: string },
): Promise<{ organisations: OrganisationFigures[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize);
  const after = decodeCursor(opts.cursor);
  const q = opts.query.trim();
  if (q.length > 200) throw badRequest('query is longer than 200 characters', 'invalid_value', 'query');
  const pattern = `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = rowsOf(
    await db.raw(
      `${FIGURES}, m.role FROM accounts a
       LEFT JOIN memberships m ON m.account_id = a.id AND m.member_id = CAST(? AS text)
       WHERE (CAST(? AS text) IS NULL OR m.member_id IS NOT NULL)
         AND (? = '' OR a.id = ? OR a.label ILIKE ?)
         AND (CAST(? AS bigint) IS NULL OR (a.created_at, a.id) < ((TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond'), CAST(? AS text)))
       ORDER BY a.created_at DESC, a.id DESC LIMIT ?`,
      [
        opts.memberId ?? null,
        opts.memberId ?? null,
        q,
        q,
        pattern,
        after?.atMicros ?? null,
        after?.atMicros ?? null,
        after?.id ?? '',
        size + 1,
      ],
    ),
  );
  const p = page(rows.map(figuresOf), size, (o) => ({ atMicros: o.atMicros, id: o.id }));
  return { organisations: p.rows, nextCursor: p.nextCursor };
}

/**
 * A new organisation (an account with no balance yet) with its first owner: a new member named
 * `ownerName`, or the member tied to `ownerTelegram` (made if there is none). A Telegram owner is
 * also the account's owner for the bot, as accounts the bot made are.
 */
export async function createOrganisation(
  db: Db,
  actor: Actor,
  opts: { name: string; ownerName: string; ownerTelegram: string },
): Promise<{ accountId: string; ownerMemberId: string }> {
  const accountId = newId('acct');
  return db.transaction(async (trx) => {
    await trx.raw(`INSERT INTO accounts (id, label, owner) VALUES (?, ?, ?)`, [
      accountId,
      opts.name,
      opts.ownerTelegram || null,
    ]);
    let memberId: string;
    if (opts.ownerTelegram) {
      await trx.raw(
        `INSERT INTO members (id, name, telegram_user) VALUES (?, ?, ?) ON CONFLICT (telegram_user) DO NOTHING`,
        [newId('mem'), opts.ownerName || opts.ownerTelegram, opts.ownerTelegram],
      );
      memberId = (await memberByTelegram(trx, opts.ownerTelegram))!;
    } else {
      memberId = newId('mem');
      await trx.raw(`INSERT INTO members (id, name) VALUES (?, ?)`, [memberId, opts.ownerName]);
    }
    await trx.raw(`INSERT INTO memberships (account_id, member_id, role) VALUES (?, ?, 'owner')`, [
      accountId,
      memberId,
    ]);
    await audit(trx, actor, {
      accountId,
      action: 'organisation.created',
      target: accountId,
      after: { name: opts.name },
    });
    await audit(trx, actor, { accountId, action: 'member.added', target: memberId, after: { role: 'owner' } });
    return { accountId, ownerMemberId: memberId };
  });
}

export async function renameOrganisation(db: Db, actor: Actor, accountId: string, name: string): Promise<void> {
  await db.transaction(async (trx) => {
    const before = rowsOf(await trx.raw(`SELECT label FROM accounts WHERE id = ? FOR UPDATE`, [accountId]))[0]!;
    if (before.label === name) return;
    await trx.raw(`UPDATE accounts SET label = ? WHERE id = ?`, [name, accountId]);
    await audit(trx, actor, {
      accountId,
      action: 'organisation.renamed',
      target: accountId,
      before: { name: before.label },
      after: { name },
    });
  });
}
