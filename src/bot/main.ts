// `npm run bot`: the Telegram bot on its own, calling the gateway's BillingService over the
// network (GATEWAY_RPC_URL, ADMIN_TOKEN), exactly as the operator CLI does. Its configuration is
// read once (src/config/bot-config.ts); a setting it cannot use stops it with one line.
import { loadBotProcessConfig, type BotProcessConfig } from '../config/bot-config.ts';
import { createLogger } from '../log/logger.ts';
import { setSecrets } from '../secrets/scrub.ts';
import { networkTransport, startBot } from './start.ts';

let config: BotProcessConfig;
try {
  config = loadBotProcessConfig();
} catch (err) {
  console.error(`bot: ${(err as Error).message}`);
  process.exit(2);
}
// Human lines at a terminal, JSON otherwise, as the gateway's (LOG_FORMAT).
const log = createLogger(config.logLevel, undefined, config.logFormat);
// Its secrets never reach a log line (a Bot API error may quote the URL, which holds the token).
setSecrets('instance', [config.bot.token, config.bot.webhook?.secret, config.adminToken]);
try {
  const running = await startBot({
    config: config.bot,
    transport: networkTransport(config.gateway.rpcUrl, config.adminToken),
    log,
  });
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
