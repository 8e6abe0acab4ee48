// A job whose row still says running, checked against its workflow: one terminated by an
// operator, or lost with a wiped Temporal, never recorded an outcome. Its hold is released and
// the row says what became of it, so the job does not stay "in progress" for ever.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Ledger } from '../billing/ledger.ts';
import { releaseVideoHold } from './activities.ts';
import type { VideoJobRow } from './jobs.ts';
import type { VideoRuntime } from './runtime.ts';

/** How long a job's workflow may be missing after the job was created (it is being started). */
const START_GRACE_MS = 60_000;

/** The row, after failing it at zero when its workflow ended without recording an outcome. */
export async function reconcile(
  deps: { runtime: VideoRuntime; ledger: Ledger },
  row: VideoJobRow,
): Promise<VideoJobRow> {
  const status = await workflowStatus(deps.runtime, row);
  if (status === undefined || status === 'RUNNING' || status === 'CONTINUED_AS_NEW') return row;
  if (status === 'TERMINATED' || status === 'TIMED_OUT' || status === 'LOST') await failLostJob(deps, row, status);
  return (await deps.runtime.jobs.get(row.id, row.accountId)) ?? row;
}

/** The workflow's status name, LOST when it is gone, undefined when that cannot be known now. */
async function workflowStatus(runtime: VideoRuntime, row: VideoJobRow): Promise<string | undefined> {
  try {
    const { client } = await runtime.temporal(2_000);
    const d = await client.withDeadline(Date.now() + 3_000, () => client.workflow.getHandle(row.id).describe());
    return d.status.name;
  } catch (err) {
    // Not found long after creation: the job's workflow is gone.
    if (!(err instanceof WorkflowNotFoundError) || Date.now() - row.createdAt.getTime() < START_GRACE_MS)
      return undefined;
    return 'LOST';
  }
}

async function failLostJob(
  deps: { runtime: VideoRuntime; ledger: Ledger },
  row: VideoJobRow,
  status: 'TERMINATED' | 'TIMED_OUT' | 'LOST',
): Promise<void> {
  const reason = status === 'LOST' ? 'job_lost' : status.toLowerCase();
  await releaseVideoHold(deps.ledger, {
    requestId: row.requestId,
    model: row.model,
    ...(row.deployment ? { deployment: row.deployment } : {}),
    attempts: row.attempts ?? '',
    status: reason,
    httpStatus: 502,
    latencyMs: 0,
  });
  await deps.runtime.jobs.recordOutcome({
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
