// A Temporal worker for video jobs: the workflow bundle (built by webpack once, then cached by
// content hash in the temp folder, since every gateway and `npm run worker` start needs it)
// and the activities. It runs inside the gateway by default, or alone (src/process/worker-main.ts).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type LogEntry,
} from '@temporalio/worker';
import type { Logger } from 'pino';
import type { VideoActivities } from '../../workflows/video-types.ts';
import { workerTracing, workflowTracingModules } from './job-tracing.ts';

const WORKFLOWS_DIR = path.resolve(import.meta.dirname, '..', '..', 'workflows');
const WORKFLOWS_ENTRY = path.join(WORKFLOWS_DIR, 'index.ts');

let runtimeInstalled = false;

/** Temporal's own logs go to our logger, warnings and up; we stop workers ourselves on signals. */
export function installTemporalRuntime(log: Logger): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const write = (e: LogEntry) => {
    const meta = { ...(e.meta ?? {}), component: 'temporal' };
    if (e.level === 'ERROR') log.error(meta, e.message);
    else if (e.level === 'WARN') log.warn(meta, e.message);
    else log.debug(meta, e.message);
  };
  try {
    Runtime.install({ logger: new DefaultLogger('WARN', write), shutdownSignals: [] });
  } catch {
    // Already installed by someone else in this process: keep theirs.
  }
}

/** The compiled workflow code, from the cache when the sources and SDK version are unchanged. */
export async function workflowBundle(log: Logger): Promise<{ code: string }> {
  const hash = crypto.createHash('sha256');
  const require = createRequire(import.meta.url);
  hash.update(
    JSON.parse(fs.readFileSync(require.resolve('@temporalio/workflow/package.json'), 'utf8')).version as string,
  );
  for (const name of fs
    .readdirSync(WORKFLOWS_DIR)
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    hash.update(name).update(fs.readFileSync(path.join(WORKFLOWS_DIR, name)));
  }
  // The trace interceptors are in the bundle only while tracing is on: a bundle of each kind.
  const interceptorModules = workflowTracingModules();
  for (const m of interceptorModules) hash.update(m);
  const cacheDir = path.join(os.tmpdir(), 'gateway-workflow-bundles');
  const cached = path.join(cacheDir, `${hash.digest('hex').slice(0, 24)}.js`);
  try {
    return { code: fs.readFileSync(cached, 'utf8') };
  } catch {
    // not built yet
  }
  const started = Date.now();
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_ENTRY,
    workflowInterceptorModules: interceptorModules,
    logger: new DefaultLogger('WARN', (e) => log.warn({ component: 'temporal-bundler' }, e.message)),
  });
  log.info({ ms: Date.now() - started }, 'built the video workflow bundle');
  try {
    fs.mkdirSync(cacheDir, { recursive: true });
    const temp = `${cached}.${process.pid}.tmp`;
    fs.writeFileSync(temp, code);
    fs.renameSync(temp, cached);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'could not cache the workflow bundle');
  }
  return { code };
}

export interface RunningWorker {
  /** Settles when the worker stops. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

export async function startVideoWorker(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  activities: VideoActivities;
  log: Logger;
}): Promise<RunningWorker> {
  installTemporalRuntime(opts.log);
  const [connection, bundle] = await Promise.all([
    NativeConnection.connect({ address: opts.address }),
    workflowBundle(opts.log),
  ]);
  let worker: Worker;
  try {
    worker = await Worker.create({
      connection,
      namespace: opts.namespace,
      taskQueue: opts.taskQueue,
      workflowBundle: bundle,
      activities: opts.activities,
      shutdownGraceTime: '10 seconds',
      maxConcurrentActivityTaskExecutions: 20,
      ...workerTracing(),
    });
  } catch (err) {
    await connection.close();
    throw err;
  }
  const done = worker.run().finally(() => connection.close());
  opts.log.info(
    { taskQueue: opts.taskQueue, namespace: opts.namespace },
    `video worker polling task queue ${opts.taskQueue}`,
  );
  return {
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done.catch(() => {});
    },
  };
}
