// `npm run faults [-- --requests 3000 --concurrency 16 --seconds 30 --max-seconds 70]`
// A deployment fault run against a real gateway process (docs/operations.md, "The deployment
// fault run"): its own PostgreSQL, three upstream simulators (a, b, c) as three providers of the book
// with env-named credentials, and one gateway (hold billing) serving the model `fault-chat`
// (gpt-4o-mini's definition and prices) on three equal-weight deployments a, b and c. c answers
// every request 429 with `retry-after: 3`; b is killed (its port refuses connections) a third of
// the way in. Unstreamed chat requests with the official SDK (maxRetries 0), then the checks:
//   1. the client saw no error;
//   2. billing is exact: every usage row costs exactly its tokens at gpt-4o-mini's shipped prices
//      (src/billing/pricing.ts), the balance went down by exactly their sum, one row per request,
//      and each row names deployment a or b (a only for requests sent after the kill);
//   3. c, while cooling, got only its trials (the exact check is printed with the result);
//   4. the figures.
// Exits 1 when a check fails, 130 on SIGINT, 2 past its time limit; every process it started is
// stopped in every case.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { CredentialStore } from '../../src/catalogue/credentials.ts';
import { shippedBook } from '../../src/catalogue/shipped-book.ts';
import { usageCostNano } from '../../src/billing/pricing.ts';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { createDatabase, startPostgres, type TestPostgres } from '../support/postgres.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { NO_TEMPORAL_CLI } from '../support/temporal.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { Checks, log, sleep, started } from './run-report.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string' },
    concurrency: { type: 'string' },
    seconds: { type: 'string' },
    'max-seconds': { type: 'string' },
  },
});
/** Requests in all (the sequential start's included). */
const N = Number(values.requests ?? 3000);
const CONCURRENCY = Number(values.concurrency ?? 16);
/** The requests are spread over at least this long (0: as fast as the gateway answers), so c's and b's cooldowns and trials show. */
const PACE_SECONDS = Number(values.seconds ?? 30);
/** No request is sent after this many seconds of load, whatever is left. */
const MAX_LOAD_SECONDS = Number(values['max-seconds'] ?? 70);
/** The whole run, set-up and cleanup included, is stopped past this (exit 2). */
const HARD_LIMIT_MS = 105_000;

const MODEL = 'fault-chat';
const TEMPLATE = 'gpt-4o-mini';
const COOLDOWN_MS = 2000;
const RETRY_AFTER_S = 3;
const WINDOW_MS = RETRY_AFTER_S * 1000;
/** A trial is due once a window ends; under this load it comes within this long (a liveness check). */
const TRIAL_LATE_MS = 1000;
const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];
const envOf = (n: Name) => `FAULT_${n.toUpperCase()}_KEY`;
const keyOf = (n: Name) => `sk-fault-upstream-${n}`;
const deploymentKey = (n: Name) => `${MODEL}/${n}`;

// ---------------------------------------------------------------- stopping

const stop = new AbortController();
let exitCode = 0;
let pg: TestPostgres | undefined;
let gw: GatewayProcess | undefined;
let db: Db | undefined;
const sims: Partial<Record<Name, Simulator>> = {};
/** The client's connections to the gateway, closed before the gateway is stopped (it waits for open ones). */
const clientAgent = new Agent({ connections: 64 });
let cleaned: Promise<void> | undefined;

/** Stops everything this run started, once (the gateway, the simulators, the database connection, PostgreSQL). */
function cleanup(): Promise<void> {
  cleaned ??= (async () => {
    // First the client's connections: the gateway's shutdown waits (SHUTDOWN_GRACE_MS) for open ones.
    await clientAgent.destroy().catch(() => {});
    await gw?.stop('SIGTERM').catch(() => {});
    for (const s of Object.values(sims)) await s?.close().catch(() => {});
    await db?.destroy().catch(() => {});
    await pg?.stop().catch(() => {});
  })();
  return cleaned;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stop.signal.aborted) return; // already stopping: the cleanup runs to its end
    console.log(`\n${signal}: stopping the run and every process it started`);
    exitCode = 130;
    stop.abort(new Error(signal));
  });
const hardLimit = setTimeout(() => {
  console.log(`\nover the run's time limit (${HARD_LIMIT_MS / 1000} s): stopping`);
  exitCode = 2;
  stop.abort(new Error('time limit'));
  void cleanup().then(() => process.exit(2));
}, HARD_LIMIT_MS);
hardLimit.unref();

// ---------------------------------------------------------------- the run

interface Sent {
  i: number;
  sentAt: number;
  doneAt: number;
  requestId?: string;
  error?: string;
}

interface UsageRow {
  request_id: string;
  deployment: string | null;
  input_tokens: string;
  output_tokens: string;
  cached_tokens: string;
  cache_write_tokens: string;
  cost_nano: string;
  status: string;
}

const checks = new Checks();
const check = checks.check;

/** Between set-up steps: a signal received meanwhile ends the run here. */
function alive(): void {
  if (stop.signal.aborted) throw stop.signal.reason;
}

async function rows<T>(sql: string, bindings: unknown[] = []): Promise<T[]> {
  return (await db!.raw(sql, bindings as never)).rows as T[];
}

async function run(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-faults-'));
  pg = await startPostgres();
  await createDatabase(pg.url(), 'faults');
  const databaseUrl = pg.url('faults');
  for (const n of NAMES) sims[n] = await startSimulator({ apiKey: keyOf(n), name: n });
  const [a, b, c] = NAMES.map((n) => sims[n]!) as [Simulator, Simulator, Simulator];
  alive();
  log(`PostgreSQL and simulators up: a ${a.url}, b ${b.url}, c ${c.url}`);

  gw = await startGatewayProcess({
    logFile: path.join(dir, 'gateway.log'),
    env: {
      DATABASE_URL: databaseUrl,
      ...Object.fromEntries(NAMES.map((n) => [envOf(n), keyOf(n)])),
      BILLING_MODE: 'hold',
      DEPLOYMENT_COOLDOWN_MS: String(COOLDOWN_MS),
      PRICE_BOOK_REFRESH_MS: '200',
      RATE_LIMIT_RPM: '0',
      RATE_LIMIT_TPM: '0',
      LOG_LEVEL: 'warn',
      // A bound on its shutdown, should anything be left in flight.
      SHUTDOWN_GRACE_MS: '5000',
      // No video jobs: a gateway without Temporal settings would start a dev server of its own.
      TEMPORAL_CLI: NO_TEMPORAL_CLI,
      TEMPORAL_ADDRESS: '',
    },
  });
  alive();
  log(`gateway up: ${gw.httpUrl} (log ${gw.logFile})`);
  const transport = createGrpcTransport({ baseUrl: gw.rpcUrl });
  const catalogue = createClient(CatalogueService, transport);
  const billing = createClient(BillingService, transport);

  // The credentials first, in one transaction (the gateway reads all three or none), then the book.
  db = await openDb({ databaseUrl, poolMax: 2 });
  await db.transaction(async (trx) => {
    const store = new CredentialStore(trx as unknown as Db, undefined, {});
    for (const n of NAMES) await store.setEnv(`fault-${n}`, envOf(n), 'fault run');
  });
  alive();
  const doc = JSON.parse((await catalogue.exportBook({})).document) as {
    providers: Record<string, unknown>[];
    models: Record<string, unknown>[];
  };
  const template = doc.models.find((m) => m.id === TEMPLATE);
  if (!template) throw new Error(`the book has no ${TEMPLATE}`);
  doc.providers.push(...NAMES.map((n) => ({ id: `fault-${n}`, dialect: 'openai', baseUrl: `${sims[n]!.url}/v1` })));
  doc.models.push({
    ...structuredClone(template),
    id: MODEL,
    provider: 'fault-a',
    upstreamId: TEMPLATE,
    enabled: true,
    routing: 'weighted',
    deployments: NAMES.map((n) => ({ id: n, provider: `fault-${n}`, weight: 1 })),
  });
  const applied = await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'fault run' });
  if (!applied.applied) throw new Error('the book was not applied');
  // Served once the gateway has read the credentials (PRICE_BOOK_REFRESH_MS): all three deployments.
  for (let until = Date.now() + 15_000; ; await sleep(100)) {
    const listed = await catalogue.listDeployments({ modelId: MODEL });
    const served = listed.models.flatMap((m) => m.deployments).filter((d) => d.served).length;
    alive();
    if (served === NAMES.length) break;
    if (Date.now() > until) throw new Error(`${MODEL}: ${served} of ${NAMES.length} deployments served after 15 s`);
  }

  alive();
  // What customers pay: gpt-4o-mini's shipped prices (and the copy in force must be them).
  const shippedPrices = shippedBook().models.find((m) => m.id === TEMPLATE)!.prices as Record<string, string>;
  const modelPrices = (await catalogue.getModel({ id: MODEL })).model?.prices ?? {};
  if (JSON.stringify(Object.entries(modelPrices).sort()) !== JSON.stringify(Object.entries(shippedPrices).sort()))
    throw new Error(`${MODEL}'s prices ${JSON.stringify(modelPrices)} are not ${TEMPLATE}'s shipped ones`);

  const key = await billing.createKey({ creditsNano: usdToNano('10'), label: 'fault run' });
  const [opening] = await rows<{ b: string }>('SELECT balance_nano::text AS b FROM accounts WHERE id = ?', [
    key.accountId,
  ]);
  const openingNano = BigInt(opening!.b);
  log(`${MODEL} on deployments a, b, c (weight 1 each); key ${key.prefix}… with ${openingNano} nano-USD`);

  alive();
  // ---------------------------------------------------------------- load
  c.setMode({ status: 429, retryAfter: String(RETRY_AFTER_S) });
  const client = new OpenAI({
    apiKey: key.apiKey,
    baseURL: `${gw.httpUrl}/v1`,
    maxRetries: 0,
    timeout: 20_000,
    fetch: ((url: string, init: RequestInit) =>
      undiciFetch(url, { ...(init as object), dispatcher: clientAgent })) as unknown as typeof fetch,
  });
  const sent: Sent[] = [];
  const one = async (i: number): Promise<void> => {
    const s: Sent = { i, sentAt: Date.now(), doneAt: 0 };
    sent.push(s);
    // Varied prompts, outputs and cache reads, so the rows price different token mixes.
    const cached = i % 4 === 0 ? ` cached=${1 + (i % 9)}` : '';
    try {
      const { response, data } = await client.chat.completions
        .create(
          {
            model: MODEL,
            max_tokens: 32,
            messages: [
              { role: 'user', content: `fault run ${i}${' w'.repeat(i % 37)} [sim tokens=${1 + (i % 24)}${cached}]` },
            ],
          },
          { signal: stop.signal },
        )
        .withResponse();
      s.requestId = response.headers.get('x-request-id') ?? undefined;
      if (!s.requestId) s.error = 'no x-request-id';
      else if (!data.choices[0]?.message) s.error = 'no message';
    } catch (err) {
      const e = err as { status?: number; message?: string; headers?: Headers };
      s.requestId = e.headers?.get?.('x-request-id') ?? undefined;
      s.error = `${e.status ?? 'no status'} ${e.message ?? String(err)}`;
    }
    s.doneAt = Date.now();
  };

  // The start, one request at a time until c has had one (and answered it 429): from then on the
  // gateway knows c is cooling before any requests overlap, so every later request c receives
  // must be a trial (check 3 needs no allowance for requests already on their way to c).
  let next = 0;
  while (c.requests.length === 0 && next < N && !stop.signal.aborted) await one(next++);
  const loadStart = Date.now();
  const paceMs = PACE_SECONDS > 0 ? (PACE_SECONDS * 1000) / N : 0;
  const killAt = Math.floor(N / 3);
  let killStartedAt = 0;
  let killDoneAt = 0;
  let killed: Promise<void> | undefined;
  const worker = async () => {
    while (next < N && !stop.signal.aborted) {
      if (Date.now() - loadStart > MAX_LOAD_SECONDS * 1000) return;
      const i = next++;
      if (i === killAt) {
        killStartedAt = Date.now();
        killed = b.kill().then(() => {
          killDoneAt = Date.now();
          log(`b killed (request ${i} of ${N}): its port refuses connections`);
        });
      }
      const due = loadStart + i * paceMs;
      if (due > Date.now()) await sleep(due - Date.now());
      await one(i);
    }
  };
  log(
    `${next} request(s) one at a time until c had one; now ${N - next} more at concurrency ${CONCURRENCY}${paceMs ? `, spread over ${PACE_SECONDS} s` : ''}`,
  );
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await killed;
  const loadEnd = Date.now();
  if (stop.signal.aborted) return;
  const seconds = (loadEnd - started) / 1000;
  const loadSeconds = (loadEnd - loadStart) / 1000;
  log(`load done: ${sent.length} requests, ${loadSeconds.toFixed(1)} s of concurrent load`);

  // Every hold settled (an unstreamed request settles as it answers; wait for stragglers).
  const ok = sent.filter((s) => s.requestId && !s.error);
  let account: { balance: string; held: string; active: number } | undefined;
  let usage: UsageRow[] = [];
  for (let until = Date.now() + 10_000; ; await sleep(100)) {
    [account] = await rows<{ balance: string; held: string; active: number }>(
      `SELECT balance_nano::text AS balance, held_nano::text AS held,
              (SELECT count(*)::int FROM holds h WHERE h.account_id = a.id AND h.status = 'active') AS active
       FROM accounts a WHERE a.id = ?`,
      [key.accountId],
    );
    usage = await rows<UsageRow>(
      `SELECT request_id, deployment, input_tokens::text, output_tokens::text, cached_tokens::text,
              cache_write_tokens::text, cost_nano::text, status
       FROM usage_records WHERE account_id = ?`,
      [key.accountId],
    );
    if ((account!.held === '0' && account!.active === 0 && usage.length >= ok.length) || Date.now() > until) break;
  }
  const [ledger] = await rows<{ charged: string }>(
    `SELECT COALESCE(-sum(amount_nano), 0)::text AS charged FROM ledger WHERE account_id = ? AND kind = 'charge'`,
    [key.accountId],
  );

  console.log('\nchecks');
  // 1. The client saw no error.
  const errors = sent.filter((s) => s.error);
  check(
    '1 no client errors',
    errors.length === 0 && sent.length === N,
    `${errors.length} errors in ${sent.length} requests (of ${N} planned)` +
      (errors.length
        ? `; first: ${errors
            .slice(0, 3)
            .map((e) => `#${e.i} ${e.error}`)
            .join(' | ')}`
        : ''),
  );

  // 2. Billing exact.
  const byRequest = new Map<string, UsageRow[]>();
  for (const r of usage) byRequest.set(r.request_id, [...(byRequest.get(r.request_id) ?? []), r]);
  const mispriced: string[] = [];
  let sum = 0n;
  for (const r of usage) {
    const expected = usageCostNano(
      { prices: shippedPrices },
      {
        inputTokens: BigInt(r.input_tokens),
        outputTokens: BigInt(r.output_tokens),
        cachedTokens: BigInt(r.cached_tokens),
        cacheWriteTokens: BigInt(r.cache_write_tokens),
      },
    );
    sum += BigInt(r.cost_nano);
    if (BigInt(r.cost_nano) !== expected || r.status !== 'ok' || expected <= 0n)
      mispriced.push(`${r.request_id}: ${r.cost_nano} charged, ${expected} expected (status ${r.status})`);
  }
  const cachedRows = usage.filter((r) => r.cached_tokens !== '0').length;
  check(
    '2a every usage row costs exactly its tokens at gpt-4o-mini shipped prices',
    mispriced.length === 0 && usage.length > 0,
    `${usage.length - mispriced.length} of ${usage.length} rows exact (${cachedRows} with cache reads; usageCostNano of src/billing/pricing.ts, one ceil to the nano)` +
      (mispriced.length ? `; ${mispriced.slice(0, 3).join(' | ')}` : ''),
  );
  const down = openingNano - BigInt(account!.balance);
  check(
    '2b the balance went down by exactly the sum of cost_nano',
    down === sum && account!.held === '0' && account!.active === 0 && BigInt(ledger!.charged) === sum,
    `opening ${openingNano} - balance ${account!.balance} = ${down}; sum of cost_nano ${sum}; ledger charges ${ledger!.charged}; held ${account!.held}, active holds ${account!.active}`,
  );
  const ids = new Set(ok.map((s) => s.requestId!));
  const notOne = [...ids].filter((id) => byRequest.get(id)?.length !== 1);
  const stray = usage.filter((r) => !ids.has(r.request_id));
  check(
    '2c each request id has exactly one usage row',
    notOne.length === 0 && stray.length === 0 && ids.size === ok.length,
    `${ids.size} request ids, ${usage.length} rows; ${notOne.length} ids without exactly one row, ${stray.length} rows of no request sent` +
      (notOne.length ? `; e.g. ${notOne.slice(0, 3).join(', ')}` : ''),
  );
  const deploymentOf = new Map(usage.map((r) => [r.request_id, r.deployment]));
  const wrongDeployment: string[] = [];
  const servedBefore: Record<string, number> = {};
  const servedAfter: Record<string, number> = {};
  for (const s of ok) {
    const d = String(deploymentOf.get(s.requestId!) ?? 'none');
    const afterKill = killDoneAt > 0 && s.sentAt > killDoneAt;
    const tally = afterKill ? servedAfter : servedBefore;
    tally[d] = (tally[d] ?? 0) + 1;
    const allowed = afterKill ? [deploymentKey('a')] : [deploymentKey('a'), deploymentKey('b')];
    if (!allowed.includes(d))
      wrongDeployment.push(`#${s.i} ${s.requestId} ${d}${afterKill ? ' (sent after the kill)' : ''}`);
  }
  check(
    '2d every row names deployment a or b, and a for requests sent after the kill',
    wrongDeployment.length === 0 && killDoneAt > 0,
    `sent before the kill finished: ${fmt(servedBefore)}; sent after: ${fmt(servedAfter)}` +
      (wrongDeployment.length ? `; ${wrongDeployment.slice(0, 3).join(' | ')}` : ''),
  );

  // 3. c got only its trials while it cooled.
  const arrivals = c.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.at);
  const gaps = arrivals.slice(1).map((t, k) => t - arrivals[k]!);
  const inside = gaps.filter((g) => g < WINDOW_MS).length;
  const late = gaps.filter((g) => g > WINDOW_MS + TRIAL_LATE_MS).length;
  const windowsInRun = arrivals.length ? Math.floor((loadEnd - arrivals[0]!) / WINDOW_MS) + 1 : 0;
  console.log(
    `     the check: c's recorded arrival times t1 < … < tn (simulator clock). Each ti answered 429 with retry-after ${RETRY_AFTER_S}, so it opens a\n` +
      `     cooldown window [ti, ti + ${WINDOW_MS} ms) (the gateway reads the 429 after ti and cools c from then). c had its first request\n` +
      `     before any requests overlapped, so from t1 on the gateway knew c was cooling: every later arrival must be the one trial after\n` +
      `     a window ended. Check: no arrival inside any window (each gap t(i+1) - ti >= ${WINDOW_MS} ms), i.e. exactly one request (the trial)\n` +
      `     after each window ends, before the next window; and each trial came within ${TRIAL_LATE_MS} ms of its window's end (gap <= ${WINDOW_MS + TRIAL_LATE_MS} ms).`,
  );
  check(
    '3a c received no request inside a cooldown window: at most one trial after each window ends',
    inside === 0 && arrivals.length > 0 && c.counts().answered2xx === 0,
    `${arrivals.length} requests reached c (${c.counts().received} counted by it, ${c.counts().answered2xx} answered 2xx); ` +
      `${arrivals.length - 1} windows ended with a trial, ${inside} arrivals inside a window; gaps min ${min(gaps)} ms, max ${max(gaps)} ms`,
  );
  check(
    `3b c's trials came within ${TRIAL_LATE_MS} ms of each window's end`,
    late === 0,
    `${late} gaps over ${WINDOW_MS + TRIAL_LATE_MS} ms`,
  );

  // 4. The figures.
  const metrics = await fetch(`${gw.httpUrl}/metrics`).then((r) => r.text());
  const series = (name: string) =>
    metrics
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) && l.includes(`deployment="${MODEL}/`))
      .map((l) => {
        const labels = Object.fromEntries([...l.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
        return { labels, value: Number(l.slice(l.lastIndexOf(' ') + 1)) };
      });
  const attempts: Record<string, Record<string, number>> = {};
  for (const s of series('gateway_deployment_requests_total')) {
    const d = s.labels.deployment!.slice(MODEL.length + 1);
    attempts[d] = { ...attempts[d], [s.labels.outcome!]: s.value };
  }
  const cooldowns = Object.fromEntries(
    series('gateway_deployment_cooldowns_total').map((s) => [s.labels.deployment!.slice(MODEL.length + 1), s.value]),
  );
  const served = { ...servedBefore };
  for (const [d, n] of Object.entries(servedAfter)) served[d] = (served[d] ?? 0) + n;
  const bTimes = b.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.at);
  console.log('\nfigures');
  console.log(
    `  requests: ${sent.length} (${N} planned, concurrency ${CONCURRENCY}); ${seconds.toFixed(1)} s from start to the last answer, ` +
      `${loadSeconds.toFixed(1)} s of load (${(sent.length / loadSeconds).toFixed(0)} req/s); b killed ${((killStartedAt - loadStart) / 1000).toFixed(1)} s into the load`,
  );
  console.log(`  usage rows by deployment: ${fmt(served)}`);
  console.log(
    `  received by each simulator: a ${a.counts().received}, b ${b.counts().received} (its last ${bTimes.length ? `${signed((bTimes.at(-1)! - killStartedAt) / 1000)} s from the kill` : 'none'}), c ${c.counts().received}`,
  );
  console.log(
    `  gateway attempts by deployment and outcome: ${Object.entries(attempts)
      .map(([d, o]) => `${d} ${fmt(o)}`)
      .join('; ')}; cooldowns: ${fmt(cooldowns)}`,
  );
  // b's cooldowns as the gateway logged them (a warning each): when, from the kill, and for how long.
  await sleep(300); // the log is written in batches, at most 100 ms late
  const bCooldowns = fs
    .readFileSync(gw.logFile, 'utf8')
    .split('\n')
    .filter((l) => l.includes('deployment cooling down') && l.includes(`"${deploymentKey('b')}"`))
    .map((l) => JSON.parse(l) as { time: number; until: string })
    .map(
      (e) => `${signed((e.time - killStartedAt) / 1000)} s for ${((Date.parse(e.until) - e.time) / 1000).toFixed(1)} s`,
    );
  console.log(`  b's cooldowns (gateway log; time from the kill, length): ${bCooldowns.join('; ') || 'none'}`);
  console.log(
    `  c: ${arrivals.length} requests received against ${windowsInRun} ${RETRY_AFTER_S} s windows from its first request to the end of the load (at most one each)`,
  );
  console.log(`  logs: ${dir}`);
}

function fmt(o: Record<string, number>): string {
  const parts = Object.entries(o)
    .sort()
    .map(([k, v]) => `${k} ${v}`);
  return parts.length ? parts.join(', ') : 'none';
}
const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(2)}`;
const min = (xs: number[]) => (xs.length ? Math.min(...xs) : '-');
const max = (xs: number[]) => (xs.length ? Math.max(...xs) : '-');

try {
  await run();
} catch (err) {
  if (!stop.signal.aborted) {
    console.error(`the run failed: ${(err as Error).stack ?? err}`);
    exitCode = 1;
  }
} finally {
  await cleanup();
}
exitCode = checks.exitCode(exitCode);
console.log(`\nsummary: ${checks.summary(exitCode, (c) => c.name.split(' ')[0]!, ', ')}`);
process.exit(exitCode);
