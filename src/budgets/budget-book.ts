// Which budgets apply to a request, known without a database round trip (docs/budgets.md): each
// account's budgets are read once and kept in memory, dropped when the budgets change (a notice on
// BUDGETS_CHANNEL that every instance hears, as key changes are heard) and at most every
// BUDGET_BOOK_MAX_AGE_MS whatever happens. An account without budgets costs one map lookup. The
// windows a request is under are worked out here, on the clock (windows.ts); the money itself is
// only ever moved by the hold and settle statements, which read each budget's amount again.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Db } from '../db/db.ts';
import type { Caller } from '../billing/caller.ts';

export type { WindowRef } from '../billing/budget-holds.ts';
import { windowKey, type WindowRef } from '../billing/budget-holds.ts';
import { periodFromColumns, type Budget, type Mode, type Scope } from './budget.ts';
import { WindowClock, type Period } from './windows.ts';

export const BUDGETS_CHANNEL = 'budgets_changed';
/** An account's budgets are read again at least this often, notices or not. */
const BUDGET_BOOK_MAX_AGE_MS = 5_000;
const MAX_ACCOUNTS = 100_000;

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

interface Loaded {
  budgets: (Budget & { clock: WindowClock })[];
  at: number;
  /** Whether a customer template is among them (a request's windows then depend on its customer). */
  customers: boolean;
  /**
   * Each caller's windows (by key, team and member) while none of them has ended: a busy key's
   * requests share one list, made once (read only: nothing changes a WindowRef once made).
   */
  windows: Map<string, { from: number; until: number; list: WindowRef[] }>;
}

/** Callers whose windows an account's Loaded keeps at most (it is read again within 5 s anyway). */
const MAX_CACHED_CALLERS = 1_000;

export class BudgetBook {
  private readonly db: Db;
  private readonly accounts = new Map<string, Loaded>();
  private readonly loading = new Map<string, Promise<Loaded>>();
  private listener: pg.Client | undefined;
  private stopped = false;
  private readonly log: Logger | undefined;

  constructor(db: Db, log?: Logger) {
    this.db = db;
    this.log = log;
  }

  /**
   * The windows of every budget that applies to the caller's request now, sorted by budget, subject
   * and window (the order the statements lock them in). Empty for an account without budgets.
   * `customer` gives the end customer the request names ('' for none).
   */
  async windowsFor(caller: Caller, customer: () => string, now: number): Promise<WindowRef[]> {
    const loaded = await this.of(caller.accountId);
    if (loaded.budgets.length === 0) return [];
    const who = loaded.customers ? undefined : `${caller.keyId}\u0000${caller.teamId}\u0000${caller.memberId}`;
    const cached = who === undefined ? undefined : loaded.windows.get(who);
    if (cached && now >= cached.from && now < cached.until) return cached.list;
    const out: WindowRef[] = [];
    let named: string | undefined;
    for (const b of loaded.budgets) {
      // The customer is read (and checked) only where a customer budget could use it.
      const subject = subjectOf(b, caller, b.scope === 'customer' ? (named ??= customer()) : '');
      if (subject === undefined) continue;
      const w = b.clock.at(now);
      out.push({
        budgetId: b.id,
        subject,
        windowStart: w.start,
        windowEnd: w.end,
        mode: b.mode,
        rollingHours: b.period.kind === 'rolling' ? b.period.hours : 0,
        scope: b.scope,
        scopeId: b.scopeId,
        name: b.name,
        amountNano: b.amountNano,
      });
    }
    for (const w of out) w.key = windowKey(w);
    out.sort((a, b) =>
      a.budgetId < b.budgetId
        ? -1
        : a.budgetId > b.budgetId
          ? 1
          : a.subject < b.subject
            ? -1
            : a.subject > b.subject
              ? 1
              : 0,
    );
    if (who !== undefined) {
      if (loaded.windows.size >= MAX_CACHED_CALLERS) loaded.windows.clear();
      let from = Number.NEGATIVE_INFINITY;
      let until = Number.POSITIVE_INFINITY;
      for (const w of out) {
        if (w.windowStart > from) from = w.windowStart;
        if (w.windowEnd < until) until = w.windowEnd;
      }
      loaded.windows.set(who, { from, until, list: out });
    }
    return out;
  }

  /**
   * Every budget over the caller's requests, with the subject its window is kept under: for a
   * customer template, the customer `customer` names ('' when none is named: no window of its own).
   */
  async budgetsOver(caller: Caller, customer: string): Promise<{ budget: Budget; subject: string }[]> {
    const loaded = await this.of(caller.accountId);
    const out: { budget: Budget; subject: string }[] = [];
    for (const b of loaded.budgets) {
      // Over the caller at all (a customer template: for any customer its requests name)?
      if (subjectOf(b, caller, 'any') === undefined) continue;
      out.push({ budget: b, subject: b.scope === 'customer' ? customer : '' });
    }
    return out;
  }

  /** An account's budgets changed here: forgotten now (others hear the notice). */
  forget(accountId: string): void {
    this.accounts.delete(accountId);
  }

  private of(accountId: string): Loaded | Promise<Loaded> {
    const known = this.accounts.get(accountId);
    if (known && performance.now() - known.at < BUDGET_BOOK_MAX_AGE_MS) return known;
    let p = this.loading.get(accountId);
    if (!p) {
      p = this.load(accountId).finally(() => this.loading.delete(accountId));
      this.loading.set(accountId, p);
    }
    return p;
  }

  private async load(accountId: string): Promise<Loaded> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT id, scope, scope_id, name, amount_nano::text AS amount, period, time_zone, start_day, rolling_hours, mode, thresholds
         FROM budgets WHERE account_id = ? AND deleted_at IS NULL ORDER BY id`,
        [accountId],
      ),
    );
    const loaded: Loaded = {
      at: performance.now(),
      customers: rows.some((r) => r.scope === 'customer'),
      windows: new Map(),
      budgets: rows.map((r) => {
        const period: Period = periodFromColumns(r as never);
        return {
          id: r.id as string,
          accountId,
          scope: r.scope as Scope,
          scopeId: r.scope_id as string,
          name: r.name as string,
          amountNano: BigInt(r.amount as string),
          period,
          mode: r.mode as Mode,
          thresholds: r.thresholds as number[],
          clock: new WindowClock(period),
        };
      }),
    };
    if (this.accounts.size >= MAX_ACCOUNTS) this.accounts.clear();
    this.accounts.set(accountId, loaded);
    return loaded;
  }

  /** Hears budget changes of every instance; while not listening, the age bound alone applies. */
  async listen(databaseUrl: string): Promise<void> {
    const client = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      application_name: 'gateway-budgets',
    });
    this.listener = client;
    const lost = (err?: Error) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => {});
      this.accounts.clear();
      if (this.stopped) return;
      this.log?.warn(
        { err: err?.message },
        'budget change listener lost; budgets are read again every 5 s until it is back',
      );
      setTimeout(() => this.listen(databaseUrl).catch(() => {}), 1000).unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.payload) this.accounts.delete(msg.payload);
      else this.accounts.clear();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${BUDGETS_CHANNEL}`);
      this.accounts.clear();
    } catch (err) {
      lost(err as Error);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => {});
  }
}

/**
 * The subject a budget counts the caller's request under ('' for one window per period), or
 * undefined when the budget is not the caller's: an organisation's applies to all its requests, a
 * team's to its team keys', a member's to their personal keys', a key's to its own, and a customer
 * template to each end customer a request names (under the whole organisation, or under one key or team).
 */
export function subjectOf(
  b: Pick<Budget, 'scope' | 'scopeId'>,
  caller: Pick<Caller, 'keyId' | 'memberId' | 'teamId'>,
  customer: string,
): string | undefined {
  switch (b.scope) {
    case 'organisation':
      return '';
    case 'team':
      return caller.teamId !== '' && caller.teamId === b.scopeId ? '' : undefined;
    case 'member':
      return caller.memberId !== '' && caller.memberId === b.scopeId ? '' : undefined;
    case 'key':
      return caller.keyId === b.scopeId ? '' : undefined;
    case 'customer': {
      if (customer === '') return undefined;
      if (b.scopeId === '') return customer;
      if (b.scopeId === `key:${caller.keyId}`) return customer;
      if (caller.teamId !== '' && b.scopeId === `team:${caller.teamId}`) return customer;
      return undefined;
    }
  }
}
