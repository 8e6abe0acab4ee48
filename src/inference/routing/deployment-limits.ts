// A deployment's rpm / tpm / concurrency, the limits of its upstream key, held across every
// gateway instance (docs/providers.md#limits). Per minute: one window per deployment in
// PostgreSQL (deployment_windows), taken from by one atomic upsert that refuses past either
// limit, so no instance counts alone; tokens are taken at the request's bound (its input bound
// and output cap, as providers themselves count a request against tpm) and set right when it
// settles. In flight: each instance's count per deployment and account (deployment_inflight),
// taken under a lock on the deployment against the sum of every instance that refreshed its row
// lately, so an instance that died stops holding slots, and shared fairly between the accounts
// (fair-share.ts: an account turned away from the full deployment is remembered as waiting in
// deployment_waiting for WAITING_MS). Only deployments with limits pay the round trips.
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/db.ts';
import type { ResolvedDeployment } from '../../catalogue/catalogue.ts';
import { slotVerdict, type SlotVerdict } from './fair-share.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** What a request took from a deployment's window: to set right once its tokens are known. */
export interface WindowTaken {
  deployment: string;
  windowStart: string;
  tokens: bigint;
}

/** The limit of a deployment that refused a request: its minute's requests or tokens, or its requests in flight. */
export type DeploymentBound = 'rpm' | 'tpm' | 'concurrency';

/** What a request took from a deployment's window, or which of its minute's limits is used up and when it has room again. */
export type Take = { taken: WindowTaken } | { full: true; bound: 'rpm' | 'tpm'; retryAfterMs: number };

/** How long a window's row is kept after it ends (for operators reading it). */
const KEEP_MINUTES = 10;
/** An instance refreshes its in-flight rows this often; a row not refreshed for STALE_MS holds no slot. */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 30_000;
/** An account turned away from a full deployment counts as waiting for this long (a client retrying after its retry-after of 1 s is back well within it). */
const WAITING_MS = 5_000;

export class DeploymentLimits {
  private readonly db: Db;
  private sweeper: NodeJS.Timeout | undefined;
  /** This process, in deployment_inflight. */
  private readonly instance = randomUUID();
  /** This process's requests in flight per deployment with a concurrency limit. */
  private readonly inFlight = new Map<string, number>();

  constructor(db: Db) {
    this.db = db;
  }

  /**
   * One of `d`'s concurrent slots for a request of `account`: 'take' when it took one (give it
   * back with release()), 'full' when every instance together has the limit in flight (the
   * account is then remembered as waiting), 'share' when the account holds its fair share while
   * another waits (fair-share.ts).
   */
  async acquire(d: ResolvedDeployment, account: string): Promise<SlotVerdict> {
    const limit = d.limits?.concurrency;
    if (limit === undefined) return 'take';
    const verdict = await this.db.transaction(async (trx) => {
      // One instance at a time per deployment: the counts it reads are the counts it writes against.
      await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`deployment_inflight:${d.key}`]);
      const rows = rowsOf(
        await trx.raw(
          `SELECT account, CAST(sum(in_flight) AS int) AS held, false AS waiting FROM deployment_inflight
           WHERE deployment = ? AND in_flight > 0 AND seen_at > now() - make_interval(secs => ?) GROUP BY account
           UNION ALL
           SELECT account, 0, true FROM deployment_waiting
           WHERE deployment = ? AND refused_at > now() - make_interval(secs => ?)`,
          [d.key, STALE_MS / 1000, d.key, WAITING_MS / 1000],
        ),
      );
      const held = new Map<string, number>();
      const waiting = new Set<string>();
      for (const r of rows)
        r.waiting ? waiting.add(r.account as string) : held.set(r.account as string, Number(r.held));
      const v = slotVerdict({ limit, held, waiting }, account);
      if (v === 'take')
        await trx.raw(
          `WITH served AS (DELETE FROM deployment_waiting WHERE deployment = ? AND account = ?)
           INSERT INTO deployment_inflight AS f (deployment, instance, account, in_flight, seen_at)
           VALUES (?, ?, ?, 1, now())
           ON CONFLICT (deployment, instance, account) DO UPDATE SET in_flight = f.in_flight + 1, seen_at = now()`,
          [d.key, account, d.key, this.instance, account],
        );
      else if (v === 'full')
        await trx.raw(
          `INSERT INTO deployment_waiting (deployment, account, refused_at) VALUES (?, ?, now())
           ON CONFLICT (deployment, account) DO UPDATE SET refused_at = now()`,
          [d.key, account],
        );
      return v;
    });
    if (verdict === 'take') this.inFlight.set(d.key, (this.inFlight.get(d.key) ?? 0) + 1);
    return verdict;
  }

  /** Gives back a slot acquire() took for `account`. */
  async release(deployment: string, account: string): Promise<void> {
    const n = this.inFlight.get(deployment) ?? 0;
    if (n <= 1) this.inFlight.delete(deployment);
    else this.inFlight.set(deployment, n - 1);
    await this.db.raw(
      `UPDATE deployment_inflight SET in_flight = GREATEST(0, in_flight - 1), seen_at = now()
       WHERE deployment = ? AND instance = ? AND account = ?`,
      [deployment, this.instance, account],
    );
  }

  /** One request of `tokens` from `d`'s current window, or when it has room again. */
  async take(d: ResolvedDeployment, tokens: bigint): Promise<Take> {
    const rpm = d.limits?.rpm ?? 2_147_483_647;
    const tpm = d.limits?.tpm;
    // A request larger than the whole tpm would never fit: it is let through alone in an empty window.
    const rows = rowsOf(
      await this.db.raw(
        `INSERT INTO deployment_windows AS w (deployment, window_start, requests, tokens)
         VALUES (?, date_trunc('minute', now()), 1, CAST(? AS bigint))
         ON CONFLICT (deployment, window_start) DO UPDATE
           SET requests = w.requests + 1, tokens = w.tokens + EXCLUDED.tokens
           WHERE w.requests < ? AND (CAST(? AS bigint) IS NULL OR w.tokens + EXCLUDED.tokens <= CAST(? AS bigint))
         RETURNING window_start::text AS window_start,
           EXTRACT(EPOCH FROM (date_trunc('minute', now()) + interval '1 minute' - now())) * 1000 AS left_ms`,
        [d.key, tokens.toString(), rpm, tpm?.toString() ?? null, tpm?.toString() ?? null],
      ),
    );
    const row = rows[0];
    if (row) return { taken: { deployment: d.key, windowStart: row.window_start as string, tokens } };
    // Refused: which limit is used up, read from the window's request count (rpm when it is at
    // its rpm, else the tokens).
    const left = rowsOf(
      await this.db.raw(
        `SELECT EXTRACT(EPOCH FROM (date_trunc('minute', now()) + interval '1 minute' - now())) * 1000 AS left_ms,
           (SELECT requests FROM deployment_windows
            WHERE deployment = ? AND window_start = date_trunc('minute', now())) AS requests`,
        [d.key],
      ),
    )[0]!;
    const requests = left.requests === null || left.requests === undefined ? 0 : Number(left.requests);
    const bound = tpm === undefined || (d.limits?.rpm !== undefined && requests >= rpm) ? 'rpm' : 'tpm';
    return { full: true, bound, retryAfterMs: Math.max(1, Math.ceil(Number(left.left_ms))) };
  }

  /** Sets a taken window right: the tokens the request really used instead of its bound. */
  async settle(taken: WindowTaken, usedTokens: bigint): Promise<void> {
    const delta = usedTokens - taken.tokens;
    if (delta === 0n) return;
    await this.db.raw(
      `UPDATE deployment_windows SET tokens = GREATEST(0, tokens + CAST(? AS bigint))
       WHERE deployment = ? AND window_start = CAST(? AS timestamptz)`,
      [delta.toString(), taken.deployment, taken.windowStart],
    );
  }

  /** Each deployment's current window and requests in flight, on every instance (for operators: limit use). */
  async current(): Promise<Map<string, { requests: number; tokens: bigint; inFlight: number }>> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT COALESCE(w.deployment, f.deployment) AS deployment, COALESCE(w.requests, 0) AS requests,
                COALESCE(w.tokens, 0)::text AS tokens, COALESCE(f.in_flight, 0)::int AS in_flight
         FROM (SELECT deployment, requests, tokens FROM deployment_windows WHERE window_start = date_trunc('minute', now())) w
         FULL JOIN (SELECT deployment, sum(in_flight) AS in_flight FROM deployment_inflight
                    WHERE seen_at > now() - make_interval(secs => ?) GROUP BY deployment) f
           ON f.deployment = w.deployment`,
        [STALE_MS / 1000],
      ),
    );
    return new Map(
      rows.map((r) => [
        r.deployment as string,
        { requests: Number(r.requests), tokens: BigInt(r.tokens as string), inFlight: Number(r.in_flight) },
      ]),
    );
  }

  /** Refreshes this instance's in-flight rows (so they keep counting) and deletes old rows, until `stop`. */
  startSweeping(): void {
    let beats = 0;
    this.sweeper = setInterval(() => {
      if (this.inFlight.size > 0)
        this.db
          .raw(`UPDATE deployment_inflight SET seen_at = now() WHERE instance = ? AND in_flight > 0`, [this.instance])
          .catch(() => {});
      if (++beats % Math.round(60_000 / HEARTBEAT_MS) !== 0) return;
      this.db
        .raw(`DELETE FROM deployment_windows WHERE window_start < now() - make_interval(mins => ?)`, [KEEP_MINUTES])
        .catch(() => {});
      this.db
        .raw(`DELETE FROM deployment_inflight WHERE seen_at < now() - make_interval(mins => ?)`, [KEEP_MINUTES])
        .catch(() => {});
      this.db
        .raw(`DELETE FROM deployment_waiting WHERE refused_at < now() - make_interval(mins => ?)`, [KEEP_MINUTES])
        .catch(() => {});
    }, HEARTBEAT_MS);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }
}
