// A job's workflow as the gateway's video service drives it: started once under the job's id,
// waited on (its creation update, its end) and cancelled. The workflow itself is in
// workflows/video-job.ts; what it does on a cancel is in docs/video.md#cancel-and-delete.
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Ledger } from '../billing/ledger.ts';
import { unavailable } from '../errors/errors.ts';
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
import { releaseVideoHold } from './activities.ts';
import type { VideoJobRow } from './jobs.ts';
import { reconcile } from './reconcile.ts';
import type { TemporalReady, VideoRuntime } from './runtime.ts';

export interface JobWorkflowDeps {
  runtime: VideoRuntime;
  ledger: Ledger;
  log: Logger;
}

/**
 * Longest wait of POST /v1/videos for the upstream job to exist (the create retries a failing
 * upstream for about 90 s). Past it (no worker running, say) the job is answered as queued.
 */
const CREATION_WAIT_MS = 60_000;
/** How long a cancel waits for the workflow to release the hold and record the outcome. */
const CANCEL_WAIT_MS = 15_000;

/**
 * Starts the job's workflow, its id the job's. When it cannot be started the job fails at zero
 * (hold released, outcome recorded) and the caller gets a 503.
 */
export async function startJobWorkflow(
  deps: JobWorkflowDeps,
  temporal: TemporalReady,
  input: VideoJobInput,
): Promise<void> {
  try {
    await temporal.client.workflow.start(VIDEO_WORKFLOW_TYPE, {
      workflowId: input.jobId,
      taskQueue: temporal.taskQueue,
      args: [input],
      ...(temporal.searchAttributes
        ? {
            typedSearchAttributes: [
              { key: VIDEO_MODEL_ATTRIBUTE, value: input.model },
              { key: VIDEO_KEY_PREFIX_ATTRIBUTE, value: input.keyPrefix },
              { key: VIDEO_STATUS_ATTRIBUTE, value: 'queued' },
            ],
          }
        : {}),
    });
  } catch (err) {
    deps.log.error({ err, videoId: input.jobId }, 'could not start the video workflow');
    await failUnstartedJob(deps, input);
    throw unavailable(
      'video_jobs_unavailable',
      'Video generation is unavailable right now: the job could not be started. Nothing was charged.',
      { requestId: input.requestId },
    );
  }
}

async function failUnstartedJob(deps: JobWorkflowDeps, input: VideoJobInput): Promise<void> {
  await releaseVideoHold(deps.ledger, {
    requestId: input.requestId,
    model: input.model,
    status: 'not_started',
    httpStatus: 503,
    latencyMs: 0,
  });
  await deps.runtime.jobs.recordOutcome({
    jobId: input.jobId,
    status: 'failed',
    progress: 0,
    upstreamId: null,
    producedMs: 0,
    costNano: '0',
    contentKey: null,
    contentBytes: 0,
    error: { code: 'not_started', message: 'The job could not be started; nothing was charged.' },
  });
}

/**
 * The workflow's creation update: it returns once the upstream job exists or the job has
 * ended without one. Undefined when the wait is over first (no worker yet), the caller left,
 * or the workflow is gone: the job's row then says where it is.
 */
export async function awaitCreation(
  deps: JobWorkflowDeps,
  row: VideoJobRow,
  signal: AbortSignal,
): Promise<VideoCreation | undefined> {
  if (row.upstreamId || TERMINAL_STATUSES.includes(row.status)) {
    return {
      created: row.upstreamId !== null,
      error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? '' } : null,
    };
  }
  try {
    const { client } = await deps.runtime.temporal();
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

/** Waits until the job's workflow has closed, the wait is over or the caller has gone. */
export async function waitForEnd(runtime: VideoRuntime, id: string, ms: number, signal: AbortSignal): Promise<void> {
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
 * Cancels a running job's workflow and answers the row once the workflow has recorded how it
 * ended (or the wait is over). A job whose workflow is gone is reconciled instead.
 */
export async function cancelJob(deps: JobWorkflowDeps, row: VideoJobRow, signal: AbortSignal): Promise<VideoJobRow> {
  const { runtime } = deps;
  const { client } = await runtime.temporal();
  try {
    await client.workflow.getHandle(row.id).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    return reconcile(deps, row);
  }
  // The workflow releases the hold and records the outcome; give it a moment to.
  await waitForEnd(runtime, row.id, CANCEL_WAIT_MS, signal);
  let now = (await runtime.jobs.get(row.id, row.accountId)) ?? row;
  for (let i = 0; i < 20 && !TERMINAL_STATUSES.includes(now.status); i++) {
    await sleep(100);
    now = (await runtime.jobs.get(row.id, row.accountId)) ?? now;
  }
  return now;
}

/**
 * Cancels the workflow of a job its owner deleted while it ran: it ends as a cancel makes it
 * end, then removes what it stored (the row says deleted). One that has ended meanwhile is left.
 */
export async function cancelDeletedJob(deps: JobWorkflowDeps, temporal: TemporalReady, id: string): Promise<void> {
  await temporal.client.workflow
    .getHandle(id)
    .cancel()
    .catch((err: unknown) => {
      deps.log.info(
        { videoId: id, err: (err as Error).message },
        'deleted a running video job whose workflow could not be cancelled (it has ended, or ends by itself)',
      );
    });
}
