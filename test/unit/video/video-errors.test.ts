// What a failed video job tells its caller: the provider's words about the request, or a fixed
// text; never an address, a file path or the provider's account details met on the way.
import { describe, expect, it } from 'vitest';
import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { describeFailure, UPSTREAM_UNAVAILABLE_MESSAGE } from '../../../workflows/video-errors.ts';
import { FAILURE } from '../../../workflows/video-types.ts';

const fromActivity = (cause: Error) =>
  new ActivityFailure(
    'activity failed',
    'downloadVideo',
    'video_x-1',
    RetryState.MAXIMUM_ATTEMPTS_REACHED,
    'worker@host',
    cause,
  );

describe('describeFailure', () => {
  it("keeps the provider's words about the request", () => {
    expect(
      describeFailure(
        fromActivity(
          ApplicationFailure.nonRetryable('Your request was blocked by our moderation system.', FAILURE.contentPolicy),
        ),
      ),
    ).toEqual({
      code: 'content_policy_violation',
      message: 'Your request was blocked by our moderation system.',
    });
    expect(
      describeFailure(fromActivity(ApplicationFailure.nonRetryable("Invalid value for 'size'.", FAILURE.rejected))),
    ).toEqual({ code: 'upstream_rejected', message: "Invalid value for 'size'." });
    expect(
      describeFailure(ApplicationFailure.nonRetryable('Video generation failed.', FAILURE.upstreamJobFailed)),
    ).toEqual({ code: 'upstream_failed', message: 'Video generation failed.' });
  });

  it('says nothing of what the gateway met on its side', () => {
    const leaks = [
      ApplicationFailure.retryable(
        "The video download broke: ENOSPC: no space left on device, write '/srv/gateway/data/videos/.video_x.mp4.0123456789ab.partial'",
        FAILURE.unavailable,
      ),
      ApplicationFailure.retryable(
        'The upstream video API could not be reached: connect ECONNREFUSED 10.1.2.3:443',
        FAILURE.unavailable,
      ),
      ApplicationFailure.retryable(
        'Rate limit reached for sora-2 in organization org-AbCdEf123 on requests per min.',
        FAILURE.unavailable,
      ),
      ApplicationFailure.nonRetryable("The upstream refused the gateway's credentials (401).", FAILURE.unavailable),
      ApplicationFailure.nonRetryable('unknown provider openai', FAILURE.unavailable),
    ];
    for (const leak of leaks)
      expect(describeFailure(fromActivity(leak))).toEqual({
        code: 'upstream_error',
        message: UPSTREAM_UNAVAILABLE_MESSAGE,
      });
    expect(
      describeFailure(
        fromActivity(new TimeoutFailure('activity StartToClose timeout', undefined, TimeoutType.START_TO_CLOSE)),
      ),
    ).toEqual({
      code: 'upstream_error',
      message: UPSTREAM_UNAVAILABLE_MESSAGE,
    });
    expect(describeFailure(new Error("EACCES: permission denied, open '/etc/gateway/secret'"))).toEqual({
      code: 'upstream_error',
      message: UPSTREAM_UNAVAILABLE_MESSAGE,
    });
    const invalid = describeFailure(
      fromActivity(
        ApplicationFailure.nonRetryable('stored video video_x.mp4 is missing at /srv/videos', FAILURE.invalidVideo),
      ),
    );
    expect(invalid.code).toBe('invalid_video');
    expect(invalid.message).not.toContain('/srv');
  });
});
