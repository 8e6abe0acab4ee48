// The organisations' audit log (docs/organisations.md#audit): every change to members, roles,
// teams, keys, invitations and settings, written in the same transaction as the change itself,
// so a change is never without its entry nor an entry without its change. Append-only: the
// database refuses updates and deletes (migration 023).
import type { Db } from '../db/db.ts';
import type { Actor } from './actor.ts';
import { decodeCursor, page, pageSize } from './paging.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
type Runner = Pick<Db, 'raw'>;

/** How an actor is named in the log. */
export function actorName(a: Actor): string {
  switch (a.kind) {
    case 'operator':
      return 'operator';
    case 'member':
      return `member:${a.memberId}`;
    case 'telegram':
      return a.telegramUser;
    case 'team_key':
      return `key:${a.keyId}`;
    case 'invitee':
      return 'invitee';
  }
}

export interface AuditChange {
  accountId: string;
  action: string;
  target: string;
  before?: unknown;
  after?: unknown;
}

/** Appends one entry, inside the change's own transaction (`trx`). */
export async function audit(trx: Runner, actor: Actor, c: AuditChange, actorOverride?: string): Promise<void> {
  await trx.raw(
    `INSERT INTO audit_log (account_id, actor, via, from_address, action, target, before, after)
     VALUES (?, ?, ?, ?, ?, ?, CAST(? AS jsonb), CAST(? AS jsonb))`,
    [
      c.accountId,
      actorOverride ?? actorName(actor),
      actor.via,
      actor.from.slice(0, 100),
      c.action,
      c.target,
      c.before === undefined ? null : JSON.stringify(c.before),
      c.after === undefined ? null : JSON.stringify(c.after),
    ],
  );
}

export interface AuditRow {
  id: string;
  actor: string;
  via: string;
  fromAddress: string;
  action: string;
  target: string;
  before: string;
  after: string;
  at: Date;
}

/** An organisation's entries, newest first; the cursor is the last entry's id. */
export async function listAudit(
  db: Db,
  accountId: string,
  opts: { pageSize: number; cursor: string },
): Promise<{ entries: AuditRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize, 50, 500);
  const after = decodeCursor(opts.cursor);
  const rows = rowsOf(
    await db.raw(
      `SELECT a.id::text AS id, actor, via, from_address, action, target, before::text AS before, after::text AS after, at
       FROM audit_log a WHERE account_id = ? AND (CAST(? AS bigint) IS NULL OR a.id < CAST(? AS bigint))
       ORDER BY a.id DESC LIMIT ?`,
      [accountId, after?.id ?? null, after?.id ?? null, size + 1],
    ),
  );
  const entries = rows.map((r) => ({
    id: r.id as string,
    actor: r.actor as string,
    via: r.via as string,
    fromAddress: r.from_address as string,
    action: r.action as string,
    target: r.target as string,
    before: (r.before as string | null) ?? '',
    after: (r.after as string | null) ?? '',
    at: r.at as Date,
  }));
  const p = page(entries, size, (e) => ({ atMicros: '0', id: e.id }));
  return { entries: p.rows, nextCursor: p.nextCursor };
}
