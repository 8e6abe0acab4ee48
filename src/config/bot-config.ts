// The Telegram bot's settings, read from the environment once. The bot runs inside the gateway
// (when TELEGRAM_BOT_TOKEN is set: loadConfig reads these settings with the gateway's own) or
// alone (`npm run bot`: loadBotProcessConfig, with what it needs to reach the gateway).
import { usdToNano } from '../money/money.ts';
import { logFormat, logLevel, nonEmpty } from './env.ts';
import { findGateway, type FoundGateway } from './gateway-address.ts';

export interface BotConfig {
  token: string;
  /** Bot API server; a local fake in tests, a self-hosted Bot API server in some setups. */
  apiRoot: string;
  /** Set: Telegram posts updates to this URL (webhook mode). Unset: long polling. */
  webhook: { url: string; secret: string; host: string; port: number } | undefined;
  /** Credit one Telegram Star buys, in nano-USD (from TELEGRAM_STAR_USD, a decimal string). */
  nanoPerStar: bigint;
  minStars: number;
  maxStars: number;
  /** Credit of a user's first key, once per Telegram user; 0 for none. */
  welcomeCreditNano: bigint;
  /** Where users point their SDKs, shown by /start. */
  publicBaseUrl: string;
  /** Telegram user ids allowed to /refund payments. */
  adminIds: Set<number>;
  /** What /paysupport answers. */
  supportText: string;
}

/** The bot's settings as the gateway reads them at start: PUBLIC_BASE_URL unset is the gateway's own URL, known once it listens. */
export type BotSettings = Omit<BotConfig, 'publicBaseUrl'> & { publicBaseUrl: string | undefined };

/** `npm run bot`: the bot alone, calling the gateway's BillingService over the network as the operator CLI does. */
export interface BotProcessConfig {
  bot: BotConfig;
  /** Found as the CLI finds it (gateway-address.ts). */
  gateway: FoundGateway;
  adminToken: string | undefined;
  logLevel: string;
  logFormat: 'auto' | 'json' | 'pretty';
}

function wholeNumber(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

function usd(env: NodeJS.ProcessEnv, name: string, fallback: string): bigint {
  const raw = nonEmpty(env[name]) ?? fallback;
  try {
    return usdToNano(raw);
  } catch {
    throw new Error(`${name} must be a dollar amount such as 0.01, got ${JSON.stringify(raw)}`);
  }
}

/** The bot's settings, or undefined when TELEGRAM_BOT_TOKEN is not set (no bot). */
export function loadBotSettings(env: NodeJS.ProcessEnv): BotSettings | undefined {
  const token = nonEmpty(env.TELEGRAM_BOT_TOKEN);
  if (!token) return undefined;
  const nanoPerStar = usd(env, 'TELEGRAM_STAR_USD', '0.01');
  if (nanoPerStar <= 0n) throw new Error('TELEGRAM_STAR_USD must be above zero');
  const minStars = wholeNumber(env, 'TELEGRAM_TOPUP_MIN_STARS', 50);
  const maxStars = wholeNumber(env, 'TELEGRAM_TOPUP_MAX_STARS', 10_000);
  if (minStars < 1 || maxStars < minStars)
    throw new Error('need 1 <= TELEGRAM_TOPUP_MIN_STARS <= TELEGRAM_TOPUP_MAX_STARS');
  const webhookUrl = nonEmpty(env.TELEGRAM_WEBHOOK_URL);
  const webhookSecret = nonEmpty(env.TELEGRAM_WEBHOOK_SECRET);
  // Without the secret anyone who finds the URL could post a made-up successful_payment.
  if (webhookUrl && !webhookSecret)
    throw new Error('TELEGRAM_WEBHOOK_URL needs TELEGRAM_WEBHOOK_SECRET (Telegram sends it with every update)');
  if (webhookSecret && !/^[A-Za-z0-9_-]{1,256}$/.test(webhookSecret))
    throw new Error('TELEGRAM_WEBHOOK_SECRET may use only A-Z, a-z, 0-9, _ and - (1 to 256 characters)');
  const adminIds = new Set(
    (nonEmpty(env.TELEGRAM_ADMIN_IDS) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => {
        if (!/^\d+$/.test(s))
          throw new Error(`TELEGRAM_ADMIN_IDS must list numeric Telegram user ids, got ${JSON.stringify(s)}`);
        return Number(s);
      }),
  );
  return {
    token,
    apiRoot: (nonEmpty(env.TELEGRAM_API_ROOT) ?? 'https://api.telegram.org').replace(/\/+$/, ''),
    webhook: webhookUrl
      ? {
          url: webhookUrl,
          secret: webhookSecret!,
          host: nonEmpty(env.TELEGRAM_WEBHOOK_HOST) ?? '0.0.0.0',
          port: wholeNumber(env, 'TELEGRAM_WEBHOOK_PORT', 8443),
        }
      : undefined,
    nanoPerStar,
    minStars,
    maxStars,
    welcomeCreditNano: usd(env, 'TELEGRAM_WELCOME_CREDIT_USD', '0'),
    publicBaseUrl: nonEmpty(env.PUBLIC_BASE_URL)?.replace(/\/+$/, ''),
    adminIds,
    supportText:
      nonEmpty(env.TELEGRAM_SUPPORT_TEXT) ??
      'For questions about a payment or a refund, contact the operator of this gateway.',
  };
}

/** The settings with PUBLIC_BASE_URL's default filled in: the gateway's URL (the bot inside the gateway). */
export function botConfigOf(settings: BotSettings, gatewayUrl: string): BotConfig {
  return { ...settings, publicBaseUrl: (settings.publicBaseUrl ?? gatewayUrl).replace(/\/+$/, '') };
}

/** The bot's configuration when it runs alone, or undefined when TELEGRAM_BOT_TOKEN is not set (no bot); PUBLIC_BASE_URL defaults to the gateway's port on localhost. */
export function loadBotConfig(env: NodeJS.ProcessEnv = process.env): BotConfig | undefined {
  const settings = loadBotSettings(env);
  return settings && botConfigOf(settings, `http://localhost:${nonEmpty(env.PORT) ?? '8080'}`);
}

/** Everything `npm run bot` reads from its environment; a bot without TELEGRAM_BOT_TOKEN is a configuration error here. */
export function loadBotProcessConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): BotProcessConfig {
  const format = logFormat(env.LOG_FORMAT);
  const level = logLevel(env.LOG_LEVEL);
  const bot = loadBotConfig(env);
  if (!bot) throw new Error('TELEGRAM_BOT_TOKEN is not set');
  return {
    bot,
    gateway: findGateway(env, cwd),
    adminToken: nonEmpty(env.ADMIN_TOKEN),
    logLevel: level,
    logFormat: format,
  };
}
