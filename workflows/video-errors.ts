// The error a failed job shows its caller (GET /v1/videos/{id}, the generations route), from
// the failure an activity or the deadline raised. The caller sees the provider's own words
// about their request (a content-policy refusal, a 4xx, a failed generation) or a fixed text;
// never what the gateway met on its side (addresses, file paths, the provider's account
// details in a 429), which stays in the workflow's history for the operator.
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import { FAILURE, type VideoJobError } from './video-types.ts';

export const UPSTREAM_UNAVAILABLE_MESSAGE =
  'The upstream video service could not be used (it kept failing or did not answer); nothing was charged.';

export function describeFailure(err: unknown): VideoJobError {
  const app = err instanceof ActivityFailure ? err.cause : err;
  if (app instanceof ApplicationFailure) {
    switch (app.type) {
      case FAILURE.contentPolicy:
        return { code: 'content_policy_violation', message: app.message };
      case FAILURE.rejected:
        return { code: 'upstream_rejected', message: app.message };
      case FAILURE.upstreamJobFailed:
        return { code: 'upstream_failed', message: app.message };
      case FAILURE.invalidVideo:
        return {
          code: 'invalid_video',
          message: 'The upstream delivered a video that is not a readable MP4; nothing was charged.',
        };
      case FAILURE.timeout:
        return { code: 'timeout', message: app.message };
    }
  }
  return { code: 'upstream_error', message: UPSTREAM_UNAVAILABLE_MESSAGE };
}
