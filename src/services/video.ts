// VideoService: the RPC face of video jobs. Validates, records the job, holds seconds × price,
// starts its workflow and waits until the upstream job exists; reads jobs from their rows (the
// workflow writes progress and the outcome there), so answers need no worker and survive
// restarts. The caller's key comes from the call metadata, as for InferenceService; a key sees
// only its own account's jobs. The steps live in src/video/; this file composes them.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import { markupFor, type Catalogue, type ResolvedModel } from '../catalogue/catalogue.ts';
import type { Ledger } from '../billing/ledger.ts';
import { newId, newRequestId } from '../billing/ids.ts';
import { customerNano, type Markup } from '../billing/markup.ts';
import { costNano } from '../money/money.ts';
import { badRequest, conflict, gatewayError, notFound } from '../errors/errors.ts';
import { allowedModel, type Metering } from '../metering/metering.ts';
import { parseBody } from '../inference/request-body.ts';
import { callerOf, requestCallerOf, type Caller } from '../billing/caller.ts';
import { modelOfKind } from '../inference/media/common.ts';
import type {
  CancelVideoRequest,
  CreateVideoRequest,
  DeleteVideoRequest,
  GetVideoContentRequest,
  GetVideoRequest,
  ListVideosRequest,
  VideoService,
} from '../gen/gateway/v1/video_pb.js';
import { TERMINAL_STATUSES, type VideoJobInput } from '../../workflows/video-types.ts';
import { VIDEO_ROUTE } from '../video/activities.ts';
import { videoContentParts } from '../video/content.ts';
import { earlierJob, keyedJobId, readIdempotencyKey, requestHash } from '../video/idempotency.ts';
import { awaitCreation, cancelDeletedJob, cancelJob, startJobWorkflow, waitForEnd } from '../video/job-workflow.ts';
import type { VideoJobRow } from '../video/jobs.ts';
import { reconcile } from '../video/reconcile.ts';
import { readVideoRequest, type VideoRequest } from '../video/request.ts';
import type { TemporalReady, VideoRuntime } from '../video/runtime.ts';
import { failureHttpStatus, toVideo } from '../video/wire.ts';
import { noteJobHold } from '../metering/money-spans.ts';

export interface VideoServiceDeps {
  config: Config;
  ledger: Ledger;
  catalogue: Catalogue;
  metering: Metering;
  runtime: VideoRuntime;
  log: Logger;
}

export function videoService(deps: VideoServiceDeps): ServiceImpl<typeof VideoService> {
  return {
    createVideo: (req, ctx) => createVideo(deps, req, ctx),
    getVideo: (req, ctx) => getVideo(deps, req, ctx),
    getVideoContent: (req, ctx) => getVideoContent(deps, req, ctx),
    cancelVideo: (req, ctx) => cancelVideo(deps, req, ctx),
    deleteVideo: (req, ctx) => deleteVideo(deps, req, ctx),
    listVideos: (req, ctx) => listVideos(deps, req, ctx),
  };
}

/** A create, read and checked: who asks for what, under which key, at which price. */
interface Create {
  requestId: string;
  caller: Caller;
  /** What is asked, the model named by its catalogue id. */
  asked: VideoRequest;
  idempotencyKey: string | null;
  model: ResolvedModel;
  pricePerSecondUsd: string;
}

/** A new job's id and its request's hash (what a repeat under its key must match). */
interface JobIdentity {
  id: string;
  hash: string;
}

/** What the job holds: the seconds asked at the customer's price, and the markup in it. */
interface Hold {
  markup: Markup;
  nano: bigint;
}

async function createVideo(deps: VideoServiceDeps, req: CreateVideoRequest, ctx: HandlerContext) {
  const create = readCreate(deps.catalogue, req, ctx);
  allowedModel(
    { model: create.model, body: { model: create.model.id }, requestId: create.requestId },
    await deps.metering.admit(create.caller, create.requestId),
  );
  // No Temporal, no hold: 503 before any money moves.
  const temporal = await deps.runtime.temporal();
  const answer = (row: VideoJobRow) => answerCreate(deps, row, req.waitMs, ctx.signal);

  const job = jobIdentity(create);
  const earlier = await earlierJobUnderKey(deps, create, job);
  if (earlier) return answer(earlier);
  const hold = holdFor(create);
  const recorded = await recordJob(deps, create, job, hold);
  if (!recorded.isNew) return answer(recorded.row);
  await holdCredit(deps, create, job, hold);
  await startJobWorkflow(deps, temporal, workflowInput(deps.config, temporal, create, hold, recorded.row));
  deps.log.info(
    {
      videoId: job.id,
      requestId: create.requestId,
      model: create.model.id,
      seconds: create.asked.seconds,
      holdNano: String(hold.nano),
      idempotent: create.idempotencyKey !== null,
    },
    'video job started',
  );
  return answer(recorded.row);
}

/** The request's fields, its Idempotency-Key, and the model with its per-second price: 400s (and a 500) before anything else. */
function readCreate(catalogue: Catalogue, req: CreateVideoRequest, ctx: HandlerContext): Create {
  const requestId = req.requestId || newRequestId();
  const caller = requestCallerOf(ctx);
  const input = readVideoRequest(parseBody(req.body), req.openaiDefaults);
  const idempotencyKey = readIdempotencyKey(req.idempotencyKey);
  const model = modelOfKind(catalogue, input.model, 'video', VIDEO_ROUTE);
  const pricePerSecondUsd = model.prices.per_second;
  if (!pricePerSecondUsd)
    throw gatewayError({
      httpStatus: 500,
      type: 'server_error',
      message: `The catalogue has no per-second price for ${model.id}.`,
    });
  return { requestId, caller, asked: { ...input, model: model.id }, idempotencyKey, model, pricePerSecondUsd };
}

/** The job's id: derived from the account, the key and the request when keyed, else a new one. */
function jobIdentity(create: Create): JobIdentity {
  const { caller, asked, idempotencyKey } = create;
  const hash = requestHash(asked);
  const id = idempotencyKey === null ? newId('video') : keyedJobId(caller.accountId, idempotencyKey, hash);
  return { id, hash };
}

/** Held at the customer's price: the seconds asked at the provider's price, marked up. */
function holdFor(create: Create): Hold {
  const markup = markupFor(create.model, create.caller.group);
  const cost = costNano([{ quantity: BigInt(create.asked.seconds), priceUsd: create.pricePerSecondUsd, perUnits: 1n }]);
  return { markup, nano: customerNano(cost, markup) };
}

/** The job an earlier request under the same Idempotency-Key made (422 if it asked for another). */
function earlierJobUnderKey(
  deps: VideoServiceDeps,
  create: Create,
  job: JobIdentity,
): Promise<VideoJobRow | undefined> {
  if (create.idempotencyKey === null) return Promise.resolve(undefined);
  return earlierJob(deps.runtime.jobs, create.caller.accountId, create.idempotencyKey, job.id, job.hash);
}

/**
 * The job's row, before its hold: a repeat that finds the row finds a job with its hold. When
 * a concurrent request with the same key got there first, its job; 409 for a reused request id.
 */
async function recordJob(
  deps: VideoServiceDeps,
  create: Create,
  job: JobIdentity,
  hold: Hold,
): Promise<{ row: VideoJobRow; isNew: boolean }> {
  const { requestId, caller, asked } = create;
  const row = await deps.runtime.jobs.insert({
    id: job.id,
    requestId,
    accountId: caller.accountId,
    keyId: caller.keyId,
    model: asked.model,
    prompt: asked.prompt,
    seconds: asked.seconds,
    size: asked.size,
    holdNano: hold.nano,
    idempotencyKey: create.idempotencyKey,
    requestHash: job.hash,
  });
  if (row) return { row, isNew: true };
  const earlier = await earlierJobUnderKey(deps, create, job);
  if (earlier) return { row: earlier, isNew: false };
  throw conflict('duplicate_request', `Request id '${requestId}' was already used.`, { requestId });
}

/** Holds the job's price for its lifetime (402 when the balance cannot cover it: the row is taken back). */
async function holdCredit(deps: VideoServiceDeps, create: Create, job: JobIdentity, hold: Hold): Promise<void> {
  try {
    // The job's hold counts against every budget it is under until its workflow settles it.
    const windows = await deps.metering.budgetWindows({ caller: create.caller });
    await deps.metering.placeExactHold(
      create.caller,
      create.requestId,
      hold.nano,
      deps.config.video.holdTtlSeconds,
      windows,
    );
    noteJobHold(create.requestId, create.caller.accountId, hold.nano);
  } catch (err) {
    await deps.runtime.jobs.remove(job.id);
    throw err;
  }
}

/** What the job's workflow starts with: the job as asked and held, and the video settings it runs by. */
function workflowInput(
  config: Config,
  temporal: TemporalReady,
  create: Create,
  hold: Hold,
  row: VideoJobRow,
): VideoJobInput {
  const { model, asked } = create;
  return {
    jobId: row.id,
    requestId: create.requestId,
    accountId: create.caller.accountId,
    keyPrefix: create.caller.prefix,
    model: model.id,
    provider: model.provider,
    upstreamModel: model.upstreamId,
    prompt: asked.prompt,
    seconds: asked.seconds,
    size: asked.size,
    holdNano: hold.nano.toString(),
    pricePerSecondUsd: create.pricePerSecondUsd,
    // The job settles at the price and markup (and their versions) it was held at, whatever the book says by then.
    priceVersion: model.priceVersion.toString(),
    markupVersion: hold.markup.versionId.toString(),
    markupRate: hold.markup.rate,
    createdAtMs: row.createdAt.getTime(),
    pollInitialMs: config.video.pollInitialMs,
    pollMaxMs: config.video.pollMaxMs,
    jobTimeoutMs: config.video.jobTimeoutMs,
    holdTtlSeconds: config.video.holdTtlSeconds,
    searchAttributes: temporal.searchAttributes,
  };
}

/**
 * Answers a create: with no wait asked, once the upstream job exists (a refusal at creation
 * becomes the caller's error, its hold already released); otherwise once the job has ended or
 * the wait is over.
 */
async function answerCreate(deps: VideoServiceDeps, row: VideoJobRow, waitMs: number, signal: AbortSignal) {
  if (waitMs > 0) {
    await waitForEnd(deps.runtime, row.id, Math.min(waitMs, deps.config.video.waitMs), signal);
  } else {
    const creation = await awaitCreation(deps, row, signal);
    if (creation && !creation.created) throw creationRefused(row, creation.error);
  }
  const now = await deps.runtime.jobs.get(row.id, row.accountId);
  // Gone: the first request under this key was taken back (its hold could not be placed) while this one waited.
  if (!now)
    throw conflict(
      'idempotency_key_in_use',
      'The first request with this Idempotency-Key did not go through; send the request again.',
    );
  return toVideo(now);
}

/** A job that ended without an upstream job, as the caller's error (as the generations route maps it). */
function creationRefused(row: VideoJobRow, error: { code: string; message: string } | null) {
  const e = error ?? { code: 'upstream_error', message: 'The video job could not be created; nothing was charged.' };
  const status = failureHttpStatus(e.code);
  return gatewayError({
    httpStatus: status,
    type: status < 500 ? 'invalid_request_error' : 'server_error',
    code: e.code,
    requestId: row.requestId,
    message: e.message,
  });
}

/** The caller's own job: another account's id is the same 404 as an id that does not exist. */
async function ownJob(deps: VideoServiceDeps, ctx: HandlerContext, id: string): Promise<VideoJobRow> {
  deps.runtime.assertEnabled();
  const caller = callerOf(ctx);
  const row = id ? await deps.runtime.jobs.get(id, caller.accountId) : undefined;
  if (!row) throw videoNotFound(id);
  return row;
}

const videoNotFound = (id: string) =>
  notFound('video_not_found', `No video found with id '${id}'.`, { param: 'video_id' });

const isTerminal = (row: VideoJobRow) => TERMINAL_STATUSES.includes(row.status);

async function getVideo(deps: VideoServiceDeps, req: GetVideoRequest, ctx: HandlerContext) {
  const row = await ownJob(deps, ctx, req.id);
  return toVideo(isTerminal(row) ? row : await reconcile(deps, row));
}

async function* getVideoContent(deps: VideoServiceDeps, req: GetVideoContentRequest, ctx: HandlerContext) {
  const row = await ownJob(deps, ctx, req.id);
  yield* videoContentParts(deps.runtime.store, row, ctx.signal);
}

async function cancelVideo(deps: VideoServiceDeps, req: CancelVideoRequest, ctx: HandlerContext) {
  const row = await ownJob(deps, ctx, req.id);
  return toVideo(isTerminal(row) ? row : await cancelJob(deps, row, ctx.signal));
}

/** Hides the job from its owner; a finished job's MP4 and the provider's copy go, a running job is cancelled. */
async function deleteVideo(deps: VideoServiceDeps, req: DeleteVideoRequest, ctx: HandlerContext) {
  const { runtime } = deps;
  const row = await ownJob(deps, ctx, req.id);
  const current = isTerminal(row) ? row : await reconcile(deps, row);
  // A running job is cancelled through its workflow: no Temporal, no delete (503 before anything changes).
  const temporal = isTerminal(current) ? undefined : await runtime.temporal();
  const deleted = await runtime.jobs.markDeleted(row.id, row.accountId);
  if (!deleted) throw videoNotFound(req.id);
  if (isTerminal(deleted)) {
    if (deleted.contentKey) await runtime.store.delete(deleted.contentKey);
    // At the provider that made it; a job from before deployments, its model's own.
    const provider = deleted.providerId ?? deps.catalogue.get(deleted.model)?.provider;
    if (deleted.upstreamId && provider) runtime.discardUpstream(provider, deleted.upstreamId);
  } else {
    await cancelDeletedJob(deps, temporal ?? (await runtime.temporal()), row.id);
  }
  deps.log.info({ videoId: row.id, status: deleted.status }, 'video job deleted');
  return { id: row.id, deleted: true };
}

async function listVideos(deps: VideoServiceDeps, req: ListVideosRequest, ctx: HandlerContext) {
  deps.runtime.assertEnabled();
  const caller = callerOf(ctx);
  const limit = req.limit === 0 ? 20 : req.limit;
  if (limit < 1 || limit > 100)
    throw badRequest("Invalid value for 'limit': between 1 and 100.", 'invalid_value', 'limit');
  if (req.order && req.order !== 'asc' && req.order !== 'desc')
    throw badRequest("Invalid value for 'order': 'asc' or 'desc'.", 'invalid_value', 'order');
  const rows = await deps.runtime.jobs.list(caller.accountId, {
    limit: limit + 1,
    after: req.after || undefined,
    ascending: req.order === 'asc',
  });
  return { videos: rows.slice(0, limit).map(toVideo), hasMore: rows.length > limit };
}
