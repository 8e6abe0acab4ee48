// The processes a run starts (each in its own group, stopped with it), the tools it needs (wrk,
// strace, LiteLLM), and the CPU each process tree used, read from /proc.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { CACHE, NICE, ROOT } from './options.ts';

// ---------------------------------------------------------------- processes

export const children = new Set<ChildProcess>();

export function startChild(
  command: string,
  commandArgs: string[],
  opts: { env?: Record<string, string>; logFile?: string; readyLine?: RegExp; cwd?: string },
): Promise<{ child: ChildProcess; line: string }> {
  const [cmd, args] = NICE ? ['nice', ['-n', String(NICE), command, ...commandArgs]] : [command, commandArgs];
  const out = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'pipe';
  const child = spawn(cmd, args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.readyLine || !opts.logFile ? 'pipe' : out, opts.logFile ? out : 'inherit'],
    detached: true,
  });
  if (typeof out === 'number') fs.closeSync(out);
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (!opts.readyLine) return Promise.resolve({ child, line: '' });
  const rl = readline.createInterface({ input: child.stdout! });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} did not start in 120 s`)), 120_000);
    rl.on('line', (l) => {
      if (opts.logFile) fs.appendFileSync(opts.logFile, l + '\n');
      if (opts.readyLine!.test(l)) {
        clearTimeout(timer);
        resolve({ child, line: l });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`));
    });
  });
}

/** SIGTERM to the child's process group, SIGKILL after 15 s. */
export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 15_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      child.kill('SIGTERM');
    }
  });
}

export async function waitHttp(
  url: string,
  seconds: number,
  ok: (status: number) => boolean = (s) => s < 500,
): Promise<void> {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      if (ok(r.status)) return;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > until) throw new Error(`${url} not ready in ${seconds} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------- tools

/** Debian's wrk, or a build in the cache; installed with apt-get when missing (it says so). */
export function findWrk(): string {
  const cached = path.join(CACHE, 'wrk');
  for (const p of [process.env.WRK, cached, '/usr/bin/wrk', '/usr/local/bin/wrk']) if (p && fs.existsSync(p)) return p;
  console.log("wrk not found: installing Debian's wrk with apt-get (a measurement tool, not part of the gateway)");
  const r = spawnSync(
    'sh',
    ['-c', 'apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)'],
    {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    },
  );
  if (r.status !== 0 || !fs.existsSync('/usr/bin/wrk'))
    throw new Error('could not install wrk: install it (apt-get install wrk) or set WRK=/path/to/wrk');
  return '/usr/bin/wrk';
}

export function ensureStrace(): string {
  if (fs.existsSync('/usr/bin/strace')) return '/usr/bin/strace';
  console.log("strace not found: installing Debian's strace with apt-get (for --diagnose)");
  spawnSync('sh', ['-c', 'apt-get install -y -qq strace || (apt-get update -qq && apt-get install -y -qq strace)'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (!fs.existsSync('/usr/bin/strace')) throw new Error('could not install strace');
  return '/usr/bin/strace';
}

/** LiteLLM's proxy in a virtual environment of its own under the cache (made once). */
export function litellmBin(): string {
  const venv = path.join(CACHE, 'litellm-venv');
  const bin = path.join(venv, 'bin', 'litellm');
  if (fs.existsSync(bin)) return bin;
  console.log(`making a Python virtual environment for LiteLLM in ${venv} (once; pip install 'litellm[proxy]')`);
  fs.mkdirSync(CACHE, { recursive: true });
  const python = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);
  if (!python) throw new Error('python3 not found (needed for the LiteLLM target; --targets without litellm skips it)');
  let r = spawnSync(python, ['-m', 'venv', venv], { stdio: 'inherit' });
  if (r.status === 0)
    r = spawnSync(path.join(venv, 'bin', 'pip'), ['install', '-q', 'litellm[proxy]'], { stdio: 'inherit' });
  if (r.status !== 0 || !fs.existsSync(bin)) {
    fs.rmSync(venv, { recursive: true, force: true });
    throw new Error('could not install litellm[proxy]');
  }
  return bin;
}

// ---------------------------------------------------------------- CPU accounting

export const TICK_MS = 1000 / 100; // USER_HZ

export function cpuMsOf(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    } catch {
      /* gone */
    }
  }
  return ticks * TICK_MS;
}

/** The process and everything under it (a PostgreSQL server's backends, uvicorn's worker). */
export function treeOf(pid: number): number[] {
  const all: number[] = [pid];
  for (let i = 0; i < all.length; i++) {
    try {
      const kids = fs.readFileSync(`/proc/${all[i]}/task/${all[i]}/children`, 'utf8').trim();
      if (kids) all.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* gone */
    }
  }
  return all;
}

/**
 * The machine's CPU time so far (all cores, ms): `busy` is user, nice, system, irq and softirq
 * time; `steal` is time the hypervisor gave this VM's vCPUs to someone else, counted apart: a
 * slow phase of the VM, not a neighbour on it.
 */
export function machineTimes(): { busy: number; steal: number } {
  const [user, nice, system, , , irq, softirq, steal] = fs
    .readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return { busy: (user! + nice! + system! + irq! + softirq!) * TICK_MS, steal: (steal ?? 0) * TICK_MS };
}
