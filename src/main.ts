// `npm start`: the gateway with configuration from the environment (embedded defaults).
import { loadConfig } from './config/config.ts';
import { createLogger } from './log/logger.ts';
import { startGateway } from './app.ts';
import { UnsafeExposureError } from './config/exposure.ts';

const config = loadConfig();
const log = createLogger(config.logLevel);

try {
  const gateway = await startGateway(config, log);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    gateway.close().then(
      () => process.exit(0),
      (err) => { log.error({ err }, 'shutdown failed'); process.exit(1); },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
} catch (err) {
  if (err instanceof UnsafeExposureError) log.fatal(`gateway refused to start: ${err.message}`);
  else log.fatal({ err }, 'gateway failed to start');
  process.exit(1);
}
