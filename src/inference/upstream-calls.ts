// A priced request's upstream call: retried with backoff on 429, 5xx and connection failures
// (safe: the caller has received nothing yet), and once more on the model's fallback deployment
// when the first one failed. It charges nothing: a call that fails throws a failure marked with
// the outcome its zero settle records (outcomes.ts), and the caller's metering settles it.
import { Code, type ConnectError } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { Metrics } from '../log/metrics.ts';
import { gatewayError, toGatewayError } from '../errors/errors.ts';
import { withOutcome, isAbort } from '../metering/outcomes.ts';
import type { Plan } from '../metering/plan.ts';
import { upstreamFailure, type Upstream, type UpstreamBody, type UpstreamResponse } from './upstream.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** One deployment's result: an answer to use, or its failure. */
interface Attempted {
  res?: UpstreamResponse;
  failure?: ConnectError;
  outcome?: 'upstream_timeout' | 'upstream_unreachable' | 'upstream_error';
}

export class UpstreamCalls {
  private readonly upstream: Upstream;
  private readonly config: Config['upstream'];
  private readonly metrics: Metrics;
  private readonly log: Logger;

  constructor(deps: { upstream: Upstream; config: Config['upstream']; metrics: Metrics; log: Logger }) {
    this.upstream = deps.upstream;
    this.config = deps.config;
    this.metrics = deps.metrics;
    this.log = deps.log;
  }

  /**
   * POST upstream, with retries only while the caller is there (`callerGone`: no new request for
   * a caller who left). What still fails is thrown: a transport failure as 502/504, the last
   * 429/5xx of an exhausted deployment as itself; any other HTTP answer is returned as it is.
   */
  async post(
    plan: Plan,
    url: string,
    headers: Record<string, string>,
    body: UpstreamBody,
    signal?: AbortSignal,
    callerGone?: AbortSignal,
  ): Promise<UpstreamResponse> {
    if (plan.upstreamStartedAt === undefined) {
      plan.upstreamStartedAt = performance.now();
      this.metrics.addedLatencyOf(plan.route).observe((plan.upstreamStartedAt - plan.startedAt) / 1000);
    }
    const canFall =
      plan.model.providerConfig.fallback !== undefined && url.startsWith(plan.model.providerConfig.baseUrl);
    const first = await this.attempts(plan, url, headers, body, signal, canFall, callerGone);
    if (first.res || !canFall) return answerOf(first);
    if (callerGone?.aborted) throw callerGone.reason;
    // The first deployment failed before the caller got anything: the same request, once more,
    // on the fallback deployment (its URL and credentials; the caller's body unchanged).
    const primary = plan.model.providerConfig;
    const fallback = primary.fallback!;
    const swap = (v: string) => (primary.apiKey ? v.split(primary.apiKey).join(fallback.apiKey) : v);
    const fbHeaders = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, swap(v)]));
    this.metrics.upstreamRetries.inc({ provider: plan.model.provider, reason: 'fallback' });
    this.log.warn(
      { requestId: plan.requestId, provider: plan.model.provider },
      'first deployment failed; trying the fallback deployment',
    );
    return answerOf(
      await this.attempts(
        plan,
        fallback.baseUrl + url.slice(primary.baseUrl.length),
        fbHeaders,
        body,
        signal,
        false,
        callerGone,
      ),
    );
  }

  /**
   * One deployment's attempts with backoff. Returns the answer to use, or (when `keepFailure`)
   * the failure, for a fallback to try.
   */
  private async attempts(
    plan: Plan,
    url: string,
    headers: Record<string, string>,
    body: UpstreamBody,
    signal: AbortSignal | undefined,
    keepFailure: boolean,
    callerGone?: AbortSignal,
  ): Promise<Attempted> {
    const { retries, retryBaseMs, retryMaxWaitMs } = this.config;
    const provider = plan.model.provider;
    // Only a retry waits on both signals: linked lazily (AbortSignal.any costs on every stream).
    let linked: AbortSignal | undefined;
    const waits = () =>
      (linked ??= signal && callerGone ? AbortSignal.any([signal, callerGone]) : (signal ?? callerGone));
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 && callerGone?.aborted) throw callerGone.reason;
      const started = performance.now();
      const backoff = Math.min(retryMaxWaitMs, retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2));
      let res: UpstreamResponse;
      try {
        res = await this.upstream.post(url, headers, body, signal);
      } catch (err) {
        if (isAbort(err)) throw err;
        const failure = upstreamFailure(err, plan.requestId);
        const timedOut = failure.code === Code.DeadlineExceeded;
        if (!timedOut && attempt < retries) {
          this.metrics.upstreamRetries.inc({ provider, reason: 'connection' });
          await sleep(backoff, undefined, { signal: waits() });
          continue;
        }
        return { failure, outcome: timedOut ? 'upstream_timeout' : 'upstream_unreachable' };
      }
      this.metrics.upstreamLatencyOf(provider, String(res.statusCode)).observe((performance.now() - started) / 1000);
      const retryable = res.statusCode === 429 || res.statusCode >= 500;
      if (retryable && (attempt < retries || keepFailure)) {
        const retryAfter = Number(res.headers['retry-after']) * 1000;
        await res.body.dump().catch(() => {});
        if (attempt >= retries)
          return { failure: upstreamStatusFailure(res.statusCode, plan.requestId), outcome: 'upstream_error' };
        this.metrics.upstreamRetries.inc({ provider, reason: String(res.statusCode) });
        await sleep(
          Math.min(retryMaxWaitMs, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : backoff),
          undefined,
          { signal: waits() },
        );
        continue;
      }
      return { res };
    }
  }
}

/** The answer, or the failure marked with its outcome and the status the caller gets. */
function answerOf(r: Attempted): UpstreamResponse {
  if (r.res) return r.res;
  throw withOutcome(r.failure!, r.outcome!, toGatewayError(r.failure).httpStatus);
}

/** The last status of a deployment whose answers were all 429/5xx, once a fallback failed too. */
function upstreamStatusFailure(status: number, requestId: string) {
  return gatewayError({
    httpStatus: status,
    type: status === 429 ? 'rate_limit_error' : 'server_error',
    code: status === 429 ? 'upstream_rate_limited' : 'upstream_error',
    message: `The upstream provider answered ${status}.`,
    retryAfterSeconds: status === 429 ? 1 : 0,
    requestId,
  });
}
