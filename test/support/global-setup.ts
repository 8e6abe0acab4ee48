// Starts the real parts once for the test run: a throwaway PostgreSQL cluster, the upstream
// simulator and the gateway process pointed at both. Tests reach them through inject().
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createDatabase, startPostgres } from './postgres.ts';
import { startSimulator } from '../upstream/simulator.ts';
import { startGatewayProcess } from './gateway-process.ts';
import { NO_TEMPORAL_CLI, startTemporal, videoEnv } from './temporal.ts';

export const UPSTREAM_KEY = 'sk-sim-upstream-secret';

declare module 'vitest' {
  export interface ProvidedContext {
    gatewayUrl: string;
    rpcUrl: string;
    databaseUrl: string;
    adminDatabaseUrl: string;
    simulatorUrl: string;
    gatewayLog: string;
    workDir: string;
  }
}

export default async function setup(project: TestProject) {
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-test-'));
  // Gateways that tests start without DATABASE_URL run their own PostgreSQL server with its data
  // in a DATA_DIR under here; as root that server runs as another user, who must reach it.
  fs.chmodSync(workDir, 0o755);
  // Whatever started is stopped again if a later part fails, so a failed setup leaves no
  // servers behind.
  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    for (const stop of [...stops].reverse()) await stop().catch(() => {});
  };
  try {
    const pg = await startPostgres();
    stops.push(() => pg.stop());
    await createDatabase(pg.url(), 'gateway');
    const sim = await startSimulator({ apiKey: UPSTREAM_KEY });
    stops.push(() => sim.close());
    const temporal = await startTemporal(workDir);
    stops.push(() => temporal.stop());
    const videoDir = path.join(workDir, 'videos');
    // Gateways that other tests start on databases of their own inherit this: no video workers
    // of theirs on the shared Temporal (they answer 503 on the video routes instead).
    process.env.TEMPORAL_CLI = NO_TEMPORAL_CLI;
    delete process.env.TEMPORAL_ADDRESS;
    const gatewayLog = path.join(workDir, 'gateway.log');
    const gw = await startGatewayProcess({
      logFile: gatewayLog,
      env: {
        DATABASE_URL: pg.url('gateway'),
        OPENAI_API_KEY: UPSTREAM_KEY,
        OPENAI_BASE_URL: `${sim.url}/v1`,
        XAI_API_KEY: UPSTREAM_KEY,
        XAI_BASE_URL: `${sim.url}/v1`,
        DEEPSEEK_API_KEY: UPSTREAM_KEY,
        DEEPSEEK_BASE_URL: `${sim.url}/v1`,
        ANTHROPIC_API_KEY: UPSTREAM_KEY,
        ANTHROPIC_BASE_URL: sim.url,
        COHERE_API_KEY: UPSTREAM_KEY,
        COHERE_BASE_URL: `${sim.url}/cohere`,
        BFL_API_KEY: UPSTREAM_KEY,
        BFL_BASE_URL: `${sim.url}/bfl/v1`,
        IMAGE_POLL_INTERVAL_MS: '20',
        IMAGE_POLL_TIMEOUT_MS: '1500',
        UPLOAD_LIMIT_BYTES: String(1024 * 1024),
        // Short enough for the hang tests, long enough for a loaded 2-core machine.
        UPSTREAM_HEADERS_TIMEOUT_MS: '2000',
        UPSTREAM_BODY_TIMEOUT_MS: '2000',
        UPSTREAM_RETRY_BASE_MS: '20',
        // Small enough that an oversized test body fits in loopback socket buffers, so the client
        // reads the 413 instead of a reset it gets when the server stops reading mid-upload.
        BODY_LIMIT_BYTES: String(256 * 1024),
        UPSTREAM_RETRY_MAX_WAIT_MS: '100',
        LOG_LEVEL: 'info',
        ...videoEnv(temporal.address, videoDir),
      },
    });
    stops.push(() => gw.stop());

    project.provide('gatewayUrl', gw.httpUrl);
    project.provide('rpcUrl', gw.rpcUrl);
    project.provide('databaseUrl', pg.url('gateway'));
    project.provide('adminDatabaseUrl', pg.url());
    project.provide('simulatorUrl', sim.url);
    project.provide('gatewayLog', gatewayLog);
    project.provide('workDir', workDir);
    project.provide('temporalAddress', temporal.address);
    project.provide('temporalProblem', temporal.problem);
    project.provide('videoDir', videoDir);
  } catch (err) {
    await stopAll();
    throw err;
  }

  return async () => {
    await stopAll();
    if (!process.env.KEEP_TEST_DIR) fs.rmSync(workDir, { recursive: true, force: true });
  };
}
