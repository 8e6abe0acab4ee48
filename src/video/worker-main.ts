// `npm run worker`: a video worker on its own, for scale-out. It needs what the gateway's own
// worker uses: the same PostgreSQL (DATABASE_URL: holds are settled there), the same Temporal
// (TEMPORAL_ADDRESS, or the local dev server) and task queue, the same video folder
// (VIDEO_DIR) and the provider credentials (OPENAI_API_KEY, OPENAI_BASE_URL).
import path from 'node:path';
import { loadConfig, secretSettings, type Config } from '../config/config.ts';
import { setSecrets } from '../secrets/scrub.ts';
import { createLogger } from '../log/logger.ts';
import { migrate, openDb } from '../db/db.ts';
import { Ledger } from '../billing/ledger.ts';
import { videoActivities } from './activities.ts';
import { VideoJobs } from './jobs.ts';
import { FolderVideoStore, removeAbandonedWrites } from './store.ts';
import { resolveTemporal } from './temporal.ts';
import { VideoUpstream } from './upstream.ts';
import { startVideoWorker } from './worker.ts';
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
  // Scrubbed from the provider's text before it reaches a job's row, its history or a log line.
  setSecrets('instance', [...secretSettings(config), keyHashSecret]);
  const target = await resolveTemporal(config.video, path.join(config.dataDir, 'temporal'), log);
  const upstream = new VideoUpstream({ connectTimeoutMs: config.upstream.connectTimeoutMs });
  const store = new FolderVideoStore(config.video.dir);
  await removeAbandonedWrites(store, log);
  const worker = await startVideoWorker({
    address: target.address,
    namespace: config.video.temporalNamespace,
    taskQueue: config.video.taskQueue,
    log,
    activities: videoActivities({ config, ledger, jobs: new VideoJobs(db), store, upstream, log }),
  });
  log.info({ store: store.describe() }, 'video worker ready');

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'video worker stopping: finishing running activities');
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
