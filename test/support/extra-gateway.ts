// A gateway process of a test's own, on the shared database and simulator, for settings the
// main test gateway does not run with (it runs the defaults a fresh `npm start` has).
import path from 'node:path';
import { afterAll, inject } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { UPSTREAM_KEY } from './global-setup.ts';

export async function extraGateway(label: string, env: Record<string, string>): Promise<GatewayProcess> {
  const sim = inject('simulatorUrl');
  const g = await startGatewayProcess({
    logFile: path.join(inject('workDir'), `${label}-${Math.random().toString(36).slice(2, 8)}.log`),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: sim,
      ...env,
    },
  });
  return g;
}

/** Starts the gateway once for the file that calls this at its top level, and stops it after. */
export function gatewayForFile(label: string, env: Record<string, string>): () => Promise<GatewayProcess> {
  let started: Promise<GatewayProcess> | undefined;
  afterAll(async () => {
    if (started) await (await started).stop();
  });
  return () => (started ??= extraGateway(label, env));
}
