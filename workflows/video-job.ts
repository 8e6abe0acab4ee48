// One video job, durable: create the upstream job, poll it on durable timers with backoff,
// store the MP4, measure it, charge what was produced, or release the hold on failure,
// cancellation or timeout. Deterministic: no I/O, clocks or randomness here (Date.now() is
// the workflow task's time, replayed identically); everything else happens in activities.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  defineQuery,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import {
  FAILURE,
  VIDEO_STATE_QUERY,
  VIDEO_STATUS_ATTRIBUTE,
  type JobOutcome,
  type VideoActivities,
  type VideoJobError,
  type VideoJobInput,
  type VideoJobState,
  type VideoStatus,
} from './video-types.ts';

export const videoStateQuery = defineQuery<VideoJobState>(VIDEO_STATE_QUERY);

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
const transfer = proxyActivities<VideoActivities>({ startToCloseTimeout: '30 minutes', heartbeatTimeout: '30 seconds', retry: upstreamRetry });
// Money and bookkeeping: retried until they succeed (a database outage is temporary); a hold
// must end settled or released.
const books = proxyActivities<VideoActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', nonRetryableErrorTypes: [FAILURE.invalidVideo] },
});

export async function videoJob(input: VideoJobInput): Promise<VideoJobState> {
  const state: VideoJobState = {
    jobId: input.jobId,
    requestId: input.requestId,
    status: 'queued',
    phase: 'creating',
    progress: 0,
    upstreamId: null,
    polls: 0,
    producedMs: 0,
    holdNano: input.holdNano,
    costNano: '0',
    contentKey: null,
    contentBytes: 0,
    error: null,
  };
  setHandler(videoStateQuery, () => state);

  const setStatus = (status: VideoStatus) => {
    if (state.status === status) return;
    state.status = status;
    if (input.searchAttributes) upsertSearchAttributes([{ key: VIDEO_STATUS_ATTRIBUTE, value: status }]);
  };
  const outcome = (): JobOutcome => ({
    jobId: state.jobId, status: state.status, progress: state.progress, upstreamId: state.upstreamId, producedMs: state.producedMs,
    costNano: state.costNano, contentKey: state.contentKey, contentBytes: state.contentBytes, error: state.error,
  });
  const deadline = Date.now() + input.jobTimeoutMs;

  try {
    const created = await upstream.createUpstreamJob({
      jobId: input.jobId, provider: input.provider, upstreamModel: input.upstreamModel, prompt: input.prompt, seconds: input.seconds, size: input.size,
    });
    state.upstreamId = created.upstreamId;

    state.phase = 'generating';
    let delay = input.pollInitialMs;
    for (;;) {
      if (Date.now() + delay > deadline) {
        throw ApplicationFailure.nonRetryable(`The video was not ready within ${Math.round(input.jobTimeoutMs / 1000)} s.`, FAILURE.timeout);
      }
      await sleep(delay);
      const s = await upstream.pollUpstreamJob({
        jobId: input.jobId, requestId: input.requestId, provider: input.provider, upstreamId: created.upstreamId, holdTtlSeconds: input.holdTtlSeconds,
      });
      state.polls++;
      state.progress = s.progress;
      if (s.status === 'failed') {
        const e = s.error ?? { code: 'upstream_failed', message: 'The upstream video job failed.' };
        throw ApplicationFailure.nonRetryable(e.message, e.code === 'content_policy_violation' ? FAILURE.contentPolicy : FAILURE.upstreamJobFailed);
      }
      setStatus(s.status === 'queued' ? 'queued' : 'in_progress');
      if (s.status === 'completed') break;
      delay = Math.min(input.pollMaxMs, Math.ceil(delay * 1.5));
    }

    state.phase = 'downloading';
    const stored = await transfer.downloadVideo({ jobId: input.jobId, provider: input.provider, upstreamId: created.upstreamId });
    state.contentKey = stored.contentKey;
    state.contentBytes = stored.bytes;

    state.phase = 'measuring';
    const measured = await books.measureVideo({ contentKey: stored.contentKey });
    state.producedMs = measured.producedMs;

    // From the charge on, a cancel request no longer interrupts the job: it completes, paid.
    return await CancellationScope.nonCancellable(async () => {
      state.phase = 'settling';
      const charge = await books.settleCharge({
        requestId: input.requestId, model: input.model, producedMs: measured.producedMs, seconds: input.seconds,
        pricePerSecondUsd: input.pricePerSecondUsd, createdAtMs: input.createdAtMs,
      });
      state.costNano = charge.costNano;
      state.progress = 100;
      state.phase = 'done';
      state.status = 'completed';
      await books.recordOutcome(outcome());
      if (input.searchAttributes) upsertSearchAttributes([{ key: VIDEO_STATUS_ATTRIBUTE, value: 'completed' }]);
      return state;
    });
  } catch (err) {
    const cancelled = isCancellation(err);
    const error = cancelled ? { code: 'cancelled', message: 'The job was cancelled; nothing was charged.' } : describeFailure(err);
    await CancellationScope.nonCancellable(async () => {
      state.phase = 'releasing';
      await books.releaseHold({ requestId: input.requestId, model: input.model, reason: error.code, createdAtMs: input.createdAtMs });
      if (cancelled && state.upstreamId) {
        await upstream.cancelUpstreamJob({ provider: input.provider, upstreamId: state.upstreamId }).catch(() => undefined);
      }
      state.error = error;
      state.phase = 'done';
      state.status = cancelled ? 'cancelled' : 'failed';
      await books.recordOutcome(outcome());
      if (input.searchAttributes) upsertSearchAttributes([{ key: VIDEO_STATUS_ATTRIBUTE, value: state.status }]);
    });
    // Cancelled shows as Canceled in the Temporal UI, anything else as Failed with its reason.
    if (cancelled) throw err;
    throw ApplicationFailure.nonRetryable(error.message, error.code);
  }
}

/** The job's error as callers see it, from the failure an activity (or the deadline) raised. */
function describeFailure(err: unknown): VideoJobError {
  const app = err instanceof ActivityFailure ? err.cause : err;
  if (app instanceof ApplicationFailure) {
    switch (app.type) {
      case FAILURE.contentPolicy: return { code: 'content_policy_violation', message: app.message };
      case FAILURE.rejected: return { code: 'upstream_rejected', message: app.message };
      case FAILURE.upstreamJobFailed: return { code: 'upstream_failed', message: app.message };
      case FAILURE.invalidVideo: return { code: 'invalid_video', message: app.message };
      case FAILURE.timeout: return { code: 'timeout', message: app.message };
      default: return { code: 'upstream_error', message: `The upstream video service kept failing: ${app.message}` };
    }
  }
  if (app instanceof TimeoutFailure) return { code: 'upstream_error', message: 'The upstream video service did not answer in time.' };
  return { code: 'upstream_error', message: err instanceof Error ? err.message : 'The video job failed.' };
}
