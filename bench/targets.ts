// What is measured: each target (direct, the pass-throughs, this gateway on each database, Portkey,
// LiteLLM, the trace and deployment variants), how it starts, and its database.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../src/gen/gateway/v1/billing_pb.js';
import { OrganisationService } from '../src/gen/gateway/v1/organisations_pb.js';
import { CatalogueService } from '../src/gen/gateway/v1/catalogue_pb.js';
import { CredentialStore } from '../src/catalogue/credentials.ts';
import { openDb, type Db } from '../src/db/db.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded-postgres.ts';
import { createDatabase, startPostgres } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { BASELINE, LITELLM_MASTER_KEY, LOG_LEVEL, NICE, OPENING_NANO, ROOT, UPSTREAM_KEY, state } from './options.ts';
import { litellmBin, startChild, stopChild, treeOf, waitHttp } from './servers.ts';

export interface Running {
  url: string;
  headers: Record<string, string>;
  /** Processes whose CPU is the target's own. */
  pids: () => number[];
  /** The Node process to profile / trace, if the target is ours. */
  nodePid?: number;
  stop(): Promise<void>;
  /** Billing check after stop (gateway targets). */
  check?: () => Promise<string>;
  /**
   * Processes the target needs whose CPU is not the target's (the trace targets' OTLP sink):
   * counted apart, neither in the target's CPU per request nor in `others`.
   */
  sidePids?: () => number[];
  /** The trace targets: the gateway's span counts (/metrics) and what the sink received. */
  spans?: () => Promise<SpanCounts>;
  /** The database targets: their database's counters (pg_stat_database), read for --diagnose's window. */
  dbCounters?: () => Promise<DbCounters>;
}

/** What a database did, as pg_stat_database counts it (flushed by each backend about once a second). */
export interface DbCounters {
  commits: number;
  inserted: number;
  updated: number;
  deleted: number;
  read: number;
}

export interface SpanCounts {
  exported: number;
  droppedQueueFull: number;
  droppedExportFailed: number;
  /** gateway_requests_total (the /v1/ routes) summed over its labels: what spans per request are counted over. */
  requests: number;
  sinkPosts: number;
  sinkBytes: number;
}

export interface TargetDef {
  name: string;
  what: string;
  start(diag: Diagnose | undefined): Promise<Running>;
  /** Measured only when named in --targets. */
  optional?: boolean;
}
export interface Diagnose {
  profDir: string;
  probeFile: string;
}

/** A gateway target's database: its env, how to open it afterwards, and its server's processes when the gateway starts them (counted as the target's CPU). */
export interface TargetDatabase {
  env: Record<string, string>;
  open: () => Promise<Db>;
  /** A connection while the gateway runs, where open() would start a server of its own (the embedded one's). */
  connect?: () => Promise<Db>;
  stop: () => Promise<void>;
  pids?: () => number[];
}

/** What a gateway target adds to a plain gateway: settings, and a step once it is ready (before the bench key is made). */
export interface GatewayExtras {
  env?: Record<string, string>;
  setup?: (gateway: { rpcUrl: string; db: TargetDatabase }) => Promise<void>;
  /** The billing line also counts the usage rows by the deployment that served them. */
  byDeployment?: boolean;
  /** The checkout whose src/process/main.ts runs (--baseline); this one when unset. */
  cwd?: string;
  /** Makes the bench key (with OPENING_NANO on its account) instead of a plain CreateKey. */
  makeKey?: (rpcUrl: string) => Promise<{ apiKey: string; accountId: string }>;
}

export async function gatewayTarget(
  name: string,
  database: () => Promise<TargetDatabase>,
  diag: Diagnose | undefined,
  extras: GatewayExtras = {},
): Promise<Running> {
  const db = await database();
  const port = await freePort();
  const grpcPort = await freePort();
  const logFile = path.join(state.workDir, `${name}.log`);
  const probe = path.join(ROOT, 'bench/loop-probe.ts'); // this checkout's, whichever runs the gateway
  const nodeArgs = diag ? ['--cpu-prof', `--cpu-prof-dir=${diag.profDir}`, '--import', probe] : [];
  const { child } = await startChild(process.execPath, [...nodeArgs, 'src/process/main.ts'], {
    ...(extras.cwd ? { cwd: extras.cwd } : {}),
    logFile,
    env: {
      ...db.env,
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${state.simUrl}/v1`,
      // Rate limits off; billing as `npm start` bills (BILLING_MODE unset); logs at LOG_LEVEL to a file.
      RATE_LIMIT_RPM: '0',
      RATE_LIMIT_TPM: '0',
      BILLING_MODE: '',
      LOG_LEVEL,
      TEMPORAL_CLI: '/nonexistent',
      VIDEO_WORKER: '0',
      ...(diag ? { LOOP_PROBE_FILE: diag.probeFile } : {}),
      ...extras.env,
    },
  });
  await waitHttp(`http://127.0.0.1:${port}/readyz`, 120, (s) => s === 200);
  await extras.setup?.({ rpcUrl: `http://127.0.0.1:${grpcPort}`, db });
  // The database server's processes run at the measured processes' nice level too (later backends inherit it).
  if (NICE) for (const pid of db.pids?.() ?? []) spawnSync('renice', ['-n', String(NICE), '-p', String(pid)]);
  const rpcUrl = `http://127.0.0.1:${grpcPort}`;
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: rpcUrl }));
  const created = extras.makeKey
    ? await extras.makeKey(rpcUrl)
    : await billing.createKey({ creditsNano: OPENING_NANO, label: 'bench' });
  return {
    url: `http://127.0.0.1:${port}`,
    headers: { Authorization: `Bearer ${created.apiKey}` },
    pids: () => [child.pid!, ...(db.pids?.() ?? [])],
    nodePid: child.pid!,
    stop: () => stopChild(child),
    async dbCounters() {
      const d = await (db.connect ?? db.open)();
      try {
        const [r] = (
          (await d.raw(
            `SELECT xact_commit AS commits, tup_inserted AS inserted, tup_updated AS updated, tup_deleted AS deleted,
               tup_returned + tup_fetched AS read FROM pg_stat_database WHERE datname = current_database()`,
          )) as { rows: Record<keyof DbCounters, string>[] }
        ).rows;
        return {
          commits: Number(r!.commits),
          inserted: Number(r!.inserted),
          updated: Number(r!.updated),
          deleted: Number(r!.deleted),
          read: Number(r!.read),
        };
      } finally {
        await d.destroy();
      }
    },
    async check() {
      // After the gateway stopped: with credit leases, charges are written in batches and the
      // lease is returned at shutdown, so only now is everything in the database.
      const d = await db.open();
      try {
        const rows = (r: unknown) => (r as { rows: Record<string, string>[] }).rows;
        const [a] = rows(
          await d.raw(
            `SELECT a.balance_nano::text AS balance, a.held_nano::text AS held,
          (SELECT COALESCE(sum(cost_nano), 0) FROM usage_records u WHERE u.account_id = a.id)::text AS charged,
          (SELECT COALESCE(-sum(amount_nano), 0) FROM ledger l WHERE l.account_id = a.id AND l.kind = 'charge')::text AS ledger_charged,
          (SELECT count(*) FROM usage_records u WHERE u.account_id = a.id AND u.status = 'ok')::text AS ok,
          (SELECT count(*) FROM usage_records u WHERE u.account_id = a.id AND u.status NOT IN ('ok', 'lease_returned'))::text AS other,
          (SELECT count(*) FROM holds h WHERE h.account_id = a.id AND h.status = 'active')::text AS active_holds,
          (SELECT count(*) FROM holds h WHERE h.account_id = a.id AND starts_with(h.request_id, 'lease_'))::text AS leases,
          (SELECT count(*) FROM holds h WHERE h.account_id = a.id AND NOT starts_with(h.request_id, 'lease_'))::text AS own_holds
          FROM accounts a WHERE a.id = ?`,
            [created.accountId],
          ),
        );
        if (!a) return 'billing: account not found: NOT EXACT';
        const served = extras.byDeployment
          ? rows(
              await d.raw(
                `SELECT COALESCE(deployment, '-') AS deployment, count(*)::text AS n FROM usage_records
                 WHERE account_id = ? AND status <> 'lease_returned' GROUP BY 1 ORDER BY 1`,
                [created.accountId],
              ),
            )
          : [];
        const exact =
          BigInt(a.balance!) + BigInt(a.charged!) === OPENING_NANO &&
          a.held === '0' &&
          a.active_holds === '0' &&
          a.ledger_charged === a.charged;
        state.exactAll &&= exact;
        return (
          `billing: ${a.ok} requests charged ok (${a.other} other), ${a.charged} nano-USD in usage rows, ${a.ledger_charged} in ledger charges; ` +
          `balance ${a.balance} + charges = opening ${OPENING_NANO}: ${BigInt(a.balance!) + BigInt(a.charged!) === OPENING_NANO ? 'yes' : 'NO'}; held ${a.held}, active holds ${a.active_holds}; ` +
          `${a.leases} leases, ${a.own_holds} requests held on their own => ${exact ? 'EXACT' : 'NOT EXACT'}` +
          (served.length ? `; usage rows by deployment: ${served.map((r) => `${r.deployment} ${r.n}`).join(', ')}` : '')
        );
      } finally {
        await d.destroy();
        await db.stop();
      }
    },
  };
}

/** A pass-through script of bench/ in a process of its own (profiled and probed under --diagnose). */
export async function passThrough(args: string[], diag: Diagnose | undefined): Promise<Running> {
  const nodeArgs = diag ? ['--cpu-prof', `--cpu-prof-dir=${diag.profDir}`, '--import', './bench/loop-probe.ts'] : [];
  const { child, line } = await startChild(process.execPath, [...nodeArgs, ...args], {
    env: { UPSTREAM_URL: state.simUrl, UPSTREAM_KEY, ...(diag ? { LOOP_PROBE_FILE: diag.probeFile } : {}) },
    readyLine: /^http/,
  });
  return { url: line.trim(), headers: {}, pids: () => [child.pid!], nodePid: child.pid!, stop: () => stopChild(child) };
}

/**
 * The trace targets' sampling: the default sampler samples every trace (parentbased_always_on);
 * 1 % is parentbased_traceidratio at 0.01 (docs/observability.md). The export queue keeps the
 * defaults (OTEL_BSP_*: 5 s schedule delay, 2048 spans, batches of 512), named in TRACE_QUEUE.
 */
export const TRACE_SAMPLING: { percent: number; what: string; env: Record<string, string> }[] = [
  { percent: 100, what: 'every trace sampled (the default sampler)', env: {} },
  {
    percent: 1,
    what: '1 % of traces sampled (parentbased_traceidratio 0.01)',
    env: { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
  },
];
export const TRACE_QUEUE = {
  OTEL_BSP_SCHEDULE_DELAY: '5000',
  OTEL_BSP_MAX_QUEUE_SIZE: '2048',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
};

export const TARGETS: TargetDef[] = [
  {
    name: 'direct',
    what: 'the upstream simulator itself (no gateway)',
    async start() {
      return {
        url: state.simUrl,
        headers: { Authorization: `Bearer ${UPSTREAM_KEY}` },
        pids: () => [state.simPid],
        stop: async () => {},
      };
    },
  },
  {
    name: 'bare',
    what: 'bare Fastify + undici pass-through (bench/bare-passthrough.ts): no auth, billing, metrics or logs',
    start: (diag) => passThrough(['bench/bare-passthrough.ts'], diag),
  },
  // The floor of any Node proxy here (docs/benchmark.md, Figures): not run unless named.
  ...[false, true].map(
    (fastify): TargetDef => ({
      name: fastify ? 'raw-fastify' : 'raw',
      what: `bench/raw-passthrough.ts${fastify ? ' --fastify' : ''}: ${fastify ? 'Fastify' : 'node:http'} in, undici's dispatcher out, nothing else`,
      optional: true,
      start: (diag) => passThrough(['bench/raw-passthrough.ts', ...(fastify ? ['--fastify'] : [])], diag),
    }),
  ),
  {
    // The embedded default: `npm start` with no DATABASE_URL, so the gateway runs its own
    // PostgreSQL server in DATA_DIR/postgres. The books are checked after the gateway (and its
    // server) stopped, on the same cluster started again the same way.
    name: 'gateway-embedded',
    what: 'this gateway as `npm start` runs it: no DATABASE_URL (its embedded PostgreSQL server in DATA_DIR)',
    start: (diag) => gatewayTarget('gateway-embedded', embeddedDatabase, diag),
  },
  {
    name: 'gateway-postgres',
    what: 'this gateway with DATABASE_URL: a PostgreSQL server of its own (credit leases, key cache)',
    start: (diag) => gatewayTarget('gateway-postgres', postgresDatabase, diag),
  },
  // The same organisation owner's key without budgets: what the key's organisation costs apart
  // from its budgets.
  {
    name: 'gateway-postgres-member-key',
    what: 'gateway-postgres with the bench key an organisation owner’s personal key, no budgets',
    optional: true,
    start: (diag) =>
      gatewayTarget('gateway-postgres-member-key', postgresDatabase, diag, {
        makeKey: (rpcUrl) => organisationOwnerKey(rpcUrl, false),
      }),
  },
  // Both databases with the bench key under three budgets (its organisation's, its member's and
  // its own), never reached: what holding a request in every budget window costs (issue 42).
  ...(['embedded', 'postgres'] as const).map(
    (db): TargetDef => ({
      name: `gateway-${db}-3-budgets`,
      what: `gateway-${db} with the bench key under three budgets (organisation, member, key), none reached`,
      optional: true,
      start: (diag) =>
        gatewayTarget(`gateway-${db}-3-budgets`, db === 'embedded' ? embeddedDatabase : postgresDatabase, diag, {
          makeKey: (rpcUrl) => organisationOwnerKey(rpcUrl, true),
        }),
    }),
  ),
  {
    // gateway-postgres with the model the bench requests served on three deployments: three
    // providers at the same simulator with the same key (an env-named credential), equal weights.
    // What routing over deployments costs per request; its billing line counts the rows of each.
    name: 'gateway-3-deployments',
    what: 'gateway-postgres with gpt-4o-mini on three deployments (three providers at the simulator, equal weights)',
    optional: true,
    start: (diag) =>
      gatewayTarget('gateway-3-deployments', postgresDatabase, diag, {
        env: { [DEPLOYMENT_KEY_ENV]: UPSTREAM_KEY },
        setup: threeDeployments,
        byDeployment: true,
      }),
  },
  // gateway-postgres with OpenTelemetry traces on (issue 34), every trace or 1 % of them, exported
  // over OTLP/HTTP to bench/otlp-sink.ts (a process of its own, its CPU counted apart). After
  // the run: the spans exported and dropped (/metrics). Run only when named.
  ...TRACE_SAMPLING.map(
    ({ percent, what, env }): TargetDef => ({
      name: `gateway-trace-${percent}`,
      what: `gateway-postgres with traces on, ${what}, exported over OTLP/HTTP to bench/otlp-sink.ts (a process of its own)`,
      optional: true,
      start: (diag) => tracedGateway(`gateway-trace-${percent}`, env, diag),
    }),
  ),
  {
    name: 'portkey',
    what: 'Portkey gateway (@portkey-ai/gateway, npm), provider openai with a custom host',
    async start() {
      const port = await freePort();
      const { child } = await startChild(
        process.execPath,
        ['node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${port}`, '--headless'],
        {
          env: { NODE_ENV: 'production' },
          logFile: path.join(state.workDir, 'portkey.log'),
        },
      );
      await waitHttp(`http://127.0.0.1:${port}/`, 60);
      return {
        url: `http://127.0.0.1:${port}`,
        headers: {
          Authorization: `Bearer ${UPSTREAM_KEY}`,
          'x-portkey-provider': 'openai',
          'x-portkey-custom-host': `${state.simUrl}/v1`,
        },
        pids: () => [child.pid!],
        nodePid: child.pid!,
        stop: () => stopChild(child),
      };
    },
  },
  {
    name: 'litellm',
    what: 'LiteLLM proxy (PyPI litellm[proxy]), 1 worker, offline settings, no database',
    async start() {
      const bin = litellmBin();
      const port = await freePort();
      const config = path.join(state.workDir, 'litellm.yaml');
      fs.writeFileSync(
        config,
        `model_list:\n  - model_name: gpt-4o-mini\n    litellm_params:\n      model: openai/gpt-4o-mini\n      api_base: ${state.simUrl}/v1\n      api_key: ${UPSTREAM_KEY}\n`,
      );
      const { child } = await startChild(
        bin,
        ['--config', config, '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1'],
        {
          logFile: path.join(state.workDir, 'litellm.log'),
          env: {
            // Offline: the cost map and the other fetched lists from the package itself.
            LITELLM_LOCAL_MODEL_COST_MAP: 'True',
            LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS: 'True',
            LITELLM_LOCAL_AUTOROUTER_PRESETS: 'True',
            LITELLM_LOCAL_BLOG_POSTS: 'True',
            LITELLM_LOCAL_POLICY_TEMPLATES: 'True',
            LITELLM_TELEMETRY: 'False',
            LITELLM_MASTER_KEY,
            LITELLM_LOG: 'ERROR',
          },
        },
      );
      await waitHttp(`http://127.0.0.1:${port}/health/liveliness`, 120, (s) => s === 200);
      return {
        url: `http://127.0.0.1:${port}`,
        headers: { Authorization: `Bearer ${LITELLM_MASTER_KEY}` },
        pids: () => treeOf(child.pid!),
        stop: () => stopChild(child),
      };
    },
  },
  // --baseline DIR: the same two gateway targets run from another checkout, to compare two
  // versions of the code in one run.
  ...(BASELINE
    ? (['embedded', 'postgres'] as const).map(
        (db): TargetDef => ({
          name: `gateway-${db}@baseline`,
          what: `gateway-${db} run from ${BASELINE}`,
          start: (diag) =>
            gatewayTarget(`gateway-${db}@baseline`, db === 'embedded' ? embeddedDatabase : postgresDatabase, diag, {
              cwd: BASELINE,
            }),
        }),
      )
    : []),
];

/** gateway-embedded's database: the server the gateway itself starts in its DATA_DIR, reopened the same way for the check. */
async function embeddedDatabase(): Promise<TargetDatabase> {
  const dataDir = fs.mkdtempSync(path.join(state.workDir, 'data-'));
  fs.chmodSync(dataDir, 0o755); // as root the server runs as another user, who must reach it
  let server: EmbeddedPostgres | undefined;
  return {
    env: { DATA_DIR: dataDir },
    // The server the gateway started (as root it runs as another user, so it is no child
    // of the gateway's): its postmaster names the cluster folder; backends are its children.
    pids: () => processTreesMatching(path.join(dataDir, 'postgres')),
    open: async () => {
      server = await startEmbeddedPostgres({
        dataDir: path.join(dataDir, 'postgres'),
        durable: true,
        database: 'gateway',
      });
      return openDb({ databaseUrl: server.url, poolMax: 1 });
    },
    // The gateway's own server, through its socket in the cluster's folder (the bench runs as its user or root).
    connect: () =>
      openDb({
        databaseUrl: `postgres://postgres@localhost/gateway?host=${encodeURIComponent(path.join(dataDir, 'postgres'))}`,
        poolMax: 1,
      }),
    stop: async () => {
      await server?.stop();
    },
  };
}

/**
 * The bench key as an organisation's owner's personal key; `budgets`: under three of them, a
 * daily budget on the organisation, a monthly one on the member and a lifetime one on the key,
 * each far above what the run spends.
 */
async function organisationOwnerKey(rpcUrl: string, budgets: boolean): Promise<{ apiKey: string; accountId: string }> {
  const transport = createGrpcTransport({ baseUrl: rpcUrl });
  const orgs = createClient(OrganisationService, transport);
  const made = await orgs.createOrganisation({ name: 'bench', ownerName: 'bench', createOwnerKey: true });
  const accountId = made.organisation!.id;
  await createClient(BillingService, transport).topUp({
    accountId,
    amountNano: OPENING_NANO,
    externalId: 'bench',
    cause: 'bench',
  });
  if (!budgets) return { apiKey: made.ownerApiKey, accountId };
  const keyId = (await orgs.listOrganisationKeys({ organisationId: accountId })).keys[0]!.keyId;
  const budget = (scope: string, scopeId: string, period: string) =>
    orgs.setBudget({
      organisationId: accountId,
      spec: { scope, scopeId, amountUsd: '1000000', period, timeZone: 'America/New_York', mode: 'hard' },
    });
  await budget('organisation', '', 'day');
  await budget('member', made.ownerMemberId, 'month');
  await budget('key', keyId, 'lifetime');
  return { apiKey: made.ownerApiKey, accountId };
}

/** gateway-postgres's database: a durable PostgreSQL server of its own (counted as the target's CPU). */
export async function postgresDatabase(): Promise<TargetDatabase> {
  const server = await startPostgres({ durable: true }); // fsync on, as a production server runs
  state.pgServers.add(server);
  await createDatabase(server.url(), 'bench');
  const url = server.url('bench');
  return {
    env: { DATABASE_URL: url },
    // The postmaster (started with `-c port=N …`, as another user when we are root); its backends
    // and background workers are its children.
    pids: () => processTreesMatching(`-c port=${server.port} `),
    open: () => openDb({ databaseUrl: url, poolMax: 1 }),
    stop: async () => {
      await server.stop();
      state.pgServers.delete(server);
    },
  };
}

/**
 * gateway-postgres exporting its traces to an OTLP sink (bench/otlp-sink.ts) that this target
 * starts first and stops last (the gateway's shutdown exports what it still holds). The sink's CPU
 * is counted apart (sidePids): not in the gateway's CPU per request, not in `others`.
 */
export async function tracedGateway(
  name: string,
  sampling: Record<string, string>,
  diag: Diagnose | undefined,
): Promise<Running> {
  const sink = await startChild(process.execPath, ['bench/otlp-sink.ts'], {
    logFile: path.join(state.workDir, `${name}-sink.log`),
    readyLine: /^http/,
  });
  const sinkUrl = sink.line.trim();
  let gateway: Running;
  try {
    gateway = await gatewayTarget(name, postgresDatabase, diag, {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, // OTLP/HTTP protobuf, POST /v1/traces
        ...sampling,
        ...TRACE_QUEUE,
      },
    });
  } catch (err) {
    await stopChild(sink.child);
    throw err;
  }
  return {
    ...gateway,
    sidePids: () => [sink.child.pid!],
    async stop() {
      await gateway.stop();
      await stopChild(sink.child);
    },
    async spans() {
      const [metrics, counts] = await Promise.all([
        fetch(`${gateway.url}/metrics`).then((r) => r.text()),
        fetch(`${sinkUrl}/counts`).then((r) => r.json() as Promise<{ posts: number; bytes: number }>),
      ]);
      const sum = (pattern: RegExp) =>
        metrics
          .split('\n')
          .filter((l) => pattern.test(l))
          .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
      return {
        exported: sum(/^gateway_trace_spans_exported_total /),
        droppedQueueFull: sum(/^gateway_trace_spans_dropped_total\{reason="queue_full"\} /),
        droppedExportFailed: sum(/^gateway_trace_spans_dropped_total\{reason="export_failed"\} /),
        requests: sum(/^gateway_requests_total[{ ]/),
        sinkPosts: counts.posts,
        sinkBytes: counts.bytes,
      };
    },
  };
}

/** The gateway setting that holds the three deployments' credential (the simulator's key). */
export const DEPLOYMENT_KEY_ENV = 'BENCH_DEPLOYMENT_KEY';
export const DEPLOYMENTS = ['sim-1', 'sim-2', 'sim-3'];

/**
 * gpt-4o-mini on three deployments (docs/providers.md): three openai-dialect providers at the
 * simulator, each with its credential named by DEPLOYMENT_KEY_ENV, then the book with the model's
 * deployments, applied over the RPC; ready once this gateway serves all three.
 */
export async function threeDeployments({ rpcUrl, db }: { rpcUrl: string; db: TargetDatabase }): Promise<void> {
  const d = await db.open();
  try {
    // One transaction: the gateway reads all three credentials or none.
    await d.transaction(async (trx) => {
      const store = new CredentialStore(trx as unknown as Db, undefined, {});
      for (const id of DEPLOYMENTS) await store.setEnv(id, DEPLOYMENT_KEY_ENV, 'bench');
    });
  } finally {
    await d.destroy();
  }
  const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document) as {
    providers: Record<string, unknown>[];
    models: Record<string, unknown>[];
  };
  const model = doc.models.find((m) => m.id === 'gpt-4o-mini');
  if (!model) throw new Error('the book has no gpt-4o-mini');
  doc.providers.push(...DEPLOYMENTS.map((id) => ({ id, dialect: 'openai', baseUrl: `${state.simUrl}/v1` })));
  model.routing = 'weighted';
  model.deployments = DEPLOYMENTS.map((id) => ({ id, provider: id, weight: 1 }));
  const applied = await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'bench: three deployments' });
  if (!applied.applied) throw new Error('the three deployments were not applied');
  // Served once the gateway has read the credentials (within PRICE_BOOK_REFRESH_MS, 5 s by default).
  const until = Date.now() + 30_000;
  for (;;) {
    const listed = await catalogue.listDeployments({ modelId: 'gpt-4o-mini' });
    const served = listed.models.flatMap((m) => m.deployments).filter((x) => x.served && DEPLOYMENTS.includes(x.id));
    if (served.length === DEPLOYMENTS.length) return;
    if (Date.now() > until) throw new Error(`gpt-4o-mini: ${served.length} of 3 deployments served after 30 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The processes whose command line contains `pattern`, with all their descendants. */
export function processTreesMatching(pattern: string): number[] {
  const out = spawnSync('pgrep', ['-f', '--', pattern], { encoding: 'utf8' }).stdout.trim();
  return out ? [...new Set(out.split('\n').flatMap((p) => treeOf(Number(p))))] : [];
}
