// One video job, durable: create the upstream job (on the first of the model's deployments that
// takes it; every later call goes to that deployment's provider), poll it on durable timers with backoff,
// store the MP4, measure it, charge what was produced, or release the hold on failure,
// cancellation or timeout. Deterministic: no I/O, clocks or randomness here (Date.now() is
// the workflow task's time, replayed identically); everything else happens in activities.
//
// A cancel (POST /v1/videos/{id}/cancel, or DELETE of a running job) asks the provider to drop
// its job. Only when it does is the hold released unspent: a provider that will not stop a job
// bills it, so the job then runs to its end and is charged for what was produced (never more
// than the hold), like any other.
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { describeFailure } from './video-errors.ts';
import {
  FAILURE,
  VIDEO_CREATION_UPDATE,
  VIDEO_STATE_QUERY,
  VIDEO_STATUS_ATTRIBUTE,
  type JobOutcome,
  type VideoActivities,
  type VideoCreation,
  type VideoJobInput,
  type VideoJobState,
  type VideoStatus,
} from './video-types.ts';

export const videoStateQuery = defineQuery<VideoJobState>(VIDEO_STATE_QUERY);
/** The gateway answers POST /v1/videos once this returns: a refusal at creation is the caller's error. */
export const videoCreationUpdate = defineUpdate<VideoCreation>(VIDEO_CREATION_UPDATE);

// Upstream calls: 5xx, 429 (after its retry-after) and timeouts are retried with backoff;
// a content-policy rejection or another 4xx is final.
const upstreamRetry = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
  maximumAttempts: 8,
  nonRetryableErrorTypes: [FAILURE.contentPolicy, FAILURE.rejected],
};
const upstream = proxyActivities<VideoActivities>({ startToCloseTimeout: '30 seconds', retry: upstreamRetry });
// A download reports progress by heartbeat, so a worker that died mid-transfer is noticed in
// 30 s instead of at the end of the whole timeout.
const transfer = proxyActivities<VideoActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
  retry: upstreamRetry,
});
// Money and bookkeeping: retried until they succeed (a database outage is temporary); a hold
// must end settled or released.
const books = proxyActivities<VideoActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    nonRetryableErrorTypes: [FAILURE.invalidVideo],
  },
});

export async function videoJob(input: VideoJobInput): Promise<VideoJobState> {
  const state: VideoJobState = {
    jobId: input.jobId,
    requestId: input.requestId,
    status: 'queued',
    phase: 'creating',
    progress: 0,
    upstreamId: null,
    deployment: null,
    polls: 0,
    producedMs: 0,
    holdNano: input.holdNano,
    costNano: '0',
    contentKey: null,
    contentBytes: 0,
    error: null,
    cancellation: null,
  };
  setHandler(videoStateQuery, () => state);
  setHandler(videoCreationUpdate, async () => {
    await condition(() => state.upstreamId !== null || state.phase === 'done');
    return { created: state.upstreamId !== null, error: state.upstreamId === null ? state.error : null };
  });

  const setStatus = (status: VideoStatus) => {
    if (state.status === status) return;
    state.status = status;
    if (input.searchAttributes) upsertSearchAttributes([{ key: VIDEO_STATUS_ATTRIBUTE, value: status }]);
  };
  const outcome = (): JobOutcome => ({
    jobId: state.jobId,
    status: state.status,
    progress: state.progress,
    upstreamId: state.upstreamId,
    producedMs: state.producedMs,
    costNano: state.costNano,
    contentKey: state.contentKey,
    contentBytes: state.contentBytes,
    error: state.error,
  });
  const deadline = Date.now() + input.jobTimeoutMs;
  /** Every call for the job goes to the provider of the deployment that created it (the model's own for a job from before deployments). */
  let provider = input.provider;

  /** Polls the upstream job on durable timers until it has completed; throws when it failed or the deadline passed. */
  const untilGenerated = async (upstreamId: string): Promise<void> => {
    let delay = input.pollInitialMs;
    for (;;) {
      if (Date.now() + delay > deadline) {
        throw ApplicationFailure.nonRetryable(
          `The video was not ready within ${Math.round(input.jobTimeoutMs / 1000)} s.`,
          FAILURE.timeout,
        );
      }
      await sleep(delay);
      const s = await upstream.pollUpstreamJob({
        jobId: input.jobId,
        requestId: input.requestId,
        provider,
        upstreamId,
        holdTtlSeconds: input.holdTtlSeconds,
      });
      state.polls++;
      state.progress = s.progress;
      if (s.status === 'failed') {
        const e = s.error ?? { code: 'upstream_failed', message: 'The upstream video job failed.' };
        throw ApplicationFailure.nonRetryable(
          e.message,
          e.code === 'content_policy_violation' ? FAILURE.contentPolicy : FAILURE.upstreamJobFailed,
        );
      }
      setStatus(s.status === 'queued' ? 'queued' : 'in_progress');
      if (s.status === 'completed') return;
      delay = Math.min(input.pollMaxMs, Math.ceil(delay * 1.5));
    }
  };

  /** True when the provider dropped its job (or it is gone); false when it would not, or could not be asked. */
  const dropUpstreamJob = async (upstreamId: string): Promise<boolean> => {
    try {
      return (await upstream.cancelUpstreamJob({ provider, upstreamId }))?.dropped ?? true;
    } catch {
      return false;
    }
  };

  /** The outcome on the job's row; a job its owner deleted meanwhile loses what was stored of it. */
  const record = async () => {
    const recorded = await books.recordOutcome(outcome());
    if (recorded?.deleted)
      await books.discardVideo({
        contentKey: state.contentKey,
        provider,
        upstreamId: state.upstreamId,
      });
    if (input.searchAttributes) upsertSearchAttributes([{ key: VIDEO_STATUS_ATTRIBUTE, value: state.status }]);
  };

  try {
    // Not interrupted by a cancel: the upstream job's id is what cancelling it needs.
    const created = await CancellationScope.nonCancellable(() =>
      upstream.createUpstreamJob({
        jobId: input.jobId,
        requestId: input.requestId,
        accountId: input.accountId,
        model: input.model,
        provider: input.provider,
        upstreamModel: input.upstreamModel,
        prompt: input.prompt,
        seconds: input.seconds,
        size: input.size,
      }),
    );
    state.upstreamId = created.upstreamId;
    state.deployment = created.deployment ?? null;
    provider = created.provider ?? input.provider;

    state.phase = 'generating';
    try {
      await untilGenerated(created.upstreamId);
    } catch (err) {
      if (!isCancellation(err)) throw err;
      if (await CancellationScope.nonCancellable(() => dropUpstreamJob(created.upstreamId))) {
        state.cancellation = 'dropped';
        throw err;
      }
      // The provider goes on and bills the job: follow it to its end and charge what it produced.
      state.cancellation = 'refused_by_provider';
      await CancellationScope.nonCancellable(() => untilGenerated(created.upstreamId));
    }

    // The video exists and the provider bills it: from here on a cancel changes nothing.
    return await CancellationScope.nonCancellable(async () => {
      state.phase = 'downloading';
      const stored = await transfer.downloadVideo({
        jobId: input.jobId,
        provider,
        upstreamId: created.upstreamId,
      });
      state.contentKey = stored.contentKey;
      state.contentBytes = stored.bytes;

      state.phase = 'measuring';
      const measured = await books.measureVideo({ contentKey: stored.contentKey });
      state.producedMs = measured.producedMs;

      state.phase = 'settling';
      const charge = await books.settleCharge({
        requestId: input.requestId,
        model: input.model,
        ...(created.deployment !== undefined
          ? { deployment: created.deployment, providerPricePerSecondUsd: created.providerPricePerSecondUsd ?? '' }
          : {}),
        producedMs: measured.producedMs,
        seconds: input.seconds,
        pricePerSecondUsd: input.pricePerSecondUsd,
        ...(input.priceVersion !== undefined ? { priceVersion: input.priceVersion } : {}),
        ...(input.markupRate !== undefined
          ? { markupVersion: input.markupVersion ?? '0', markupRate: input.markupRate }
          : {}),
        createdAtMs: input.createdAtMs,
      });
      state.costNano = charge.costNano;
      state.progress = 100;
      state.phase = 'done';
      state.status = 'completed';
      await record();
      await condition(allHandlersFinished);
      return state;
    });
  } catch (err) {
    const cancelled = isCancellation(err);
    const error = cancelled
      ? { code: 'cancelled', message: 'The job was cancelled; nothing was charged.' }
      : describeFailure(err);
    await CancellationScope.nonCancellable(async () => {
      state.phase = 'releasing';
      // Given up on, the upstream job should not go on either (it would be billed to nobody).
      if (error.code === 'timeout' && state.upstreamId) await dropUpstreamJob(state.upstreamId);
      await books.releaseHold({
        requestId: input.requestId,
        jobId: input.jobId,
        model: input.model,
        reason: error.code,
        createdAtMs: input.createdAtMs,
      });
      state.error = error;
      state.phase = 'done';
      state.status = cancelled ? 'cancelled' : 'failed';
      await record();
      // The creation update (a caller waiting on POST /v1/videos) gets its answer before the end.
      await condition(allHandlersFinished);
    });
    // Cancelled shows as Canceled in the Temporal UI, anything else as Failed with its reason
    // (and, for the operator, the failure that caused it).
    if (cancelled) throw err;
    throw ApplicationFailure.create({
      message: error.message,
      type: error.code,
      nonRetryable: true,
      cause: err instanceof Error ? err : undefined,
    });
  }
}
