// The video workflow's activities: all its I/O. Each is idempotent, because Temporal runs an
// activity again whenever it cannot know the last attempt finished (a worker killed mid-call,
// a lost reply): the create carries an idempotency key, the download rewrites the same object,
// the settle and the release are one statement each that acts once per request id.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Metrics } from '../log/metrics.ts';
import type { Config } from '../config/config.ts';
import type { Catalogue } from '../catalogue/catalogue.ts';
import type { Ledger, SettleInput, SettleResult } from '../billing/ledger.ts';
import { costRational, type Rational } from '../money/money.ts';
import { customerNano, parseMarkup, NO_MARKUP, providerNano } from '../billing/markup.ts';
import { FAILURE, type VideoActivities } from '../../workflows/video-types.ts';
import type { VideoJobs } from './jobs.ts';
import { durationMs, measureMp4, Mp4Error } from './mp4.ts';
import { videoKey, type VideoStore } from './store.ts';
import type { VideoUpstream } from './upstream.ts';
import { createOnDeployments, videoTarget, type VideoRouting } from './deployments.ts';
import { noteJobCharge } from '../metering/money-spans.ts';
import { activeSpan, sampledTraceId } from '../tracing/spans.ts';

export const VIDEO_ROUTE = '/v1/videos';

/** Settles a video request at zero: its whole hold goes back, and its usage row says why. */
export function releaseVideoHold(
  ledger: Ledger,
  r: Pick<
    SettleInput,
    'requestId' | 'model' | 'status' | 'httpStatus' | 'latencyMs' | 'units' | 'unit' | 'deployment' | 'attempts'
  >,
): Promise<SettleResult> {
  return ledger.settle({
    ...r,
    // The job's trace, when it runs in one (an activity of a traced job): the console links the row to it.
    traceId: sampledTraceId(activeSpan()),
    costNano: 0n,
    route: VIDEO_ROUTE,
    inputTokens: 0n,
    outputTokens: 0n,
    cachedTokens: 0n,
    cacheWriteTokens: 0n,
    usageEstimated: false,
  });
}

export interface ActivityDeps {
  config: Config;
  ledger: Ledger;
  jobs: VideoJobs;
  store: VideoStore;
  upstream: VideoUpstream;
  /** The book's providers, their credentials and the models' deployments, as this process serves them. */
  catalogue: Catalogue;
  /** The deployments' router and passive health (deployments.ts). */
  routing: VideoRouting;
  log: Logger;
  /** The gateway's metrics when the worker runs inside it (a standalone worker has no /metrics). */
  metrics?: Metrics;
}

/** What the provider bills for a job: min(produced, asked) milliseconds at the per-second price, exact (not yet rounded). */
export function videoCost(producedMs: number, seconds: number, pricePerSecondUsd: string): Rational {
  const billedMs = Math.min(producedMs, seconds * 1000);
  return costRational([{ quantity: BigInt(billedMs), priceUsd: pricePerSecondUsd, perUnits: 1000n }]);
}

/** The same, rounded up once to the nano-USD. */
export function videoCostNano(producedMs: number, seconds: number, pricePerSecondUsd: string): bigint {
  return providerNano(videoCost(producedMs, seconds, pricePerSecondUsd));
}

/** HTTP status recorded on the usage row of a job that ended without a charge. */
function releaseStatus(reason: string): number {
  switch (reason) {
    case 'content_policy_violation':
    case 'upstream_rejected':
      return 400;
    case 'cancelled':
      return 499;
    case 'timeout':
      return 504;
    default:
      return 502;
  }
}

export function videoActivities(deps: ActivityDeps): VideoActivities {
  /** Where a job's calls go: the provider of the deployment that created it. */
  const provider = (id: string) => videoTarget(deps.catalogue, id);

  return {
    async createUpstreamJob(a) {
      if (a.model !== undefined && a.requestId !== undefined && a.accountId !== undefined)
        return createOnDeployments(deps, { ...a, model: a.model, requestId: a.requestId, accountId: a.accountId });
      // A create scheduled before deployments: on the model's own provider, as it was asked.
      const r = await deps.upstream.create(provider(a.provider), {
        jobId: a.jobId,
        model: a.upstreamModel,
        prompt: a.prompt,
        seconds: a.seconds,
        size: a.size,
      });
      return { upstreamId: r.upstreamId };
    },

    async pollUpstreamJob(a) {
      const s = await deps.upstream.status(provider(a.provider), a.upstreamId);
      // Every poll keeps the hold alive, so the sweeper releases only holds of jobs nothing works on.
      await deps.ledger.renewHold(a.requestId, a.holdTtlSeconds);
      if (s.status !== 'failed')
        await deps.jobs.markProgress(
          a.jobId,
          s.status === 'queued' ? 'queued' : 'in_progress',
          s.status === 'completed' ? 99 : s.progress,
          a.upstreamId,
        );
      return s;
    },

    async downloadVideo(a) {
      const ctx = Context.current();
      // A cancelled activity (its workflow gave up, the worker is shutting down) stops the
      // transfer at once; the store removes the unfinished file either way.
      const signal = ctx.cancellationSignal;
      const key = videoKey(a.jobId);
      let last = 0;
      const { bytes } = await deps.upstream
        .content(provider(a.provider), a.upstreamId, signal)
        .then((res) =>
          deps.store.put(
            key,
            res.body,
            (n) => {
              // Heartbeats are throttled by the SDK; one per MiB is plenty to show the worker is alive.
              if (n - last >= 1 << 20) {
                last = n;
                ctx.heartbeat(n);
              }
            },
            signal,
          ),
        )
        .catch((err: unknown) => {
          if (signal.aborted) throw signal.reason;
          if (err instanceof ApplicationFailure) throw err;
          deps.log.warn({ videoId: a.jobId, err: (err as Error).message }, 'video download broke');
          throw ApplicationFailure.retryable(
            `The video download broke: ${(err as Error).message}`,
            FAILURE.unavailable,
          );
        });
      if (bytes === 0) throw ApplicationFailure.retryable('The upstream sent an empty video.', FAILURE.unavailable);
      return { contentKey: key, bytes };
    },

    async measureVideo(a) {
      const obj = await deps.store.open(a.contentKey);
      if (!obj) throw ApplicationFailure.nonRetryable(`stored video ${a.contentKey} is missing`, FAILURE.invalidVideo);
      try {
        const d = await measureMp4(obj);
        return { producedMs: Number(durationMs(d)), units: d.units.toString(), timescale: d.timescale.toString() };
      } catch (err) {
        if (err instanceof Mp4Error)
          throw ApplicationFailure.nonRetryable(
            `The upstream's video is not a readable MP4: ${err.message}`,
            FAILURE.invalidVideo,
          );
        throw err;
      }
    },

    async settleCharge(a) {
      const cost = videoCost(a.producedMs, a.seconds, a.pricePerSecondUsd);
      // What the deployment that made it bills the operator, at its own price where it has one.
      const providerCost = a.providerPricePerSecondUsd
        ? providerNano(videoCost(a.producedMs, a.seconds, a.providerPricePerSecondUsd))
        : providerNano(cost);
      // At the markup the hold was taken at; a job started before markups has none.
      const markup = a.markupRate === undefined ? NO_MARKUP : parseMarkup(BigInt(a.markupVersion ?? '0'), a.markupRate);
      const r = await deps.ledger.settle({
        requestId: a.requestId,
        traceId: sampledTraceId(activeSpan()),
        costNano: customerNano(cost, markup),
        providerCostNano: providerCost,
        ...(a.deployment ? { deployment: a.deployment } : {}),
        attempts: await deps.jobs.attemptsOf({ requestId: a.requestId }),
        markupVersion: markup.versionId,
        model: a.model,
        route: VIDEO_ROUTE,
        inputTokens: 0n,
        outputTokens: 0n,
        cachedTokens: 0n,
        cacheWriteTokens: 0n,
        usageEstimated: false,
        units: BigInt(Math.min(a.producedMs, a.seconds * 1000)),
        unit: 'video_ms',
        status: 'ok',
        httpStatus: 200,
        latencyMs: Math.max(0, Math.min(2_147_483_647, Date.now() - a.createdAtMs)),
        ...(a.priceVersion !== undefined ? { priceVersion: BigInt(a.priceVersion) } : {}),
      });
      noteJobCharge({
        requestId: a.requestId,
        chargedNano: r.chargedNano,
        providerCostNano: providerCost,
        markupVersion: markup.versionId,
        ...(a.priceVersion !== undefined ? { priceVersion: BigInt(a.priceVersion) } : {}),
      });
      if (!r.firstSettle)
        deps.log.info(
          { requestId: a.requestId, chargedNano: String(r.chargedNano) },
          'video charge was already settled; not charged again',
        );
      else if (r.chargedNano > 0n) deps.metrics?.chargedNanoOf(VIDEO_ROUTE, a.model).inc(Number(r.chargedNano));
      return { costNano: r.chargedNano.toString(), firstSettle: r.firstSettle };
    },

    async releaseHold(a) {
      const deployment = a.jobId === undefined ? undefined : await deps.jobs.deploymentOf(a.jobId);
      await releaseVideoHold(deps.ledger, {
        requestId: a.requestId,
        model: a.model,
        ...(deployment ? { deployment } : {}),
        attempts: await deps.jobs.attemptsOf({ requestId: a.requestId }),
        units: 0n,
        unit: 'video_ms',
        status: a.reason,
        httpStatus: releaseStatus(a.reason),
        latencyMs: Math.max(0, Math.min(2_147_483_647, Date.now() - a.createdAtMs)),
      });
    },

    async recordOutcome(o) {
      const { deleted } = await deps.jobs.recordOutcome(o);
      deps.log.info(
        {
          videoId: o.jobId,
          status: o.status,
          producedMs: o.producedMs,
          costNano: o.costNano,
          error: o.error?.code,
          deleted,
        },
        'video job finished',
      );
      return { deleted };
    },

    async cancelUpstreamJob(a) {
      // A job the provider has finished is billed whatever happens next: deleting it now would
      // release the hold of a video someone pays for. It is followed to its end instead.
      const pc = provider(a.provider);
      const now = await deps.upstream.status(pc, a.upstreamId).catch(() => null); // a job gone or unreadable: DELETE says which
      if (now?.status === 'completed') {
        deps.log.info(
          { upstreamId: a.upstreamId },
          'a cancelled video job had already finished upstream; it is charged for what it produced',
        );
        return { dropped: false };
      }
      const r = await deps.upstream.remove(pc, a.upstreamId);
      if (r === 'refused')
        deps.log.warn(
          { upstreamId: a.upstreamId },
          'the upstream would not drop the video job; it runs on and is charged for what it produces',
        );
      return { dropped: r !== 'refused' };
    },

    async discardVideo(a) {
      if (a.contentKey) await deps.store.delete(a.contentKey);
      if (a.upstreamId) {
        const upstreamId = a.upstreamId;
        // Best effort: a provider gone from the book (or without a credential) is a warning, not a retry for ever.
        const r = await Promise.resolve()
          .then(() => deps.upstream.remove(provider(a.provider), upstreamId))
          .catch((err: unknown) => (err as Error).message);
        if (r !== 'removed' && r !== 'gone')
          deps.log.warn(
            { upstreamId: a.upstreamId, result: r },
            "could not delete the upstream's copy of a deleted video",
          );
      }
    },
  };
}
