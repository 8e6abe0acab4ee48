// Credit leases (BILLING_MODE=lease): billing off the request path, exactness kept.
//
// An instance reserves a slice of an account's available balance in one statement: the lease
// is an ordinary hold (so available = balance - held still holds, and the balance can never go
// negative whatever N instances do). Requests then reserve and settle against the lease in
// memory, with no database round trip of their own; their usage rows and ledger charges are
// written in batches, each batch in one statement that charges the balance and shrinks the
// lease by the same amount. Idle leases are returned, and shutdown flushes and returns all.
//
// Loss window on a crash: the charges not yet flushed (at most LEASE_FLUSH_MS of requests, or
// 256 of them) are lost with the process: those requests are not charged and have no usage
// row. The lease hold itself expires and the sweeper releases it. The operator bears that loss;
// a customer is never charged twice or beyond their balance.
//
// A lease is the gateway's reservation, not the customer's spending: when money must leave the
// account (a refund), the instance gives back what its lease holds beyond its requests in flight
// (giveBack, asked through NOTIFY by Ledger.reclaimLeases).
//
// Budgets (docs/budgets.md): a lease on an account under budgets also holds a slice of each
// budget window its requests are under, held in the window row as a request's hold is (recorded
// in hold_budgets under the lease's id). A request reserves its amount in the lease and in every
// slice; the batch that writes its charge moves the charge from held to spent in each window. So
// every instance's slices plus the window's spend never exceed the budget. A slice takes at most
// a quarter of what its window has left (at least what the request needs), is given back with the
// lease, when idle or its window has ended, and when another instance is refused for want of room.
import pg from 'pg';
import type { Logger } from 'pino';
import { retryIfConnectionLost, type Db } from '../db/db.ts';
import { plainArray, textArray } from '../db/array-literal.ts';
import { LEASE_RECLAIM_CHANNEL, storedTraceId, type Balance, type Ledger } from './ledger.ts';
import { newId } from './ids.ts';
import {
  holdEachInWindows,
  lockWindows,
  moveSliceMoney,
  sliceChargeParams,
  BUDGET_ALERT_DUE,
  SLICE_CHARGES_CTE,
  SLICE_LOCKS_CTE,
  windowKey,
  windowOfKey,
  EXPIRE_BUDGETS_CTE,
  type WindowRef,
} from './budget-holds.ts';
import { storedAttempts } from './attempts.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows?: Row[] }).rows ?? [];

export interface LeaseConfig {
  /** How much of the available balance one lease takes at a time (nano-USD). */
  sliceNano: bigint;
  flushMs: number;
  idleMs: number;
  ttlSeconds: number;
}

/** One settled request, waiting for its batch. */
export interface LeasedCharge {
  requestId: string;
  keyId: string;
  /** Whose key made the request, when it was made ('' for the other): the usage row's member and team. */
  memberId: string;
  teamId: string;
  model: string;
  /** The name the caller asked for: the model's id or an alias of it. */
  requestedModel: string;
  /** The price book version the request was priced at (0: none). */
  priceVersion: bigint;
  /** What the provider bills for the request, in full (costNano + uncoveredNano is the customer's figure). */
  providerCostNano: bigint;
  /** The markup version the charge was computed at (0: none). */
  markupVersion: bigint;
  /** The deployment whose answer decided the request ('' when none answered). */
  deployment: string;
  /** The request's trace id (32 lowercase hex) when its trace was sampled; unset or '' otherwise (stored NULL). */
  traceId?: string;
  /** Its upstream attempts (attempts.ts); unset or '' for none (stored NULL). */
  attempts?: string;
  route: string;
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  cacheWriteTokens: bigint;
  usageEstimated: boolean;
  /** The customer's charge (the provider cost marked up), at most the reservation; the rest is uncovered. */
  costNano: bigint;
  uncoveredNano: bigint;
  status: string;
  httpStatus: number;
  latencyMs: number;
  units: bigint;
  unit: string;
}

/** A lease's slice of one budget window: held in the window's row, reserved by requests in memory. */
interface Slice {
  key: string;
  window: WindowRef;
  /** Not reserved by a request in flight nor charged by one waiting for its batch. */
  free: bigint;
  inFlight: number;
  lastUsed: number;
}

interface Lease {
  id: string;
  accountId: string;
  /** Not reserved by a request in flight nor charged by one waiting for its batch. */
  free: bigint;
  inFlight: number;
  /** What the requests in flight have reserved: the customer's "held". */
  reserved: bigint;
  pending: LeasedCharge[];
  /** Its budget slices, by window key. */
  slices: Map<string, Slice>;
  /** Whether it ever held a budget slice (its return then releases them, the account locked first). */
  hadSlices?: boolean;
  /** What the pending charges charged each window, by window key: the batch moves it to spent. */
  pendingWindows: Map<string, bigint>;
  lastUsed: number;
  /** Database work on this lease, one statement at a time. */
  queue: Promise<unknown>;
  /** Takes no new requests: retired, or given back and waiting for its requests in flight. */
  closed: boolean;
  /** Set once the lease is being returned to the account, so it is returned once. */
  returning?: Promise<void>;
}

export interface Reservation {
  lease: Lease;
  amountNano: bigint;
  /** The budget slices it reserved `amountNano` in too. */
  slices: Slice[];
}

export class LeaseBook {
  private readonly leases = new Map<string, Lease>();
  /** Leases being returned: their last batch may still be unwritten. */
  private readonly retiring = new Set<Lease>();
  private readonly opening = new Map<string, Promise<Lease | undefined>>();
  private readonly timer: NodeJS.Timeout;
  private ticks = 0;
  private listener: pg.Client | undefined;
  private listenRetry: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly db: Db;
  private readonly ledger: Ledger;
  private readonly config: LeaseConfig;
  private readonly log: Logger;
  /** Told of the budget windows a batch just charged (budget alerts, src/budgets/alerts.ts). */
  windowsCharged?: (windows: Pick<WindowRef, 'budgetId' | 'subject' | 'windowStart'>[]) => void;

  constructor(db: Db, ledger: Ledger, config: LeaseConfig, log: Logger) {
    this.db = db;
    this.ledger = ledger;
    this.config = config;
    this.log = log;
    this.timer = setInterval(() => this.tick(), config.flushMs);
    this.timer.unref();
  }

  /**
   * Reserves `amountNano` for one request, from this instance's lease on the account and its slice
   * of each budget window in `windows`; undefined when the balance or a budget cannot cover it
   * that way (the caller then holds in the database, which says which).
   */
  async reserve(
    keyHash: Buffer,
    accountId: string,
    amountNano: bigint,
    windows: readonly WindowRef[] = [],
  ): Promise<Reservation | undefined> {
    for (let attempt = 0; attempt < 2; attempt++) {
      let lease = this.leases.get(accountId);
      if (!lease || lease.closed) lease = await this.open(keyHash, accountId, amountNano);
      if (!lease) return undefined;
      if (lease.free < amountNano && !(await this.grow(lease, amountNano))) return undefined;
      // Only a slice short of the amount waits in the lease's queue (behind a batch being written).
      if (windows.some((w) => (lease.slices.get(windowKey(w))?.free ?? 0n) < amountNano))
        if (!(await this.growSlices(lease, windows, amountNano))) return undefined;
      // Retired while we waited: take a fresh lease rather than spend from a returned one.
      if (lease.closed) continue;
      const slices = windows.map((w) => lease.slices.get(windowKey(w)));
      // Another request took what a grow made free meanwhile: try once more.
      if (lease.free < amountNano || slices.some((sl) => !sl || sl.free < amountNano)) continue;
      const now = performance.now();
      for (const sl of slices as Slice[]) {
        sl.free -= amountNano;
        sl.inFlight++;
        sl.lastUsed = now;
      }
      lease.free -= amountNano;
      lease.reserved += amountNano;
      lease.inFlight++;
      lease.lastUsed = now;
      return { lease, amountNano, slices: slices as Slice[] };
    }
    return undefined;
  }

  /** Settles a reserved request in memory: charges min(cost, reserved) of the customer's cost; the batch writes it. */
  settle(r: Reservation, charge: Omit<LeasedCharge, 'costNano' | 'uncoveredNano'>, costNano: bigint): bigint {
    const charged = costNano < r.amountNano ? costNano : r.amountNano;
    r.lease.free += r.amountNano - charged;
    r.lease.reserved -= r.amountNano;
    r.lease.inFlight--;
    for (const sl of r.slices) {
      sl.free += r.amountNano - charged;
      sl.inFlight--;
      if (charged > 0n) r.lease.pendingWindows.set(sl.key, (r.lease.pendingWindows.get(sl.key) ?? 0n) + charged);
    }
    r.lease.pending.push({ ...charge, costNano: charged, uncoveredNano: costNano - charged });
    if (r.lease.pending.length >= 256)
      this.flush(r.lease).catch((err) =>
        this.log.warn({ err, lease: r.lease.id }, 'lease flush failed; retried next tick'),
      );
    // A lease given back keeps its requests in flight; the last one to settle returns the rest.
    if (r.lease.closed && r.lease.inFlight === 0) void this.retire(r.lease);
    return charged;
  }

  /**
   * Gives back what this instance's leases on the account hold beyond their requests in flight
   * (Ledger.reclaimLeases asked): the lease takes no new requests, its charges are written, and
   * its free part is released with the lease marked `reclaimed_at`, in one statement; the lease
   * is returned whole once its last request in flight settles.
   */
  async giveBack(accountId: string): Promise<void> {
    await this.opening.get(accountId)?.catch(() => undefined);
    const live = this.leases.get(accountId);
    if (live) {
      live.closed = true;
      this.leases.delete(accountId);
      this.retiring.add(live);
    }
    const mine = [...this.retiring].filter((l) => l.accountId === accountId);
    await Promise.all(mine.map((lease) => this.releaseFree(lease)));
  }

  private async releaseFree(lease: Lease): Promise<void> {
    await this.flush(lease).catch((err) =>
      this.log.warn({ err, lease: lease.id }, 'lease flush failed; retried next tick'),
    );
    await this.serial(lease, async () => {
      const free = lease.free;
      lease.free = 0n;
      const release = (runner: Pick<Db, 'raw'>) =>
        runner.raw(
          `WITH h AS (
             UPDATE holds SET amount_nano = amount_nano - CAST(? AS bigint), reclaimed_at = now() WHERE request_id = ? AND status = 'active' RETURNING account_id
           )
           UPDATE accounts SET held_nano = held_nano - CAST(? AS bigint) FROM h WHERE accounts.id = h.account_id`,
          [free.toString(), lease.id, free.toString()],
        );
      try {
        if (lease.slices.size === 0) await release(this.db);
        else await this.releaseSlices(lease, () => true, release);
      } catch (err) {
        lease.free += free;
        this.log.warn({ err, lease: lease.id }, 'giving a lease back failed');
      }
    });
    if (lease.inFlight === 0) await this.retire(lease);
  }

  /**
   * Makes `need` free in the lease's slice of each window, taking each shortfall (at most a
   * quarter of what the window has left, at least the shortfall) from the window in one
   * transaction: the account's row locked first (as every statement that moves a window's money
   * does, so none waits on another in a circle), then the lease's hold, checked active, then the
   * windows in their order.
   * False when a hard window has less room than its shortfall (the request goes to a database
   * hold, whose refusal names the budget).
   */
  private growSlices(lease: Lease, windows: readonly WindowRef[], need: bigint): Promise<boolean> {
    return this.serial(lease, async () => {
      const freeIn = (w: WindowRef) => lease.slices.get(windowKey(w))?.free ?? 0n;
      const short = windows.filter((w) => freeIn(w) < need);
      if (short.length === 0) return true;
      const taken = await retryIfConnectionLost(() =>
        this.db.transaction(async (trx) => {
          await trx.raw('SELECT 1 FROM accounts WHERE id = ? FOR UPDATE', [lease.accountId]);
          const live = rowsOf(
            await trx.raw(`SELECT 1 FROM holds WHERE request_id = ? AND status = 'active' FOR UPDATE`, [lease.id]),
          );
          if (live.length === 0) return null;
          const rooms = await lockWindows(trx, short);
          const amounts = short.map((w, i) => sliceSize(w, rooms[i]!, need - freeIn(w), this.config.sliceNano));
          if (amounts.some((a) => a === undefined)) return null;
          await holdEachInWindows(trx, lease.id, short, amounts as bigint[]);
          return amounts as bigint[];
        }),
      );
      if (!taken) return false;
      lease.hadSlices = true;
      const now = performance.now();
      short.forEach((w, i) => {
        const key = windowKey(w);
        let slice = lease.slices.get(key);
        if (!slice) lease.slices.set(key, (slice = { key, window: w, free: 0n, inFlight: 0, lastUsed: now }));
        slice.free += taken[i]!;
      });
      return !lease.closed;
    });
  }

  /**
   * Gives back the free part of the lease's slices that `pick` chooses, with `alsoRun` (the
   * lease's own release) in the same transaction, the account's row locked first. A slice with
   * no request in flight is forgotten; on failure each keeps what it had.
   */
  private async releaseSlices(
    lease: Lease,
    pick: (slice: Slice) => boolean,
    alsoRun?: (runner: Pick<Db, 'raw'>) => Promise<unknown>,
  ): Promise<void> {
    const picked = [...lease.slices.values()].filter(pick);
    const moves = new Map(picked.map((sl) => [sl.key, { charged: 0n, released: sl.free }]));
    for (const sl of picked) sl.free = 0n;
    try {
      await this.db.transaction(async (trx) => {
        await trx.raw('SELECT 1 FROM accounts WHERE id = ? FOR UPDATE', [lease.accountId]);
        await alsoRun?.(trx);
        await moveSliceMoney(trx, lease.id, moves);
      });
    } catch (err) {
      for (const sl of picked) sl.free += moves.get(sl.key)!.released;
      throw err;
    }
    for (const sl of picked) if (sl.inFlight === 0) lease.slices.delete(sl.key);
  }

  /** Slices no request used for LEASE_IDLE_MS, or whose window has ended, go back to their windows. */
  private pruneSlices(lease: Lease): Promise<unknown> {
    const now = performance.now();
    const wall = Date.now();
    const stale = (sl: Slice) =>
      sl.inFlight === 0 && (sl.window.windowEnd <= wall || now - sl.lastUsed > this.config.idleMs);
    if (![...lease.slices.values()].some(stale)) return Promise.resolve();
    return this.serial(lease, () => this.releaseSlices(lease, stale)).catch((err) =>
      this.log.warn({ err, lease: lease.id }, 'giving budget slices back failed; tried again later'),
    );
  }

  /**
   * Listens for requests to give leases back, on a connection of its own (reconnected after a
   * loss). A request missed while it was down is found on reconnecting: any account of a lease
   * here whose leases are paused is given back then.
   */
  async listen(databaseUrl: string): Promise<void> {
    const client = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      application_name: 'gateway-lease-listener',
    });
    this.listener = client;
    const lost = (err?: Error) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => {});
      if (this.stopped) return;
      this.log.warn({ err: err?.message }, 'lease reclaim listener lost; reconnecting');
      this.listenRetry = setTimeout(() => this.listen(databaseUrl).catch(() => {}), 1000);
      this.listenRetry.unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.payload) this.giveBack(msg.payload).catch((err) => this.log.warn({ err }, 'giving a lease back failed'));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${LEASE_RECLAIM_CHANNEL}`);
      const accounts = [...new Set([...this.leases.keys(), ...[...this.retiring].map((l) => l.accountId)])];
      if (accounts.length > 0) {
        const paused = await client.query('SELECT id FROM accounts WHERE id = ANY($1) AND lease_pause_until > now()', [
          accounts,
        ]);
        for (const row of paused.rows as { id: string }[]) void this.giveBack(row.id).catch(() => {});
      }
    } catch (err) {
      lost(err as Error);
    }
  }

  /**
   * An account's balance as its key holder should see it from this instance: the written
   * figures (`read`, which leaves lease reservations out) less the charges this instance has
   * made in memory and not yet written, with the reservations of its requests in flight as held.
   * The read runs in the leases' queues, so no batch is written meanwhile: each charge is
   * counted once, in the database or in memory. Another instance's unwritten charges are not
   * known here: they appear within its LEASE_FLUSH_MS.
   */
  async customerView(accountId: string, read: () => Promise<Balance>): Promise<Balance> {
    const mine = [...this.retiring].filter((l) => l.accountId === accountId);
    const live = this.leases.get(accountId);
    if (live) mine.push(live);
    const inQueues = mine.reduce<() => Promise<Balance>>((inner, lease) => () => this.serial(lease, inner), read);
    const written = await inQueues();
    let unwritten = 0n;
    let reserved = 0n;
    for (const lease of mine) {
      for (const c of lease.pending) unwritten += c.costNano;
      reserved += lease.reserved;
    }
    const balanceNano = written.balanceNano - unwritten;
    const heldNano = written.heldNano + reserved;
    return { accountId, balanceNano, heldNano, availableNano: balanceNano - heldNano };
  }

  /** Writes every pending charge and returns every lease (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.stopped = true;
    clearTimeout(this.listenRetry);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => {});
    await Promise.all([...this.leases.values(), ...this.retiring].map((l) => this.retire(l)));
  }

  private async open(keyHash: Buffer, accountId: string, need: bigint): Promise<Lease | undefined> {
    const busy = this.opening.get(accountId);
    if (busy) return busy;
    const p = retryIfConnectionLost(async () => {
      // A fresh id per attempt: if a lost connection had in fact committed the previous one,
      // that hold is simply never used, and expires and is swept like a crashed instance's.
      const id = newId('lease');
      const want = need > this.config.sliceNano ? need : this.config.sliceNano;
      const hold = await this.ledger.placeHold({
        apiKeyHash: keyHash,
        requestId: id,
        minNano: need,
        maxNano: want,
        ttlSeconds: this.config.ttlSeconds,
        lease: true,
      });
      if (hold.kind !== 'held') return undefined;
      const lease: Lease = {
        id,
        accountId,
        free: hold.amountNano,
        inFlight: 0,
        reserved: 0n,
        pending: [],
        slices: new Map(),
        pendingWindows: new Map(),
        lastUsed: performance.now(),
        queue: Promise.resolve(),
        closed: false,
      };
      this.leases.set(accountId, lease);
      return lease;
    }).finally(() => this.opening.delete(accountId));
    this.opening.set(accountId, p);
    return p;
  }

  /**
   * Makes `need` free in the lease, taking the shortfall (at least a slice) from the available
   * balance. The shortfall is worked out in the lease's queue: what is free when the grow runs,
   * not when the request asked, decides it, so a lease with some but too little left is grown.
   */
  private grow(lease: Lease, need: bigint): Promise<boolean> {
    return this.serial(lease, async () => {
      if (lease.free >= need) return true; // another request grew it meanwhile
      const shortfall = need - lease.free;
      const want = shortfall > this.config.sliceNano ? shortfall : this.config.sliceNano;
      // A transaction: the lease row is locked and checked before the account grows, so a lease
      // the sweeper just expired never takes balance (amounts come from the updated row itself).
      // Retried when the connection is lost: a grow that did commit only holds more than the
      // lease counts, and that surplus is released with the lease when it is returned.
      const grow = await retryIfConnectionLost(() =>
        this.db.transaction(async (trx) => {
          const live = rowsOf(
            await trx.raw(`SELECT 1 FROM holds WHERE request_id = ? AND status = 'active' FOR UPDATE`, [lease.id]),
          );
          if (live.length === 0) return null;
          const got = rowsOf(
            await trx.raw(
              `UPDATE accounts SET held_nano = held_nano + LEAST(CAST(? AS bigint), balance_nano - held_nano),
                               last_hold_nano = LEAST(CAST(? AS bigint), balance_nano - held_nano)
           WHERE id = ? AND balance_nano - held_nano >= CAST(? AS bigint) AND (lease_pause_until IS NULL OR lease_pause_until < now())
           RETURNING last_hold_nano::text AS grow`,
              [want.toString(), want.toString(), lease.accountId, shortfall.toString()],
            ),
          )[0]?.grow as string | undefined;
          if (got === undefined) return null;
          await trx.raw(
            `UPDATE holds SET amount_nano = amount_nano + CAST(? AS bigint), expires_at = now() + make_interval(secs => ?) WHERE request_id = ?`,
            [got, this.config.ttlSeconds, lease.id],
          );
          return got;
        }),
      );
      if (grow == null) return false;
      // Counted even when the lease closed meanwhile, so what it gives back or returns is all it holds.
      lease.free += BigInt(grow);
      return !lease.closed;
    });
  }

  /**
   * One batch: usage rows, ledger charges, the balance and the lease, in one statement; with
   * budget windows, the same statement locks the account's row and the windows first and charges
   * them (one round trip, as without budgets: under load this runs every LEASE_FLUSH_MS or 256
   * requests, and the transaction it replaced cost six more), and says whether an alert is due.
   */
  private flush(lease: Lease): Promise<unknown> {
    return this.serial(lease, async () => {
      const batch = lease.pending.splice(0);
      if (batch.length === 0) return;
      const windows = lease.pendingWindows;
      lease.pendingWindows = new Map();
      try {
        const { applied, alertDue } = await flushStatement(this.db, batch, lease, windows);
        if (applied && alertDue) this.windowsCharged?.([...windows.keys()].map(windowOfKey));
        if (!applied) {
          lease.closed = true;
          this.log.error(
            { lease: lease.id, requests: batch.length },
            'lease no longer active (expired?); its unwritten charges are lost',
          );
        }
      } catch (err) {
        lease.pending.unshift(...batch); // try again with the next batch
        for (const [k, v] of windows) lease.pendingWindows.set(k, (lease.pendingWindows.get(k) ?? 0n) + v);
        throw err;
      }
    });
  }

  /** Flushes and returns a lease: what is left of it is released. Once per lease. */
  private retire(lease: Lease): Promise<void> {
    return (lease.returning ??= this.returnLease(lease));
  }

  private async returnLease(lease: Lease): Promise<void> {
    lease.closed = true;
    if (this.leases.get(lease.accountId) === lease) this.leases.delete(lease.accountId);
    this.retiring.add(lease);
    await this.flush(lease).catch((err) => this.log.error({ err, lease: lease.id }, 'lease flush failed'));
    this.retiring.delete(lease);
    // Its slices go back with it (what hold_budgets keeps under its id), after the account's row lock.
    const statement = (runner: Pick<Db, 'raw'>) =>
      runner.raw(
        `WITH h AS (
         UPDATE holds SET status = 'settled', charged_nano = 0, closed_at = now() WHERE request_id = ? AND status = 'active'
         RETURNING request_id, account_id, key_id, amount_nano
       ), a AS (
         UPDATE accounts SET held_nano = held_nano - h.amount_nano FROM h WHERE accounts.id = h.account_id
       ), u AS (
         INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, status, http_status, latency_ms)
         SELECT ?, account_id, key_id, '', '', 0, 'lease_returned', 0, 0 FROM h
       ), ${EXPIRE_BUDGETS_CTE}
       SELECT count(*) FROM h`,
        [lease.id, lease.id],
      );
    await this.serial(lease, () =>
      lease.slices.size === 0 && !lease.hadSlices
        ? statement(this.db)
        : this.db.transaction(async (trx) => {
            await trx.raw('SELECT 1 FROM accounts WHERE id = ? FOR UPDATE', [lease.accountId]);
            await statement(trx);
          }),
    ).catch((err) => this.log.error({ err, lease: lease.id }, 'lease return failed; the sweeper will release it'));
  }

  private tick(): void {
    const now = performance.now();
    const renew =
      ++this.ticks % Math.max(1, Math.floor((this.config.ttlSeconds * 1000) / 3 / this.config.flushMs)) === 0;
    // Leases given back still write their requests' charges and stay alive until the last one settles.
    for (const lease of this.retiring) {
      if (lease.returning) continue;
      if (lease.pending.length > 0)
        this.flush(lease).catch((err) =>
          this.log.warn({ err, lease: lease.id }, 'lease flush failed; retried next tick'),
        );
      if (renew) void this.renew(lease);
    }
    for (const lease of this.leases.values()) {
      if (lease.pending.length > 0)
        this.flush(lease).catch((err) =>
          this.log.warn({ err, lease: lease.id }, 'lease flush failed; retried next tick'),
        );
      if (lease.inFlight === 0 && now - lease.lastUsed > this.config.idleMs) void this.retire(lease);
      else if (renew) {
        void this.renew(lease);
        if (lease.slices.size > 0) void this.pruneSlices(lease);
      }
    }
  }

  private renew(lease: Lease): Promise<unknown> {
    return this.serial(lease, () =>
      this.db.raw(
        `UPDATE holds SET expires_at = now() + make_interval(secs => ?) WHERE request_id = ? AND status = 'active'`,
        [this.config.ttlSeconds, lease.id],
      ),
    ).catch((err) => this.log.warn({ err, lease: lease.id }, 'lease renewal failed'));
  }

  private serial<T>(lease: Lease, work: () => Promise<T>): Promise<T> {
    const next = lease.queue.then(work, work);
    lease.queue = next.catch(() => {});
    return next;
  }
}

/**
 * What a slice of window `w` takes to cover `shortfall`: a soft budget's (or a deleted one's,
 * room < 0) a lease slice's worth; a hard one's at most a quarter of its room, at least the
 * shortfall, so instances leave each other room; undefined when the room is below the shortfall.
 */
function sliceSize(w: WindowRef, room: bigint, shortfall: bigint, sliceNano: bigint): bigint | undefined {
  if (w.mode === 'soft' || room < 0n) return shortfall > sliceNano ? shortfall : sliceNano;
  if (room < shortfall) return undefined;
  const quarter = room / 4n;
  const want = quarter < sliceNano ? quarter : sliceNano;
  return want > shortfall ? want : shortfall;
}

/**
 * A lease's batch in one statement: its charges as rows (each column an array, unnested), the
 * lease shrunk and the balance charged by their total, a ledger row per charge and a usage row per
 * request: its CTEs, which the statements below end (with the budget windows' CTEs or without).
 * Applied only while the lease is active (`applied` 1).
 */
const FLUSH_CTES = `r AS (
   SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS bigint[]),
     CAST(? AS bigint[]), CAST(? AS bigint[]), CAST(? AS boolean[]), CAST(? AS bigint[]), CAST(? AS bigint[]), CAST(? AS text[]),
     CAST(? AS int[]), CAST(? AS int[]), CAST(? AS bigint[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]),
     CAST(? AS bigint[]), CAST(? AS bigint[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]),
     CAST(? AS text[])) WITH ORDINALITY
     AS r(request_id, key_id, model, route, input_tokens, output_tokens, cached_tokens, cache_write_tokens, usage_estimated,
          cost_nano, uncovered_nano, status, http_status, latency_ms, units, unit, requested_model, price_version,
          provider_cost_nano, markup_version, deployment, trace_id, attempts, member_id, team_id, n)
 ), total AS (
   SELECT COALESCE(sum(cost_nano), 0) AS t FROM r
 ), lease AS (
   UPDATE holds SET amount_nano = amount_nano - (SELECT t FROM total) WHERE request_id = ? AND status = 'active'$LOCKED RETURNING account_id
 ), a AS (
   UPDATE accounts SET balance_nano = balance_nano - (SELECT t FROM total), held_nano = held_nano - (SELECT t FROM total)
   FROM lease WHERE accounts.id = lease.account_id RETURNING accounts.balance_nano + (SELECT t FROM total) AS before
 ), l AS (
   INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, request_id, cause)
   SELECT lease.account_id, -r.cost_nano, 'charge', a.before - sum(r.cost_nano) OVER (ORDER BY r.n), r.request_id, 'request'
   FROM r, lease, a WHERE r.cost_nano > 0
 ), u AS (
   INSERT INTO usage_records (request_id, account_id, key_id, model, route, input_tokens, output_tokens, cached_tokens,
     cache_write_tokens, usage_estimated, cost_nano, uncovered_nano, status, http_status, latency_ms, units, unit, requested_model,
     price_version_id, provider_cost_nano, markup_version_id, deployment, trace_id, attempts, member_id, team_id)
   SELECT r.request_id, lease.account_id, r.key_id, r.model, r.route, r.input_tokens, r.output_tokens, r.cached_tokens,
     r.cache_write_tokens, r.usage_estimated, r.cost_nano, r.uncovered_nano, r.status, r.http_status, r.latency_ms, r.units, r.unit,
     r.requested_model, NULLIF(r.price_version, 0), r.provider_cost_nano, NULLIF(r.markup_version, 0), NULLIF(r.deployment, ''),
     NULLIF(r.trace_id, ''), NULLIF(r.attempts, ''), NULLIF(r.member_id, ''), NULLIF(r.team_id, '')
   FROM r, lease
 )`;

const FLUSH_SQL = `WITH ${FLUSH_CTES.replace('$LOCKED', '')}
 SELECT count(*)::int AS applied, false AS alert_due FROM lease`;
// `lease` waits for every lock in `lk` (count(*) reads all of it) before it changes anything.
const FLUSH_WITH_SLICES_SQL = `WITH ${SLICE_LOCKS_CTE}, ${FLUSH_CTES.replace('$LOCKED', ' AND (SELECT count(*) FROM lk) >= 0')}, ${SLICE_CHARGES_CTE}
 SELECT count(*)::int AS applied, ${BUDGET_ALERT_DUE} AS alert_due FROM lease`;

/**
 * One batch written, with what it charged each budget window's slice when there are any:
 * `applied` false when the lease is no longer active (expired); `alertDue` when a window it
 * charged reached a threshold not yet fired.
 */
export async function flushStatement(
  runner: Pick<Db, 'raw'>,
  batch: readonly LeasedCharge[],
  lease: Pick<Lease, 'id' | 'accountId'>,
  windows: ReadonlyMap<string, bigint>,
): Promise<{ applied: boolean; alertDue: boolean }> {
  let rows: Record<string, unknown>[];
  if (windows.size === 0) rows = rowsOf(await runner.raw(FLUSH_SQL, [...flushColumns(batch), lease.id]));
  else {
    const { locks, charges } = sliceChargeParams(lease.accountId, lease.id, windows);
    rows = rowsOf(await runner.raw(FLUSH_WITH_SLICES_SQL, [...locks, ...flushColumns(batch), lease.id, ...charges]));
  }
  return { applied: rows[0]?.applied === 1, alertDue: rows[0]?.alert_due === true };
}

/** FLUSH_SQL's arrays, in its order: each column one array literal, which PostgreSQL parses into the type it is cast to. */
function flushColumns(batch: readonly LeasedCharge[]): string[] {
  type Text = { [K in keyof LeasedCharge]-?: LeasedCharge[K] extends string ? K : never }[keyof LeasedCharge];
  type Plain = Exclude<keyof LeasedCharge, Text | 'traceId' | 'attempts'>;
  const text = (k: Text) => textArray(batch.map((c) => c[k]));
  const plain = (k: Plain) => plainArray(batch.map((c) => c[k]));
  return [
    text('requestId'),
    text('keyId'),
    text('model'),
    text('route'),
    plain('inputTokens'),
    plain('outputTokens'),
    plain('cachedTokens'),
    plain('cacheWriteTokens'),
    plain('usageEstimated'),
    plain('costNano'),
    plain('uncoveredNano'),
    text('status'),
    plain('httpStatus'),
    plain('latencyMs'),
    plain('units'),
    text('unit'),
    text('requestedModel'),
    plain('priceVersion'),
    plain('providerCostNano'),
    plain('markupVersion'),
    text('deployment'),
    textArray(batch.map((c) => storedTraceId(c.traceId))),
    textArray(batch.map((c) => storedAttempts(c.attempts))),
    text('memberId'),
    text('teamId'),
  ];
}
