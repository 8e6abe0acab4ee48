// `npm run worker`: a video worker on its own, for scale-out. It needs what the gateway's own
// worker uses: the same PostgreSQL (DATABASE_URL: holds are settled there, and the price book and
// the providers' credentials are read from it), the same Temporal (TEMPORAL_ADDRESS, or the local
// dev server) and task queue, the same video folder (VIDEO_DIR), and what the credentials need
// (CREDENTIALS_KEY for sealed ones, the variables that others name). It serves the book's
// deployments as the gateway does, with passive health of its own.
import path from 'node:path';
import { loadConfig, secretSettings, type Config } from '../config/config.ts';
import { setSecrets } from '../secrets/scrub.ts';
import { createLogger } from '../log/logger.ts';
import { migrate, openDb, type Db } from '../db/db.ts';
import { Ledger } from '../billing/ledger.ts';
import { Catalogue } from '../catalogue/catalogue.ts';
import { PriceBook } from '../catalogue/price-book.ts';
import { serveBookInForce } from '../catalogue/book-refresh.ts';
import { CredentialStore, credentialKey } from '../catalogue/credentials.ts';
import { DeploymentHealth } from '../inference/routing/deployment-health.ts';
import { Router } from '../inference/routing/router.ts';
import { JobRouting } from '../inference/routing/job-routing.ts';
import { videoActivities } from '../video/activities.ts';
import { VideoJobs } from '../video/jobs.ts';
import { FolderVideoStore, removeAbandonedWrites } from '../video/store.ts';
import { resolveTemporal } from '../video/temporal.ts';
import { VideoUpstream } from '../video/upstream.ts';
import { startVideoWorker } from '../video/worker.ts';
import { runningTracing, startTracing } from '../tracing/tracing.ts';

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  // A bad setting is one line that names it, as for the gateway.
  console.error(`worker: ${(err as Error).message}`);
  process.exit(1);
}
// Traces (off unless OTEL_EXPORTER_OTLP_ENDPOINT is set): the jobs' workflows and activities join the trace that created each job.
startTracing(config.tracing, 'video-worker');
const log = createLogger(config.logLevel, undefined, config.logFormat, config.tracing.enabled).child({
  component: 'video-worker',
});

if (!config.databaseUrl) {
  log.fatal(
    'npm run worker needs DATABASE_URL: the worker settles holds in the database the gateway uses, and the embedded one (no DATABASE_URL) is private to the gateway that started it',
  );
  process.exit(1);
}

try {
  const db = await openDb({ databaseUrl: config.databaseUrl, poolMax: 5 });
  await migrate(db);
  const keyHashSecret = await Ledger.loadSecret(db, config.keyHashSecret);
  const ledger = new Ledger(db, keyHashSecret);
  const key = credentialKey({
    ...(config.credentialsKey ? { configured: config.credentialsKey } : {}),
    dataDir: config.dataDir,
    embedded: false,
  });
  // Scrubbed from the provider's text before it reaches a job's row, its history or a log line (the catalogue adds the providers').
  setSecrets('instance', [...secretSettings(config), keyHashSecret, key?.key.toString('base64')]);
  const { catalogue, routing, stopBookRefresh } = await serveDeployments(config, db, key);
  const target = await resolveTemporal(config.video, path.join(config.dataDir, 'temporal'), log);
  const upstream = new VideoUpstream({ connectTimeoutMs: config.upstream.connectTimeoutMs });
  const store = new FolderVideoStore(config.video.dir);
  await removeAbandonedWrites(store, log);
  const worker = await startVideoWorker({
    address: target.address,
    namespace: config.video.temporalNamespace,
    taskQueue: config.video.taskQueue,
    log,
    activities: videoActivities({ config, ledger, jobs: new VideoJobs(db), store, upstream, catalogue, routing, log }),
  });
  log.info({ store: store.describe() }, 'video worker ready');

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'video worker stopping: finishing running activities');
    stopBookRefresh();
    worker
      .shutdown()
      .then(() => Promise.all([upstream.close(), db.destroy(), target.devServer?.stop(), runningTracing()?.shutdown()]))
      .then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, 'worker shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  await worker.done;
} catch (err) {
  log.fatal({ err }, 'video worker failed');
  process.exit(1);
}

/** The book in force (read again every PRICE_BOOK_REFRESH_MS) with the credentials, and the deployments' router and health. */
async function serveDeployments(config: Config, db: Db, key: ReturnType<typeof credentialKey>) {
  const catalogue = new Catalogue(config);
  const credentials = new CredentialStore(db, key, config.environment);
  const stopBookRefresh = await serveBookInForce(
    catalogue,
    new PriceBook(db),
    config.priceBookRefreshMs,
    log,
    credentials,
  );
  const health = new DeploymentHealth(config.routing);
  health.onCooldown = (deployment, until, reason) =>
    log.warn({ deployment, reason, until: new Date(until).toISOString() }, 'deployment cooling down');
  return { catalogue, routing: new JobRouting(new Router(health), health), stopBookRefresh };
}
