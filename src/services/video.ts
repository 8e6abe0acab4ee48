// VideoService: the RPC face of video jobs. Validates, records the job, holds seconds × price,
// starts its workflow and waits until the upstream job exists; reads jobs from their rows (the
// workflow writes progress and the outcome there), so answers need no worker and survive
// restarts. The caller's key comes from the call metadata, as for InferenceService; a key sees
// only its own account's jobs.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import { markupFor, type Catalogue } from '../catalogue/catalogue.ts';
import type { Ledger } from '../billing/ledger.ts';
import { newId, newRequestId } from '../billing/ids.ts';
import { costNano } from '../money/money.ts';
import { customerNano } from '../billing/markup.ts';
import { badRequest, gatewayError } from '../errors/errors.ts';
import type { Metering } from '../metering/metering.ts';
import { parseBody } from '../inference/request-body.ts';
import { callerOf, type Caller } from '../billing/caller.ts';
import { modelOfKind } from '../inference/media/common.ts';
import type { VideoService } from '../gen/gateway/v1/video_pb.js';
import {
  TERMINAL_STATUSES,
  VIDEO_CREATION_UPDATE,
  VIDEO_KEY_PREFIX_ATTRIBUTE,
  VIDEO_MODEL_ATTRIBUTE,
  VIDEO_STATUS_ATTRIBUTE,
  VIDEO_WORKFLOW_TYPE,
  type VideoCreation,
  type VideoJobInput,
} from '../../workflows/video-types.ts';
import { releaseVideoHold, VIDEO_ROUTE } from '../video/activities.ts';
import type { VideoJobRow } from '../video/jobs.ts';
import type { VideoRuntime } from '../video/runtime.ts';
import { failureHttpStatus, FORM_ERROR_FIELD, VIDEO_SECONDS, VIDEO_SIZES } from '../video/wire.ts';

const FIELDS = ['model', 'prompt', 'seconds', 'size'];
const MAX_PROMPT_CHARS = 32_000;
const CHUNK = 256 * 1024;
/**
 * Longest wait of POST /v1/videos for the upstream job to exist (the create retries a failing
 * upstream for about 90 s). Past it (no worker running, say) the job is answered as queued.
 */
const CREATION_WAIT_MS = 60_000;
/** How long an Idempotency-Key names its request (as Stripe's keys). */
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
/** Visible ASCII, 1 to 255 characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

type Json = Record<string, unknown>;
type VideoRequest = { model: string; prompt: string; seconds: number; size: string };

const notFound = (id: string) =>
  gatewayError({
    httpStatus: 404,
    type: 'invalid_request_error',
    code: 'video_not_found',
    param: 'video_id',
    message: `No video found with id '${id}'.`,
  });

/** What identifies a request under an Idempotency-Key: the job it asks for, defaults applied. */
function requestHash(r: VideoRequest): string {
  return createHash('sha256')
    .update(JSON.stringify([r.model, r.prompt, r.seconds, r.size]))
    .digest('hex');
}

/**
 * A keyed job's id (and so its workflow id), derived from the account, the key and the request:
 * the same request under the same key is the same job, which the row's primary key and
 * Temporal's workflow id both hold to.
 */
export function keyedJobId(accountId: string, idempotencyKey: string, hash: string): string {
  return `video_${createHash('sha256').update(`${accountId}\n${idempotencyKey}\n${hash}`).digest('hex').slice(0, 32)}`;
}

export interface VideoServiceDeps {
  config: Config;
  ledger: Ledger;
  catalogue: Catalogue;
  metering: Metering;
  runtime: VideoRuntime;
  log: Logger;
}

export function videoService(deps: VideoServiceDeps): ServiceImpl<typeof VideoService> {
  const { ledger, runtime, config } = deps;
  const jobs = runtime.jobs;

  async function ownJob(ctx: HandlerContext, id: string): Promise<{ key: Caller; row: VideoJobRow }> {
    runtime.assertEnabled();
    const key = callerOf(ctx);
    const row = id ? await jobs.get(id, key.accountId) : undefined;
    if (!row) throw notFound(id);
    return { key, row };
  }

  /** Waits until the job's workflow has closed, the wait is over or the caller has gone. */
  async function waitForEnd(id: string, ms: number, signal: AbortSignal): Promise<void> {
    if (ms <= 0) return;
    const { client } = await runtime.temporal();
    const stop = AbortSignal.any([AbortSignal.timeout(ms), signal]);
    try {
      await client.withAbortSignal(stop, () => client.workflow.getHandle(id).result());
    } catch {
      // Failed, cancelled, or the wait ended: the row says which.
    }
  }

  /**
   * A job whose row still says running, checked against its workflow: one terminated by an
   * operator, or lost with a wiped Temporal, never recorded an outcome. Its hold is released.
   */
  async function reconcile(row: VideoJobRow): Promise<VideoJobRow> {
    let status: string;
    try {
      const { client } = await runtime.temporal(2_000);
      const d = await client.withDeadline(Date.now() + 3_000, () => client.workflow.getHandle(row.id).describe());
      status = d.status.name;
    } catch (err) {
      // Not found long after creation: the job's workflow is gone.
      if (!(err instanceof WorkflowNotFoundError) || Date.now() - row.createdAt.getTime() < 60_000) return row;
      status = 'LOST';
    }
    if (status === 'RUNNING' || status === 'CONTINUED_AS_NEW') return row;
    if (status === 'TERMINATED' || status === 'TIMED_OUT' || status === 'LOST') {
      const reason = status === 'LOST' ? 'job_lost' : status.toLowerCase();
      await releaseVideoHold(ledger, {
        requestId: row.requestId,
        model: row.model,
        status: reason,
        httpStatus: 502,
        latencyMs: 0,
      });
      await jobs.recordOutcome({
        jobId: row.id,
        status: 'failed',
        progress: row.progress,
        upstreamId: row.upstreamId,
        producedMs: 0,
        costNano: '0',
        contentKey: null,
        contentBytes: 0,
        error: {
          code: reason,
          message: `The job's workflow was ${status === 'LOST' ? 'not found' : status.toLowerCase().replace('_', ' ')}; nothing was charged.`,
        },
      });
    }
    return (await jobs.get(row.id, row.accountId)) ?? row;
  }

  /**
   * The job an earlier request under this Idempotency-Key made, when the key is still honoured
   * (or its id matches: the same request, after the key's 24 hours). 422 when the key named a
   * different request, or its job has been deleted.
   */
  async function earlierJob(
    accountId: string,
    idempotencyKey: string,
    jobId: string,
    hash: string,
  ): Promise<VideoJobRow | undefined> {
    const row =
      (await jobs.findByIdempotencyKey(accountId, idempotencyKey, IDEMPOTENCY_TTL_SECONDS)) ??
      (await jobs.getEvenDeleted(jobId, accountId));
    if (!row) return undefined;
    if (row.requestHash !== hash) {
      throw gatewayError({
        httpStatus: 422,
        type: 'invalid_request_error',
        code: 'idempotency_key_reused',
        message:
          'This Idempotency-Key was used with a different request in the last 24 hours; a key can only be repeated with the same request. Use a new key.',
      });
    }
    if (row.deletedAt) {
      throw gatewayError({
        httpStatus: 422,
        type: 'invalid_request_error',
        code: 'idempotency_key_reused',
        message: 'The video made with this Idempotency-Key has been deleted. Use a new key.',
      });
    }
    return row;
  }

  /**
   * Answers a create: with no wait asked, once the upstream job exists (a refusal at creation
   * becomes the caller's error, its hold already released); otherwise once the job has ended or
   * the wait is over.
   */
  async function answerJob(row: VideoJobRow, waitMs: number, signal: AbortSignal) {
    if (waitMs > 0) {
      await waitForEnd(row.id, Math.min(waitMs, config.video.waitMs), signal);
    } else {
      const creation = await awaitCreation(row, signal);
      if (creation && !creation.created) {
        const e = creation.error ?? {
          code: 'upstream_error',
          message: 'The video job could not be created; nothing was charged.',
        };
        const status = failureHttpStatus(e.code);
        throw gatewayError({
          httpStatus: status,
          type: status < 500 ? 'invalid_request_error' : 'server_error',
          code: e.code,
          requestId: row.requestId,
          message: e.message,
        });
      }
    }
    const now = await jobs.get(row.id, row.accountId);
    // Gone: the first request under this key was taken back (its hold could not be placed) while this one waited.
    if (!now)
      throw gatewayError({
        httpStatus: 409,
        type: 'invalid_request_error',
        code: 'idempotency_key_in_use',
        message: 'The first request with this Idempotency-Key did not go through; send the request again.',
      });
    return toVideo(now);
  }

  /**
   * The workflow's creation update: it returns once the upstream job exists or the job has
   * ended without one. Undefined when the wait is over first (no worker yet), the caller left,
   * or the workflow is gone: the job's row then says where it is.
   */
  async function awaitCreation(row: VideoJobRow, signal: AbortSignal): Promise<VideoCreation | undefined> {
    if (row.upstreamId || TERMINAL_STATUSES.includes(row.status)) {
      return {
        created: row.upstreamId !== null,
        error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? '' } : null,
      };
    }
    try {
      const { client } = await runtime.temporal();
      const stop = AbortSignal.any([AbortSignal.timeout(CREATION_WAIT_MS), signal]);
      return await client.withAbortSignal(stop, () =>
        client.workflow.getHandle(row.id).executeUpdate<VideoCreation, []>(VIDEO_CREATION_UPDATE),
      );
    } catch (err) {
      if (!signal.aborted)
        deps.log.warn(
          { videoId: row.id, err: (err as Error).message },
          'did not learn whether the upstream video job was created; answering the job as it stands',
        );
      return undefined;
    }
  }

  /** The request's fields, checked: 400 for anything missing, unknown or out of range. */
  function readRequest(body: Json, openaiDefaults: boolean): VideoRequest | Error {
    if (typeof body[FORM_ERROR_FIELD] === 'string')
      return badRequest(`The multipart body could not be read: ${body[FORM_ERROR_FIELD]}`, 'invalid_multipart');
    for (const name of Object.keys(body)) {
      if (name === 'input_reference')
        return badRequest(
          'Reference inputs (input_reference) are not supported by this gateway.',
          'unsupported_parameter',
          name,
        );
      if (!FIELDS.includes(name))
        return badRequest(`Unrecognized request argument supplied: ${name}`, 'unknown_parameter', name);
    }
    const defaults: Json = openaiDefaults ? { model: 'sora-2', seconds: 4, size: '720x1280' } : {};
    const get = (name: string) => (body[name] === undefined || body[name] === null ? defaults[name] : body[name]);
    for (const name of FIELDS) {
      if (get(name) === undefined)
        return badRequest(`Missing required parameter: '${name}'.`, 'missing_required_parameter', name);
    }
    const model = get('model');
    if (typeof model !== 'string' || model === '')
      return badRequest("Invalid type for 'model': expected a model name.", 'invalid_type', 'model');
    const prompt = get('prompt');
    if (typeof prompt !== 'string' || prompt.trim() === '')
      return badRequest("Invalid value for 'prompt': expected a non-empty string.", 'invalid_value', 'prompt');
    if (prompt.length > MAX_PROMPT_CHARS)
      return badRequest(
        `Invalid value for 'prompt': longer than ${MAX_PROMPT_CHARS} characters.`,
        'invalid_value',
        'prompt',
      );
    const rawSeconds = get('seconds');
    const seconds =
      typeof rawSeconds === 'number'
        ? rawSeconds
        : typeof rawSeconds === 'string' && /^\d{1,3}$/.test(rawSeconds)
          ? Number(rawSeconds)
          : NaN;
    if (!(VIDEO_SECONDS as readonly number[]).includes(seconds)) {
      return badRequest(
        `Invalid value for 'seconds': ${JSON.stringify(rawSeconds)}. Supported values are: ${VIDEO_SECONDS.map((s) => `'${s}'`).join(', ')}.`,
        'invalid_value',
        'seconds',
      );
    }
    const size = get('size');
    if (typeof size !== 'string' || !(VIDEO_SIZES as readonly string[]).includes(size)) {
      return badRequest(
        `Invalid value for 'size': ${JSON.stringify(size)}. Supported values are: ${VIDEO_SIZES.map((s) => `'${s}'`).join(', ')}.`,
        'invalid_value',
        'size',
      );
    }
    return { model, prompt, seconds, size };
  }

  return {
    async createVideo(req, ctx) {
      const requestId = req.requestId || newRequestId();
      const key = callerOf(ctx);
      const body = parseBody(req.body);
      const input = readRequest(body, req.openaiDefaults);
      if (input instanceof Error) throw input;
      const idempotencyKey = req.idempotencyKey || null;
      if (idempotencyKey !== null && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
        throw badRequest('Invalid Idempotency-Key: 1 to 255 visible ASCII characters.', 'invalid_idempotency_key');
      }
      const model = modelOfKind(deps.catalogue, input.model, 'video', VIDEO_ROUTE);
      const price = model.prices.per_second;
      if (!price)
        throw gatewayError({
          httpStatus: 500,
          type: 'server_error',
          message: `The catalogue has no per-second price for ${model.id}.`,
        });

      await deps.metering.admit(key, requestId);
      // No Temporal, no hold: 503 before any money moves.
      const temporal = await runtime.temporal();
      const asked = { ...input, model: model.id };
      const hash = requestHash(asked);
      const answer = (row: VideoJobRow) => answerJob(row, req.waitMs, ctx.signal);

      let jobId = newId('video');
      if (idempotencyKey !== null) {
        jobId = keyedJobId(key.accountId, idempotencyKey, hash);
        const earlier = await earlierJob(key.accountId, idempotencyKey, jobId, hash);
        if (earlier) return answer(earlier);
      }

      // The row first, then the hold: a repeat that finds the row finds a job with its hold. Held
      // at the customer's price: the seconds asked at the provider's price, marked up.
      const markup = markupFor(model, key.group);
      const holdNano = customerNano(
        costNano([{ quantity: BigInt(input.seconds), priceUsd: price, perUnits: 1n }]),
        markup,
      );
      const row = await jobs.insert({
        id: jobId,
        requestId,
        accountId: key.accountId,
        keyId: key.keyId,
        model: model.id,
        prompt: input.prompt,
        seconds: input.seconds,
        size: input.size,
        holdNano,
        idempotencyKey,
        requestHash: hash,
      });
      if (!row) {
        // A concurrent request with the same key (or request id) got there first.
        const earlier =
          idempotencyKey !== null ? await earlierJob(key.accountId, idempotencyKey, jobId, hash) : undefined;
        if (earlier) return answer(earlier);
        throw gatewayError({
          httpStatus: 409,
          type: 'invalid_request_error',
          code: 'duplicate_request',
          requestId,
          message: `Request id '${requestId}' was already used.`,
        });
      }
      try {
        await deps.metering.placeExactHold(key, requestId, holdNano, config.video.holdTtlSeconds);
      } catch (err) {
        await jobs.remove(jobId);
        throw err;
      }

      const release = (status: string) =>
        releaseVideoHold(ledger, { requestId, model: model.id, status, httpStatus: 503, latencyMs: 0 });
      const keyPrefix = key.prefix;
      const workflowInput: VideoJobInput = {
        jobId,
        requestId,
        accountId: key.accountId,
        keyPrefix,
        model: model.id,
        provider: model.provider,
        upstreamModel: model.upstreamId,
        prompt: input.prompt,
        seconds: input.seconds,
        size: input.size,
        holdNano: holdNano.toString(),
        pricePerSecondUsd: price,
        // The job settles at the price and markup (and their versions) it was held at, whatever the book says by then.
        priceVersion: model.priceVersion.toString(),
        markupVersion: markup.versionId.toString(),
        markupRate: markup.rate,
        createdAtMs: row.createdAt.getTime(),
        pollInitialMs: config.video.pollInitialMs,
        pollMaxMs: config.video.pollMaxMs,
        jobTimeoutMs: config.video.jobTimeoutMs,
        holdTtlSeconds: config.video.holdTtlSeconds,
        searchAttributes: temporal.searchAttributes,
      };
      try {
        await temporal.client.workflow.start(VIDEO_WORKFLOW_TYPE, {
          workflowId: jobId,
          taskQueue: temporal.taskQueue,
          args: [workflowInput],
          ...(temporal.searchAttributes
            ? {
                typedSearchAttributes: [
                  { key: VIDEO_MODEL_ATTRIBUTE, value: model.id },
                  { key: VIDEO_KEY_PREFIX_ATTRIBUTE, value: keyPrefix },
                  { key: VIDEO_STATUS_ATTRIBUTE, value: 'queued' },
                ],
              }
            : {}),
        });
      } catch (err) {
        deps.log.error({ err, videoId: jobId }, 'could not start the video workflow');
        await release('not_started');
        await jobs.recordOutcome({
          jobId,
          status: 'failed',
          progress: 0,
          upstreamId: null,
          producedMs: 0,
          costNano: '0',
          contentKey: null,
          contentBytes: 0,
          error: { code: 'not_started', message: 'The job could not be started; nothing was charged.' },
        });
        throw gatewayError({
          httpStatus: 503,
          type: 'server_error',
          code: 'video_jobs_unavailable',
          requestId,
          message: 'Video generation is unavailable right now: the job could not be started. Nothing was charged.',
        });
      }
      deps.log.info(
        {
          videoId: jobId,
          requestId,
          model: model.id,
          seconds: input.seconds,
          holdNano: String(holdNano),
          idempotent: idempotencyKey !== null,
        },
        'video job started',
      );
      return answer(row);
    },

    async getVideo(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      return toVideo(TERMINAL_STATUSES.includes(row.status) ? row : await reconcile(row));
    },

    async *getVideoContent(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      // As OpenAI answers it: a 404 (which the SDKs do not retry), no code.
      if (row.status !== 'completed' || !row.contentKey) {
        const message = TERMINAL_STATUSES.includes(row.status)
          ? `Video '${row.id}' has ${row.status === 'cancelled' ? 'been cancelled' : 'failed'}; it has no content.`
          : 'Video is not ready yet, use GET /v1/videos/{video_id} to check status.';
        throw gatewayError({ httpStatus: 404, type: 'invalid_request_error', message });
      }
      const obj = await runtime.store.open(row.contentKey);
      if (!obj)
        throw gatewayError({
          httpStatus: 404,
          type: 'invalid_request_error',
          code: 'video_content_missing',
          message: `The content of video '${row.id}' is no longer stored.`,
        });
      yield {
        part: { case: 'start' as const, value: { videoId: row.id, contentType: 'video/mp4', size: BigInt(obj.size) } },
      };
      for await (const chunk of obj.stream()) {
        const buf = chunk as Buffer;
        for (let at = 0; at < buf.length; at += CHUNK)
          yield { part: { case: 'data' as const, value: buf.subarray(at, at + CHUNK) } };
        if (ctx.signal.aborted) return;
      }
    },

    async cancelVideo(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      if (TERMINAL_STATUSES.includes(row.status)) return toVideo(row);
      const { client } = await runtime.temporal();
      try {
        await client.workflow.getHandle(row.id).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        return toVideo(await reconcile(row));
      }
      // The workflow releases the hold and records the outcome; give it a moment to.
      await waitForEnd(row.id, 15_000, ctx.signal);
      let now = (await jobs.get(row.id, row.accountId)) ?? row;
      for (let i = 0; i < 20 && !TERMINAL_STATUSES.includes(now.status); i++) {
        await sleep(100);
        now = (await jobs.get(row.id, row.accountId)) ?? now;
      }
      return toVideo(now);
    },

    async deleteVideo(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      const current = TERMINAL_STATUSES.includes(row.status) ? row : await reconcile(row);
      // A running job is cancelled through its workflow: no Temporal, no delete (503 before anything changes).
      const temporal = TERMINAL_STATUSES.includes(current.status) ? undefined : await runtime.temporal();
      const deleted = await jobs.markDeleted(row.id, row.accountId);
      if (!deleted) throw notFound(req.id);
      if (TERMINAL_STATUSES.includes(deleted.status)) {
        if (deleted.contentKey) await runtime.store.delete(deleted.contentKey);
        const provider = deps.catalogue.get(deleted.model)?.provider;
        if (deleted.upstreamId && provider) runtime.discardUpstream(provider, deleted.upstreamId);
      } else {
        // The workflow ends as a cancel makes it end, then removes what it stored (the row says deleted).
        await (temporal ?? (await runtime.temporal())).client.workflow
          .getHandle(row.id)
          .cancel()
          .catch((err: unknown) => {
            deps.log.info(
              { videoId: row.id, err: (err as Error).message },
              'deleted a running video job whose workflow could not be cancelled (it has ended, or ends by itself)',
            );
          });
      }
      deps.log.info({ videoId: row.id, status: deleted.status }, 'video job deleted');
      return { id: row.id, deleted: true };
    },

    async listVideos(req, ctx) {
      runtime.assertEnabled();
      const key = callerOf(ctx);
      const limit = req.limit === 0 ? 20 : req.limit;
      if (limit < 1 || limit > 100)
        throw badRequest("Invalid value for 'limit': between 1 and 100.", 'invalid_value', 'limit');
      if (req.order && req.order !== 'asc' && req.order !== 'desc')
        throw badRequest("Invalid value for 'order': 'asc' or 'desc'.", 'invalid_value', 'order');
      const rows = await jobs.list(key.accountId, {
        limit: limit + 1,
        after: req.after || undefined,
        ascending: req.order === 'asc',
      });
      return { videos: rows.slice(0, limit).map(toVideo), hasMore: rows.length > limit };
    },
  };
}

export function toVideo(row: VideoJobRow) {
  return {
    id: row.id,
    model: row.model,
    prompt: row.prompt,
    seconds: row.seconds,
    size: row.size,
    status: row.status,
    progress: row.progress,
    createdAt: BigInt(Math.floor(row.createdAt.getTime() / 1000)),
    completedAt: row.completedAt ? BigInt(Math.floor(row.completedAt.getTime() / 1000)) : 0n,
    ...(row.errorCode ? { error: { code: row.errorCode, message: row.errorMessage ?? '' } } : {}),
    requestId: row.requestId,
    holdNano: row.holdNano,
    costNano: row.costNano,
    producedMs: row.producedMs,
    contentBytes: row.contentBytes,
  };
}
