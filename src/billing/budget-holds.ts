// Budgets held like money, in the database (docs/budgets.md#held-not-counted-after): a request's
// hold, or an instance's budget slice, is placed only where every hard budget's window has room,
// with the window rows locked in one order (budget, subject, window) after the account's, so two
// holds never deadlock and never both take the last of a budget. What each hold took of which
// window is written beside it (hold_budgets), so its settle charges exactly those windows and a
// hold that expires gives exactly that back.
import type { Knex } from 'knex';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
type Runner = Pick<Knex, 'raw'>;

/** One window of one budget that a request is under (src/budgets/budget-book.ts works them out). */
export interface WindowRef {
  budgetId: string;
  /** The end customer's id for a customer budget; '' otherwise. */
  subject: string;
  /** Epoch ms. */
  windowStart: number;
  windowEnd: number;
  mode: 'hard' | 'soft';
  /** A rolling budget sums this many hourly buckets (its window is the current one); 0 otherwise. */
  rollingHours: number;
  scope: string;
  scopeId: string;
  name: string;
  /** The amount as the instance read it; the statements read it again. */
  amountNano: bigint;
  /** windowKey's value, where whoever made the reference worked it out once. */
  key?: string;
}

/** The window that refused, and the room it had. */
export interface BudgetShortfall {
  window: WindowRef;
  roomNano: bigint;
}

const HOUR_MS = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** The windows as the statements' arrays: budget ids, subjects, window starts. */
function columns(windows: readonly WindowRef[]): [string[], string[], string[]] {
  return [windows.map((w) => w.budgetId), windows.map((w) => w.subject), windows.map((w) => iso(w.windowStart))];
}

/**
 * Each window's room (its amount and raise, less what was spent, not forgiven, and what is held;
 * a rolling budget's over its last buckets), with the window rows made where missing and locked,
 * in the order the windows are given (sorted by the budget book). A budget deleted since the
 * request read it has unlimited room. Never negative: a budget lowered below what is held has none.
 */
export async function lockWindows(trx: Runner, windows: readonly WindowRef[]): Promise<bigint[]> {
  const [ids, subjects, starts] = columns(windows);
  await trx.raw(
    `INSERT INTO budget_windows (budget_id, subject, window_start)
     SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])) ON CONFLICT DO NOTHING`,
    [ids, subjects, starts],
  );
  const rows = rowsOf(
    await trx.raw(
      `SELECT w.budget_id, w.subject, (extract(epoch FROM w.window_start) * 1000)::bigint::text AS at,
              (b.amount_nano + w.raise_nano - w.spent_nano + w.forgiven_nano - w.held_nano)::text AS room,
              b.deleted_at IS NOT NULL AS gone
       FROM budget_windows w JOIN budgets b ON b.id = w.budget_id
       WHERE (w.budget_id, w.subject, w.window_start) IN
             (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])))
       ORDER BY w.budget_id, w.subject, w.window_start
       FOR UPDATE OF w`,
      [ids, subjects, starts],
    ),
  );
  const room = new Map(rows.map((r) => [`${r.budget_id}\u0000${r.subject}\u0000${r.at}`, r]));
  const rooms: bigint[] = [];
  for (const w of windows) {
    const r = room.get(`${w.budgetId}\u0000${w.subject}\u0000${w.windowStart}`);
    if (!r || r.gone) {
      rooms.push(-1n); // no limit
      continue;
    }
    let left = BigInt(r.room as string);
    if (w.rollingHours > 1) left -= await earlierBuckets(trx, w);
    rooms.push(left > 0n ? left : 0n);
  }
  return rooms;
}

/** What a rolling budget's earlier buckets in its span used (spent, not forgiven, and held). */
async function earlierBuckets(trx: Runner, w: WindowRef): Promise<bigint> {
  const from = w.windowStart - (w.rollingHours - 1) * HOUR_MS;
  const r = rowsOf(
    await trx.raw(
      `SELECT COALESCE(sum(spent_nano - forgiven_nano + held_nano), 0)::text AS used FROM budget_windows
       WHERE budget_id = ? AND subject = ? AND window_start >= CAST(? AS timestamptz) AND window_start < CAST(? AS timestamptz)`,
      [w.budgetId, w.subject, iso(from), iso(w.windowStart)],
    ),
  )[0]!;
  return BigInt(r.used as string);
}

/**
 * The tightest hard window and its room, given each window's room (lockWindows); undefined when
 * no hard window limits anything.
 */
export function tightest(windows: readonly WindowRef[], rooms: readonly bigint[]): BudgetShortfall | undefined {
  let best: BudgetShortfall | undefined;
  windows.forEach((w, i) => {
    const room = rooms[i]!;
    if (w.mode !== 'hard' || room < 0n) return;
    if (!best || room < best.roomNano) best = { window: w, roomNano: room };
  });
  return best;
}

/** Adds `amountNano` to each window's held figure, and records it against the hold `requestId`. */
export async function holdInWindows(
  trx: Runner,
  requestId: string,
  windows: readonly WindowRef[],
  amountNano: bigint,
): Promise<void> {
  if (windows.length === 0 || amountNano === 0n) return;
  const [ids, subjects, starts] = columns(windows);
  await trx.raw(
    `WITH s AS (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])) AS s(budget_id, subject, window_start)),
     w AS (
       UPDATE budget_windows w SET held_nano = w.held_nano + CAST(? AS bigint) FROM s
       WHERE w.budget_id = s.budget_id AND w.subject = s.subject AND w.window_start = s.window_start
     )
     INSERT INTO hold_budgets AS h (request_id, budget_id, subject, window_start, amount_nano)
     SELECT ?, budget_id, subject, window_start, CAST(? AS bigint) FROM s
     ON CONFLICT (request_id, budget_id, subject, window_start) DO UPDATE SET amount_nano = h.amount_nano + EXCLUDED.amount_nano`,
    [ids, subjects, starts, amountNano.toString(), requestId, amountNano.toString()],
  );
}

/** A key for one window, as the slices and the statements name it. */
export const windowKey = (w: Pick<WindowRef, 'budgetId' | 'subject' | 'windowStart'> & { key?: string }) =>
  w.key ?? `${w.budgetId}\u0000${w.subject}\u0000${w.windowStart}`;

/** The window a key names (windowKey's inverse). */
export function windowOfKey(key: string): Pick<WindowRef, 'budgetId' | 'subject' | 'windowStart'> {
  const [budgetId, subject, start] = key.split('\u0000') as [string, string, string];
  return { budgetId, subject, windowStart: Number(start) };
}

/** The windows keys name, as the statements' columns. */
function keyColumns(keys: readonly string[]): [string[], string[], string[]] {
  const parts = keys.map((k) => k.split('\u0000'));
  return [parts.map((p) => p[0]!), parts.map((p) => p[1]!), parts.map((p) => iso(Number(p[2])))];
}

/**
 * Adds each window's own amount to its held figure, recorded against `requestId` (an instance's
 * lease growing its budget slices); the windows were locked by lockWindows in this transaction.
 */
export async function holdEachInWindows(
  trx: Runner,
  requestId: string,
  windows: readonly WindowRef[],
  amounts: readonly bigint[],
): Promise<void> {
  const [ids, subjects, starts] = columns(windows);
  await trx.raw(
    `WITH s AS (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[]), CAST(? AS bigint[]))
                AS s(budget_id, subject, window_start, amount)),
     w AS (
       UPDATE budget_windows w SET held_nano = w.held_nano + s.amount FROM s
       WHERE w.budget_id = s.budget_id AND w.subject = s.subject AND w.window_start = s.window_start
     )
     INSERT INTO hold_budgets AS h (request_id, budget_id, subject, window_start, amount_nano)
     SELECT ?, budget_id, subject, window_start, amount FROM s
     ON CONFLICT (request_id, budget_id, subject, window_start) DO UPDATE SET amount_nano = h.amount_nano + EXCLUDED.amount_nano`,
    [ids, subjects, starts, amounts.map(String), requestId],
  );
}

/**
 * What a lease's slices give up, by window key: `charged` moves from held to spent (a batch of
 * its requests' charges), `released` goes back to the window; both leave the lease's record.
 * The caller holds the account's row lock, as every statement that moves held money does first.
 */
export async function moveSliceMoney(
  trx: Runner,
  leaseId: string,
  moves: ReadonlyMap<string, { charged: bigint; released: bigint }>,
): Promise<void> {
  const keys = [...moves.keys()].sort();
  if (keys.length === 0) return;
  const [ids, subjects, starts] = keyColumns(keys);
  const charged = keys.map((k) => String(moves.get(k)!.charged));
  const released = keys.map((k) => String(moves.get(k)!.released));
  await trx.raw(
    `SELECT 1 FROM budget_windows WHERE (budget_id, subject, window_start) IN
       (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])))
     ORDER BY budget_id, subject, window_start FOR UPDATE`,
    [ids, subjects, starts],
  );
  await trx.raw(
    `WITH s AS (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[]), CAST(? AS bigint[]), CAST(? AS bigint[]))
                AS s(budget_id, subject, window_start, charged, released)),
     hb AS (
       UPDATE hold_budgets h SET amount_nano = h.amount_nano - s.charged - s.released FROM s
       WHERE h.request_id = ? AND h.budget_id = s.budget_id AND h.subject = s.subject AND h.window_start = s.window_start
       RETURNING h.budget_id, h.subject, h.window_start, s.charged, s.released
     )
     UPDATE budget_windows w SET spent_nano = w.spent_nano + hb.charged, held_nano = w.held_nano - hb.charged - hb.released
     FROM hb WHERE w.budget_id = hb.budget_id AND w.subject = hb.subject AND w.window_start = hb.window_start`,
    [ids, subjects, starts, charged, released, leaseId],
  );
}

/**
 * A lease batch's budget windows, as CTEs for the batch's own statement (their parameters, in the
 * order of their `?`, from sliceChargeParams): `lk` locks the account's row and then the windows in
 * key order, as every statement that moves a window's money takes them (the batch's `lease`
 * update waits on `lk` as an InitPlan, and everything else it writes follows `lease`). `sbw`
 * charges each window what its slice paid (after `lease`, so nothing moves unless the lease is
 * active), returning each window's spend for BUDGET_ALERT_DUE.
 */
export const SLICE_LOCKS_CTE = `lka AS (SELECT 1 FROM accounts WHERE id = ? FOR UPDATE),
  lk AS (
    SELECT 1 FROM budget_windows WHERE EXISTS (SELECT 1 FROM lka) AND (budget_id, subject, window_start) IN
      (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])))
    ORDER BY budget_id, subject, window_start FOR UPDATE
  )`;
export const SLICE_CHARGES_CTE = `sc AS (
    SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[]), CAST(? AS bigint[]))
      AS sc(budget_id, subject, window_start, charged)
  ), shb AS (
    UPDATE hold_budgets h SET amount_nano = h.amount_nano - sc.charged FROM sc, lease
    WHERE h.request_id = ? AND h.budget_id = sc.budget_id AND h.subject = sc.subject AND h.window_start = sc.window_start
    RETURNING h.budget_id, h.subject, h.window_start, sc.charged
  ), sbw AS (
    UPDATE budget_windows w SET spent_nano = w.spent_nano + shb.charged, held_nano = w.held_nano - shb.charged
    FROM shb WHERE w.budget_id = shb.budget_id AND w.subject = shb.subject AND w.window_start = shb.window_start
    RETURNING w.budget_id, w.subject, w.window_start, w.spent_nano - w.forgiven_nano AS spent, w.raise_nano
  )`;

/**
 * When a window has reached a threshold (a percentage of its amount), in SQL over the given
 * expressions: the one rule of the alerts' statement (src/budgets/alerts.ts) and of a lease
 * batch's check below.
 */
export const thresholdReached = (spent: string, amount: string, threshold: string) =>
  `${spent} > 0 AND CAST(${spent} AS numeric) * 100 >= CAST(${amount} AS numeric) * ${threshold}`;

/**
 * Whether a window `sbw` charged has reached a threshold that has not fired yet (the alerts'
 * own statement then runs). Checked on every batch, so a check that failed is made again by the
 * next one.
 */
export const BUDGET_ALERT_DUE = `EXISTS (
    SELECT 1 FROM sbw JOIN budgets b ON b.id = sbw.budget_id AND b.deleted_at IS NULL
    CROSS JOIN LATERAL unnest(b.thresholds) AS t(threshold)
    WHERE ${thresholdReached('sbw.spent', 'b.amount_nano + sbw.raise_nano', 't.threshold')}
      AND NOT EXISTS (SELECT 1 FROM budget_alerts ba WHERE ba.budget_id = sbw.budget_id AND ba.subject = sbw.subject
                      AND ba.window_start = sbw.window_start AND ba.threshold = t.threshold))`;

/** SLICE_LOCKS_CTE's parameters (before the batch's own) and SLICE_CHARGES_CTE's (after them). */
export function sliceChargeParams(
  accountId: string,
  leaseId: string,
  charged: ReadonlyMap<string, bigint>,
): { locks: (string | string[])[]; charges: (string | string[])[] } {
  const keys = [...charged.keys()].sort();
  const [ids, subjects, starts] = keyColumns(keys);
  return {
    locks: [accountId, ids, subjects, starts],
    charges: [ids, subjects, starts, keys.map((k) => String(charged.get(k)!)), leaseId],
  };
}

/** Whether any instance's lease holds a slice of this window (what a refusal may ask back). */
export async function windowHasSlices(runner: Runner, w: WindowRef): Promise<boolean> {
  const r = rowsOf(
    await runner.raw(
      `SELECT 1 FROM hold_budgets WHERE budget_id = ? AND subject = ? AND window_start = CAST(? AS timestamptz)
         AND starts_with(request_id, 'lease_') AND amount_nano > 0 LIMIT 1`,
      [w.budgetId, w.subject, iso(w.windowStart)],
    ),
  );
  return r.length > 0;
}

/**
 * The settle's part for budgets, in the settle's statement (a CTE after `h`, the settled hold with
 * its charged_nano): each window the hold took from is charged what was charged, and its hold
 * released. Empty work for a request under no budget.
 */
export const SETTLE_BUDGETS_CTE = `hb AS (
    DELETE FROM hold_budgets USING h WHERE hold_budgets.request_id = h.request_id
    RETURNING hold_budgets.budget_id, hold_budgets.subject, hold_budgets.window_start, hold_budgets.amount_nano, h.charged_nano
  ), bw AS (
    UPDATE budget_windows w SET spent_nano = w.spent_nano + hb.charged_nano, held_nano = w.held_nano - hb.amount_nano
    FROM hb WHERE w.budget_id = hb.budget_id AND w.subject = hb.subject AND w.window_start = hb.window_start
  )`;

/** The part of a hold expiry for budgets: what the expired holds (`h`) took goes back, nothing is charged. */
export const EXPIRE_BUDGETS_CTE = `hb AS (
    DELETE FROM hold_budgets USING h WHERE hold_budgets.request_id = h.request_id
    RETURNING hold_budgets.budget_id, hold_budgets.subject, hold_budgets.window_start, hold_budgets.amount_nano
  ), hbs AS (
    SELECT budget_id, subject, window_start, sum(amount_nano) AS amount FROM hb GROUP BY 1, 2, 3
  ), bw AS (
    UPDATE budget_windows w SET held_nano = w.held_nano - hbs.amount
    FROM hbs WHERE w.budget_id = hbs.budget_id AND w.subject = hbs.subject AND w.window_start = hbs.window_start
  )`;
