// The provider's video API (OpenAI's shape: POST /videos, GET /videos/{id},
// GET /videos/{id}/content, DELETE /videos/{id}), called from activities only, on the provider of
// a deployment (deployments.ts). Failures are classified here for Temporal: what a retry can fix
// (5xx, 429, timeouts, broken connections) is retryable, the rest (content policy, other 4xx) is
// final; an answer's status is in the failure's details, for the deployments' health.
import { ApplicationFailure } from '@temporalio/activity';
import { Agent, FormData, request, type Dispatcher } from 'undici';
import { FAILURE, type UpstreamJobStatus } from '../../workflows/video-types.ts';
import { scrub } from '../secrets/scrub.ts';

type Json = Record<string, unknown>;
const MAX_ERROR_BODY = 16 * 1024;

/** Codes and words providers use for prompts or outputs their safety system refused. */
const CONTENT_POLICY = /moderation|content[_ ]?policy|safety|blocked/i;

/** Where a call goes: the provider's base URL, and its headers (the book's, and the credential unless it needs none). */
export interface VideoTarget {
  baseUrl: string;
  headers: Readonly<Record<string, string>>;
}

/** What an upstream failure says about the answer, when there was one: its status and retry-after. */
export interface AnswerDetails {
  status?: number;
  retryAfterMs?: number;
}

/** The status (and retry-after) of the answer a failure came from; none when nothing answered. */
export function answerOf(err: unknown): AnswerDetails {
  return err instanceof ApplicationFailure ? ((err.details?.[0] as AnswerDetails | undefined) ?? {}) : {};
}

export class VideoUpstream {
  private readonly agent: Agent;

  constructor(opts: { connectTimeoutMs: number }) {
    this.agent = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: 20_000,
      bodyTimeout: 60_000,
      keepAliveTimeout: 30_000,
    });
  }

  async create(
    t: VideoTarget,
    a: { jobId: string; model: string; prompt: string; seconds: number; size: string },
  ): Promise<{ upstreamId: string; status: UpstreamJobStatus }> {
    // OpenAI's video API takes a multipart form (its SDK always sends one).
    const form = new FormData();
    form.set('model', a.model);
    form.set('prompt', a.prompt);
    form.set('seconds', String(a.seconds));
    form.set('size', a.size);
    const res = await this.call(t, 'POST', '/videos', { 'idempotency-key': `gateway-${a.jobId}` }, form);
    const json = await readJson(res, 'create');
    if (typeof json.id !== 'string' || json.id === '')
      throw ApplicationFailure.retryable('The upstream answered the create without a job id.', FAILURE.unavailable);
    return { upstreamId: json.id, status: statusOf(json) };
  }

  async status(t: VideoTarget, upstreamId: string): Promise<UpstreamJobStatus> {
    const res = await this.call(t, 'GET', `/videos/${encodeURIComponent(upstreamId)}`);
    return statusOf(await readJson(res, 'status'));
  }

  /** The MP4 as a stream; the caller consumes it (or aborts `signal`, which ends the transfer). */
  async content(t: VideoTarget, upstreamId: string, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    return this.call(
      t,
      'GET',
      `/videos/${encodeURIComponent(upstreamId)}/content`,
      { accept: 'application/binary' },
      undefined,
      signal,
    );
  }

  /**
   * DELETE {base}/videos/{id}: 'removed' (2xx), 'gone' (404: nothing left to bill), or 'refused'
   * (another 4xx, e.g. a job the provider will not stop). 5xx, 429 and network failures throw
   * retryable failures, as every call here does.
   */
  async remove(t: VideoTarget, upstreamId: string): Promise<'removed' | 'gone' | 'refused'> {
    try {
      const res = await this.call(t, 'DELETE', `/videos/${encodeURIComponent(upstreamId)}`);
      await res.body.dump();
      return 'removed';
    } catch (err) {
      if (err instanceof ApplicationFailure && err.nonRetryable)
        return (err.details?.[0] as { status?: number } | undefined)?.status === 404 ? 'gone' : 'refused';
      throw err;
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  /** One request; anything but a 2xx becomes the right kind of failure. */
  private async call(
    t: VideoTarget,
    method: 'GET' | 'POST' | 'DELETE',
    pathname: string,
    headers: Record<string, string> = {},
    body?: FormData,
    signal?: AbortSignal,
  ): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${t.baseUrl}${pathname}`, {
        method,
        headers: { ...t.headers, ...headers },
        body,
        dispatcher: this.agent,
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // Connection refused or reset, or a timeout: all worth another attempt.
      throw ApplicationFailure.retryable(
        `The upstream video API could not be reached: ${(err as Error).message}`,
        FAILURE.unavailable,
      );
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    let text = '';
    try {
      text = (await res.body.text()).slice(0, MAX_ERROR_BODY);
    } catch {
      /* the status says enough */
    }
    throw failureFor(res.statusCode, res.headers['retry-after'], text);
  }
}

/**
 * The failure an error answer is. The provider's message is kept (the caller may see it, and
 * Temporal keeps it in the job's history) after the credential scrubber: a provider may quote the
 * request's headers.
 */
function failureFor(status: number, retryAfter: string | string[] | undefined, text: string): ApplicationFailure {
  let message = `The upstream video API answered ${status}.`;
  let code = '';
  try {
    const e = (JSON.parse(scrub(text)) as Json).error as Json | undefined;
    if (e && typeof e.message === 'string' && e.message) message = scrub(e.message);
    if (e && typeof e.code === 'string') code = e.code;
  } catch {
    /* not JSON */
  }
  // A redirect is followed by nobody (it would carry the key elsewhere): the provider's fault, as a 502.
  if (status >= 300 && status < 400)
    return ApplicationFailure.create({
      message: `The upstream video API answered with a redirect (${status}), which the gateway does not follow.`,
      type: FAILURE.unavailable,
      nonRetryable: true,
      details: [{ status }],
    });
  if (status === 429) {
    const seconds = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
    const delay = Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 120) * 1000 : undefined;
    return ApplicationFailure.create({
      message,
      type: FAILURE.unavailable,
      nonRetryable: false,
      details: [{ status, ...(delay !== undefined ? { retryAfterMs: seconds * 1000 } : {}) } satisfies AnswerDetails],
      ...(delay !== undefined ? { nextRetryDelay: delay } : {}),
    });
  }
  if (status >= 500 || status === 408)
    return ApplicationFailure.create({
      message,
      type: FAILURE.unavailable,
      nonRetryable: false,
      details: [{ status }],
    });
  // The gateway's own credentials: its operator's problem, not the caller's request (a 502 to them).
  if (status === 401 || status === 403) {
    return ApplicationFailure.create({
      message: `The upstream refused the gateway's credentials (${status}).`,
      type: FAILURE.unavailable,
      nonRetryable: true,
      details: [{ status }],
    });
  }
  if (CONTENT_POLICY.test(code) || (status === 400 && CONTENT_POLICY.test(message)))
    return ApplicationFailure.create({
      message,
      type: FAILURE.contentPolicy,
      nonRetryable: true,
      details: [{ status }],
    });
  return ApplicationFailure.create({ message, type: FAILURE.rejected, nonRetryable: true, details: [{ status }] });
}

async function readJson(res: Dispatcher.ResponseData, what: string): Promise<Json> {
  try {
    const json = JSON.parse(await res.body.text()) as unknown;
    if (json && typeof json === 'object' && !Array.isArray(json)) return json as Json;
  } catch {
    /* fall through */
  }
  throw ApplicationFailure.retryable(`The upstream's ${what} answer was not a JSON object.`, FAILURE.unavailable);
}

/** OpenAI's Video object -> the status the workflow acts on. */
export function statusOf(json: Json): UpstreamJobStatus {
  const progress =
    typeof json.progress === 'number' && Number.isFinite(json.progress)
      ? Math.max(0, Math.min(100, Math.round(json.progress)))
      : 0;
  switch (json.status) {
    case 'completed':
      return { status: 'completed', progress: 100, error: null };
    case 'failed': {
      const e = (json.error ?? {}) as Json;
      const code = typeof e.code === 'string' ? e.code : '';
      const message = typeof e.message === 'string' && e.message ? scrub(e.message) : 'The upstream video job failed.';
      return {
        status: 'failed',
        progress,
        error: { code: CONTENT_POLICY.test(code) ? 'content_policy_violation' : 'upstream_failed', message },
      };
    }
    case 'in_progress':
      return { status: 'in_progress', progress, error: null };
    default:
      return { status: 'queued', progress, error: null };
  }
}
