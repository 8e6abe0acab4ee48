// Budgets as an organisation's owners and admins set them (docs/budgets.md#seeing-and-managing-them):
// written with the audit log in one transaction; every instance's budget book hears the change
// (the budgets table's trigger). A new budget's current window starts with what its scope has
// already spent in it, so a daily budget set at noon counts the morning too (a rolling or a
// customer budget starts from nothing: their past spend is not kept in their form).
import type { Db } from '../db/db.ts';
import { badRequest, notFound } from '../errors/errors.ts';
import { newId } from '../billing/ids.ts';
import type { Actor } from '../organisations/actor.ts';
import { audit } from '../organisations/audit.ts';
import { periodColumns, periodFromColumns, type Budget, type Mode, type Scope } from './budget.ts';
import { windowAt } from './windows.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
type Runner = Pick<Db, 'raw'>;

/** At most this many budgets per organisation. */
export const MAX_BUDGETS = 1_000;

export const budgetNotFound = () => notFound('budget_not_found', 'No budget of this organisation has this id.');

/** A budget with its current window's figures (for the subject '' of a customer template: none). */
export interface BudgetFigures extends Budget {
  windowStart: Date;
  windowEnd: Date | undefined;
  spentNano: bigint;
  heldNano: bigint;
  raiseNano: bigint;
  /** Spend forgiven in the window (a reset); spentNano is net of it. */
  forgivenNano: bigint;
  /** Whose window: '' (the budget's one), or a customer budget's end customer. */
  subject: string;
  /** amount + raise − spent + forgiven − held, at least 0. */
  remainingNano: bigint;
}

export const COLUMNS = `id, account_id, scope, scope_id, name, amount_nano::text AS amount, period, time_zone, start_day, rolling_hours,
  mode, thresholds`;

export function budgetOf(r: Row): Budget {
  return {
    id: r.id as string,
    accountId: r.account_id as string,
    scope: r.scope as Scope,
    scopeId: r.scope_id as string,
    name: r.name as string,
    amountNano: BigInt(r.amount as string),
    period: periodFromColumns(r as never),
    mode: r.mode as Mode,
    thresholds: r.thresholds as number[],
  };
}

/** Checks that the scope's id is of this organisation (a team, member or key of another is no id at all). */
async function checkScope(trx: Runner, accountId: string, b: Pick<Budget, 'scope' | 'scopeId'>): Promise<void> {
  const id = b.scope === 'customer' ? b.scopeId.replace(/^(key|team):/, '') : b.scopeId;
  const kind = b.scope === 'customer' ? (b.scopeId.startsWith('key:') ? 'key' : 'team') : b.scope;
  if (id === '' || b.scope === 'organisation') return;
  const sql = {
    team: 'SELECT 1 FROM teams WHERE account_id = ? AND id = ? AND deleted_at IS NULL',
    member: 'SELECT 1 FROM memberships WHERE account_id = ? AND member_id = ?',
    key: 'SELECT 1 FROM api_keys WHERE account_id = ? AND id = ?',
  }[kind as 'team' | 'member' | 'key'];
  if (rowsOf(await trx.raw(sql, [accountId, id])).length === 0)
    throw notFound(`${kind}_not_found`, `No ${kind} of this organisation has this id.`, { param: 'scope_id' });
}

/** What the budget's scope already spent in the window [start, now): the new budget's opening spend. */
async function spentSoFar(trx: Runner, b: Omit<Budget, 'id'>, start: number): Promise<bigint> {
  if (b.period.kind === 'rolling' || b.scope === 'customer') return 0n;
  const column = { organisation: 'account_id', team: 'team_id', member: 'member_id', key: 'key_id' }[b.scope];
  const r = rowsOf(
    await trx.raw(
      `SELECT COALESCE(sum(cost_nano), 0)::text AS spent FROM usage_records
       WHERE account_id = ? AND ${column} = ? AND created_at >= CAST(? AS timestamptz)`,
      [b.accountId, b.scope === 'organisation' ? b.accountId : b.scopeId, new Date(start).toISOString()],
    ),
  )[0]!;
  return BigInt(r.spent as string);
}

/** A new budget, or a change of one (`id`): the audit log says which and what it was. */
export async function saveBudget(
  db: Db,
  actor: Actor,
  accountId: string,
  input: Omit<Budget, 'id' | 'accountId'>,
  id = '',
): Promise<string> {
  const b = { ...input, accountId };
  const p = periodColumns(b.period);
  return db.transaction(async (trx) => {
    await checkScope(trx, accountId, b);
    const args = [
      b.scope,
      b.scopeId,
      b.name,
      b.amountNano.toString(),
      p.period,
      p.timeZone,
      p.startDay,
      p.rollingHours,
      b.mode,
      b.thresholds,
    ];
    if (id) {
      const before = rowsOf(
        await trx.raw(
          `SELECT ${COLUMNS} FROM budgets WHERE account_id = ? AND id = ? AND deleted_at IS NULL FOR UPDATE`,
          [accountId, id],
        ),
      )[0];
      if (!before) throw budgetNotFound();
      await trx.raw(
        `UPDATE budgets SET scope = ?, scope_id = ?, name = ?, amount_nano = CAST(? AS bigint), period = ?, time_zone = ?,
           start_day = ?, rolling_hours = ?, mode = ?, thresholds = CAST(? AS integer[]) WHERE id = ?`,
        [...args, id],
      );
      await audit(trx, actor, {
        accountId,
        action: 'budget.changed',
        target: id,
        before: shown(budgetOf(before)),
        after: shown({ ...b, id }),
      });
      return id;
    }
    const count = rowsOf(
      await trx.raw(`SELECT count(*)::int AS n FROM budgets WHERE account_id = ? AND deleted_at IS NULL`, [accountId]),
    )[0]!.n as number;
    if (count >= MAX_BUDGETS)
      throw badRequest(`an organisation has at most ${MAX_BUDGETS} budgets`, 'too_many_budgets');
    const made = newId('bud');
    await trx.raw(
      `INSERT INTO budgets (id, account_id, scope, scope_id, name, amount_nano, period, time_zone, start_day, rolling_hours, mode, thresholds)
       VALUES (?, ?, ?, ?, ?, CAST(? AS bigint), ?, ?, ?, ?, ?, CAST(? AS integer[]))`,
      [made, accountId, ...args],
    );
    const w = windowAt(b.period, Date.now());
    const opening = await spentSoFar(trx, b, w.start);
    if (opening > 0n)
      await trx.raw(
        `INSERT INTO budget_windows (budget_id, subject, window_start, spent_nano) VALUES (?, '', CAST(? AS timestamptz), CAST(? AS bigint))`,
        [made, new Date(w.start).toISOString(), opening.toString()],
      );
    await audit(trx, actor, { accountId, action: 'budget.created', target: made, after: shown({ ...b, id: made }) });
    return made;
  });
}

export async function deleteBudget(db: Db, actor: Actor, accountId: string, id: string): Promise<void> {
  await db.transaction(async (trx) => {
    const before = rowsOf(
      await trx.raw(
        `UPDATE budgets SET deleted_at = now() WHERE account_id = ? AND id = ? AND deleted_at IS NULL RETURNING ${COLUMNS}`,
        [accountId, id],
      ),
    )[0];
    if (!before) throw budgetNotFound();
    await audit(trx, actor, { accountId, action: 'budget.deleted', target: id, before: shown(budgetOf(before)) });
  });
}

/**
 * The organisation's budgets with their current window's figures; `applyTo` narrows them to those
 * over one member's requests (theirs, their personal keys', their teams', and the organisation's).
 */
export async function listBudgets(db: Db, accountId: string, applyTo?: { memberId: string }): Promise<BudgetFigures[]> {
  const rows = rowsOf(
    await db.raw(
      `SELECT ${COLUMNS} FROM budgets WHERE account_id = ? AND deleted_at IS NULL
         AND (CAST(? AS text) IS NULL OR scope = 'organisation' OR (scope = 'member' AND scope_id = CAST(? AS text))
              OR (scope = 'key' AND scope_id IN (SELECT id FROM api_keys WHERE member_id = CAST(? AS text)))
              OR (scope = 'team' AND scope_id IN
                    (SELECT team_id FROM team_members WHERE account_id = ? AND member_id = CAST(? AS text))))
       ORDER BY created_at, id LIMIT ?`,
      [accountId, ...Array(3).fill(applyTo?.memberId ?? null), accountId, applyTo?.memberId ?? null, MAX_BUDGETS],
    ),
  );
  const now = Date.now();
  const out: BudgetFigures[] = [];
  for (const r of rows) out.push(await figuresOf(db, budgetOf(r), now));
  return out;
}

/** A budget's current window (of `subject`: '' but for a customer budget) and what it spent, holds and has left. */
export async function figuresOf(db: Runner, b: Budget, now: number, subject = ''): Promise<BudgetFigures> {
  const w = windowAt(b.period, now);
  const from = b.period.kind === 'rolling' ? w.start - (b.period.hours - 1) * 3_600_000 : w.start;
  const r = rowsOf(
    await db.raw(
      `SELECT COALESCE(sum(spent_nano - forgiven_nano), 0)::text AS spent, COALESCE(sum(held_nano), 0)::text AS held,
              COALESCE(sum(forgiven_nano), 0)::text AS forgiven,
              COALESCE(sum(raise_nano) FILTER (WHERE window_start = CAST(? AS timestamptz)), 0)::text AS raise
       FROM budget_windows WHERE budget_id = ? AND subject = ? AND window_start >= CAST(? AS timestamptz)
         AND window_start <= CAST(? AS timestamptz)`,
      [new Date(w.start).toISOString(), b.id, subject, new Date(from).toISOString(), new Date(w.start).toISOString()],
    ),
  )[0]!;
  const spent = BigInt(r.spent as string);
  const held = BigInt(r.held as string);
  const raise = BigInt(r.raise as string);
  const left = b.amountNano + raise - spent - held;
  return {
    ...b,
    windowStart: new Date(w.start),
    windowEnd: Number.isFinite(w.end) ? new Date(w.end) : undefined,
    spentNano: spent,
    heldNano: held,
    raiseNano: raise,
    forgivenNano: BigInt(r.forgiven as string),
    subject,
    remainingNano: left > 0n ? left : 0n,
  };
}

/** A budget as the audit log keeps it. */
function shown(b: Omit<Budget, 'accountId'> & { accountId?: string }) {
  return {
    id: b.id,
    scope: b.scope,
    scope_id: b.scopeId,
    name: b.name,
    amount_nano: b.amountNano.toString(),
    ...periodColumns(b.period),
    mode: b.mode,
    thresholds: b.thresholds,
  };
}
