// `npm run bot`: the Telegram bot on its own, calling the gateway's BillingService over the
// network (GATEWAY_RPC_URL, ADMIN_TOKEN), exactly as the operator CLI does.
import { logFormat } from '../config/config.ts';
import { createLogger } from '../log/logger.ts';
import { loadBotConfig } from './config.ts';
import { networkTransport, startBot } from './start.ts';

// Human lines at a terminal, JSON otherwise, as the gateway's (LOG_FORMAT).
let format: ReturnType<typeof logFormat>;
try {
  format = logFormat(process.env.LOG_FORMAT);
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
const log = createLogger(process.env.LOG_LEVEL || 'info', undefined, format);
try {
  const config = loadBotConfig();
  if (!config) {
    log.fatal('TELEGRAM_BOT_TOKEN is not set');
    process.exit(2);
  }
  const running = await startBot({ config, transport: networkTransport(config.rpcUrl, config.adminToken), log });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'telegram bot stopping');
    running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
} catch (err) {
  log.fatal({ err }, 'telegram bot failed to start');
  process.exit(1);
}
