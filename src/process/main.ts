// `npm start`: the gateway with configuration from the environment (embedded defaults), after
// ./.env or the file of --settings (start-options.ts). Logs are human lines on a terminal and
// JSON otherwise (LOG_FORMAT); the address it listens on is written to DATA_DIR/gateway.json for
// the operator CLI while it runs. Ctrl-C, SIGTERM and closing the terminal (SIGHUP) stop it
// the same way: requests finished, charges written, its own PostgreSQL and Temporal stopped.
import type { Config } from '../config/config.ts';
import { loadStartConfig, START_USAGE } from '../config/start-options.ts';
import { createLogger } from '../log/logger.ts';
import { startGateway } from './server.ts';
import { removeGatewayAddress, writeGatewayAddress } from '../config/gateway-address.ts';
import { UnsafeExposureError } from '../config/exposure.ts';

let config: Config;
try {
  // The options, then ./.env (or --settings) filling in what the environment does not set, then the settings.
  const loaded = loadStartConfig(process.argv.slice(2));
  if (!loaded) {
    console.log(START_USAGE);
    process.exit(0);
  }
  config = loaded;
} catch (err) {
  // A bad setting is one line that names it, not a stack trace.
  console.error(`gateway: ${(err as Error).message}`);
  process.exit(1);
}
const log = createLogger(config.logLevel, undefined, config.logFormat, config.tracing.enabled);
// A closed terminal (SIGHUP) takes the output with it, maybe a moment before the signal is
// handled: what is still written has nowhere to go, and its error must not stop the shutdown.
for (const out of [process.stdout, process.stderr]) out.on('error', () => {});

try {
  const gateway = await startGateway(config, log);
  try {
    writeGatewayAddress(config.dataDir, {
      rpcUrl: gateway.rpcUrl,
      httpUrl: gateway.httpUrl,
      pid: process.pid,
      startedAt: new Date().toISOString(),
    });
  } catch (err) {
    log.warn(
      { err },
      `could not write ${config.dataDir}/gateway.json; the operator CLI needs GATEWAY_RPC_URL or GRPC_PORT to find this gateway`,
    );
  }
  // The startup lines reach the log now (it is otherwise written in batches, up to 100 ms late).
  log.flush();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    removeGatewayAddress(config.dataDir, process.pid);
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    gateway.close().then(
      () => {
        log.info('gateway stopped');
        process.exit(0);
      },
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGHUP', () => stop('SIGHUP'));
} catch (err) {
  if (err instanceof UnsafeExposureError) log.fatal(`gateway refused to start: ${err.message}`);
  else log.fatal({ err }, 'gateway failed to start');
  process.exit(1);
}
