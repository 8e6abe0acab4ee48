// Bounds on requests in flight at once, per key, team, member and account
// (docs/security.md#requests-in-flight), held across every instance on the database. A bound is a
// scope (`key:<id>`, `team:<id>`, `member:<id>`, `account:<id>`) and a number. PostgreSQL keeps, per scope, the slots
// every instance was granted (in_flight_totals, never above the bound: one conditional upsert
// takes from it) and each instance's own grant (in_flight_grants). An instance admits requests
// in memory while it has granted slots free, so a busy key costs no statement per request; it
// takes more only when its grant is full (an eighth of what the bound has left, at most
// MAX_GRANT, at least what it needs), and hands back what its recent peak did not use after a
// second or so (RATE_LIMIT_GRANT_IDLE_MS). So every instance together never has more than the
// bound in flight: each one's requests fit in its grant, and the grants in the bound. Near the
// bound (fewer than MAX_GRANT slots left) grants shrink to what is needed and a finished
// request's slot goes back at once, so K requests over a bound of K get exactly K slots; far
// from it, a grant not yet handed back can refuse a request elsewhere early, never admit one
// beyond.
//
// An instance that dies stops refreshing its rows (every 5 s) and any instance deletes them after
// 30 s, giving their slots back. An instance uses a grant only while its row was surely refreshed
// within that time (with two heartbeats to spare), and a row it finds deleted is a grant lost:
// its requests still running are covered by the next grants it takes before it admits another.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../db/db.ts';

/** One bound a request must fit under: its scope, the most in flight at once (> 0), and the code a refusal names. */
export interface InFlightBound {
  scope: string;
  limit: number;
  code: 'key_concurrency_limit' | 'team_concurrency_limit' | 'member_concurrency_limit' | 'account_concurrency_limit';
}

/**
 * The bounds of a request by a key: the key's own (its rotation chain's), its team's or its
 * member's (an organisation's settings), and its account's; 0 means none.
 */
export function boundsOf(
  key: { windowId: string; maxInFlight: number },
  account: { id: string; maxInFlight: number },
  owner: { teamId: string; teamMaxInFlight: number; memberId: string; memberMaxInFlight: number } = {
    teamId: '',
    teamMaxInFlight: 0,
    memberId: '',
    memberMaxInFlight: 0,
  },
) {
  const bounds: InFlightBound[] = [];
  if (key.maxInFlight > 0)
    bounds.push({ scope: `key:${key.windowId}`, limit: key.maxInFlight, code: 'key_concurrency_limit' });
  if (owner.teamId && owner.teamMaxInFlight > 0)
    bounds.push({ scope: `team:${owner.teamId}`, limit: owner.teamMaxInFlight, code: 'team_concurrency_limit' });
  if (owner.memberId && owner.memberMaxInFlight > 0)
    bounds.push({
      scope: `member:${owner.memberId}`,
      limit: owner.memberMaxInFlight,
      code: 'member_concurrency_limit',
    });
  if (account.maxInFlight > 0)
    bounds.push({ scope: `account:${account.id}`, limit: account.maxInFlight, code: 'account_concurrency_limit' });
  return bounds;
}

/** Slots one instance takes from a bound at a time, at most; and the share of what is left. */
const MAX_GRANT = 16;
const GRANT_SHARE = 8;
/** How often an instance refreshes its rows; a row not refreshed for STALE_MS holds no slot. */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 30_000;
const TICK_MS = 250;
/** How often rows that count nothing any more are deleted. */
const PRUNE_MS = 60_000;
/** A bound the database just found full is not asked again for this long by the same scope's requests: each is refused at once. */
const REFUSED_MS = 50;

/** What this instance holds of one scope. */
interface Pool {
  limit: number;
  /** Slots the database counts for this instance. */
  granted: number;
  inUse: number;
  /** The most in use since the last hand-back check. */
  peak: number;
  checkedAt: number;
  /** performance.now() when a statement that refreshed this instance's row was sent. */
  confirmedAt: number;
  /** The bound had fewer than MAX_GRANT slots left when last asked: a finished request's slot goes back at once. */
  tight: boolean;
  /** When the database last said the bound had no slot left (asked again only REFUSED_MS later). */
  refusedAt: number;
  /** A claim or hand-back under way: one at a time per scope. */
  op: Promise<unknown> | undefined;
  /** Counts the statements that set `granted`, so a heartbeat's answer does not overwrite a newer one. */
  version: number;
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

export class InFlightLimits {
  private readonly db: Db;
  private readonly log: Logger | undefined;
  private readonly idleMs: number;
  private readonly heartbeatMs: number;
  private readonly staleMs: number;
  /** A grant is used from memory only while its row was refreshed this recently (room for two missed beats). */
  private readonly trustedMs: number;
  /** This process, in in_flight_grants. */
  private readonly instance = randomUUID();
  private readonly pools = new Map<string, Pool>();
  private timers: NodeJS.Timeout[] = [];

  /** `heartbeatMs` and `staleMs` are there for tests; an instance's own are the defaults. */
  constructor(db: Db, opts: { idleMs?: number; log?: Logger; heartbeatMs?: number; staleMs?: number } = {}) {
    this.db = db;
    this.log = opts.log;
    this.idleMs = opts.idleMs ?? 1_000;
    this.heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
    this.staleMs = opts.staleMs ?? STALE_MS;
    this.trustedMs = this.staleMs - 2 * this.heartbeatMs;
  }

  /**
   * A slot of every bound, or none: undefined when the request may run (give the slots back with
   * release), else the first bound that has no room. Answered at once, without a promise, in the
   * usual case: every bound has a granted slot free here.
   */
  take(bounds: readonly InFlightBound[]): InFlightBound | undefined | Promise<InFlightBound | undefined> {
    const now = performance.now();
    for (const b of bounds) if (!this.hasRoom(b, now)) return this.takeEach(bounds);
    for (const b of bounds) this.use(this.pools.get(b.scope)!);
    return undefined;
  }

  /** take() when a bound has no granted slot free here: each bound's slot, asking the database where needed. */
  private async takeEach(bounds: readonly InFlightBound[]): Promise<InFlightBound | undefined> {
    const got = await Promise.all(bounds.map((b) => this.takeOne(b)));
    const refused = bounds.find((_, i) => !got[i]);
    if (refused) this.release(bounds.filter((_, i) => got[i]));
    return refused;
  }

  /** Gives back the slots take() took for `bounds`. */
  release(bounds: readonly InFlightBound[]): void {
    for (const b of bounds) {
      const p = this.pools.get(b.scope);
      if (!p || p.inUse === 0) continue;
      p.inUse--;
      // Near the bound, a slot this instance does not use may be what another instance waits for.
      if (p.tight)
        void this.serially(p, () => this.handBack(b.scope, p, p.granted - p.inUse)).catch((err) =>
          this.log?.warn({ err }, 'handing back in-flight slots failed; tried again later'),
        );
    }
  }

  /** Starts the heartbeat, the sweep of dead instances' rows and the hand-back of unused slots. */
  start(): void {
    // Each on its own interval: no tick arithmetic to keep in step.
    this.timers = [
      setInterval(() => this.handBackIdle(), Math.min(TICK_MS, this.heartbeatMs)),
      setInterval(() => void this.heartbeat(), this.heartbeatMs),
      setInterval(() => void this.prune(), PRUNE_MS),
    ];
    for (const t of this.timers) t.unref();
  }

  /** Shutdown: every slot this instance was granted goes back at once. */
  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await this.db
      .raw(giveBack('g.instance = CAST($1 AS text)'), [this.instance])
      .catch((err) =>
        this.log?.warn({ err }, 'handing back in-flight slots failed; they go when their rows are stale'),
      );
    this.pools.clear();
  }

  private hasRoom(b: InFlightBound, now = performance.now()): boolean {
    const p = this.pools.get(b.scope);
    return p !== undefined && p.limit === b.limit && p.inUse < p.granted && now - p.confirmedAt < this.trustedMs;
  }

  private use(p: Pool): void {
    p.inUse++;
    if (p.inUse > p.peak) p.peak = p.inUse;
  }

  /**
   * A slot of `b`: a free one of this instance's grant, else one more granted by the database,
   * taken inside the scope's one-at-a-time step, so a grant goes to the requests that waited for
   * it. False when the bound has none left (asked at most every REFUSED_MS per scope).
   */
  private takeOne(b: InFlightBound): Promise<boolean> | boolean {
    const p = this.pools.get(b.scope);
    if (p && this.hasRoom(b)) {
      this.use(p);
      return true;
    }
    const pool = p ?? this.newPool(b);
    return this.serially(pool, async () => {
      if (this.hasRoom(b)) {
        this.use(pool);
        return true;
      }
      if (pool.limit !== b.limit) {
        // The bound changed (the key's setting): what the old one granted beyond the running requests goes back first.
        await this.handBack(b.scope, pool, pool.granted - pool.inUse);
        pool.limit = b.limit;
      } else if (performance.now() - pool.refusedAt < REFUSED_MS) return false;
      if (!(await this.claim(b, pool)) || !this.hasRoom(b)) {
        pool.refusedAt = performance.now();
        pool.tight = true;
        return false;
      }
      this.use(pool);
      return true;
    });
  }

  private newPool(b: InFlightBound): Pool {
    const now = performance.now();
    const p: Pool = {
      limit: b.limit,
      granted: 0,
      inUse: 0,
      peak: 0,
      checkedAt: now,
      confirmedAt: -Infinity,
      tight: false,
      refusedAt: -Infinity,
      op: undefined,
      version: 0,
    };
    this.pools.set(b.scope, p);
    return p;
  }

  /** Enough more slots of `b` for this instance to run one more request; false when the bound has not got them. */
  private async claim(b: InFlightBound, p: Pool): Promise<boolean> {
    const sentAt = performance.now();
    const r = rowsOf(
      await this.db.raw(CLAIM, [
        b.scope,
        this.instance,
        b.limit,
        Math.max(1, p.inUse + 1 - p.granted),
        MAX_GRANT,
        GRANT_SHARE,
      ]),
    )[0];
    if (r?.granted == null) return false;
    p.version++;
    p.granted = Number(r.granted);
    p.confirmedAt = sentAt;
    p.tight = b.limit - Number(r.total) < MAX_GRANT;
    return true;
  }

  /** Gives `n` of this instance's slots of `scope` back to the bound. */
  private async handBack(scope: string, p: Pool, n: number): Promise<void> {
    if (n <= 0) return;
    // Out of the grant before the statement is sent: once the database has them another instance
    // may be granted them, so a request admitted here meanwhile must not count on them. Should the
    // statement fail, the grant is only smaller here than the database's count until the heartbeat.
    p.granted -= n;
    p.version++;
    const r = rowsOf(await this.db.raw(HAND_BACK, [scope, this.instance, n]))[0];
    p.version++;
    // No row to take them from: the grant was lost (a stale row deleted); the database counts none.
    p.granted = r?.granted == null ? 0 : Number(r.granted);
    if (r?.total != null) p.tight = p.limit - Number(r.total) < MAX_GRANT;
  }

  /** Each scope whose recent peak left slots unused for a while gives them back; empty pools are forgotten. */
  private handBackIdle(): void {
    const now = performance.now();
    for (const [scope, p] of this.pools) {
      if (p.op || now - p.checkedAt < this.idleMs) continue;
      p.checkedAt = now;
      const spare = p.granted - Math.max(p.peak, p.inUse);
      p.peak = p.inUse;
      if (spare > 0)
        void this.serially(p, () => this.handBack(scope, p, p.granted - Math.max(p.peak, p.inUse))).catch((err) =>
          this.log?.warn({ err }, 'handing back in-flight slots failed; tried again later'),
        );
      else if (p.granted === 0 && p.inUse === 0) this.pools.delete(scope);
    }
  }

  /** Refreshes this instance's rows, learns of grants lost, and deletes dead instances' rows (giving their slots back). */
  private async heartbeat(): Promise<void> {
    const sentAt = performance.now();
    const versions = new Map([...this.pools].map(([s, p]) => [s, p.version]));
    try {
      if (this.pools.size > 0) {
        const rows = rowsOf(
          // Rows that hold nothing are left to go stale and be pruned.
          await this.db.raw(
            `UPDATE in_flight_grants SET seen_at = now() WHERE instance = ? AND granted > 0 RETURNING scope, granted`,
            [this.instance],
          ),
        );
        const counted = new Map(rows.map((r) => [r.scope as string, Number(r.granted)]));
        for (const [scope, p] of this.pools) {
          if (p.op || versions.get(scope) !== p.version) continue;
          p.granted = counted.get(scope) ?? 0;
          p.confirmedAt = sentAt;
        }
      }
      await this.db.raw(giveBack('g.seen_at < now() - make_interval(secs => CAST($1 AS float8))'), [
        this.staleMs / 1000,
      ]);
    } catch (err) {
      this.log?.warn({ err }, 'in-flight heartbeat failed; tried again shortly');
    }
  }

  /** Rows that count nothing any more. */
  private async prune(): Promise<void> {
    await this.db
      .raw(`DELETE FROM in_flight_grants WHERE granted = 0 AND seen_at < now() - make_interval(secs => ?)`, [
        this.staleMs / 1000,
      ])
      .catch(() => {});
    await this.db.raw(`DELETE FROM in_flight_totals WHERE granted = 0`).catch(() => {});
  }

  private serially<T>(p: Pool, fn: () => Promise<T>): Promise<T> {
    const run = (p.op ?? Promise.resolve()).catch(() => {}).then(fn);
    p.op = run;
    const clear = () => {
      if (p.op === run) p.op = undefined;
    };
    run.then(clear, clear);
    return run;
  }
}

// Each statement locks the scope's total before an instance's row (the order every statement
// here takes them in, so they never wait on each other in a circle).

/**
 * A grant of at least `need` ($4) slots (an eighth ($6) of what is left of the bound $3, at most
 * $5), if the bound has them: added to the total of scope $1 and to instance $2's row; answers
 * the row's new count (null: none granted) and the new total. Its parameters are numbered, each
 * used more than once.
 */
const CLAIM = `
  WITH t AS (
    INSERT INTO in_flight_totals AS t (scope, granted, last_grant)
    SELECT CAST($1 AS text), f.n, f.n
    FROM (SELECT LEAST(CAST($3 AS int), GREATEST(CAST($4 AS int),
            LEAST(CAST($5 AS int), CAST($3 AS int) / CAST($6 AS int)))) AS n) f
    WHERE CAST($4 AS int) <= CAST($3 AS int)
    ON CONFLICT (scope) DO UPDATE
      SET granted = t.granted + LEAST(CAST($3 AS int) - t.granted, GREATEST(CAST($4 AS int),
            LEAST(CAST($5 AS int), (CAST($3 AS int) - t.granted) / CAST($6 AS int)))),
          last_grant = LEAST(CAST($3 AS int) - t.granted, GREATEST(CAST($4 AS int),
            LEAST(CAST($5 AS int), (CAST($3 AS int) - t.granted) / CAST($6 AS int))))
      WHERE t.granted + CAST($4 AS int) <= CAST($3 AS int)
    RETURNING t.last_grant AS n, t.granted AS total
  ), g AS (
    INSERT INTO in_flight_grants AS g (scope, instance, granted, seen_at)
    SELECT CAST($1 AS text), CAST($2 AS text), t.n, now() FROM t
    ON CONFLICT (scope, instance) DO UPDATE SET granted = g.granted + EXCLUDED.granted, seen_at = now()
    RETURNING g.granted
  )
  SELECT (SELECT granted FROM g) AS granted, (SELECT total FROM t) AS total`;

/** $3 of instance $2's slots of scope $1 back to the total; answers what its row has left (null: no row held them) and the total. */
const HAND_BACK = `
  WITH t AS (
    SELECT scope FROM in_flight_totals WHERE scope = CAST($1 AS text) FOR UPDATE
  ), g AS (
    UPDATE in_flight_grants SET granted = granted - CAST($3 AS int), seen_at = now()
    WHERE scope = (SELECT scope FROM t) AND instance = CAST($2 AS text) AND granted >= CAST($3 AS int)
    RETURNING granted
  ), u AS (
    UPDATE in_flight_totals SET granted = granted - CAST($3 AS int)
    WHERE scope = CAST($1 AS text) AND EXISTS (SELECT 1 FROM g)
    RETURNING granted
  )
  SELECT (SELECT granted FROM g) AS granted, (SELECT granted FROM u) AS total`;

/** Deletes the grant rows `where` picks (alias g, one parameter $1), giving what they held back to their totals. */
function giveBack(where: string): string {
  return `
    WITH t AS (
      SELECT scope FROM in_flight_totals
      WHERE scope IN (SELECT g.scope FROM in_flight_grants g WHERE ${where})
      ORDER BY scope FOR UPDATE
    ), dead AS (
      DELETE FROM in_flight_grants g USING t WHERE g.scope = t.scope AND ${where}
      RETURNING g.scope, g.granted
    )
    UPDATE in_flight_totals s SET granted = s.granted - d.n
    FROM (SELECT scope, CAST(sum(granted) AS int) AS n FROM dead GROUP BY scope) d WHERE s.scope = d.scope`;
}
