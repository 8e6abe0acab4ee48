// VideoService: the RPC face of video jobs. Validates, holds seconds × price, records the job
// and starts its workflow; reads jobs from their rows (the workflow writes progress and the
// outcome there), so answers need no worker and survive restarts. The caller's key comes
// from the call metadata, as for InferenceService; a key sees only its own account's jobs.
import { setTimeout as sleep } from 'node:timers/promises';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { Catalogue } from '../catalogue/catalogue.ts';
import { isWellFormedKey, keyFromHeaders, visiblePrefix } from '../billing/keys.ts';
import { newId, type KeyRow, type Ledger } from '../billing/ledger.ts';
import { costNano } from '../billing/money.ts';
import { badRequest, gatewayError, unauthorized } from '../rpc/errors.ts';
import { newRequestId, type Engine } from '../inference/engine.ts';
import { modelOfKind } from '../inference/media/common.ts';
import type { VideoService } from '../gen/gateway/v1/video_pb.js';
import {
  TERMINAL_STATUSES,
  VIDEO_KEY_PREFIX_ATTRIBUTE,
  VIDEO_MODEL_ATTRIBUTE,
  VIDEO_STATUS_ATTRIBUTE,
  VIDEO_WORKFLOW_TYPE,
  type VideoJobInput,
} from '../../workflows/video-types.ts';
import { VIDEO_ROUTE } from './activities.ts';
import type { VideoJobRow } from './jobs.ts';
import type { VideoRuntime } from './runtime.ts';
import { FORM_ERROR_FIELD, VIDEO_SECONDS, VIDEO_SIZES } from './wire.ts';

const FIELDS = ['model', 'prompt', 'seconds', 'size'];
const MAX_PROMPT_CHARS = 32_000;
const CHUNK = 256 * 1024;

type Json = Record<string, unknown>;

const notFound = (id: string) =>
  gatewayError({ httpStatus: 404, type: 'invalid_request_error', code: 'video_not_found', param: 'video_id', message: `No video found with id '${id}'.` });

export interface VideoServiceDeps {
  config: Config;
  ledger: Ledger;
  catalogue: Catalogue;
  engine: Engine;
  runtime: VideoRuntime;
  log: Logger;
}

export function videoService(deps: VideoServiceDeps): ServiceImpl<typeof VideoService> {
  const { ledger, runtime, config } = deps;
  const jobs = runtime.jobs;

  const callerKey = (ctx: HandlerContext) => keyFromHeaders(ctx.requestHeader.get('authorization'), ctx.requestHeader.get('x-api-key'));

  /** The caller's live key (401 otherwise: one answer for every kind of bad key). */
  async function caller(ctx: HandlerContext): Promise<KeyRow> {
    const apiKey = callerKey(ctx);
    if (!apiKey || !isWellFormedKey(apiKey)) throw unauthorized();
    const key = await ledger.findKey({ apiKey });
    if (!key) throw unauthorized();
    return key;
  }

  async function ownJob(ctx: HandlerContext, id: string): Promise<{ key: KeyRow; row: VideoJobRow }> {
    runtime.assertEnabled();
    const key = await caller(ctx);
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
      await ledger.settle({
        requestId: row.requestId, costNano: 0n, model: row.model, route: VIDEO_ROUTE, inputTokens: 0n, outputTokens: 0n, cachedTokens: 0n,
        cacheWriteTokens: 0n, usageEstimated: false, status: reason, httpStatus: 502, latencyMs: 0,
      });
      await jobs.recordOutcome({
        jobId: row.id, status: 'failed', progress: row.progress, upstreamId: row.upstreamId, producedMs: 0, costNano: '0', contentKey: null, contentBytes: 0,
        error: { code: reason, message: `The job's workflow was ${status === 'LOST' ? 'not found' : status.toLowerCase().replace('_', ' ')}; nothing was charged.` },
      });
    }
    return (await jobs.get(row.id, row.accountId)) ?? row;
  }

  /** The request's fields, checked: 400 for anything missing, unknown or out of range. */
  function readRequest(body: Json, openaiDefaults: boolean): { model: string; prompt: string; seconds: number; size: string } | Error {
    if (typeof body[FORM_ERROR_FIELD] === 'string') return badRequest(`The multipart body could not be read: ${body[FORM_ERROR_FIELD]}`, 'invalid_multipart');
    for (const name of Object.keys(body)) {
      if (name === 'input_reference') return badRequest('Reference inputs (input_reference) are not supported by this gateway.', 'unsupported_parameter', name);
      if (!FIELDS.includes(name)) return badRequest(`Unrecognized request argument supplied: ${name}`, 'unknown_parameter', name);
    }
    const defaults: Json = openaiDefaults ? { model: 'sora-2', seconds: 4, size: '720x1280' } : {};
    const get = (name: string) => (body[name] === undefined || body[name] === null ? defaults[name] : body[name]);
    for (const name of FIELDS) {
      if (get(name) === undefined) return badRequest(`Missing required parameter: '${name}'.`, 'missing_required_parameter', name);
    }
    const model = get('model');
    if (typeof model !== 'string' || model === '') return badRequest("Invalid type for 'model': expected a model name.", 'invalid_type', 'model');
    const prompt = get('prompt');
    if (typeof prompt !== 'string' || prompt.trim() === '') return badRequest("Invalid value for 'prompt': expected a non-empty string.", 'invalid_value', 'prompt');
    if (prompt.length > MAX_PROMPT_CHARS) return badRequest(`Invalid value for 'prompt': longer than ${MAX_PROMPT_CHARS} characters.`, 'invalid_value', 'prompt');
    const rawSeconds = get('seconds');
    const seconds = typeof rawSeconds === 'number' ? rawSeconds : typeof rawSeconds === 'string' && /^\d{1,3}$/.test(rawSeconds) ? Number(rawSeconds) : NaN;
    if (!(VIDEO_SECONDS as readonly number[]).includes(seconds)) {
      return badRequest(`Invalid value for 'seconds': ${JSON.stringify(rawSeconds)}. Supported values are: ${VIDEO_SECONDS.map((s) => `'${s}'`).join(', ')}.`, 'invalid_value', 'seconds');
    }
    const size = get('size');
    if (typeof size !== 'string' || !(VIDEO_SIZES as readonly string[]).includes(size)) {
      return badRequest(`Invalid value for 'size': ${JSON.stringify(size)}. Supported values are: ${VIDEO_SIZES.map((s) => `'${s}'`).join(', ')}.`, 'invalid_value', 'size');
    }
    return { model, prompt, seconds, size };
  }

  return {
    async createVideo(req, ctx) {
      const requestId = req.requestId || newRequestId();
      const { apiKey, body } = await deps.engine.parse(callerKey(ctx), req.body);
      const input = readRequest(body, req.openaiDefaults);
      if (input instanceof Error) return deps.engine.invalid(apiKey, input);
      const model = await modelOfKind(deps.engine, deps.catalogue, apiKey, input.model, 'video', VIDEO_ROUTE);
      const price = model.prices.per_second;
      if (!price) throw gatewayError({ httpStatus: 500, type: 'server_error', message: `The catalogue has no per-second price for ${model.id}.` });

      const keyHash = await deps.engine.admit(apiKey, requestId);
      // No Temporal, no hold: 503 before any money moves.
      const temporal = await runtime.temporal();

      const holdNano = costNano([{ quantity: BigInt(input.seconds), priceUsd: price, perUnits: 1n }]);
      const hold = await deps.engine.placeExactHold(keyHash, requestId, holdNano, config.video.holdTtlSeconds);

      const jobId = newId('video');
      const release = (status: string) =>
        ledger.settle({
          requestId, costNano: 0n, model: model.id, route: VIDEO_ROUTE, inputTokens: 0n, outputTokens: 0n, cachedTokens: 0n, cacheWriteTokens: 0n,
          usageEstimated: false, status, httpStatus: 503, latencyMs: 0,
        });
      let row: VideoJobRow;
      try {
        row = await jobs.insert({ id: jobId, requestId, accountId: hold.accountId, keyId: hold.keyId, model: model.id, prompt: input.prompt, seconds: input.seconds, size: input.size, holdNano });
      } catch (err) {
        await release('not_started');
        throw err;
      }

      const keyPrefix = visiblePrefix(apiKey);
      const workflowInput: VideoJobInput = {
        jobId, requestId, accountId: hold.accountId, keyPrefix, model: model.id, provider: model.provider, upstreamModel: model.upstreamId,
        prompt: input.prompt, seconds: input.seconds, size: input.size, holdNano: holdNano.toString(), pricePerSecondUsd: price,
        createdAtMs: row.createdAt.getTime(), pollInitialMs: config.video.pollInitialMs, pollMaxMs: config.video.pollMaxMs,
        jobTimeoutMs: config.video.jobTimeoutMs, holdTtlSeconds: config.video.holdTtlSeconds, searchAttributes: temporal.searchAttributes,
      };
      try {
        await temporal.client.workflow.start(VIDEO_WORKFLOW_TYPE, {
          workflowId: jobId,
          taskQueue: temporal.taskQueue,
          args: [workflowInput],
          ...(temporal.searchAttributes
            ? { typedSearchAttributes: [{ key: VIDEO_MODEL_ATTRIBUTE, value: model.id }, { key: VIDEO_KEY_PREFIX_ATTRIBUTE, value: keyPrefix }, { key: VIDEO_STATUS_ATTRIBUTE, value: 'queued' }] }
            : {}),
        });
      } catch (err) {
        deps.log.error({ err, videoId: jobId }, 'could not start the video workflow');
        await release('not_started');
        await jobs.recordOutcome({
          jobId, status: 'failed', progress: 0, upstreamId: null, producedMs: 0, costNano: '0', contentKey: null, contentBytes: 0,
          error: { code: 'not_started', message: 'The job could not be started; nothing was charged.' },
        });
        throw gatewayError({ httpStatus: 503, type: 'server_error', code: 'video_jobs_unavailable', requestId, message: 'Video generation is unavailable right now: the job could not be started. Nothing was charged.' });
      }
      deps.log.info({ videoId: jobId, requestId, model: model.id, seconds: input.seconds, holdNano: String(holdNano) }, 'video job started');

      await waitForEnd(jobId, Math.min(req.waitMs, config.video.waitMs), ctx.signal);
      return toVideo((await jobs.get(jobId, hold.accountId)) ?? row);
    },

    async getVideo(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      return toVideo(TERMINAL_STATUSES.includes(row.status) ? row : await reconcile(row));
    },

    async *getVideoContent(req, ctx) {
      const { row } = await ownJob(ctx, req.id);
      if (row.status !== 'completed' || !row.contentKey) {
        const why = TERMINAL_STATUSES.includes(row.status) ? `has ${row.status === 'cancelled' ? 'been cancelled' : 'failed'}; there is no content` : `is ${row.status}; its content is available once it has completed`;
        throw gatewayError({ httpStatus: 409, type: 'invalid_request_error', code: 'video_not_ready', param: 'video_id', message: `Video '${row.id}' ${why}.` });
      }
      const obj = await runtime.store.open(row.contentKey);
      if (!obj) throw gatewayError({ httpStatus: 404, type: 'invalid_request_error', code: 'video_content_missing', message: `The content of video '${row.id}' is no longer stored.` });
      yield { part: { case: 'start' as const, value: { videoId: row.id, contentType: 'video/mp4', size: BigInt(obj.size) } } };
      for await (const chunk of obj.stream()) {
        const buf = chunk as Buffer;
        for (let at = 0; at < buf.length; at += CHUNK) yield { part: { case: 'data' as const, value: buf.subarray(at, at + CHUNK) } };
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

    async listVideos(req, ctx) {
      runtime.assertEnabled();
      const key = await caller(ctx);
      const limit = req.limit === 0 ? 20 : req.limit;
      if (limit < 1 || limit > 100) throw badRequest("Invalid value for 'limit': between 1 and 100.", 'invalid_value', 'limit');
      if (req.order && req.order !== 'asc' && req.order !== 'desc') throw badRequest("Invalid value for 'order': 'asc' or 'desc'.", 'invalid_value', 'order');
      const rows = await jobs.list(key.accountId, { limit: limit + 1, after: req.after || undefined, ascending: req.order === 'asc' });
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
