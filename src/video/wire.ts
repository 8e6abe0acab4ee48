// Request facts the facade and the video service share; no dependencies, so the facade can
// import it without pulling in the service.

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
