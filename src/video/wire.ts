// Request facts the facade and the video service share, and a job as the service answers it;
// types are all it imports, so the facade can import it without pulling in the service.
import type { VideoJobRow } from './jobs.ts';

/** Seconds and sizes sora-2 accepts (as OpenAI's video API lists them). */
export const VIDEO_SECONDS = [4, 8, 12] as const;
export const VIDEO_SIZES = ['720x1280', '1280x720'] as const;

/** The facade marks a multipart body it could not read with this field; the service answers 400. */
export const FORM_ERROR_FIELD = '$form_error';

/** HTTP status of a job that ended without a video (as the generations route answers it too). */
export function failureHttpStatus(code: string): number {
  switch (code) {
    case 'content_policy_violation':
    case 'upstream_rejected':
      return 400;
    case 'cancelled':
      return 409;
    case 'timeout':
      return 504;
    case 'not_started':
      return 503;
    default:
      return 502;
  }
}

/** A job's row as the Video message answers it (the facade adds OpenAI's object fields). */
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
