// What an owner or admin changes in one window of a budget (docs/budgets.md#seeing-and-managing-them):
// a temporary raise of the current window, and a reset that forgives what was spent in it. Both
// live on the window's row (raise_nano, forgiven_nano), so they end with the window by
// construction: the next window is a new row. The row may not exist yet (nothing was held in the
// window so far): it is made, then locked, in the transaction that changes it and writes the audit
// entry, so a hold or settle of the same window waits for it and sees the change whole. Locks are
// taken in the order holds and settles take them, the account's row first and then the window's,
// so the two never wait for each other in a circle.
import type { Db } from '../db/db.ts';
import type { Actor } from '../organisations/actor.ts';
import { audit } from '../organisations/audit.ts';
import { windowSubject, type Budget } from './budget.ts';
import { budgetNotFound, budgetOf, COLUMNS, figuresOf, type BudgetFigures } from './budget-store.ts';
import { HOUR_MS, windowAt } from './windows.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
type Runner = Pick<Db, 'raw'>;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The organisation's live budget `id`, or 404; the organisation's account row locked first, as a
 * hold locks it before the windows (and as the audit entry's foreign key would lock it later).
 * The budget row is read, not locked: SetBudget locks it before the account, the other order.
 */
async function budgetOfOrganisation(trx: Runner, accountId: string, id: string): Promise<Budget> {
  await trx.raw('SELECT 1 FROM accounts WHERE id = ? FOR UPDATE', [accountId]);
  const r = rowsOf(
    await trx.raw(`SELECT ${COLUMNS} FROM budgets WHERE account_id = ? AND id = ? AND deleted_at IS NULL`, [
      accountId,
      id,
    ]),
  )[0];
  if (!r) throw budgetNotFound();
  return budgetOf(r);
}

/** Makes the window's row where it is missing (nothing held in it yet), so it can be locked and changed. */
async function ensureWindow(trx: Runner, budgetId: string, subject: string, start: number): Promise<void> {
  await trx.raw(
    `INSERT INTO budget_windows (budget_id, subject, window_start) VALUES (?, ?, CAST(? AS timestamptz))
     ON CONFLICT DO NOTHING`,
    [budgetId, subject, iso(start)],
  );
}

export interface WindowTarget {
  accountId: string;
  budgetId: string;
  /** As the call names it: '' for the budget's one window, a customer budget's end customer (checked here). */
  subject: string;
}

/**
 * Sets the raise of the budget's current window for `subject` to `raiseNano` (a new raise replaces
 * the last; 0 takes it back): until the window ends, its amount is the budget's plus the raise.
 */
export async function raiseWindow(db: Db, actor: Actor, t: WindowTarget, raiseNano: bigint): Promise<BudgetFigures> {
  return db.transaction(async (trx) => {
    const b = await budgetOfOrganisation(trx, t.accountId, t.budgetId);
    const subject = windowSubject(b.scope, t.subject);
    const now = Date.now();
    const w = windowAt(b.period, now);
    await ensureWindow(trx, b.id, subject, w.start);
    const before = rowsOf(
      await trx.raw(
        `SELECT raise_nano::text AS raise FROM budget_windows
         WHERE budget_id = ? AND subject = ? AND window_start = CAST(? AS timestamptz) FOR UPDATE`,
        [b.id, subject, iso(w.start)],
      ),
    )[0]!.raise as string;
    await trx.raw(
      `UPDATE budget_windows SET raise_nano = CAST(? AS bigint)
       WHERE budget_id = ? AND subject = ? AND window_start = CAST(? AS timestamptz)`,
      [raiseNano.toString(), b.id, subject, iso(w.start)],
    );
    const window = { subject, window_start: iso(w.start), window_end: Number.isFinite(w.end) ? iso(w.end) : null };
    await audit(trx, actor, {
      accountId: t.accountId,
      action: 'budget.raised',
      target: b.id,
      before: { ...window, raise_nano: before },
      after: { ...window, raise_nano: raiseNano.toString() },
    });
    return figuresOf(trx, b, now, subject);
  });
}

/**
 * Forgives what `subject` spent so far in the budget's current window (forgiven := spent, on each
 * of a rolling budget's buckets in its span): the window starts again from nothing spent, and what
 * is held stays held. Answers the window's figures after, and what this reset forgave.
 */
export async function resetWindowSpend(
  db: Db,
  actor: Actor,
  t: WindowTarget,
): Promise<{ figures: BudgetFigures; forgivenNano: bigint }> {
  return db.transaction(async (trx) => {
    const b = await budgetOfOrganisation(trx, t.accountId, t.budgetId);
    const subject = windowSubject(b.scope, t.subject);
    const now = Date.now();
    const w = windowAt(b.period, now);
    const from = b.period.kind === 'rolling' ? w.start - (b.period.hours - 1) * HOUR_MS : w.start;
    await ensureWindow(trx, b.id, subject, w.start);
    // Every bucket of a rolling budget's span, oldest first (a hold locks only the current one).
    const rows = rowsOf(
      await trx.raw(
        `SELECT window_start, (spent_nano - forgiven_nano)::text AS unforgiven FROM budget_windows
         WHERE budget_id = ? AND subject = ? AND window_start >= CAST(? AS timestamptz) AND window_start <= CAST(? AS timestamptz)
         ORDER BY window_start FOR UPDATE`,
        [b.id, subject, iso(from), iso(w.start)],
      ),
    );
    const forgivenNano = rows.reduce((sum, r) => sum + BigInt(r.unforgiven as string), 0n);
    await trx.raw(
      `UPDATE budget_windows SET forgiven_nano = spent_nano
       WHERE budget_id = ? AND subject = ? AND window_start >= CAST(? AS timestamptz) AND window_start <= CAST(? AS timestamptz)`,
      [b.id, subject, iso(from), iso(w.start)],
    );
    const window = { subject, window_start: iso(w.start), window_end: Number.isFinite(w.end) ? iso(w.end) : null };
    await audit(trx, actor, {
      accountId: t.accountId,
      action: 'budget.spend_reset',
      target: b.id,
      before: { ...window, spent_nano: forgivenNano.toString() },
      after: { ...window, spent_nano: '0', forgiven_nano: forgivenNano.toString() },
    });
    return { figures: await figuresOf(trx, b, now, subject), forgivenNano };
  });
}
