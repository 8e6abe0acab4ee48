// A deployment's rpm / tpm / concurrency, the limits of its upstream key, held across every
// gateway instance (docs/providers.md#limits). Per minute: one window per deployment in
// PostgreSQL (deployment_windows), taken from by one atomic upsert that refuses past either
// limit, so no instance counts alone; tokens are taken at the request's bound (its input bound
// and output cap, as providers themselves count a request against tpm) and set right when it
// settles. In flight: each instance's count per deployment (deployment_inflight), taken under a
// lock on the deployment against the sum of every instance that refreshed its row lately, so an
// instance that died stops holding slots. Only deployments with limits pay the round trips.
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/db.ts';
import type { ResolvedDeployment } from '../../catalogue/catalogue.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** What a request took from a deployment's window: to set right once its tokens are known. */
export interface WindowTaken {
  deployment: string;
  windowStart: string;
  tokens: bigint;
}

export type Take = { taken: WindowTaken } | { full: true; retryAfterMs: number };

/** How long a window's row is kept after it ends (for operators reading it). */
const KEEP_MINUTES = 10;
/** An instance refreshes its in-flight rows this often; a row not refreshed for STALE_MS holds no slot. */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 30_000;

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
   * One of `d`'s concurrent slots, if every instance together has fewer than its limit in flight;
   * false when they have not. A slot taken is given back with release().
   */
  async acquire(d: ResolvedDeployment): Promise<boolean> {
    const limit = d.limits?.concurrency;
    if (limit === undefined) return true;
    const took = await this.db.transaction(async (trx) => {
      // One instance at a time per deployment: the sum it reads is the sum it writes against.
      await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`deployment_inflight:${d.key}`]);
      const rows = rowsOf(
        await trx.raw(
          `INSERT INTO deployment_inflight AS f (deployment, instance, in_flight, seen_at)
           SELECT ?, ?, 1, now()
           WHERE (SELECT COALESCE(sum(in_flight), 0) FROM deployment_inflight
                  WHERE deployment = ? AND seen_at > now() - make_interval(secs => ?)) < ?
           ON CONFLICT (deployment, instance) DO UPDATE SET in_flight = f.in_flight + 1, seen_at = now()
           RETURNING in_flight`,
          [d.key, this.instance, d.key, STALE_MS / 1000, limit],
        ),
      );
      return rows.length > 0;
    });
    if (took) this.inFlight.set(d.key, (this.inFlight.get(d.key) ?? 0) + 1);
    return took;
  }

  /** Gives back a slot acquire() took. */
  async release(deployment: string): Promise<void> {
    const n = this.inFlight.get(deployment) ?? 0;
    if (n <= 1) this.inFlight.delete(deployment);
    else this.inFlight.set(deployment, n - 1);
    await this.db.raw(
      `UPDATE deployment_inflight SET in_flight = GREATEST(0, in_flight - 1), seen_at = now()
       WHERE deployment = ? AND instance = ?`,
      [deployment, this.instance],
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
    const left = rowsOf(
      await this.db.raw(
        `SELECT EXTRACT(EPOCH FROM (date_trunc('minute', now()) + interval '1 minute' - now())) * 1000 AS left_ms`,
      ),
    )[0]!;
    return { full: true, retryAfterMs: Math.max(1, Math.ceil(Number(left.left_ms))) };
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
    }, HEARTBEAT_MS);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }
}
