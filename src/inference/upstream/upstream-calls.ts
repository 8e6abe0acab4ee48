// A priced request's upstream call, routed over the model's deployments (docs/providers.md): the
// router's order, each failure before the caller got anything (429, 5xx, timeouts, refused
// connections) moving the request on to the next deployment, and a deployment tried again after a
// backoff only once the others have had their turn. Every answer feeds the deployments' passive
// health, judged for the caller's account. It charges nothing: a call that fails throws a failure
// marked with the outcome its zero settle records (outcomes.ts), and the caller's metering settles
// it once, at the deployment whose answer decided it (plan.servedBy: the one that answered, or of a
// request that failed everywhere the last one that gave an HTTP answer).
import { Code, type ConnectError } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { Config } from '../../config/config.ts';
import type { Metrics } from '../../log/metrics.ts';
import type { Catalogue, ResolvedDeployment } from '../../catalogue/catalogue.ts';
import { gatewayError, toGatewayError } from '../../errors/errors.ts';
import { withOutcome, isAbort } from '../../metering/outcomes.ts';
import type { Plan } from '../../metering/plan.ts';
import { upstreamFailure, type Upstream, type UpstreamBody, type UpstreamResponse } from './upstream.ts';
import { targetOf, type Endpoint, type Target } from '../providers/target.ts';
import type { Attempt, DeploymentHealth } from '../routing/deployment-health.ts';
import type { Router } from '../routing/router.ts';
import type { DeploymentBound, DeploymentLimits } from '../routing/deployment-limits.ts';
import { endFailedAttempt, notePrompt, startAttemptSpan } from './attempt-spans.ts';
import { upstreamRedirect } from './replies.ts';
import { failSpan, traceparentOf } from '../../tracing/spans.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { FormData } from 'undici';
import { AttemptLog, outcomeOfStatus } from '../../billing/attempts.ts';

type Outcome = 'upstream_timeout' | 'upstream_unreachable' | 'upstream_error';

/** The last failure of a request whose deployments all failed. */
interface Failed {
  failure: ConnectError;
  outcome: Outcome;
}

export class UpstreamCalls {
  private readonly upstream: Upstream;
  private readonly config: Config['upstream'];
  private readonly metrics: Metrics;
  private readonly log: Logger;
  private readonly catalogue: Catalogue;
  private readonly router: Router;
  private readonly limits: DeploymentLimits | undefined;
  /** TRACE_UPSTREAM_TRACEPARENT: each attempt tells the provider its traceparent. */
  private readonly upstreamTraceparent: boolean;
  readonly health: DeploymentHealth;

  constructor(deps: {
    upstream: Upstream;
    config: Config['upstream'];
    metrics: Metrics;
    log: Logger;
    catalogue: Catalogue;
    router: Router;
    health: DeploymentHealth;
    /** The shared windows of deployments with rpm / tpm limits. */
    limits?: DeploymentLimits;
    upstreamTraceparent?: boolean;
  }) {
    this.upstreamTraceparent = deps.upstreamTraceparent ?? false;
    this.upstream = deps.upstream;
    this.config = deps.config;
    this.metrics = deps.metrics;
    this.log = deps.log;
    this.catalogue = deps.catalogue;
    this.router = deps.router;
    this.health = deps.health;
    this.limits = deps.limits;
  }

  /** A deployment as a call reaches it now: its credential read at this moment (a replaced one applies at once). */
  targetFor(d: ResolvedDeployment): Target {
    return targetOf(d, this.catalogue.secretOf(d.provider.id) ?? '');
  }

  /**
   * POST upstream over the model's deployments, with retries only while the caller is there
   * (`callerGone`: no new request for a caller who left). What still fails is thrown: a
   * transport failure as 502/504, the last 429/5xx as itself; any other HTTP answer is returned
   * as it is, and the deployment that gave it is `plan.servedBy`. A failure thrown names the last
   * deployment that gave an HTTP answer, if one did.
   */
  async post(
    plan: Plan,
    endpoint: Endpoint,
    body: UpstreamBody,
    signal?: AbortSignal,
    callerGone?: AbortSignal,
  ): Promise<UpstreamResponse> {
    if (plan.upstreamStartedAt === undefined) {
      plan.upstreamStartedAt = performance.now();
      this.metrics.addedLatencyOf(plan.route).observe((plan.upstreamStartedAt - plan.startedAt) / 1000);
    }
    const account = plan.caller.accountId;
    const order = this.router.order(
      plan.model,
      { inputTokens: plan.inputUpper, outputTokens: plan.maxOutput * plan.choices },
      plan.requestId,
      account,
    );
    if (order.length === 0) throw withOutcome(noDeployment(plan), 'upstream_unreachable', 503);
    const { retries, retryBaseMs, retryMaxWaitMs } = this.config;
    // Every deployment once; a model on fewer deployments than attempts goes round again.
    const attempts = Math.max(order.length, retries + 1);
    // Only a retry waits on both signals: linked lazily (AbortSignal.any costs on every stream).
    let linked: AbortSignal | undefined;
    const waits = () =>
      (linked ??= signal && callerGone ? AbortSignal.any([signal, callerGone]) : (signal ?? callerGone));
    let last: Failed | undefined;
    let lastKey: string | undefined;
    /** The last deployment that gave an HTTP answer (a 429 or 5xx): the one a failed request's usage row names. */
    let lastAnswered: ResolvedDeployment | undefined;
    let waitMs = 0;
    /** Set while every deployment tried was at its limits: when the soonest has room again, and which limits refused it. */
    let full: Full | undefined;
    for (let attempt = 0; attempt < attempts; attempt++) {
      const d = order[attempt % order.length]!;
      if (attempt > 0 && callerGone?.aborted) throw callerGone.reason;
      const round = Math.floor(attempt / order.length);
      if (round > 0 && attempt % order.length === 0) {
        // A second round: the same deployments again, after a backoff (or their retry-after).
        const backoff = Math.min(retryMaxWaitMs, retryBaseMs * 2 ** round * (0.5 + Math.random() / 2));
        await sleep(Math.min(retryMaxWaitMs, waitMs > 0 ? waitMs : backoff), undefined, { signal: waits() });
        waitMs = 0;
      }
      const pass = this.admit(plan, d, account);
      if (!pass) continue;
      if (d.limits && this.limits) {
        const refused = await this.takeLimits(plan, d);
        if (refused !== undefined) {
          if (pass.trial) this.health.releaseTrial(pass);
          this.metrics.deploymentLimitWaits.of(d.key).inc();
          full = addRefusal(full, refused);
          continue;
        }
      }
      if (last) this.metrics.upstreamRetries.inc({ provider: d.provider.id, reason: 'next_deployment' });
      const result = await this.attempt(plan, d, endpoint, body, signal, pass, {
        lastAttempt: attempt === attempts - 1,
        number: attempt,
        after: last ? (lastKey === d.key ? 'retry' : 'failover') : undefined,
      });
      if ('res' in result) {
        plan.servedBy = d;
        plan.answerSpan?.end(); // a route's earlier call for this request (an end twice is ignored)
        plan.answerSpan = result.res.span;
        return result.res;
      }
      this.giveBackLimits(plan);
      last = result;
      lastKey = d.key;
      if (result.outcome === 'upstream_error') lastAnswered = d;
      if (result.retryAfterMs) waitMs = Math.max(waitMs, result.retryAfterMs);
    }
    if (!last && full !== undefined) throw this.atLimits(plan, full);
    if (!last) throw withOutcome(noDeployment(plan), 'upstream_unreachable', 503);
    if (lastAnswered) plan.servedBy = lastAnswered;
    throw withOutcome(last.failure, last.outcome, toGatewayError(last.failure).httpStatus);
  }

  /**
   * The attempt `d` takes from `account` now, or undefined when it takes nothing: a deployment
   * whose cooldown is over takes one trial request; one cooling since the order was made takes
   * none. (The model's own count, not the order's: a model on two whose other is cooling still
   * cools this one.)
   */
  private admit(plan: Plan, d: ResolvedDeployment, account: string): Attempt | undefined {
    const admission = plan.model.served.length > 1 ? this.health.admission(d.key, account) : 'open';
    if (admission === 'cooling') return undefined;
    const trial = admission === 'trial' ? this.health.claimTrial(d.key, account) : undefined;
    if (admission === 'trial' && !trial) return undefined;
    return { key: d.key, account, sentAt: 0, trial };
  }

  /**
   * Every deployment tried was at its limits, a 429 either way (issue 39: a refusal says which
   * bound and when to retry): `deployment_share_limit` when one refused the caller's account for
   * holding its fair share while others wait (its own doing), else `deployments_at_limit` naming
   * the limits that refused it.
   */
  private atLimits(plan: Plan, full: Full) {
    if (!full.share) return withOutcome(atLimits(plan, full.ms, full.bounds), 'deployment_limits', 429);
    this.metrics.concurrencyRefusals.of('deployment_share_limit').inc();
    return withOutcome(overItsShare(plan), 'deployment_share_limit', 429);
  }

  /**
   * `d`'s limits for this request: a concurrent slot (within its account's fair share while
   * others wait), then the minute window (rpm, and tpm at the request's bound). Undefined when it
   * took them; else in how many ms the deployment has room, and whether the share refused it.
   */
  private async takeLimits(
    plan: Plan,
    d: ResolvedDeployment,
  ): Promise<{ waitMs: number; share: boolean; bound: DeploymentBound } | undefined> {
    const limits = this.limits!;
    if (d.limits?.concurrency !== undefined) {
      const slot = await limits.acquire(d, plan.caller.accountId);
      if (slot !== 'take') return { waitMs: 1000, share: slot === 'share', bound: 'concurrency' };
      plan.deploymentSlot = d.key;
    }
    if (d.limits?.rpm === undefined && d.limits?.tpm === undefined) return undefined;
    const took = await limits.take(d, plan.inputUpper + plan.maxOutput * plan.choices);
    if ('full' in took) {
      this.giveBackLimits(plan);
      return { waitMs: took.retryAfterMs, share: false, bound: took.bound };
    }
    plan.deploymentWindow = took.taken;
    return undefined;
  }

  /**
   * What an attempt that failed (or never went out) took goes back at once: its slot, and its
   * tokens from the window (its request still counts, as the provider counts it). The settle
   * gives back what the attempt that answered took.
   */
  private giveBackLimits(plan: Plan): void {
    const { deploymentSlot: slot, deploymentWindow: window } = plan;
    plan.deploymentSlot = undefined;
    plan.deploymentWindow = undefined;
    const warn = (what: string) => (err: unknown) =>
      this.log.warn({ err, deployment: slot ?? window?.deployment }, what);
    if (slot !== undefined)
      this.limits!.release(slot, plan.caller.accountId).catch(warn('giving back a deployment slot failed'));
    if (window !== undefined) this.limits!.settle(window, 0n).catch(warn('setting a deployment window right failed'));
  }

  /** One call to one deployment; its answer, or its failure (recorded in the deployment's health). */
  private async attempt(
    plan: Plan,
    d: ResolvedDeployment,
    endpoint: Endpoint,
    body: UpstreamBody,
    signal: AbortSignal | undefined,
    pass: Attempt,
    how: { lastAttempt: boolean; number: number; after: 'retry' | 'failover' | undefined },
  ): Promise<{ res: UpstreamResponse } | (Failed & { retryAfterMs?: number })> {
    const target = this.targetFor(d);
    const { url, headers } = endpoint(target);
    const provider = d.provider.id;
    const span = startAttemptSpan(plan, d, url, { attempt: how.number, after: how.after, trial: !!pass.trial });
    notePrompt(span, plan.body);
    const traceparent = this.upstreamTraceparent ? traceparentOf(span) : undefined;
    const started = performance.now();
    pass.sentAt = this.health.now();
    let res: UpstreamResponse;
    try {
      res = await this.upstream.post(
        url,
        traceparent ? { ...headers, traceparent } : headers,
        bodyFor(plan, d, body),
        signal,
        d.provider.timeoutMs,
      );
    } catch (err) {
      if (isAbort(err)) {
        if (pass.trial) this.health.releaseTrial(pass);
        endFailedAttempt(span, noteAttempt(plan, d, 'caller_left'));
        throw err;
      }
      const failure = upstreamFailure(err, plan.requestId);
      const timedOut = failure.code === Code.DeadlineExceeded;
      const reason = noteAttempt(plan, d, timedOut ? 'timeout' : 'connection');
      endFailedAttempt(span, reason);
      this.failed(d, pass, reason, undefined);
      this.metrics.upstreamRetries.inc({ provider, reason });
      return { failure, outcome: timedOut ? 'upstream_timeout' : 'upstream_unreachable' };
    }
    const seconds = (performance.now() - started) / 1000;
    this.metrics.upstreamLatencyOf(provider, String(res.statusCode)).observe(seconds);
    this.metrics.deploymentLatencyOf(d.key).observe(seconds);
    // A redirect is the deployment's fault too (a moved or misconfigured endpoint): it fails over
    // and counts against the deployment's health, as a 5xx does; the gateway follows none.
    const redirect = res.statusCode >= 300 && res.statusCode < 400;
    noteAttempt(plan, d, outcomeOfStatus(res.statusCode));
    if (res.statusCode === 429 || res.statusCode >= 500 || redirect) {
      endFailedAttempt(span, String(res.statusCode), res.statusCode);
      const retryAfter = retryAfterMs(res.headers['retry-after']);
      this.failed(d, pass, String(res.statusCode), res.statusCode === 429 ? retryAfter : undefined);
      // The last attempt's answer goes to the caller as the provider gave it (its error's own words).
      if (how.lastAttempt) return { res };
      await res.body.dump().catch(() => {});
      this.metrics.upstreamRetries.inc({ provider, reason: String(res.statusCode) });
      return {
        failure: redirect
          ? upstreamRedirect(res.statusCode, plan.requestId)
          : upstreamStatusFailure(res.statusCode, plan.requestId, retryAfter),
        outcome: 'upstream_error',
        ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
      };
    }
    this.health.succeeded(pass, seconds * 1000);
    this.metrics.deploymentRequestsOf(d.key, provider, 'ok').inc();
    if (span.isRecording()) {
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 400) failSpan(span, String(res.statusCode));
      res.span = span; // ended by the settle, with the usage (a 4xx answer too: it settles at zero)
    }
    return { res };
  }

  private failed(d: ResolvedDeployment, pass: Attempt, reason: string, retryAfter: number | undefined): void {
    this.metrics.deploymentRequestsOf(d.key, d.provider.id, reason).inc();
    this.health.failed(pass, reason, retryAfter);
  }
}

/** Records an attempt at `d` on the request's plan (its usage row's attempts); the outcome, for the attempt's span. */
function noteAttempt(plan: Plan, d: ResolvedDeployment, outcome: string): string {
  (plan.attempts ??= new AttemptLog()).add(d.key, outcome);
  return outcome;
}

/** The body for `d`: the route's, with the upstream model id swapped where the deployment names the model otherwise. */
function bodyFor(plan: Plan, d: ResolvedDeployment, body: UpstreamBody): UpstreamBody {
  if (d.upstreamId === plan.model.upstreamId) return body;
  if (body instanceof FormData) {
    if (!body.has('model')) return body;
    const copy = new FormData();
    for (const [k, v] of body.entries()) copy.append(k, k === 'model' ? d.upstreamId : v);
    return copy;
  }
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  try {
    const json = JSON.parse(text) as Record<string, unknown>;
    if (typeof json !== 'object' || json === null || json.model === undefined) return body;
    return JSON.stringify({ ...json, model: d.upstreamId });
  } catch {
    return body;
  }
}

/** A retry-after header's delay in ms (seconds or an HTTP date); undefined when absent or unreadable. */
function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

function noDeployment(plan: Plan) {
  return gatewayError({
    httpStatus: 503,
    type: 'server_error',
    code: 'no_deployment',
    message: `No deployment of '${plan.model.id}' can take the request now; try again shortly.`,
    retryAfterSeconds: 1,
    requestId: plan.requestId,
  });
}

/** The deployments that refused a request for their limits: when the soonest has room (ms), whether a fair share refused it, which limits did. */
type Full = { ms: number; share: boolean; bounds: Set<DeploymentBound> };

/** One more deployment's refusal, added to those before it (made at the first: a request served at once allocates nothing). */
function addRefusal(full: Full | undefined, r: { waitMs: number; share: boolean; bound: DeploymentBound }): Full {
  const f = full ?? { ms: Infinity, share: false, bounds: new Set() };
  f.ms = Math.min(f.ms, r.waitMs);
  f.share ||= r.share;
  f.bounds.add(r.bound);
  return f;
}

const BOUND_WORDS: Record<DeploymentBound, string> = {
  concurrency: 'concurrent requests (concurrency)',
  rpm: 'requests per minute (rpm)',
  tpm: 'tokens per minute (tpm)',
};

/**
 * Every deployment of the model is at its limits (its requests in flight, or its rpm / tpm for
 * this minute): 429 naming them and when the soonest has room; nothing was sent, nothing is charged.
 */
function atLimits(plan: Plan, retryAfterMs: number, bounds: ReadonlySet<DeploymentBound>) {
  const retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const named = (['concurrency', 'rpm', 'tpm'] as const).filter((b) => bounds.has(b)).map((b) => BOUND_WORDS[b]);
  return gatewayError({
    httpStatus: 429,
    type: 'rate_limit_error',
    code: 'deployments_at_limit',
    message: `Every deployment of '${plan.model.id}' is at its limit of ${named.join(' or ')} (deployments_at_limit); try again in ${retryAfterSeconds} s.`,
    retryAfterSeconds,
    requestId: plan.requestId,
  });
}

/** The caller's account holds its fair share of every deployment it could use while other accounts wait: nothing was sent, nothing is charged. */
function overItsShare(plan: Plan) {
  return gatewayError({
    httpStatus: 429,
    type: 'rate_limit_error',
    code: 'deployment_share_limit',
    message: `This account holds its fair share of the concurrent requests of '${plan.model.id}' while other accounts wait (deployment_share_limit); try again when one of its requests has finished.`,
    retryAfterSeconds: 1,
    requestId: plan.requestId,
  });
}

/** The last status of a request whose every attempt was answered 429/5xx. */
function upstreamStatusFailure(status: number, requestId: string, retryAfter?: number) {
  return gatewayError({
    httpStatus: status,
    type: status === 429 ? 'rate_limit_error' : 'server_error',
    code: status === 429 ? 'upstream_rate_limited' : 'upstream_error',
    message: `The upstream provider answered ${status}.`,
    retryAfterSeconds: status === 429 ? Math.max(1, Math.ceil((retryAfter ?? 1000) / 1000)) : 0,
    requestId,
  });
}
