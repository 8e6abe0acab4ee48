// Video jobs inside the gateway process: finds or starts Temporal in the background (the
// gateway never waits for it to serve other routes), runs a worker unless VIDEO_WORKER=0, and
// tells the video service whether Temporal can be used right now.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Metrics } from '../log/metrics.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/db.ts';
import type { Ledger } from '../billing/ledger.ts';
import { unavailable } from '../errors/errors.ts';
import { videoActivities } from './activities.ts';
import { VideoJobs } from './jobs.ts';
import { FolderVideoStore, removeAbandonedWrites, type VideoStore } from './store.ts';
import { ensureSearchAttributes, resolveTemporal, type DevServer } from './temporal.ts';
import { VideoUpstream } from './upstream.ts';
import type { Catalogue } from '../catalogue/catalogue.ts';
import { videoTarget, type VideoRouting } from './deployments.ts';
import { startVideoWorker, type RunningWorker } from './worker.ts';
import { clientTracing } from './job-tracing.ts';

export interface TemporalReady {
  client: Client;
  searchAttributes: boolean;
  taskQueue: string;
}

type State =
  | { kind: 'starting' }
  | { kind: 'ready'; ready: TemporalReady }
  /** permanent: no Temporal at all (nothing configured, no CLI); else one that is down for now. */
  | { kind: 'unavailable'; reason: string; permanent: boolean };

const RECONNECT_MS = 10_000;

// What API clients are told: in general terms only. The reasons (paths, addresses, settings)
// are for the operator, in the log.
const PUBLIC_REASON = {
  none: 'it has no Temporal service for video jobs.',
  down: 'its Temporal service for video jobs cannot be reached right now; try again later.',
  starting: 'its Temporal service for video jobs is still starting; try again shortly.',
} as const;

const videoUnavailable = (why: keyof typeof PUBLIC_REASON) =>
  unavailable('video_jobs_unavailable', `Video generation is unavailable on this gateway: ${PUBLIC_REASON[why]}`);

export class VideoRuntime {
  readonly jobs: VideoJobs;
  readonly store: VideoStore;
  private readonly config: Config;
  private readonly log: Logger;
  private readonly ledger: Ledger;
  private readonly metrics: Metrics | undefined;
  private readonly upstream: VideoUpstream;
  private readonly catalogue: Catalogue;
  private readonly routing: VideoRouting;
  private state: State = { kind: 'starting' };
  private started: Promise<void> | undefined;
  private connection: Connection | undefined;
  private devServer: DevServer | undefined;
  /** The Temporal web UI when known: TEMPORAL_UI_URL's, or that of this DATA_DIR's own dev server (never another program's on the dev port). */
  private uiUrl: string | undefined;
  private worker: RunningWorker | undefined;
  private closing = false;

  constructor(deps: {
    config: Config;
    log: Logger;
    db: Db;
    ledger: Ledger;
    /** The book as this gateway serves it: the models' deployments and the providers' credentials. */
    catalogue: Catalogue;
    /** The inference routes' router and passive health (src/video/deployments.ts). */
    routing: VideoRouting;
    metrics?: Metrics;
  }) {
    this.metrics = deps.metrics;
    this.catalogue = deps.catalogue;
    this.routing = deps.routing;
    this.config = deps.config;
    this.log = deps.log.child({ component: 'video' });
    this.ledger = deps.ledger;
    this.jobs = new VideoJobs(deps.db);
    this.store = new FolderVideoStore(deps.config.video.dir);
    this.upstream = new VideoUpstream({ connectTimeoutMs: deps.config.upstream.connectTimeoutMs });
  }

  /** Starts connecting in the background; never throws. */
  start(): void {
    this.started ??= this.connect().catch((err) => {
      this.state = { kind: 'unavailable', reason: (err as Error).message, permanent: true };
      this.log.warn({ err }, 'video jobs are disabled (the /v1/videos routes answer 503)');
    });
  }

  /**
   * Temporal, once connected. While the gateway is still connecting this waits (up to
   * `waitMs`); when Temporal cannot be used it throws a 503 that says why.
   */
  async temporal(waitMs = 20_000): Promise<TemporalReady> {
    this.start();
    if (this.state.kind === 'starting') await Promise.race([this.started, sleep(waitMs, undefined, { ref: false })]);
    const s = this.state as State;
    if (s.kind === 'ready') return s.ready;
    throw videoUnavailable(s.kind === 'unavailable' ? (s.permanent ? 'none' : 'down') : 'starting');
  }

  /**
   * 503 when this gateway has no Temporal at all: then no video route works. (While a
   * configured Temporal is only unreachable, finished jobs are still read from the database.)
   */
  assertEnabled(): void {
    if (this.state.kind === 'unavailable' && this.state.permanent) throw videoUnavailable('none');
  }

  private async connect(): Promise<void> {
    const cfg = this.config.video;
    let target;
    try {
      target = await resolveTemporal(cfg, path.join(this.config.dataDir, 'temporal'), this.log);
    } catch (err) {
      const reason = (err as Error).message;
      this.state = { kind: 'unavailable', reason, permanent: true };
      // The one line that says how to get video jobs; every other route is unaffected.
      this.log.warn(`video jobs are disabled (the /v1/videos routes answer 503): ${reason}`);
      return;
    }
    this.devServer = target.devServer;
    this.uiUrl = target.uiUrl;

    // A configured cluster may be down for a while: keep trying, answering 503 meanwhile.
    let warned = false;
    for (;;) {
      if (this.closing) return;
      try {
        this.connection = await Connection.connect({ address: target.address });
        await this.connection.workflowService.getSystemInfo({});
        break;
      } catch (err) {
        await this.connection?.close().catch(() => {});
        this.connection = undefined;
        this.state = {
          kind: 'unavailable',
          reason: `Temporal at ${target.address} is not reachable (${(err as Error).message}).`,
          permanent: false,
        };
        if (!warned)
          this.log.warn(
            `video jobs wait for Temporal at ${target.address}, not reachable yet; the /v1/videos routes answer 503 until it is`,
          );
        warned = true;
        await sleep(RECONNECT_MS, undefined, { ref: false });
      }
    }
    const namespace = cfg.temporalNamespace;
    const searchAttributes = await ensureSearchAttributes(this.connection, namespace, this.log);
    const client = new Client({ connection: this.connection, namespace, interceptors: clientTracing() });
    this.state = { kind: 'ready', ready: { client, searchAttributes, taskQueue: cfg.taskQueue } };
    this.log.info(
      { address: target.address, namespace, taskQueue: cfg.taskQueue, ui: target.uiUrl, store: this.store.describe() },
      `video jobs ready: Temporal at ${target.address}${target.uiUrl ? ` (web UI ${target.uiUrl})` : ''}, task queue ${cfg.taskQueue}`,
    );

    if (cfg.runWorker && !this.closing) {
      await removeAbandonedWrites(this.store, this.log);
      try {
        this.worker = await startVideoWorker({
          address: target.address,
          namespace,
          taskQueue: cfg.taskQueue,
          log: this.log,
          activities: videoActivities({
            config: this.config,
            ledger: this.ledger,
            jobs: this.jobs,
            store: this.store,
            upstream: this.upstream,
            catalogue: this.catalogue,
            routing: this.routing,
            log: this.log,
            metrics: this.metrics,
          }),
        });
        this.worker.done.catch((err) =>
          this.log.error({ err }, 'the video worker stopped with an error; jobs wait for another worker'),
        );
      } catch (err) {
        this.log.error({ err }, 'the video worker could not start; jobs wait for another worker (npm run worker)');
      }
    }
  }

  /** A workflow's page in the Temporal web UI, or '' when this gateway does not know the UI's address. */
  workflowPage(workflowId: string): string {
    if (!this.uiUrl) return '';
    const namespace = encodeURIComponent(this.config.video.temporalNamespace);
    return `${this.uiUrl}/namespaces/${namespace}/workflows/${encodeURIComponent(workflowId)}`;
  }

  /** Best effort, in the background: deletes the provider's copy of a deleted job's video (at the provider that made it). */
  discardUpstream(provider: string, upstreamId: string): void {
    let target;
    try {
      target = videoTarget(this.catalogue, provider);
    } catch (err) {
      this.log.warn(
        { upstreamId, err: (err as Error).message },
        "could not delete the upstream's copy of a deleted video",
      );
      return;
    }
    this.upstream.remove(target, upstreamId).then(
      (r) => {
        if (r === 'refused') this.log.warn({ upstreamId }, 'the upstream would not delete its copy of a deleted video');
      },
      (err: unknown) =>
        this.log.warn(
          { upstreamId, err: (err as Error).message },
          "could not delete the upstream's copy of a deleted video",
        ),
    );
  }

  async close(): Promise<void> {
    this.closing = true;
    // A start still under way (a worker bundling, a reconnect wait) gets a moment to settle.
    await Promise.race([this.started?.catch(() => {}), sleep(12_000, undefined, { ref: false })]);
    await this.worker?.shutdown();
    await this.connection?.close().catch(() => {});
    await this.upstream.close().catch(() => {});
    await this.devServer?.stop();
  }
}
