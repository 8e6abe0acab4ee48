// Idempotency-Key on creates, as Stripe's keys work: a key belongs to the account and names one
// request for 24 hours; the same request under it is the same job (its id derived from both),
// a different one is refused. docs/video.md#idempotency-key tells the rules to callers.
import { createHash } from 'node:crypto';
import { badRequest, gatewayError } from '../errors/errors.ts';
import type { VideoJobRow, VideoJobs } from './jobs.ts';
import type { VideoRequest } from './request.ts';

/** How long an Idempotency-Key names its request (as Stripe's keys). */
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
/** Visible ASCII, 1 to 255 characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The header's key, null without one; 400 for one that is not 1 to 255 visible ASCII characters. */
export function readIdempotencyKey(header: string): string | null {
  const key = header || null;
  if (key !== null && !IDEMPOTENCY_KEY.test(key))
    throw badRequest('Invalid Idempotency-Key: 1 to 255 visible ASCII characters.', 'invalid_idempotency_key');
  return key;
}

/** What identifies a request under an Idempotency-Key: the job it asks for, defaults applied. */
export function requestHash(r: VideoRequest): string {
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

/**
 * The job an earlier request under this Idempotency-Key made, when the key is still honoured
 * (or its id matches: the same request, after the key's 24 hours). 422 when the key named a
 * different request, or its job has been deleted.
 */
export async function earlierJob(
  jobs: VideoJobs,
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
