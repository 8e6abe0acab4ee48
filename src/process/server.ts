// The composition root: wires the parts into one running gateway (database, catalogue, billing,
// metering and routes, services, the RPC port, the HTTP facade and the housekeeping sweeper),
// each started by a named step below. main.ts runs it; tests and tools can too.
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type http2 from 'node:http2';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { passwordOf, secretSettings, type Config } from '../config/config.ts';
import { setSecrets } from '../secrets/scrub.ts';
import { migrate, openDb, type Db } from '../db/db.ts';
import { startEmbeddedPostgres } from '../db/embedded-postgres.ts';
import { Ledger } from '../billing/ledger.ts';
import { RateLimiter } from '../billing/rate-limits.ts';
import { LeaseBook } from '../billing/leases.ts';
import { KeyCache } from '../billing/key-cache.ts';
import { KeyCheck } from '../billing/key-check.ts';
import { InFlightLimits } from '../billing/in-flight.ts';
import { describeExposure, exposureOf, unsafeExposure, UnsafeExposureError } from '../config/exposure.ts';
import { runningTracing, startTracing } from '../tracing/tracing.ts';
import { captureContent } from '../inference/upstream/attempt-spans.ts';
import { usdToNano } from '../money/money.ts';
import { Metrics } from '../log/metrics.ts';
import { RequestLines } from '../log/request-lines.ts';
import { connectableUrl, startupSummary } from '../log/startup-summary.ts';
import { billingService } from '../services/billing.ts';
import { Catalogue } from '../catalogue/catalogue.ts';
import { servingSummary } from '../catalogue/serving.ts';
import { PriceBook } from '../catalogue/price-book.ts';
import { serveBookInForce } from '../catalogue/book-refresh.ts';
import { CredentialStore, credentialKey } from '../catalogue/credentials.ts';
import { shippedBook } from '../catalogue/shipped-book.ts';
import { UsagePreview } from '../catalogue/usage-preview.ts';
import { catalogueService } from '../services/catalogue.ts';
import { ChatRoute } from '../inference/routes/chat.ts';
import { MessagesRoute } from '../inference/routes/messages.ts';
import { ResponsesRoute } from '../inference/routes/responses.ts';
import { ResponseOwners } from '../tenancy/response-owners.ts';
import { EmbeddingsRoute } from '../inference/routes/embeddings.ts';
import { ImagesRoute } from '../inference/routes/images.ts';
import { AudioRoute } from '../inference/routes/audio.ts';
import { Metering } from '../metering/metering.ts';
import { StreamRuns } from '../inference/streams/stream-run.ts';
import { UpstreamCalls } from '../inference/upstream/upstream-calls.ts';
import { DeploymentHealth } from '../inference/routing/deployment-health.ts';
import { Router } from '../inference/routing/router.ts';
import { DeploymentLimits } from '../inference/routing/deployment-limits.ts';
import { JobRouting } from '../inference/routing/job-routing.ts';
import { CooldownEnds } from '../inference/routing/cooldown-ends.ts';
import type { RouteDeps } from '../inference/deps.ts';
import { inferenceService, type InferenceRoutes } from '../services/inference.ts';
import { keyBudgets } from '../budgets/key-budgets.ts';
import { Upstream } from '../inference/upstream/upstream.ts';
import { startRpcServer } from '../rpc/server.ts';
import { directTransport } from '../rpc/direct-transport.ts';
import type { Services } from '../rpc/services.ts';
import { buildFacade } from '../facade/app.ts';
import { VideoRuntime } from '../video/runtime.ts';
import { videoService } from '../services/video.ts';
import { organisationService } from '../services/organisations.ts';
import { BudgetBook } from '../budgets/budget-book.ts';
import { BudgetAlerts } from '../budgets/alerts.ts';
import { startBotIfConfigured } from '../bot/start.ts';
import { ConsoleSessions } from '../billing/console-sessions.ts';
import { consoleApi } from '../console/api.ts';
import { registerConsolePages } from '../console/pages.ts';
import { DEMO_PROVIDERS, startDemoProvider } from '../demo/demo-provider.ts';

/** How long a console session lasts: 12 h from sign-in at most, 1 h without a request. */
const CONSOLE_SESSION_LIFETIMES = { absoluteMs: 12 * 3_600_000, idleMs: 3_600_000 };

export interface Gateway {
  httpUrl: string;
  rpcUrl: string;
  db: Db;
  ledger: Ledger;
  close(): Promise<void>;
}

/**
 * The gateway on DATABASE_URL, or else on the embedded PostgreSQL server it starts itself in
 * DATA_DIR/postgres (src/db/embedded-postgres.ts) and stops last when it closes. With --demo, the
 * demo provider first.
 */
export async function startGateway(config: Config, log: Logger): Promise<Gateway> {
  return config.demo ? withDemoProvider(config, log) : startServing(config, log);
}

/**
 * `npm start -- --demo`: the shipped providers answered by the built-in demo provider
 * (src/demo/), started before the gateway and stopped after it. Never on unless asked.
 */
async function withDemoProvider(config: Config, log: Logger): Promise<Gateway> {
  const ignored = DEMO_PROVIDERS.filter((p) => config.providers[p].apiKey || config.providers[p].fallback);
  if (ignored.length > 0)
    log.warn(
      { providers: ignored },
      'demo: the keys and fallbacks set for these providers are not used; the demo provider answers for them',
    );
  const demo = await startDemoProvider();
  let gateway: Gateway;
  try {
    gateway = await startServing(demo.serving(config), log);
  } catch (err) {
    await demo.close();
    throw err;
  }
  return { ...gateway, close: () => gateway.close().finally(() => demo.close()) };
}

async function startServing(config: Config, log: Logger): Promise<Gateway> {
  // Before anything listens (the embedded database included): an open billing port without a
  // token is refused outright.
  const unsafe = unsafeExposure(config);
  if (unsafe) throw new UnsafeExposureError(unsafe);
  // Before anything that makes spans (off unless an OTLP endpoint is set: docs/observability.md).
  startTracing(config.tracing, 'gateway');
  if (config.databaseUrl) return startOn(config, log, config.databaseUrl);
  if (fs.existsSync(path.join(config.dataDir, 'pglite'))) {
    log.warn(
      `${path.join(config.dataDir, 'pglite')} holds a database of an older version (PGlite), which is no longer read: the embedded database is now a PostgreSQL server in ${path.join(config.dataDir, 'postgres')}`,
    );
  }
  const embedded = await startEmbeddedPostgres({
    dataDir: path.join(config.dataDir, 'postgres'),
    durable: true,
    database: 'gateway',
    log: { info: (m) => log.info(m), warn: (m) => log.warn(m) },
  });
  let gateway: Gateway;
  try {
    gateway = await startOn(config, log, embedded.url, embedded.dataDir);
  } catch (err) {
    await embedded.stop();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return { ...gateway, close: () => (closing ??= gateway.close().finally(() => embedded.stop())) };
}

/** Provider credentials, sealed in the database under CREDENTIALS_KEY or (embedded) a key file in DATA_DIR. */
function credentialStore(config: Config, db: Db, embeddedDir: string | undefined) {
  const key = credentialKey({
    ...(config.credentialsKey ? { configured: config.credentialsKey } : {}),
    dataDir: config.dataDir,
    embedded: embeddedDir !== undefined,
  });
  return { store: new CredentialStore(db, key, config.environment), key };
}

/** InferenceService over each route family's route. */
function inferenceRoutes(
  config: Config,
  routeDeps: RouteDeps,
  owners: ResponseOwners,
  keyBudgets: InferenceRoutes['keyBudgets'] & {},
) {
  return inferenceService({
    keyBudgets,
    chat: new ChatRoute(routeDeps),
    messages: new MessagesRoute(routeDeps),
    responses: new ResponsesRoute(routeDeps, owners),
    embeddings: new EmbeddingsRoute(routeDeps),
    images: new ImagesRoute(routeDeps, config.media),
    audio: new AudioRoute(routeDeps),
  });
}

/** The gateway's parts on one database, started in order; `close` stops them in the reverse. */
async function startOn(config: Config, log: Logger, databaseUrl: string, embeddedDir?: string): Promise<Gateway> {
  const db = await openDatabase(databaseUrl, embeddedDir, log);
  const keyHashSecret = await Ledger.loadSecret(db, config.keyHashSecret);
  const ledger = new Ledger(db, keyHashSecret);
  // Every provider, configured or not, is listed once in the start-up summary below.
  const catalogue = new Catalogue(config);
  // What is served and charged comes from the price book: the shipped book is only each model's
  // and alias's first version, written on the first start that finds none.
  const priceBook = new PriceBook(db);
  await priceBook.seed(shippedBook());
  const { store: credentials, key: credentialsKey } = credentialStore(config, db, embeddedDir);
  // This instance's own secrets, wherever they came from, are scrubbed from provider text (the catalogue adds the providers').
  setSecrets('instance', [
    ...secretSettings(config),
    keyHashSecret,
    credentialsKey?.key.toString('base64'),
    passwordOf(databaseUrl),
  ]);
  const stopBookRefresh = await serveBookInForce(catalogue, priceBook, config.priceBookRefreshMs, log, credentials);
  const metrics = new Metrics();
  const billing = await startBilling(config, { db, ledger, databaseUrl, metrics, log });
  const upstream = new Upstream(config);
  // Deployments' rpm / tpm, shared by every instance on the database.
  const deploymentLimits = new DeploymentLimits(db);
  deploymentLimits.startSweeping();
  const { metering, streams, routeDeps } = inferenceParts(config, {
    ledger,
    catalogue,
    upstream,
    metrics,
    billing,
    log,
    deploymentLimits,
  });
  const owners = new ResponseOwners(db);
  const video = videoRuntime(config, { log, db, ledger, metrics, catalogue, health: routeDeps.calls.health });
  // A cooldown ended by hand reaches every instance's health (NOTIFY).
  const cooldowns = new CooldownEnds(db, routeDeps.calls.health, log);
  await cooldowns.listen(databaseUrl);
  const services: Services = {
    billing: billingService(ledger, billing.limiter, billing.keys, billing.leases),
    catalogue: catalogueService(catalogue, priceBook, new UsagePreview(db), {
      credentials,
      deploymentLimits,
      cooldowns,
      ...routeDeps,
    }),
    inference: inferenceRoutes(config, routeDeps, owners, (c) => keyBudgets(db, billing.budgets, c, Date.now())),
    video: videoService({ config, ledger, catalogue, metering, runtime: video, log }),
    organisations: organisationService({
      db,
      ledger,
      keys: billing.keys,
      limiter: billing.limiter,
      budgetsChanged: (accountId) => billing.budgets.forget(accountId),
      alertWebhooksAllowPrivate: config.alerts.allowPrivate,
    }),
  };
  const rpc = await startRpc(config, services, billing.keys, log);
  // The browser console (docs/console.md): its API and pages on the HTTP port, its sessions in the database.
  const consoleSessions = new ConsoleSessions(db, CONSOLE_SESSION_LIFETIMES);
  const facade = await startHttp(config, {
    services,
    catalogue,
    billing,
    db,
    video,
    consoleSessions,
    metrics,
    log,
  });
  const stopSweeper = startSweepers(config, log, { ledger, limiter: billing.limiter, owners, consoleSessions });
  const { httpUrl, rpcUrl, bot } = await announce(config, {
    facade,
    rpc: rpc.server,
    services,
    catalogue,
    video,
    embeddedDir,
    credentialsKey: credentialsKey?.where,
    log,
  });
  return {
    httpUrl,
    rpcUrl,
    db,
    ledger,
    close: closeOnce(async () => {
      stopSweeper();
      stopBookRefresh();
      deploymentLimits.stop();
      await bot?.stop();
      await stopListening(config, facade, rpc);
      // Every hold this process placed is settled before the database goes.
      // Streams read on for a caller who left get most of this wait to see their usage.
      streams.cutAbandoned(8_000);
      const unsettled = await metering.drain(10_000);
      if (unsettled > 0) log.error({ unsettled }, 'shutting down with unsettled holds; the sweeper will release them');
      await billing.leases?.close(); // pending charges written, leases returned
      await billing.limiter.close(); // settled tokens written, unused rate grants handed back
      await billing.inFlight.close(); // this instance's in-flight slots back to their bounds
      await upstream.close();
      await billing.keyCache?.close();
      await billing.budgets.stop();
      await billing.alerts.stop();
      await cooldowns.stop();
      await video.close(); // the worker finishes its running activities, which need the database
      await db.destroy();
      await runningTracing()?.shutdown(); // the last spans exported (bounded by the export timeout)
    }),
  };
}

/** The periodic sweeps of every instance; each is safe with many instances. */
function startSweepers(
  config: Config,
  log: Logger,
  p: { ledger: Ledger; limiter: RateLimiter; owners: ResponseOwners; consoleSessions: ConsoleSessions },
): () => void {
  return startSweeper(config.holds.sweepIntervalMs, log, [
    // Holds of a crashed process are released here (see Ledger.expireHolds).
    [
      'hold sweep',
      () =>
        p.ledger.expireHolds().then(
          (n) => {
            if (n > 0) log.warn({ released: n }, 'released expired holds');
          },
          (err) => log.error({ err }, 'hold sweep failed'),
        ),
    ],
    ['rate window prune', () => p.limiter.prune()],
    ['response owner prune', () => p.owners.prune()],
    ['console session prune', () => p.consoleSessions.prune()],
  ]);
}

/**
 * Video jobs run on Temporal, found or started in the background (src/video/runtime.ts); their
 * creates go over the models' deployments, judged by the same health as the routes' requests.
 */
function videoRuntime(
  config: Config,
  p: { log: Logger; db: Db; ledger: Ledger; metrics: Metrics; catalogue: Catalogue; health: DeploymentHealth },
): VideoRuntime {
  const routing = new JobRouting(new Router(p.health), p.health, p.metrics);
  return new VideoRuntime({ config, ...p, routing });
}

/** `close` made once: later calls wait for the same closing. */
function closeOnce(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= close());
}

async function openDatabase(databaseUrl: string, embeddedDir: string | undefined, log: Logger): Promise<Db> {
  const db = await openDb({ databaseUrl });
  await migrate(db);
  log.info(
    { database: embeddedDir ? `embedded PostgreSQL in ${embeddedDir}` : 'postgresql (DATABASE_URL)' },
    'database ready',
  );
  return db;
}

interface BillingParts {
  keyCache: KeyCache | undefined;
  limiter: RateLimiter;
  inFlight: InFlightLimits;
  leases: LeaseBook | undefined;
  keys: KeyCheck;
  /** Which budgets each request is under (docs/budgets.md), heard changed on every instance. */
  budgets: BudgetBook;
  /** Budget alerts fired after charges, and their webhook deliveries. */
  alerts: BudgetAlerts;
  /** What each settle tells the facade's request line (the deployment, the attempts, the money). */
  requestLines: RequestLines;
}

/** The key check, rate limits and (in lease mode) credit leases with the key cache they need. */
async function startBilling(
  config: Config,
  p: { db: Db; ledger: Ledger; databaseUrl: string; metrics: Metrics; log: Logger },
): Promise<BillingParts> {
  const leasing = config.billingMode === 'lease';
  // The key cache listens for key changes on a connection of its own; with leases only (a hold
  // per request checks the key in its own statement anyway).
  const keyCache =
    leasing && config.keyCacheMaxAgeMs > 0
      ? new KeyCache({
          databaseUrl: p.databaseUrl,
          maxAgeMs: config.keyCacheMaxAgeMs,
          log: p.log,
          lookups: p.metrics.keyCacheLookupsOf,
        })
      : undefined;
  await keyCache?.start();
  const limiter = new RateLimiter(p.db, config.rateLimits, keyCache, p.log);
  // Requests in flight per key and per account, shared by every instance on the database.
  const inFlight = new InFlightLimits(p.db, { idleMs: config.rateLimits.grantIdleMs, log: p.log });
  inFlight.start();
  const leases = leasing
    ? new LeaseBook(
        p.db,
        p.ledger,
        {
          sliceNano: usdToNano(config.lease.sliceUsd),
          flushMs: config.lease.flushMs,
          idleMs: config.lease.idleMs,
          ttlSeconds: config.holds.ttlSeconds,
        },
        p.log,
      )
    : undefined;
  await leases?.listen(p.databaseUrl);
  const budgets = new BudgetBook(p.db, p.log);
  await budgets.listen(p.databaseUrl);
  const alerts = new BudgetAlerts(p.db, {
    ...config.alerts,
    ...(config.bot ? { telegram: { token: config.bot.token, apiRoot: config.bot.apiRoot } } : {}),
    fired: (a) => p.metrics.budgetAlerts.of(a.scope, String(a.threshold)).inc(),
    log: p.log,
  });
  alerts.start();
  if (leases)
    leases.windowsCharged = (windows) =>
      void alerts.check(windows).catch((err) => p.log.warn({ err }, 'checking budget alerts failed'));
  const requestLines = new RequestLines();
  return {
    keyCache,
    limiter,
    inFlight,
    leases,
    keys: new KeyCheck(p.ledger, keyCache),
    budgets,
    alerts,
    requestLines,
  };
}

/** The inference routes' parts: metering (holds and settles), upstream calls, stream runs. */
function inferenceParts(
  config: Config,
  p: {
    ledger: Ledger;
    catalogue: Catalogue;
    upstream: Upstream;
    metrics: Metrics;
    billing: BillingParts;
    log: Logger;
    deploymentLimits: DeploymentLimits;
  },
): { metering: Metering; streams: StreamRuns; routeDeps: RouteDeps } {
  const { billing, log } = p;
  const metering = new Metering({
    holds: config.holds,
    ledger: p.ledger,
    limiter: billing.limiter,
    keys: billing.keys,
    metrics: p.metrics,
    log,
    ...(billing.leases ? { leases: billing.leases } : {}),
    inFlight: billing.inFlight,
    maxInFlightPerAccount: config.maxInFlightPerAccount,
    budgets: billing.budgets,
    alerts: billing.alerts,
    requestLines: billing.requestLines,
    deploymentSettled: ({ window, slot, account, usedTokens }) => {
      if (window)
        p.deploymentLimits
          .settle(window, usedTokens)
          .catch((err) => log.warn({ err, deployment: window.deployment }, 'setting a deployment window right failed'));
      if (slot)
        p.deploymentLimits
          .release(slot, account)
          .catch((err) => log.warn({ err, deployment: slot }, 'giving back a deployment slot failed'));
    },
  });
  const streams = new StreamRuns({
    settle: (plan, usage, status, httpStatus) => metering.settle(plan, usage, status, httpStatus),
    log,
    abandonedDrainMs: config.upstream.abandonedDrainMs,
  });
  const health = new DeploymentHealth(config.routing);
  health.onCooldown = (key, until, reason, account) => {
    const fields = { deployment: key, reason, until: new Date(until).toISOString() };
    if (account === undefined) {
      p.metrics.deploymentCooldowns.of(key).inc();
      log.warn(fields, 'deployment cooling down');
    } else {
      p.metrics.deploymentAccountCooldowns.of(key).inc();
      log.warn({ ...fields, accountId: account }, 'deployment cooling down for one account');
    }
  };
  const calls = new UpstreamCalls({
    upstream: p.upstream,
    config: config.upstream,
    metrics: p.metrics,
    log,
    catalogue: p.catalogue,
    router: new Router(health),
    health,
    limits: p.deploymentLimits,
    upstreamTraceparent: config.tracing.upstreamTraceparent,
  });
  if (config.tracing.enabled && config.tracing.content.capture) captureContent(config.tracing.content.maxBytes);
  const routeDeps: RouteDeps = {
    metering,
    calls,
    streams,
    upstream: p.upstream,
    catalogue: p.catalogue,
    sharedProviderObjects: config.sharedProviderObjects,
    log,
  };
  return { metering, streams, routeDeps };
}

interface RpcPort {
  server: http2.Http2Server;
  sessions: Set<http2.ServerHttp2Session>;
}

async function startRpc(config: Config, services: Services, keys: KeyCheck, log: Logger): Promise<RpcPort> {
  const server = await startRpcServer(services, {
    host: config.grpcHost,
    port: config.grpcPort,
    adminToken: config.adminToken,
    log,
    // One message carries a whole request: the largest JSON body or multipart upload, and its framing.
    readMaxBytes: Math.max(config.bodyLimitBytes, config.media.uploadTotalLimitBytes) + 64 * 1024,
    authenticate: (apiKey) => keys.authenticate(apiKey),
    traceCallerContext: config.tracing.callerContext,
    traceResponseHeader: config.tracing.responseHeader,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  return { server, sessions };
}

/** The HTTP port: the facade, with the console's API and pages on it. */
async function startHttp(
  config: Config,
  p: {
    services: Services;
    catalogue: Catalogue;
    billing: BillingParts;
    db: Db;
    video: VideoRuntime;
    consoleSessions: ConsoleSessions;
    metrics: Metrics;
    log: Logger;
  },
): Promise<FastifyInstance> {
  const { log } = p;
  const { keys, requestLines } = p.billing;
  const facade = buildFacade({
    transport: directTransport(p.services, log),
    log,
    bodyLimitBytes: config.bodyLimitBytes,
    uploads: config.media,
    metrics: p.metrics,
    metricsToken: config.metricsToken,
    servedModel: (name) => p.catalogue.get(name)?.id,
    ...(config.demo ? { demoProviders: new Set<string>(DEMO_PROVIDERS) } : {}),
    deploymentHeader: config.routing.deploymentHeader,
    streamStallMs: config.streamStallMs,
    traceCallerContext: config.tracing.callerContext,
    traceResponseHeader: config.tracing.responseHeader,
    requestLines,
    knownCaller: (apiKey) => keys.known(apiKey),
    authenticate: (apiKey) => keys.authenticate(apiKey),
    ready: async () => {
      await p.db.raw('SELECT 1');
    },
    plugins: [
      consoleApi({
        transport: directTransport(p.services, log),
        sessions: p.consoleSessions,
        authenticate: (apiKey) => keys.authenticate(apiKey),
        adminToken: config.adminToken,
        workflowPage: (workflowId) => p.video.workflowPage(workflowId),
        traceUiUrl: config.tracing.uiUrl,
        log,
      }),
      async (app) => registerConsolePages(app, { log, demo: config.demo }),
    ],
  });
  await facade.listen({ host: config.host, port: config.port });
  return facade;
}

/** Runs each housekeeping task every `everyMs`, a failure logged under its name; the answer stops them. */
function startSweeper(everyMs: number, log: Logger, tasks: [string, () => Promise<unknown>][]): () => void {
  const timer = setInterval(() => {
    for (const [name, task] of tasks) task().catch((err) => log.warn({ err }, `${name} failed`));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Where the gateway answers, said once it does: exposure, video, the bot, the start-up summary. */
async function announce(
  config: Config,
  p: {
    facade: FastifyInstance;
    rpc: http2.Http2Server;
    services: Services;
    catalogue: Catalogue;
    video: VideoRuntime;
    embeddedDir: string | undefined;
    credentialsKey: string | undefined;
    log: Logger;
  },
) {
  const { log } = p;
  const httpPort = (p.facade.server.address() as AddressInfo).port;
  const rpcPort = (p.rpc.address() as AddressInfo).port;
  const httpUrl = connectableUrl(config.host, httpPort);
  const rpcUrl = connectableUrl(config.grpcHost, rpcPort);
  const exposure = exposureOf(config, { http: httpPort, rpc: rpcPort });
  log.info({ exposure }, `exposed: ${describeExposure(exposure)}`);
  p.video.start();
  // The Telegram bot, when TELEGRAM_BOT_TOKEN is set, on the same services (see src/bot/).
  const bot = await startBotIfConfigured({
    settings: config.bot,
    transport: directTransport(p.services),
    publicBaseUrl: httpUrl,
    log,
  });
  const summary = startupSummary(config, {
    httpPort,
    rpcPort,
    ...servingSummary(p.catalogue),
    ...(p.credentialsKey ? { credentialsKey: p.credentialsKey } : {}),
    leasing: config.billingMode === 'lease',
    embeddedDir: p.embeddedDir,
    botConfigured: config.bot !== undefined,
    bot: bot && { mode: bot.mode, username: bot.bot.botInfo.username },
  });
  if (config.sharedProviderObjects.size > 0) {
    log.warn(
      { shared: [...config.sharedProviderObjects] },
      "SHARED_PROVIDER_OBJECTS: every API key may use these kinds of objects in the operator's provider accounts",
    );
  }
  log.info(
    { http: httpUrl, rpc: rpcUrl, summary },
    `gateway ready${config.demo ? ' (demo provider: made-up answers, real charges)' : ''}: OpenAI-compatible base URL ${httpUrl}/v1; Connect/gRPC services on ${rpcUrl}`,
  );
  return { httpUrl, rpcUrl, bot };
}

/**
 * Stops accepting; in-flight requests and streams run on for the grace period, then their
 * connections are cut (a cut stream is charged for what it delivered, as always).
 */
async function stopListening(config: Config, facade: FastifyInstance, rpc: RpcPort): Promise<void> {
  const cut = setTimeout(() => {
    facade.server.closeAllConnections();
    for (const session of rpc.sessions) session.destroy();
  }, config.shutdownGraceMs);
  for (const session of rpc.sessions) session.close(); // GOAWAY: open RPC streams finish
  await Promise.all([facade.close(), new Promise<void>((resolve) => rpc.server.close(() => resolve()))]);
  clearTimeout(cut);
}
