// A throwaway PostgreSQL cluster for the test run: initdb in a temporary folder, started on a
// free port, removed afterwards. No system service is used.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './ports.ts';

export interface TestPostgres {
  url: (database?: string) => string;
  port: number;
  stop(): Promise<void>;
}

function findBinDir(): string {
  const root = '/usr/lib/postgresql';
  if (fs.existsSync(root)) {
    const versions = fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(root, versions[0], 'bin');
  }
  const which = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) return path.dirname(which.stdout.trim());
  throw new Error('PostgreSQL server binaries not found: install them (apt-get install -y postgresql) or put initdb on PATH');
}

/** PostgreSQL refuses to run as root; as root we run it as an unprivileged user. */
function runAs(): string[] {
  if (process.getuid?.() !== 0) return [];
  for (const user of ['postgres', 'nobody']) {
    if (spawnSync('id', ['-u', user]).status === 0) return ['runuser', '-u', user, '--'];
  }
  throw new Error('running as root and no unprivileged user (postgres or nobody) exists to run PostgreSQL');
}

export async function startPostgres(): Promise<TestPostgres> {
  const bin = findBinDir();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
  const dataDir = path.join(dir, 'data');
  const prefix = runAs();
  if (prefix.length) spawnSync('chown', ['-R', prefix[2]!, dir]);
  fs.chmodSync(dir, 0o755);

  const cmd = (exe: string, args: string[]) => (prefix.length ? [prefix[0]!, [...prefix.slice(1), path.join(bin, exe), ...args]] : [path.join(bin, exe), args]) as [string, string[]];
  const [initExe, initArgs] = cmd('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--locale=C']);
  const init = spawnSync(initExe, initArgs, { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);

  const port = await freePort();
  const [pgExe, pgArgs] = cmd('postgres', [
    '-D', dataDir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1',
    '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300',
  ]);
  const server: ChildProcess = spawn(pgExe, pgArgs, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  server.stderr?.on('data', (d) => { stderr = (stderr + d).slice(-4000); });

  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url() });
    try {
      await c.connect();
      await c.end();
      break;
    } catch {
      await c.end().catch(() => {});
      if (server.exitCode !== null || Date.now() > deadline) throw new Error(`PostgreSQL did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    url,
    port,
    async stop() {
      // Signal the postmaster itself: runuser does not pass signals on to its child.
      const pidFile = path.join(dataDir, 'postmaster.pid');
      const pid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN;
      const exited = new Promise((r) => (server.exitCode !== null ? r(null) : server.once('exit', r)));
      try {
        if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGINT');
        else server.kill('SIGINT');
      } catch {
        server.kill('SIGKILL');
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (server.exitCode === null) server.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function createDatabase(adminUrl: string, name: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE "${name}"`);
  } finally {
    await c.end();
  }
}
