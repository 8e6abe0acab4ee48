// Gateway processes for the soak run: several over one database, each restartable (SIGKILL,
// then a fresh process), with short hold expiry and a fast sweeper so crashes resolve quickly.
import path from 'node:path';
import { startGatewayProcess } from '../support/gateway-process.ts';
import { NO_TEMPORAL_CLI } from '../support/temporal.ts';
import type { SoakGateway } from './soak.ts';

export const SOAK_APP_NAME = 'gateway-soak';
export const SOAK_HOLD_TTL_MS = 2_000;
export const SOAK_SWEEP_MS = 300;

export function soakDatabaseUrl(databaseUrl: string): string {
  const u = new URL(databaseUrl);
  u.searchParams.set('application_name', SOAK_APP_NAME);
  return u.toString();
}

export async function soakGateway(opts: {
  databaseUrl: string;
  simulatorUrl: string;
  upstreamKey: string;
  logDir: string;
  name: string;
  billing?: 'hold' | 'lease';
}): Promise<SoakGateway & { stop(): Promise<void> }> {
  let n = 0;
  const start = async () => {
    const proc = await startGatewayProcess({
      logFile: path.join(opts.logDir, `${opts.name}-${n++}.log`),
      env: {
        DATABASE_URL: soakDatabaseUrl(opts.databaseUrl),
        OPENAI_API_KEY: opts.upstreamKey,
        OPENAI_BASE_URL: `${opts.simulatorUrl}/v1`,
        ANTHROPIC_API_KEY: opts.upstreamKey,
        ANTHROPIC_BASE_URL: opts.simulatorUrl,
        HOLD_TTL_SECONDS: String(SOAK_HOLD_TTL_MS / 1000),
        HOLD_SWEEP_INTERVAL_MS: String(SOAK_SWEEP_MS),
        UPSTREAM_RETRY_BASE_MS: '10',
        UPSTREAM_RETRY_MAX_WAIT_MS: '50',
        UPSTREAM_HEADERS_TIMEOUT_MS: '5000',
        UPSTREAM_BODY_TIMEOUT_MS: '5000',
        RATE_LIMIT_RPM: '0',
        RATE_LIMIT_TPM: '0',
        LOG_LEVEL: 'warn',
        BILLING_MODE: opts.billing ?? 'hold',
        LEASE_SLICE_USD: '0.005',
        LEASE_FLUSH_MS: '50',
        LEASE_IDLE_MS: '500',
        // No video jobs: a gateway without Temporal settings would start a dev server of its own.
        TEMPORAL_CLI: NO_TEMPORAL_CLI,
        TEMPORAL_ADDRESS: '',
      },
    });
    const handle: SoakGateway & { stop(): Promise<void> } = {
      httpUrl: proc.httpUrl,
      rpcUrl: proc.rpcUrl,
      async restart() {
        await proc.stop('SIGKILL');
        return start();
      },
      async stop() {
        await proc.stop('SIGTERM');
      },
    };
    return handle;
  };
  return start();
}
