// Where a video job runs: its model's deployments, as every other route is served
// (docs/providers.md#routing). The create goes over them in the router's order, each admitted by
// its passive health, and moves on when one fails before the job exists there (a 429, a 5xx, no
// answer); a refusal of the request itself (content policy, another 4xx) ends it. The deployment
// that created the job is recorded on the job's row and in its workflow, and every later call
// for the job (polls, the download, a cancel, a delete) goes to that deployment's provider.
import { ApplicationFailure } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Catalogue, ResolvedDeployment, ResolvedModel } from '../catalogue/catalogue.ts';
import { FAILURE } from '../../workflows/video-types.ts';
import type { VideoJobs } from './jobs.ts';
import { answerOf, type VideoTarget, type VideoUpstream } from './upstream.ts';
import { outcomeOfStatus } from '../billing/attempts.ts';

/** An attempt at one deployment, as its passive health records it. */
export interface DeploymentAttempt {
  key: string;
  account: string;
  sentAt: number;
}

/**
 * The router and passive health of the inference routes, as a video job uses them
 * (src/inference/routing/job-routing.ts; handed in by the process, since video and inference are
 * one layer): the same deployments' health, whichever route's calls fed it.
 */
export interface VideoRouting {
  /** The deployments to try, best first; none when every one is cooling for `account`. */
  order(model: ResolvedModel, requestId: string, account: string): readonly ResolvedDeployment[];
  /** An attempt at `d` now, or undefined when its health takes nothing from `account` now. */
  admit(model: ResolvedModel, d: ResolvedDeployment, account: string): DeploymentAttempt | undefined;
  /** Any answer but a 429 or 5xx. */
  succeeded(d: ResolvedDeployment, a: DeploymentAttempt, latencyMs: number): void;
  /** `reason`: the status, or 'connection' when nothing answered. */
  failed(d: ResolvedDeployment, a: DeploymentAttempt, reason: string, retryAfterMs?: number): void;
}

/** The job as its create asks for it. */
export interface CreateAsk {
  jobId: string;
  requestId: string;
  accountId: string;
  /** The catalogue model's id. */
  model: string;
  prompt: string;
  seconds: number;
  size: string;
}

/** Where the upstream job was created. */
export interface CreatedAt {
  upstreamId: string;
  /** `<model>/<deployment>`: the usage row names it. */
  deployment: string;
  provider: string;
  /** What a second of video costs the operator there (the deployment's price, else the model's). */
  providerPricePerSecondUsd: string;
}

export interface CreateDeps {
  catalogue: Catalogue;
  routing: VideoRouting;
  upstream: VideoUpstream;
  jobs: VideoJobs;
  log: Logger;
}

/** The provider as a call to it goes: its base URL, its book headers and its credential here (none when it needs none). */
export function videoTarget(catalogue: Catalogue, providerId: string): VideoTarget {
  const p = catalogue.providers().find((x) => x.id === providerId);
  // Retryable: the book or a credential may be back within a refresh; the caller sees a fixed text.
  if (!p) throw ApplicationFailure.retryable(`provider ${providerId} is not in the book`, FAILURE.unavailable);
  if (p.auth === 'none') return { baseUrl: p.baseUrl, headers: p.headers };
  const key = catalogue.secretOf(p.id);
  if (key === undefined)
    throw ApplicationFailure.retryable(`provider ${p.id} has no credential on this worker`, FAILURE.unavailable);
  return { baseUrl: p.baseUrl, headers: { ...p.headers, authorization: `Bearer ${key}` } };
}

/**
 * Creates the upstream job on the first deployment of the model's order that takes it. Throws
 * the last failure when none did (retryable: Temporal tries the order again after a backoff), or
 * at once a refusal of the request (not retryable).
 */
export async function createOnDeployments(deps: CreateDeps, a: CreateAsk): Promise<CreatedAt> {
  const model = deps.catalogue.get(a.model);
  const order = model?.available ? deps.routing.order(model, a.requestId, a.accountId) : [];
  let last: unknown;
  for (const d of order) {
    const attempt = deps.routing.admit(model!, d, a.accountId);
    if (!attempt) continue;
    const created = await createOn(deps, a, d, attempt).catch((err: unknown) => {
      if (err instanceof ApplicationFailure && err.nonRetryable) throw err;
      last = err;
      return undefined;
    });
    if (created) return created;
  }
  throw (
    last ??
    ApplicationFailure.retryable(
      `no deployment of ${a.model} can take a video job now (none served here, or every one cooling)`,
      FAILURE.unavailable,
    )
  );
}

/** One create at `d`: the job, or the failure (fed to `d`'s health; its row names `d` once it answered). */
async function createOn(deps: CreateDeps, a: CreateAsk, d: ResolvedDeployment, attempt: DeploymentAttempt) {
  const target = videoTarget(deps.catalogue, d.provider.id);
  const started = performance.now();
  try {
    const r = await deps.upstream.create(target, {
      jobId: a.jobId,
      model: d.upstreamId,
      prompt: a.prompt,
      seconds: a.seconds,
      size: a.size,
    });
    deps.routing.succeeded(d, attempt, performance.now() - started);
    await deps.jobs.recordDeployment(a.jobId, d.key, d.provider.id);
    await deps.jobs.recordAttempt(a.jobId, d.key, 'ok');
    return {
      upstreamId: r.upstreamId,
      deployment: d.key,
      provider: d.provider.id,
      providerPricePerSecondUsd: d.providerPrices.per_second ?? '',
    } satisfies CreatedAt;
  } catch (err) {
    const { status, retryAfterMs } = answerOf(err);
    const final = err instanceof ApplicationFailure && err.nonRetryable;
    // A refusal of the request is the deployment working (as a 4xx is for every route).
    if (final && status !== undefined && status < 500) deps.routing.succeeded(d, attempt, performance.now() - started);
    else deps.routing.failed(d, attempt, status === undefined ? 'connection' : String(status), retryAfterMs);
    if (status !== undefined) await deps.jobs.recordDeployment(a.jobId, d.key, d.provider.id);
    await deps.jobs.recordAttempt(a.jobId, d.key, status === undefined ? 'connection' : outcomeOfStatus(status));
    if (!final)
      deps.log.warn(
        { videoId: a.jobId, deployment: d.key, status: status ?? 'no answer' },
        'a video create failed on a deployment; the next one (or a retry) takes it',
      );
    throw err;
  }
}
