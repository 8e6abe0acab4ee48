// The video_jobs table: who owns a job and what became of it. The workflow's activities write
// progress and the outcome; the routes read from here, so they answer without a worker and
// after a restart. A deleted job keeps its row (deleted_at set), hidden from its owner.
import type { Db } from '../db/db.ts';
import { scrub } from '../secrets/scrub.ts';
import { AttemptLog } from '../billing/attempts.ts';
import type { JobOutcome, VideoStatus } from '../../workflows/video-types.ts';

export interface VideoJobRow {
  id: string;
  requestId: string;
  accountId: string;
  keyId: string;
  model: string;
  prompt: string;
  seconds: number;
  size: string;
  holdNano: bigint;
  status: VideoStatus;
  progress: number;
  upstreamId: string | null;
  producedMs: bigint;
  costNano: bigint;
  contentKey: string | null;
  contentBytes: bigint;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: Date;
  completedAt: Date | null;
  /** The caller's Idempotency-Key, while it is honoured; null without one or once expired. */
  idempotencyKey: string | null;
  /** What was asked, hashed: a repeat under the same key must match it. */
  requestHash: string | null;
  deletedAt: Date | null;
  /**
   * `<model>/<deployment>` that created the upstream job (before that, the last whose create gave
   * an HTTP answer), and its provider: every later call for the job goes there. Null for a job no
   * deployment answered, and for jobs from before deployments (their model's own provider).
   */
  deployment: string | null;
  providerId: string | null;
  /** The create's attempts so far (src/billing/attempts.ts): the job's usage row keeps them. Null before the first. */
  attempts: string | null;
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

const COLUMNS = `id, request_id, account_id, key_id, model, prompt, seconds, size, hold_nano::text AS hold_nano, status, progress, upstream_id,
  produced_ms::text AS produced_ms, cost_nano::text AS cost_nano, content_key, content_bytes::text AS content_bytes, error_code, error_message,
  created_at, completed_at, idempotency_key, request_hash, deleted_at, deployment, provider_id, attempts`;

function toRow(r: Row): VideoJobRow {
  return {
    id: r.id as string,
    requestId: r.request_id as string,
    accountId: r.account_id as string,
    keyId: r.key_id as string,
    model: r.model as string,
    prompt: r.prompt as string,
    seconds: Number(r.seconds),
    size: r.size as string,
    holdNano: BigInt(r.hold_nano as string),
    status: r.status as VideoStatus,
    progress: Number(r.progress),
    upstreamId: (r.upstream_id as string | null) ?? null,
    producedMs: BigInt(r.produced_ms as string),
    costNano: BigInt(r.cost_nano as string),
    contentKey: (r.content_key as string | null) ?? null,
    contentBytes: BigInt(r.content_bytes as string),
    errorCode: (r.error_code as string | null) ?? null,
    errorMessage: (r.error_message as string | null) ?? null,
    createdAt: new Date(r.created_at as string),
    completedAt: r.completed_at ? new Date(r.completed_at as string) : null,
    idempotencyKey: (r.idempotency_key as string | null) ?? null,
    requestHash: (r.request_hash as string | null) ?? null,
    deletedAt: r.deleted_at ? new Date(r.deleted_at as string) : null,
    deployment: (r.deployment as string | null) ?? null,
    providerId: (r.provider_id as string | null) ?? null,
    attempts: (r.attempts as string | null) ?? null,
  };
}

export class VideoJobs {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  /**
   * A new job's row; undefined when its id, request id or (account, Idempotency-Key) is taken:
   * a concurrent request with the same key got there first.
   */
  async insert(j: {
    id: string;
    requestId: string;
    accountId: string;
    keyId: string;
    model: string;
    prompt: string;
    seconds: number;
    size: string;
    holdNano: bigint;
    idempotencyKey: string | null;
    requestHash: string;
  }): Promise<VideoJobRow | undefined> {
    const rows = rowsOf(
      await this.db.raw(
        `INSERT INTO video_jobs (id, request_id, account_id, key_id, model, prompt, seconds, size, hold_nano, idempotency_key, request_hash)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS bigint), ?, ?) ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [
          j.id,
          j.requestId,
          j.accountId,
          j.keyId,
          j.model,
          j.prompt,
          j.seconds,
          j.size,
          j.holdNano.toString(),
          j.idempotencyKey,
          j.requestHash,
        ],
      ),
    );
    return rows[0] ? toRow(rows[0]) : undefined;
  }

  /** Takes back a row whose hold could not be placed (nothing ran for it). */
  async remove(id: string): Promise<void> {
    await this.db.raw(`DELETE FROM video_jobs WHERE id = ? AND upstream_id IS NULL AND status = 'queued'`, [id]);
  }

  /** A job of this account that has not been deleted; undefined for another account's job, so ids reveal nothing. */
  async get(id: string, accountId: string): Promise<VideoJobRow | undefined> {
    const r = rowsOf(
      await this.db.raw(`SELECT ${COLUMNS} FROM video_jobs WHERE id = ? AND account_id = ? AND deleted_at IS NULL`, [
        id,
        accountId,
      ]),
    )[0];
    return r ? toRow(r) : undefined;
  }

  /** Deleted or not: for matching a repeated request to its job. */
  async getEvenDeleted(id: string, accountId: string): Promise<VideoJobRow | undefined> {
    const r = rowsOf(
      await this.db.raw(`SELECT ${COLUMNS} FROM video_jobs WHERE id = ? AND account_id = ?`, [id, accountId]),
    )[0];
    return r ? toRow(r) : undefined;
  }

  /**
   * The job this account made with `key` within the last `ttlSeconds`. An older one first gives
   * the key up, so the key can name a new request.
   */
  async findByIdempotencyKey(accountId: string, key: string, ttlSeconds: number): Promise<VideoJobRow | undefined> {
    await this.db.raw(
      `UPDATE video_jobs SET idempotency_key = NULL WHERE account_id = ? AND idempotency_key = ? AND created_at < now() - make_interval(secs => ?)`,
      [accountId, key, ttlSeconds],
    );
    const r = rowsOf(
      await this.db.raw(`SELECT ${COLUMNS} FROM video_jobs WHERE account_id = ? AND idempotency_key = ?`, [
        accountId,
        key,
      ]),
    )[0];
    return r ? toRow(r) : undefined;
  }

  /** Hides the job from its owner; the row as it was when deleted, undefined when there was none to delete. */
  async markDeleted(id: string, accountId: string): Promise<VideoJobRow | undefined> {
    const r = rowsOf(
      await this.db.raw(
        `UPDATE video_jobs SET deleted_at = now() WHERE id = ? AND account_id = ? AND deleted_at IS NULL RETURNING ${COLUMNS}`,
        [id, accountId],
      ),
    )[0];
    return r ? toRow(r) : undefined;
  }

  /** Newest first (or oldest first), continuing after the job `after` of the same account. */
  async list(accountId: string, opts: { limit: number; after?: string; ascending: boolean }): Promise<VideoJobRow[]> {
    const dir = opts.ascending ? 'ASC' : 'DESC';
    const cmp = opts.ascending ? '>' : '<';
    const params: unknown[] = [accountId];
    let cursor = '';
    if (opts.after) {
      cursor = `AND (created_at, id) ${cmp} (SELECT created_at, id FROM video_jobs WHERE id = ? AND account_id = ?)`;
      params.push(opts.after, accountId);
    }
    params.push(opts.limit);
    const rows = rowsOf(
      await this.db.raw(
        `SELECT ${COLUMNS} FROM video_jobs WHERE account_id = ? AND deleted_at IS NULL ${cursor} ORDER BY created_at ${dir}, id ${dir} LIMIT ?`,
        params as never,
      ),
    );
    return rows.map(toRow);
  }

  /**
   * The operator's listing (BillingService.ListVideoJobs): jobs of every account, or of one,
   * deleted ones too, newest first, continuing after the job `after`.
   */
  async listAll(opts: { accountId?: string; limit: number; after?: string }): Promise<VideoJobRow[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (opts.accountId) {
      where.push('account_id = ?');
      params.push(opts.accountId);
    }
    if (opts.after) {
      where.push('(created_at, id) < (SELECT created_at, id FROM video_jobs WHERE id = ?)');
      params.push(opts.after);
    }
    params.push(opts.limit);
    const rows = rowsOf(
      await this.db.raw(
        `SELECT ${COLUMNS} FROM video_jobs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT ?`,
        params as never,
      ),
    );
    return rows.map(toRow);
  }

  /** The deployment whose create answered (it created the job, or refused it); its usage row will name it. */
  async recordDeployment(id: string, deployment: string, providerId: string): Promise<void> {
    await this.db.raw('UPDATE video_jobs SET deployment = ?, provider_id = ? WHERE id = ?', [
      deployment,
      providerId,
      id,
    ]);
  }

  /** The deployment the job's row names, if any. */
  async deploymentOf(id: string): Promise<string | undefined> {
    const r = rowsOf(await this.db.raw('SELECT deployment FROM video_jobs WHERE id = ?', [id]))[0];
    return (r?.deployment as string | null | undefined) ?? undefined;
  }

  /**
   * One attempt of the job's create at a deployment, added to those of its earlier tries (a retried
   * create goes over the deployments again), bounded as a usage row's attempts are; the job's
   * usage row is written with them. The row is locked meanwhile, so two tries add both.
   */
  async recordAttempt(id: string, deployment: string, outcome: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      const r = rowsOf(await trx.raw('SELECT attempts FROM video_jobs WHERE id = ? FOR UPDATE', [id]))[0];
      if (!r) return;
      const log = AttemptLog.of(r.attempts as string | null);
      log.add(deployment, outcome);
      await trx.raw('UPDATE video_jobs SET attempts = ? WHERE id = ?', [log.text() || null, id]);
    });
  }

  /** The attempts of a job's create, by the job's id or its hold's request id ('' for none). */
  async attemptsOf(by: { id: string } | { requestId: string }): Promise<string> {
    const [column, value] = 'id' in by ? ['id', by.id] : ['request_id', by.requestId];
    const r = rowsOf(await this.db.raw(`SELECT attempts FROM video_jobs WHERE ${column} = ?`, [value]))[0];
    return (r?.attempts as string | null | undefined) ?? '';
  }

  /** Progress of a running job; never overwrites an outcome. */
  async markProgress(
    id: string,
    status: 'queued' | 'in_progress',
    progress: number,
    upstreamId: string,
  ): Promise<void> {
    await this.db.raw(
      `UPDATE video_jobs SET status = ?, progress = ?, upstream_id = ? WHERE id = ? AND status IN ('queued', 'in_progress')`,
      [status, progress, upstreamId, id],
    );
  }

  /**
   * The job's final state; repeating it (a retried activity) writes the same values. Says whether
   * the owner has deleted the job (then what it stored is to be removed).
   */
  async recordOutcome(o: JobOutcome): Promise<{ deleted: boolean }> {
    const r = rowsOf(
      await this.db.raw(
        `UPDATE video_jobs SET status = ?, progress = ?, upstream_id = COALESCE(?, upstream_id), produced_ms = ?, cost_nano = CAST(? AS bigint),
           content_key = ?, content_bytes = ?, error_code = ?, error_message = ?, completed_at = COALESCE(completed_at, now())
         WHERE id = ? RETURNING deleted_at IS NOT NULL AS deleted`,
        [
          o.status,
          o.progress,
          o.upstreamId,
          o.producedMs,
          o.costNano,
          o.contentKey,
          o.contentBytes,
          o.error?.code ?? null,
          // The provider's words, scrubbed where they were read (upstream.ts); again here, the row's own last line.
          o.error ? scrub(o.error.message) : null,
          o.jobId,
        ],
      ),
    )[0];
    return { deleted: r?.deleted === true };
  }
}
