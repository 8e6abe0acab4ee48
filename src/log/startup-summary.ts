// What a started gateway tells the person who started it: where it listens and who may reach
// it, where its browser console is and who can sign in there, which database, billing mode,
// providers, Temporal and the bot. Computed once from the Config and the parts that started,
// logged as one record: JSON keeps the facts as fields (`summary`), a terminal gets the lines of
// summaryLines() (src/log/pretty.ts). Never a secret: tokens and keys only as "set / not set",
// URLs without user, password or query.
import path from 'node:path';
import type { Config } from '../config/config.ts';
import { addressFilePath } from '../config/gateway-address.ts';

/** Who can connect to a listening address. */
export type Scope = 'loopback' | 'all interfaces' | 'one address';

export interface Listener {
  /** What a client on this machine connects to. */
  url: string;
  host: string;
  port: number;
  scope: Scope;
}

export interface StartupSummary {
  http: Listener & { metricsToken: boolean };
  rpc: Listener & { adminToken: boolean };
  /** The browser console on the HTTP port; the operator signs in with ADMIN_TOKEN, so without one nobody does. */
  console: { url: string; operatorSignIn: boolean };
  /** embedded: the PostgreSQL server the gateway started, with its cluster in `dir`. */
  database: { kind: 'embedded'; dir: string } | { kind: 'postgresql'; server: string };
  billing: { mode: 'lease' | 'hold'; sliceUsd: string };
  providers: {
    name: string;
    /** Enabled models with a deployment on it (a model that lists none is deployed on its own provider). */
    models: number;
    /** Of those, the ones served on it here now (as ListProviders and the console count them). */
    served: number;
    key: boolean;
    /** The book says it needs no credential (`"auth": "none"`). */
    authNone: boolean;
    keyVariable: string;
    baseUrl?: string;
    fallback: boolean;
    /** Answered by the built-in demo provider (`npm start -- --demo`), not the provider itself. */
    demo?: true;
  }[];
  /** `npm start -- --demo`: the shipped providers are answered by the demo provider (src/demo/). */
  demo?: true;
  /** Where the key that seals provider credentials is (never the key); none: only credentials naming a variable work. */
  credentials: { key: string | 'none' };
  /**
   * Models on more than one deployment, or with a deployment the book lists that takes no traffic
   * here (docs/providers.md): every deployment's id, and those whose provider has no credential here.
   */
  deployments: { model: string; deployments: string[]; strategy: string; noCredential: string[] }[];
  /** At start Temporal is always still being found or started (in the background). */
  temporal:
    | { kind: 'cluster'; address: string; namespace: string; status: 'starting'; worker: boolean }
    | { kind: 'dev server'; address: string; uiUrl: string; status: 'starting'; worker: boolean };
  bot: { state: 'off' } | { state: 'failed' } | { state: 'on'; mode: 'polling' | 'webhook'; username: string };
  /** OpenTelemetry traces (docs/observability.md): where they go, how many, and what a caller's traceparent does. */
  traces:
    | { state: 'off' }
    | { state: 'on'; protocol: string; endpoint: string; sampler: string; callerContext: string; content: boolean };
  /** Where the operator CLI finds this gateway (written by `npm start`). */
  addressFile: string;
  /** The settings file read before the settings (./.env or --settings): the variables it set, and those the environment kept (names only). */
  envFile?: { path: string; set: number; kept: string[] };
}

export interface StartedParts {
  httpPort: number;
  rpcPort: number;
  /** Every model with its deployments, served here or not (catalogue/serving.ts servingSummary). */
  models: readonly {
    id: string;
    enabled: boolean;
    strategy: string;
    /** The book lists its deployments (else it is served on its own provider as one). */
    listsDeployments: boolean;
    deployments: readonly { id: string; provider: string; served: boolean; state?: string }[];
  }[];
  /** Every provider of the catalogue, with its credential here and its models (catalogue/serving.ts). */
  providers: readonly {
    id: string;
    baseUrl: string;
    credential: boolean;
    authNone: boolean;
    fromSetting: boolean;
    models: number;
    served: number;
  }[];
  /** Where the credentials key is ('CREDENTIALS_KEY' or its file), or undefined: none. */
  credentialsKey?: string;
  /** Credit leases run (BILLING_MODE=lease). */
  leasing: boolean;
  /** The embedded server's cluster folder (DATA_DIR/postgres, or where root keeps it); unset with DATABASE_URL. */
  embeddedDir?: string;
  /** TELEGRAM_BOT_TOKEN is set. */
  botConfigured: boolean;
  bot: { mode: 'polling' | 'webhook'; username: string } | undefined;
}

export function listenScope(host: string): Scope {
  if (host === '0.0.0.0' || host === '::' || host === '') return 'all interfaces';
  if (host === 'localhost' || host === '::1' || /^127\./.test(host)) return 'loopback';
  return 'one address';
}

/** http://host:port a client on this machine can use; all-interfaces binds are reached on loopback. */
export function connectableUrl(host: string, port: number): string {
  const shown = listenScope(host) === 'all interfaces' ? '127.0.0.1' : host;
  return `http://${shown.includes(':') ? `[${shown}]` : shown}:${port}`;
}

/** A URL fit to show: no user, password, query or fragment; undefined when it does not parse. */
export function withoutSecrets(raw: string): string | undefined {
  try {
    const u = new URL(raw);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return undefined;
  }
}

const DEFAULT_HOSTS: Record<string, string> = {
  openai: 'api.openai.com',
  anthropic: 'api.anthropic.com',
  xai: 'api.x.ai',
  deepseek: 'api.deepseek.com',
  cohere: 'api.cohere.com',
  bfl: 'api.bfl.ai',
};

export function startupSummary(config: Config, parts: StartedParts): StartupSummary {
  const states = new Map(parts.providers.map((p) => [p.id, p]));
  const providers: StartupSummary['providers'] = Object.values(config.providers).map((p) => {
    const baseUrl = withoutSecrets(p.baseUrl);
    const custom = baseUrl !== undefined && new URL(baseUrl).hostname !== DEFAULT_HOSTS[p.name];
    const state = states.get(p.name);
    if (config.demo)
      return {
        name: p.name,
        models: state?.models ?? 0,
        served: state?.served ?? 0,
        key: true,
        authNone: false,
        keyVariable: `${p.name.toUpperCase()}_API_KEY`,
        fallback: false,
        demo: true as const,
      };
    return {
      name: p.name,
      models: state?.models ?? 0,
      served: state?.served ?? 0,
      // The credential store's counts as much as the setting (it wins over it).
      key: state?.credential ?? p.apiKey !== undefined,
      authNone: state?.authNone ?? false,
      keyVariable: `${p.name.toUpperCase()}_API_KEY`,
      ...(custom ? { baseUrl } : {}),
      fallback: p.fallback !== undefined,
    };
  });
  for (const b of parts.providers) {
    if (Object.hasOwn(config.providers, b.id) || b.fromSetting) continue;
    providers.push({
      name: b.id,
      models: b.models,
      served: b.served,
      key: b.credential,
      authNone: b.authNone,
      keyVariable: `npm run cli -- providers set-credential ${b.id}`,
      ...(withoutSecrets(b.baseUrl) ? { baseUrl: withoutSecrets(b.baseUrl)! } : {}),
      fallback: false,
    });
  }
  let database: StartupSummary['database'] = {
    kind: 'embedded',
    dir: parts.embeddedDir ?? path.join(config.dataDir, 'postgres'),
  };
  if (config.databaseUrl) {
    const u = withoutSecrets(config.databaseUrl);
    database = { kind: 'postgresql', server: u ?? 'DATABASE_URL (not shown: it does not parse as a URL)' };
  }
  const v = config.video;
  const httpUrl = connectableUrl(config.host, parts.httpPort);
  return {
    http: {
      url: httpUrl,
      host: config.host,
      port: parts.httpPort,
      scope: listenScope(config.host),
      metricsToken: config.metricsToken !== undefined,
    },
    rpc: {
      url: connectableUrl(config.grpcHost, parts.rpcPort),
      host: config.grpcHost,
      port: parts.rpcPort,
      scope: listenScope(config.grpcHost),
      adminToken: config.adminToken !== undefined,
    },
    console: { url: `${httpUrl}/console`, operatorSignIn: config.adminToken !== undefined },
    database,
    billing: { mode: parts.leasing ? 'lease' : 'hold', sliceUsd: config.lease.sliceUsd },
    providers,
    credentials: { key: parts.credentialsKey ?? 'none' },
    deployments: deploymentsOf(parts.models),
    temporal: v.temporalAddress
      ? {
          kind: 'cluster',
          address: v.temporalAddress,
          namespace: v.temporalNamespace,
          status: 'starting',
          worker: v.runWorker,
        }
      : {
          kind: 'dev server',
          address: `127.0.0.1:${v.devServerPort}`,
          uiUrl: `http://127.0.0.1:${v.devServerUiPort}`,
          status: 'starting',
          worker: v.runWorker,
        },
    bot: parts.bot ? { state: 'on', ...parts.bot } : parts.botConfigured ? { state: 'failed' } : { state: 'off' },
    traces: tracesOf(config),
    addressFile: addressFilePath(config.dataDir),
    ...(config.demo ? { demo: true as const } : {}),
    ...(config.envFile
      ? { envFile: { path: config.envFile.path, set: config.envFile.set.length, kept: config.envFile.kept } }
      : {}),
  };
}

/**
 * The models on several deployments, and those with a listed deployment that takes no traffic
 * for want of a credential here; those first, so the five shown never hide one.
 */
function deploymentsOf(models: StartedParts['models']): StartupSummary['deployments'] {
  // A deployment the book disabled takes no traffic by the operator's word, not for want of a credential.
  const idle = (d: StartedParts['models'][number]['deployments'][number]) => !d.served && d.state !== 'disabled';
  const out = models
    .filter((m) => m.enabled && (m.deployments.length > 1 || (m.listsDeployments && m.deployments.some(idle))))
    .map((m) => ({
      model: m.id,
      deployments: m.deployments.map((d) => d.id),
      strategy: m.strategy,
      noCredential: m.deployments.filter(idle).map((d) => d.id),
    }));
  return [...out.filter((d) => d.noCredential.length > 0), ...out.filter((d) => d.noCredential.length === 0)];
}

function tracesOf(config: Config): StartupSummary['traces'] {
  const t = config.tracing;
  if (!t.enabled) return { state: 'off' };
  const env = config.environment;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || '';
  return {
    state: 'on',
    protocol: t.protocol,
    endpoint: withoutSecrets(endpoint) ?? 'OTEL_EXPORTER_OTLP_ENDPOINT (not shown: it does not parse as a URL)',
    sampler: 'ratio' in t.sampler ? `${t.sampler.kind} ${t.sampler.ratio}` : t.sampler.kind,
    callerContext: t.callerContext,
    content: t.content.capture,
  };
}

function reach(l: Listener): string {
  if (l.scope === 'loopback') return `this machine only (${l.host})`;
  if (l.scope === 'all interfaces') return `all interfaces (${l.host || '0.0.0.0'}): anyone who can reach this machine`;
  return `address ${l.host} only`;
}

/** The first rows: what `npm start` was started with (--demo, a settings file), when anything. */
function startedWithRows(s: StartupSummary): [string, string][] {
  const rows: [string, string][] = [];
  if (s.demo)
    rows.push([
      'demo',
      "every shipped model is answered by the built-in demo provider: made-up answers (your words repeated), billed at the price book's prices; for real ones start without --demo, with a provider key (OPENAI_API_KEY=sk-… npm start)",
    ]);
  const f = s.envFile;
  if (f) {
    const relative = path.relative(process.cwd(), f.path);
    const kept = f.kept.length > 0 ? `; ${f.kept.join(', ')} kept from the environment, which wins` : '';
    rows.push([
      'settings',
      `read from ${relative.startsWith('..') ? f.path : relative}: ${f.set} ${f.set === 1 ? 'variable' : 'variables'}${kept}`,
    ]);
  }
  return rows;
}

/** The summary as a title and short lines, for a person at a terminal. */
export function summaryLines(s: StartupSummary): string[] {
  const rows: [string, string][] = startedWithRows(s);
  // Without a token, /metrics and the Billing/Catalogue RPCs answer loopback callers only (src/config/exposure.ts).
  rows.push([
    'HTTP',
    `${s.http.url}/v1  ${reach(s.http)}; /metrics ${s.http.metricsToken ? 'needs METRICS_TOKEN' : 'for this machine only (set METRICS_TOKEN to serve it further)'}`,
  ]);
  const rpcGuard = s.rpc.adminToken
    ? 'Billing/Catalogue need ADMIN_TOKEN'
    : 'Billing/Catalogue for this machine only (no ADMIN_TOKEN)';
  rows.push(['RPC', `${s.rpc.url}  ${reach(s.rpc)}; ${rpcGuard}`]);
  // A newcomer's first sight of the console, and why the operator cannot sign in by default.
  rows.push([
    'console',
    `${s.console.url}  key holders sign in with their key; ${s.console.operatorSignIn ? 'the operator with ADMIN_TOKEN' : 'operator pages are off until ADMIN_TOKEN is set'}`,
  ]);
  rows.push([
    'database',
    s.database.kind === 'embedded'
      ? `embedded PostgreSQL server, data in ${s.database.dir} (set DATABASE_URL for your own)`
      : `PostgreSQL at ${s.database.server}`,
  ]);
  rows.push([
    'billing',
    s.billing.mode === 'lease'
      ? `credit leases of $${s.billing.sliceUsd} per key and instance`
      : 'a hold and a settlement per request',
  ]);
  rows.push(...providerRows(s.providers));
  rows.push([
    'credentials',
    s.credentials.key === 'none'
      ? 'provider credentials name variables only (set CREDENTIALS_KEY to seal them in the database)'
      : `provider credentials sealed in the database with ${s.credentials.key === 'CREDENTIALS_KEY' ? 'CREDENTIALS_KEY' : `the key in ${s.credentials.key}`}`,
  ]);
  rows.push(...deploymentRows(s.deployments));
  const t = s.temporal;
  const worker = t.worker ? '' : '; no video worker here (VIDEO_WORKER=0)';
  rows.push([
    'Temporal',
    t.kind === 'cluster'
      ? `connecting to ${t.address} (namespace ${t.namespace}) in the background${worker}`
      : `starting this folder's local dev server in the background on ${t.address}, web UI ${t.uiUrl} (free ports if those are taken; logged once it is up)${worker}`,
  ]);
  rows.push([
    'bot',
    s.bot.state === 'on'
      ? `on: @${s.bot.username} by ${s.bot.mode === 'polling' ? 'long polling' : 'webhook'}`
      : s.bot.state === 'failed'
        ? 'not started (see the error above)'
        : 'off (set TELEGRAM_BOT_TOKEN for the Telegram bot)',
  ]);
  rows.push([
    'traces',
    s.traces.state === 'off'
      ? 'off (set OTEL_EXPORTER_OTLP_ENDPOINT to export OpenTelemetry traces)'
      : `OTLP ${s.traces.protocol} to ${s.traces.endpoint}, sampler ${s.traces.sampler}; callers' traceparent: ${s.traces.callerContext}${s.traces.content ? '; prompts and answers captured' : ''}`,
  ]);
  const relative = path.relative(process.cwd(), s.addressFile);
  rows.push([
    'CLI',
    `npm run cli -- keys --help  (finds this gateway through ${relative.startsWith('..') ? s.addressFile : relative})`,
  ]);
  const width = Math.max(...rows.map(([label]) => label.length));
  const title = s.demo ? 'gateway ready (demo)' : 'gateway ready';
  return [title, ...rows.map(([label, text]) => `${label.padEnd(width)}  ${text}`)];
}

/** One row per provider: its models and what stands in the way of serving them. */
function providerRows(providers: StartupSummary['providers']): [string, string][] {
  const rows: [string, string][] = [];
  const nameWidth = Math.max(...providers.map((p) => p.name.length));
  const countWidth = Math.max(...providers.map((p) => String(p.models).length));
  providers.forEach((p, i) => {
    const facts = p.demo
      ? ['the demo provider']
      : [p.authNone ? 'no credential needed' : p.key ? 'key set' : `no key (set ${p.keyVariable})`];
    // Without a credential none are served, which "no key" says already.
    if (!p.demo && (p.key || p.authNone) && p.served !== p.models) facts.push(`${p.served} of them served here`);
    if (p.baseUrl) facts.push(`at ${p.baseUrl}`);
    if (p.fallback) facts.push('with a fallback');
    rows.push([
      i === 0 ? 'providers' : '',
      `${p.name.padEnd(nameWidth)} ${String(p.models).padStart(countWidth)} ${(p.models === 1 ? 'model' : 'models').padEnd(6)}  ${facts.join(', ')}`,
    ]);
  });
  return rows;
}

/** The models served by several deployments (five, then how many more), and those that take no traffic. */
function deploymentRows(deployments: StartupSummary['deployments']): [string, string][] {
  const rows: [string, string][] = [];
  for (const [i, d] of deployments.slice(0, 5).entries()) {
    const one = d.noCredential.length === 1;
    const idle =
      d.noCredential.length === 0
        ? ''
        : `; WARN ${d.noCredential.join(', ')} ${one ? 'takes' : 'take'} no traffic: ${one ? 'its' : 'their'} provider has no credential here`;
    rows.push([i === 0 ? 'deployments' : '', `${d.model} on ${d.deployments.join(', ')} (${d.strategy})${idle}`]);
  }
  const idleMore = deployments.slice(5).filter((d) => d.noCredential.length > 0).length;
  if (deployments.length > 5)
    rows.push([
      '',
      `and ${deployments.length - 5} more models on several deployments${idleMore > 0 ? ` (WARN ${idleMore} with deployments that have no credential here)` : ''}`,
    ]);
  return rows;
}
