// Runs the bot: long polling by default, a webhook server when TELEGRAM_WEBHOOK_URL is set.
// Long polling allows one poller per bot token, so with several gateway instances use the
// webhook (any instance can take any update) or run `npm run bot` once.
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { Interceptor, Transport } from '@connectrpc/connect';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { webhookCallback, type Bot } from 'grammy';
import type { Logger } from 'pino';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { telegramUserHeader } from './acting.ts';
import { createBot } from './bot.ts';
import { COMMANDS } from './commands.ts';
import type { BotContext } from './context.ts';
import { botConfigOf, type BotConfig, type BotSettings } from '../config/bot-config.ts';

export interface RunningBot {
  bot: Bot<BotContext>;
  mode: 'polling' | 'webhook';
  stop(): Promise<void>;
}

/** Far above any update Telegram sends (a message is at most 4096 characters plus its metadata). */
const MAX_UPDATE_BYTES = 1024 * 1024;

/** Answers without reading the body, and closes the connection so none is read. */
function refuse(req: http.IncomingMessage, res: http.ServerResponse, status: number): void {
  res.writeHead(status, { connection: 'close' }).end();
  req.socket.destroySoon();
}

// Only what the bot handles; Telegram keeps this list between calls.
const ALLOWED_UPDATES = ['message', 'callback_query', 'pre_checkout_query'] as const;

/**
 * The services over the network, as the operator CLI reaches them; OrganisationService calls
 * name the Telegram user they are made for (acting.ts).
 */
export function networkTransport(rpcUrl: string, adminToken: string | undefined): Transport {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set('authorization', `Bearer ${adminToken}`);
    return next(req);
  };
  return createGrpcTransport({
    baseUrl: rpcUrl,
    interceptors: adminToken ? [bearer, telegramUserHeader] : [telegramUserHeader],
  });
}

export async function startBot(opts: {
  config: BotConfig;
  transport: Transport;
  log: Logger;
  historyPageSize?: number;
}): Promise<RunningBot> {
  const { config, log } = opts;
  const bot = createBot({
    config,
    billing: createClient(BillingService, opts.transport),
    catalogue: createClient(CatalogueService, opts.transport),
    organisations: createClient(OrganisationService, opts.transport),
    log,
    ...(opts.historyPageSize ? { historyPageSize: opts.historyPageSize } : {}),
  });
  await bot.init(); // getMe: a wrong token fails here, loudly
  await bot.api.setMyCommands(COMMANDS).catch((err) => log.warn({ err }, 'telegram: setMyCommands failed'));
  return config.webhook ? serveWebhook(bot, config.webhook, log) : startPolling(bot, log);
}

type Webhook = NonNullable<BotConfig['webhook']>;

/** A server that takes Telegram's updates at the webhook URL's path, and the webhook set to it. */
async function serveWebhook(bot: Bot<BotContext>, wh: Webhook, log: Logger): Promise<RunningBot> {
  const path = new URL(wh.url).pathname;
  const handle = webhookCallback(bot, 'http', { secretToken: wh.secret });
  const secret = Buffer.from(wh.secret);
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || new URL(req.url ?? '/', 'http://x').pathname !== path) {
      res.statusCode = 404;
      return void res.end();
    }
    // Nothing is read from a sender without the secret, nor more than an update can be: the
    // secret is compared in constant time and the declared size checked before the body.
    const given = Buffer.from(String(req.headers['x-telegram-bot-api-secret-token'] ?? ''));
    if (given.length !== secret.length || !timingSafeEqual(given, secret)) return refuse(req, res, 401);
    const declared = Number(req.headers['content-length']);
    if (!Number.isSafeInteger(declared)) return refuse(req, res, 411);
    if (declared > MAX_UPDATE_BYTES) return refuse(req, res, 413);
    handle(req, res).catch((err: unknown) => {
      log.error({ err }, 'telegram webhook update failed');
      if (!res.headersSent) res.statusCode = 500; // Telegram delivers it again
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(wh.port, wh.host, () => resolve()));
  await bot.api.setWebhook(wh.url, { secret_token: wh.secret, allowed_updates: [...ALLOWED_UPDATES] });
  log.info({ bot: bot.botInfo.username, url: wh.url, port: wh.port }, 'telegram bot running by webhook');
  return {
    bot,
    mode: 'webhook',
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

function startPolling(bot: Bot<BotContext>, log: Logger): RunningBot {
  const polling = bot
    .start({ allowed_updates: [...ALLOWED_UPDATES] })
    .catch((err: unknown) => log.error({ err }, 'telegram long polling stopped'));
  log.info({ bot: bot.botInfo.username }, 'telegram bot running by long polling');
  return {
    bot,
    mode: 'polling',
    stop: async () => {
      if (bot.isRunning())
        await bot.stop().catch((err: unknown) => log.warn({ err }, 'telegram: confirming the last update failed'));
      await polling;
    },
  };
}

/**
 * For the gateway: starts the bot when TELEGRAM_BOT_TOKEN is set (`settings`, read with the
 * gateway's configuration), on the gateway's own services; users are shown `publicBaseUrl`
 * unless PUBLIC_BASE_URL says otherwise. A bot that cannot start (Telegram refuses the token, or
 * cannot be reached) is logged and the gateway serves on without it.
 */
export async function startBotIfConfigured(opts: {
  settings: BotSettings | undefined;
  transport: Transport;
  publicBaseUrl: string;
  log: Logger;
}): Promise<RunningBot | undefined> {
  if (!opts.settings) return undefined;
  try {
    return await startBot({
      config: botConfigOf(opts.settings, opts.publicBaseUrl),
      transport: opts.transport,
      log: opts.log,
    });
  } catch (err) {
    opts.log.error({ err }, 'telegram bot not started');
    return undefined;
  }
}
