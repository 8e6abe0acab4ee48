// The Telegram bot's settings, read from the environment once. Kept apart from the gateway's
// own Config: the bot runs inside the gateway (when TELEGRAM_BOT_TOKEN is set) or alone.
import { usdToNano } from '../billing/money.ts';
import { findGateway } from '../cli/gateway-address.ts';

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
  /** Billing RPC when the bot runs alone (`npm run bot`): found as the CLI finds it. */
  rpcUrl: string;
  adminToken: string | undefined;
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
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

/** The bot's configuration, or undefined when TELEGRAM_BOT_TOKEN is not set (no bot). */
export function loadBotConfig(env: NodeJS.ProcessEnv = process.env, defaults: { publicBaseUrl?: string } = {}): BotConfig | undefined {
  const token = nonEmpty(env.TELEGRAM_BOT_TOKEN);
  if (!token) return undefined;
  const nanoPerStar = usd(env, 'TELEGRAM_STAR_USD', '0.01');
  if (nanoPerStar <= 0n) throw new Error('TELEGRAM_STAR_USD must be above zero');
  const minStars = wholeNumber(env, 'TELEGRAM_TOPUP_MIN_STARS', 50);
  const maxStars = wholeNumber(env, 'TELEGRAM_TOPUP_MAX_STARS', 10_000);
  if (minStars < 1 || maxStars < minStars) throw new Error('need 1 <= TELEGRAM_TOPUP_MIN_STARS <= TELEGRAM_TOPUP_MAX_STARS');
  const webhookUrl = nonEmpty(env.TELEGRAM_WEBHOOK_URL);
  const webhookSecret = nonEmpty(env.TELEGRAM_WEBHOOK_SECRET);
  // Without the secret anyone who finds the URL could post a made-up successful_payment.
  if (webhookUrl && !webhookSecret) throw new Error('TELEGRAM_WEBHOOK_URL needs TELEGRAM_WEBHOOK_SECRET (Telegram sends it with every update)');
  if (webhookSecret && !/^[A-Za-z0-9_-]{1,256}$/.test(webhookSecret)) throw new Error('TELEGRAM_WEBHOOK_SECRET may use only A-Z, a-z, 0-9, _ and - (1 to 256 characters)');
  const adminIds = new Set(
    (nonEmpty(env.TELEGRAM_ADMIN_IDS) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => {
        if (!/^\d+$/.test(s)) throw new Error(`TELEGRAM_ADMIN_IDS must list numeric Telegram user ids, got ${JSON.stringify(s)}`);
        return Number(s);
      }),
  );
  return {
    token,
    apiRoot: (nonEmpty(env.TELEGRAM_API_ROOT) ?? 'https://api.telegram.org').replace(/\/+$/, ''),
    webhook: webhookUrl ? { url: webhookUrl, secret: webhookSecret!, host: nonEmpty(env.TELEGRAM_WEBHOOK_HOST) ?? '0.0.0.0', port: wholeNumber(env, 'TELEGRAM_WEBHOOK_PORT', 8443) } : undefined,
    nanoPerStar,
    minStars,
    maxStars,
    welcomeCreditNano: usd(env, 'TELEGRAM_WELCOME_CREDIT_USD', '0'),
    publicBaseUrl: (nonEmpty(env.PUBLIC_BASE_URL) ?? defaults.publicBaseUrl ?? `http://localhost:${nonEmpty(env.PORT) ?? '8080'}`).replace(/\/+$/, ''),
    adminIds,
    supportText: nonEmpty(env.TELEGRAM_SUPPORT_TEXT) ?? 'For questions about a payment or a refund, contact the operator of this gateway.',
    rpcUrl: findGateway(env).rpcUrl,
    adminToken: nonEmpty(env.ADMIN_TOKEN),
  };
}
