// `npm run bench`: what this gateway costs, measured with wrk (C, one thread) so the load
// generator is not what is measured. Each target runs alone (the upstream simulator aside),
// with a warm-up before every measurement; three repetitions, median and spread. Billing on,
// rate limits off. Not a test: figures. docs/benchmark.md says how to read them.
//
//   npm run bench [-- --reps 3 --seconds 10 --warmup 2 --targets direct,bare,gateway-embedded,gateway-postgres,portkey,litellm
//                     (also raw,raw-fastify: the floor of a Node proxy, gateway-3-deployments: gpt-4o-mini
//                     on three deployments of the simulator, and gateway-trace-100, gateway-trace-1:
//                     gateway-postgres with OpenTelemetry traces, every trace / 1 %, exported to
//                     bench/otlp-sink.ts; only when named)
//                     --no-streams --diagnose --log-level info --quiet-wait 15 --nice=-5 --quick]
//
// --diagnose adds, per gateway target: a CPU profile (node --cpu-prof) of the c=32 window,
// syscalls per request (strace -c -f, attached for a run of its own, also on the bare
// pass-through), event-loop delay and GC (bench/loop-probe.ts).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../src/gen/gateway/v1/catalogue_pb.js';
import { CredentialStore } from '../src/catalogue/credentials.ts';
import { openDb, type Db } from '../src/db/db.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded-postgres.ts';
import { createDatabase, startPostgres, type TestPostgres } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { formatSummary, summarise } from './profile-summary.ts';

const { values } = parseArgs({
  options: {
    reps: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    targets: { type: 'string' },
    'no-streams': { type: 'boolean' },
    diagnose: { type: 'boolean' },
    'log-level': { type: 'string' },
    'quiet-wait': { type: 'string' },
    nice: { type: 'string' },
    quick: { type: 'boolean' },
  },
});
const REPS = Number(values.reps ?? (values.quick ? 1 : 3));
const SECONDS = Number(values.seconds ?? (values.quick ? 3 : 10));
const WARMUP = Number(values.warmup ?? 2);
const STREAM_SECONDS = Math.max(2, Math.min(SECONDS, 5));
const LOG_LEVEL = values['log-level'] ?? 'info';
const QUIET_WAIT_S = Number(values['quiet-wait'] ?? 15);
// On a machine shared with other work: run every measured process (and the load) at this nice
// level (negative = ahead of the rest; root only), so the figures are closer to "alone".
const NICE = Number(values.nice ?? 0);
const ROOT = path.resolve(import.meta.dirname, '..');
const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'gateway-bench');
const UPSTREAM_KEY = 'sk-bench-upstream';
const OPENING_NANO = 1_000_000_000_000n; // $1,000
const LITELLM_MASTER_KEY = 'sk-bench-litellm-0123456789abcdef0123456789abcdef';

const CHAT = JSON.stringify({
  model: 'gpt-4o-mini',
  max_tokens: 64,
  messages: [{ role: 'user', content: 'Say hello [sim tokens=16]' }],
});
// 16 content chunks, 2 ms apart upstream.
const STREAM = JSON.stringify({
  model: 'gpt-4o-mini',
  max_tokens: 64,
  stream: true,
  messages: [{ role: 'user', content: 'Say hello [sim tokens=16 delay=2]' }],
});

// ---------------------------------------------------------------- processes

const children = new Set<ChildProcess>();

function startChild(
  command: string,
  commandArgs: string[],
  opts: { env?: Record<string, string>; logFile?: string; readyLine?: RegExp },
): Promise<{ child: ChildProcess; line: string }> {
  const [cmd, args] = NICE ? ['nice', ['-n', String(NICE), command, ...commandArgs]] : [command, commandArgs];
  const out = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'pipe';
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.readyLine || !opts.logFile ? 'pipe' : out, opts.logFile ? out : 'inherit'],
    detached: true,
  });
  if (typeof out === 'number') fs.closeSync(out);
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (!opts.readyLine) return Promise.resolve({ child, line: '' });
  const rl = readline.createInterface({ input: child.stdout! });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} did not start in 120 s`)), 120_000);
    rl.on('line', (l) => {
      if (opts.logFile) fs.appendFileSync(opts.logFile, l + '\n');
      if (opts.readyLine!.test(l)) {
        clearTimeout(timer);
        resolve({ child, line: l });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`));
    });
  });
}

/** SIGTERM to the child's process group, SIGKILL after 15 s. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 15_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      child.kill('SIGTERM');
    }
  });
}

async function waitHttp(url: string, seconds: number, ok: (status: number) => boolean = (s) => s < 500): Promise<void> {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      if (ok(r.status)) return;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > until) throw new Error(`${url} not ready in ${seconds} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------- tools

/** Debian's wrk, or a build in the cache; installed with apt-get when missing (it says so). */
function findWrk(): string {
  const cached = path.join(CACHE, 'wrk');
  for (const p of [process.env.WRK, cached, '/usr/bin/wrk', '/usr/local/bin/wrk']) if (p && fs.existsSync(p)) return p;
  console.log("wrk not found: installing Debian's wrk with apt-get (a measurement tool, not part of the gateway)");
  const r = spawnSync(
    'sh',
    ['-c', 'apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)'],
    {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    },
  );
  if (r.status !== 0 || !fs.existsSync('/usr/bin/wrk'))
    throw new Error('could not install wrk: install it (apt-get install wrk) or set WRK=/path/to/wrk');
  return '/usr/bin/wrk';
}

function ensureStrace(): string {
  if (fs.existsSync('/usr/bin/strace')) return '/usr/bin/strace';
  console.log("strace not found: installing Debian's strace with apt-get (for --diagnose)");
  spawnSync('sh', ['-c', 'apt-get install -y -qq strace || (apt-get update -qq && apt-get install -y -qq strace)'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (!fs.existsSync('/usr/bin/strace')) throw new Error('could not install strace');
  return '/usr/bin/strace';
}

/** LiteLLM's proxy in a virtual environment of its own under the cache (made once). */
function litellmBin(): string {
  const venv = path.join(CACHE, 'litellm-venv');
  const bin = path.join(venv, 'bin', 'litellm');
  if (fs.existsSync(bin)) return bin;
  console.log(`making a Python virtual environment for LiteLLM in ${venv} (once; pip install 'litellm[proxy]')`);
  fs.mkdirSync(CACHE, { recursive: true });
  const python = ['python3', 'python'].find((p) => spawnSync(p, ['--version']).status === 0);
  if (!python) throw new Error('python3 not found (needed for the LiteLLM target; --targets without litellm skips it)');
  let r = spawnSync(python, ['-m', 'venv', venv], { stdio: 'inherit' });
  if (r.status === 0)
    r = spawnSync(path.join(venv, 'bin', 'pip'), ['install', '-q', 'litellm[proxy]'], { stdio: 'inherit' });
  if (r.status !== 0 || !fs.existsSync(bin)) {
    fs.rmSync(venv, { recursive: true, force: true });
    throw new Error('could not install litellm[proxy]');
  }
  return bin;
}

// ---------------------------------------------------------------- CPU accounting

const TICK_MS = 1000 / 100; // USER_HZ

function cpuMsOf(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    } catch {
      /* gone */
    }
  }
  return ticks * TICK_MS;
}

/** The process and everything under it (a PostgreSQL server's backends, uvicorn's worker). */
function treeOf(pid: number): number[] {
  const all: number[] = [pid];
  for (let i = 0; i < all.length; i++) {
    try {
      const kids = fs.readFileSync(`/proc/${all[i]}/task/${all[i]}/children`, 'utf8').trim();
      if (kids) all.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* gone */
    }
  }
  return all;
}

/**
 * The machine's CPU time so far (all cores, ms): `busy` is user, nice, system, irq and softirq
 * time; `steal` is time the hypervisor gave this VM's vCPUs to someone else, counted apart: a
 * slow phase of the VM, not a neighbour on it.
 */
function machineTimes(): { busy: number; steal: number } {
  const [user, nice, system, , , irq, softirq, steal] = fs
    .readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return { busy: (user! + nice! + system! + irq! + softirq!) * TICK_MS, steal: (steal ?? 0) * TICK_MS };
}

// ---------------------------------------------------------------- load

interface WrkResult {
  requests: number;
  durationS: number;
  rps: number;
  errors: number;
  p50: number;
  p75: number;
  p90: number;
  p99: number;
  max: number; // ms
  wrkCpuMs: number;
}

/** wrk, one thread, `connections` connections, for `seconds`; POSTs `body` with the target's headers. */
async function wrk(
  t: Running,
  pathname: string,
  body: string,
  connections: number,
  seconds: number,
): Promise<WrkResult> {
  const headers = Object.entries(t.headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');
  const args = [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--timeout',
    '5s',
    '-s',
    path.join(ROOT, 'bench', 'wrk', 'post.lua'),
    t.url + pathname,
  ];
  // bash's `times` gives wrk's own CPU (the load generator must stay far below the targets').
  const child = spawn(
    NICE ? 'nice' : 'bash',
    [...(NICE ? ['-n', String(NICE), 'bash'] : []), '-c', '"$0" "$@"; rc=$?; times >&2; exit $rc', WRK, ...args],
    {
      env: { ...process.env, WRK_BODY: body, WRK_HEADERS: headers },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const json = out
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  if (code !== 0 || !json) throw new Error(`wrk failed (${code}): ${out} ${err}`);
  const w = JSON.parse(json) as Record<string, number>;
  const times = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(err.trim());
  const wrkCpuMs = times
    ? (Number(times[1]) * 60 + Number(times[2]) + Number(times[3]) * 60 + Number(times[4])) * 1000
    : NaN;
  const errors = w.connect! + w.read! + w.write! + w.status! + w.timeout!;
  const durationS = w.duration_us! / 1e6;
  // Non-2xx answers (wrk counts status >= 400) and socket errors are not throughput.
  return {
    requests: w.requests!,
    durationS,
    rps: Math.max(0, w.requests! - w.status!) / durationS,
    errors,
    p50: w.p50! / 1000,
    p75: w.p75! / 1000,
    p90: w.p90! / 1000,
    p99: w.p99! / 1000,
    max: w.max! / 1000,
    wrkCpuMs,
  };
}

interface StreamSample {
  streams: number;
  errors: number;
  ttft: number[];
  gaps: number[];
}

/**
 * One connection, one stream after another, for `seconds`: time to the first content chunk and
 * the gaps between content chunks, read as they arrive. Cheap enough (tens of streams a second)
 * to run beside wrk without being what limits the run.
 */
async function streamProbe(t: Running, seconds: number): Promise<StreamSample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(t.url + '/v1/chat/completions');
  const s: StreamSample = { streams: 0, errors: 0, ttft: [], gaps: [] };
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    await new Promise<void>((resolve) => {
      const started = performance.now();
      let last = 0;
      let buf = '';
      const req = http.request(
        u,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', ...t.headers } },
        (res) => {
          if (res.statusCode !== 200) {
            s.errors++;
            res.resume();
            res.on('end', resolve);
            return;
          }
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const now = performance.now();
            buf += chunk;
            let i: number;
            while ((i = buf.indexOf('\n\n')) !== -1) {
              const ev = buf.slice(0, i);
              buf = buf.slice(i + 2);
              const m = /"content":"((?:[^"\\]|\\.)+)"/.exec(ev); // a non-empty content delta
              if (!m) continue;
              if (last === 0) s.ttft.push(now - started);
              else s.gaps.push(now - last);
              last = now;
            }
          });
          res.on('end', () => {
            s.streams++;
            resolve();
          });
          res.on('error', () => {
            s.errors++;
            resolve();
          });
        },
      );
      req.on('error', () => {
        s.errors++;
        resolve();
      });
      req.end(STREAM);
    });
  }
  agent.destroy();
  return s;
}

// ---------------------------------------------------------------- targets

interface Running {
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
}

interface SpanCounts {
  exported: number;
  droppedQueueFull: number;
  droppedExportFailed: number;
  /** gateway_requests_total (the /v1/ routes) summed over its labels: what spans per request are counted over. */
  requests: number;
  sinkPosts: number;
  sinkBytes: number;
}

interface TargetDef {
  name: string;
  what: string;
  start(diag: Diagnose | undefined): Promise<Running>;
  /** Measured only when named in --targets. */
  optional?: boolean;
}
interface Diagnose {
  profDir: string;
  probeFile: string;
}

let SIM_URL = '';
let WRK = '';

/** A gateway target's database: its env, how to open it afterwards, and its server's processes when the gateway starts them (counted as the target's CPU). */
interface TargetDatabase {
  env: Record<string, string>;
  open: () => Promise<Db>;
  stop: () => Promise<void>;
  pids?: () => number[];
}

/** What a gateway target adds to a plain gateway: settings, and a step once it is ready (before the bench key is made). */
interface GatewayExtras {
  env?: Record<string, string>;
  setup?: (gateway: { rpcUrl: string; db: TargetDatabase }) => Promise<void>;
  /** The billing line also counts the usage rows by the deployment that served them. */
  byDeployment?: boolean;
}

async function gatewayTarget(
  name: string,
  database: () => Promise<TargetDatabase>,
  diag: Diagnose | undefined,
  extras: GatewayExtras = {},
): Promise<Running> {
  const db = await database();
  const port = await freePort();
  const grpcPort = await freePort();
  const logFile = path.join(WORK_DIR, `${name}.log`);
  const nodeArgs = diag ? ['--cpu-prof', `--cpu-prof-dir=${diag.profDir}`, '--import', './bench/loop-probe.ts'] : [];
  const { child } = await startChild(process.execPath, [...nodeArgs, 'src/process/main.ts'], {
    logFile,
    env: {
      ...db.env,
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${SIM_URL}/v1`,
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
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${grpcPort}` }));
  const created = await billing.createKey({ creditsNano: OPENING_NANO, label: 'bench' });
  return {
    url: `http://127.0.0.1:${port}`,
    headers: { Authorization: `Bearer ${created.apiKey}` },
    pids: () => [child.pid!, ...(db.pids?.() ?? [])],
    nodePid: child.pid!,
    stop: () => stopChild(child),
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
        EXACT_ALL &&= exact;
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
async function passThrough(args: string[], diag: Diagnose | undefined): Promise<Running> {
  const nodeArgs = diag ? ['--cpu-prof', `--cpu-prof-dir=${diag.profDir}`, '--import', './bench/loop-probe.ts'] : [];
  const { child, line } = await startChild(process.execPath, [...nodeArgs, ...args], {
    env: { UPSTREAM_URL: SIM_URL, UPSTREAM_KEY, ...(diag ? { LOOP_PROBE_FILE: diag.probeFile } : {}) },
    readyLine: /^http/,
  });
  return { url: line.trim(), headers: {}, pids: () => [child.pid!], nodePid: child.pid!, stop: () => stopChild(child) };
}

let EXACT_ALL = true;
let WORK_DIR = '';
let pgServer: TestPostgres | undefined;

/**
 * The trace targets' sampling: the default sampler samples every trace (parentbased_always_on);
 * 1 % is parentbased_traceidratio at 0.01 (docs/observability.md). The export queue keeps the
 * defaults (OTEL_BSP_*: 5 s schedule delay, 2048 spans, batches of 512), named in TRACE_QUEUE.
 */
const TRACE_SAMPLING: { percent: number; what: string; env: Record<string, string> }[] = [
  { percent: 100, what: 'every trace sampled (the default sampler)', env: {} },
  {
    percent: 1,
    what: '1 % of traces sampled (parentbased_traceidratio 0.01)',
    env: { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
  },
];
const TRACE_QUEUE = {
  OTEL_BSP_SCHEDULE_DELAY: '5000',
  OTEL_BSP_MAX_QUEUE_SIZE: '2048',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
};

const TARGETS: TargetDef[] = [
  {
    name: 'direct',
    what: 'the upstream simulator itself (no gateway)',
    async start() {
      return {
        url: SIM_URL,
        headers: { Authorization: `Bearer ${UPSTREAM_KEY}` },
        pids: () => [SIM_PID],
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
    start: (diag) =>
      gatewayTarget(
        'gateway-embedded',
        async () => {
          const dataDir = fs.mkdtempSync(path.join(WORK_DIR, 'data-'));
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
            stop: async () => {
              await server?.stop();
            },
          };
        },
        diag,
      ),
  },
  {
    name: 'gateway-postgres',
    what: 'this gateway with DATABASE_URL: a PostgreSQL server of its own (credit leases, key cache)',
    start: (diag) => gatewayTarget('gateway-postgres', postgresDatabase, diag),
  },
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
          logFile: path.join(WORK_DIR, 'portkey.log'),
        },
      );
      await waitHttp(`http://127.0.0.1:${port}/`, 60);
      return {
        url: `http://127.0.0.1:${port}`,
        headers: {
          Authorization: `Bearer ${UPSTREAM_KEY}`,
          'x-portkey-provider': 'openai',
          'x-portkey-custom-host': `${SIM_URL}/v1`,
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
      const config = path.join(WORK_DIR, 'litellm.yaml');
      fs.writeFileSync(
        config,
        `model_list:\n  - model_name: gpt-4o-mini\n    litellm_params:\n      model: openai/gpt-4o-mini\n      api_base: ${SIM_URL}/v1\n      api_key: ${UPSTREAM_KEY}\n`,
      );
      const { child } = await startChild(
        bin,
        ['--config', config, '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1'],
        {
          logFile: path.join(WORK_DIR, 'litellm.log'),
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
];

let SIM_PID = 0;

/** gateway-postgres's database: a durable PostgreSQL server of its own (counted as the target's CPU). */
async function postgresDatabase(): Promise<TargetDatabase> {
  pgServer = await startPostgres({ durable: true }); // fsync on, as a production server runs
  await createDatabase(pgServer.url(), 'bench');
  const url = pgServer.url('bench');
  return {
    env: { DATABASE_URL: url },
    pids: pgProcesses,
    open: () => openDb({ databaseUrl: url, poolMax: 1 }),
    stop: async () => {
      await pgServer?.stop();
      pgServer = undefined;
    },
  };
}

/**
 * gateway-postgres exporting its traces to an OTLP sink (bench/otlp-sink.ts) that this target
 * starts first and stops last (the gateway's shutdown exports what it still holds). The sink's CPU
 * is counted apart (sidePids): not in the gateway's CPU per request, not in `others`.
 */
async function tracedGateway(
  name: string,
  sampling: Record<string, string>,
  diag: Diagnose | undefined,
): Promise<Running> {
  const sink = await startChild(process.execPath, ['bench/otlp-sink.ts'], {
    logFile: path.join(WORK_DIR, `${name}-sink.log`),
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
const DEPLOYMENT_KEY_ENV = 'BENCH_DEPLOYMENT_KEY';
const DEPLOYMENTS = ['sim-1', 'sim-2', 'sim-3'];

/**
 * gpt-4o-mini on three deployments (docs/providers.md): three openai-dialect providers at the
 * simulator, each with its credential named by DEPLOYMENT_KEY_ENV, then the book with the model's
 * deployments, applied over the RPC; ready once this gateway serves all three.
 */
async function threeDeployments({ rpcUrl, db }: { rpcUrl: string; db: TargetDatabase }): Promise<void> {
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
  doc.providers.push(...DEPLOYMENTS.map((id) => ({ id, dialect: 'openai', baseUrl: `${SIM_URL}/v1` })));
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

function pgProcesses(): number[] {
  // The postmaster (started with `-c port=N …`, as another user when we are root); its backends
  // and background workers are its children.
  return pgServer ? processTreesMatching(`-c port=${pgServer.port} `) : [];
}

/** The processes whose command line contains `pattern`, with all their descendants. */
function processTreesMatching(pattern: string): number[] {
  const out = spawnSync('pgrep', ['-f', '--', pattern], { encoding: 'utf8' }).stdout.trim();
  return out ? [...new Set(out.split('\n').flatMap((p) => treeOf(Number(p))))] : [];
}

// ---------------------------------------------------------------- measuring

interface Rep {
  rps: number;
  p50: number;
  p99: number;
  p75: number;
  errors: number;
  cpuUsPerReq: number;
  wrkCpuShare: number;
  othersBusy: number;
  /** Cores' worth of time the hypervisor took from this VM during the measurement. */
  steal: number;
  /** The CPU per request of the target's side processes (the OTLP sink), when it has any. */
  sideUsPerReq?: number;
}
interface StreamRep {
  streamsPerS: number;
  ttftP50: number;
  ttftP99: number;
  gapP50: number;
  gapP99: number;
  errors: number;
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const median = (xs: number[]) => pct(xs, 50);
/** Half the range around the median, as a share: ±x. */
const spread = (xs: number[]) => (xs.length < 2 ? 0 : (Math.max(...xs) - Math.min(...xs)) / 2 / median(xs));

/**
 * These two cores may be shared (other users, a test suite): before each measurement, wait (up
 * to QUIET_WAIT_S) until the rest of the machine uses less than a quarter of a core, so the
 * figures are the targets', not the neighbours'. Every measurement reports what others used.
 */
async function awaitQuiet(): Promise<void> {
  const until = Date.now() + QUIET_WAIT_S * 1000;
  for (;;) {
    const b0 = machineTimes().busy;
    await new Promise((r) => setTimeout(r, 1000));
    const others = (machineTimes().busy - b0) / 1000;
    if (others < 0.25) return;
    if (Date.now() > until) {
      console.log(`  (the machine stayed busy: ${others.toFixed(2)} cores used by other processes; measuring anyway)`);
      return;
    }
  }
}

async function measureChat(t: Running, connections: number, window?: { begin(): void; end(): void }): Promise<Rep> {
  await awaitQuiet();
  await wrk(t, '/v1/chat/completions', CHAT, connections, WARMUP);
  window?.begin();
  const pids = t.pids();
  const cpu0 = cpuMsOf(pids);
  const sim0 = cpuMsOf([SIM_PID]);
  const sidePids = t.sidePids?.() ?? [];
  const side0 = cpuMsOf(sidePids);
  const times0 = machineTimes();
  const w = await wrk(t, '/v1/chat/completions', CHAT, connections, SECONDS);
  window?.end();
  const cpu = cpuMsOf(pids) - cpu0;
  const sim = t.pids().includes(SIM_PID) ? 0 : cpuMsOf([SIM_PID]) - sim0;
  const side = cpuMsOf(sidePids) - side0;
  const times1 = machineTimes();
  const busy = times1.busy - times0.busy;
  const ok = w.rps * w.durationS;
  return {
    rps: w.rps,
    p50: w.p50,
    p75: w.p75,
    p99: w.p99,
    errors: w.errors,
    cpuUsPerReq: (cpu * 1000) / Math.max(1, ok),
    wrkCpuShare: w.wrkCpuMs / (w.durationS * 1000 + WARMUP * 1000),
    // What the rest of the machine (other users of these two cores) used meanwhile, in cores.
    othersBusy:
      Math.max(0, busy - cpu - sim - side - w.wrkCpuMs * (w.durationS / (w.durationS + WARMUP))) / (w.durationS * 1000),
    steal: (times1.steal - times0.steal) / (w.durationS * 1000),
    ...(sidePids.length ? { sideUsPerReq: (side * 1000) / Math.max(1, ok) } : {}),
  };
}

async function measureStream(t: Running, connections: number): Promise<StreamRep> {
  await awaitQuiet();
  if (connections === 1) {
    await streamProbe(t, 1);
    const s = await streamProbe(t, STREAM_SECONDS);
    return {
      streamsPerS: s.streams / STREAM_SECONDS,
      ttftP50: pct(s.ttft, 50),
      ttftP99: pct(s.ttft, 99),
      gapP50: pct(s.gaps, 50),
      gapP99: pct(s.gaps, 99),
      errors: s.errors,
    };
  }
  // c connections: wrk carries c-1 of them (cheap), one probe connection reads the timing.
  await wrk(t, '/v1/chat/completions', STREAM, connections - 1, WARMUP);
  const [w, s] = await Promise.all([
    wrk(t, '/v1/chat/completions', STREAM, connections - 1, STREAM_SECONDS),
    streamProbe(t, STREAM_SECONDS - 0.2),
  ]);
  return {
    streamsPerS: w.rps + s.streams / STREAM_SECONDS,
    ttftP50: pct(s.ttft, 50),
    ttftP99: pct(s.ttft, 99),
    gapP50: pct(s.gaps, 50),
    gapP99: pct(s.gaps, 99),
    errors: w.errors + s.errors,
  };
}

interface TargetResult {
  name: string;
  chat: Record<number, Rep[]>;
  stream: Record<number, StreamRep[]>;
  check?: string;
  diagnosis?: string;
  error?: string;
  /** The trace targets: span counts once the run's spans were exported (before the gateway stopped). */
  spans?: SpanCounts;
}

async function diagnose(t: Running, diag: Diagnose, window: { from: bigint; to: bigint }): Promise<string> {
  const lines: string[] = [];
  const probe = fs.existsSync(diag.probeFile) ? JSON.parse(fs.readFileSync(diag.probeFile, 'utf8')) : undefined;
  if (probe)
    lines.push(
      `  event loop (c=32 window): delay p50 ${probe.loopDelayMs.p50} ms, p99 ${probe.loopDelayMs.p99} ms, max ${probe.loopDelayMs.max} ms (10 ms sampling); GC ${JSON.stringify(probe.gc)}`,
    );
  await t.stop();
  const prof = fs.readdirSync(diag.profDir).find((f) => f.endsWith('.cpuprofile'));
  if (prof) {
    const p = JSON.parse(fs.readFileSync(path.join(diag.profDir, prof), 'utf8'));
    // Profile times are CLOCK_MONOTONIC microseconds, as process.hrtime is.
    const from = Number(window.from / 1000n) - p.startTime;
    const to = Number(window.to / 1000n) - p.startTime;
    lines.push(`  CPU profile of the c=32 window (${prof}):`, formatSummary(summarise(p, 30, from / 1000, to / 1000)));
  }
  return lines.join('\n');
}

/** strace -c -f attached to the running Node process for one wrk run: syscalls per request. */
async function syscallsPerRequest(t: Running): Promise<string> {
  const strace = ensureStrace();
  const out = path.join(WORK_DIR, `strace-${t.nodePid}.txt`);
  const tids = fs.readdirSync(`/proc/${t.nodePid}/task`);
  await wrk(t, '/v1/chat/completions', CHAT, 32, WARMUP);
  const tracer = spawn(strace, ['-c', '-f', '-o', out, ...tids.flatMap((tid) => ['-p', tid])], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1000)); // attached
  const w = await wrk(t, '/v1/chat/completions', CHAT, 32, 5);
  tracer.kill('SIGINT');
  await new Promise((r) => tracer.once('exit', r));
  const text = fs.readFileSync(out, 'utf8');
  const rows = text
    .split('\n')
    .filter((l) => /^\s*[\d.]+\s+[\d.]+\s+\d+\s+\d+/.test(l) && !/\stotal\s*$/.test(l))
    .map((l) => {
      const f = l.trim().split(/\s+/);
      return { calls: Number(f[3]), name: f[f.length - 1]! };
    });
  const n = Math.max(1, w.rps * w.durationS);
  const total = rows.reduce((a, r) => a + r.calls, 0);
  const top = rows
    .sort((a, b) => b.calls - a.calls)
    .slice(0, 8)
    .map((r) => `${r.name} ${(r.calls / n).toFixed(2)}`)
    .join(', ');
  return `  syscalls per request under strace (c=32, ${Math.round(w.rps)} req/s traced): ${(total / n).toFixed(1)}: ${top}`;
}

/** Ready means answering: the first chat request can take seconds (lazy imports, JIT, caches). */
async function firstAnswer(t: Running): Promise<void> {
  const until = Date.now() + 120_000;
  for (;;) {
    try {
      const r = await fetch(t.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...t.headers },
        body: CHAT,
      });
      const text = await r.text();
      if (r.status === 200) return;
      if (Date.now() > until) throw new Error(`no 200 in 120 s: ${r.status} ${text.slice(0, 300)}`);
    } catch (err) {
      if (Date.now() > until) throw err;
    }
    await new Promise((res) => setTimeout(res, 500));
  }
}

async function runTarget(def: TargetDef): Promise<TargetResult> {
  const r: TargetResult = { name: def.name, chat: {}, stream: {} };
  let t: Running | undefined;
  try {
    t = await def.start(undefined);
    await firstAnswer(t);
    for (const c of [1, 32]) {
      r.chat[c] = [];
      for (let i = 0; i < REPS; i++) {
        const before = await t.spans?.();
        const rep = await measureChat(t, c);
        r.chat[c].push(rep);
        console.log(
          `  ${def.name} chat c=${c} rep ${i + 1}: ${rep.rps.toFixed(0)} req/s, p50 ${rep.p50.toFixed(2)} ms, p99 ${rep.p99.toFixed(2)} ms, errors ${rep.errors}, ` +
            `${rep.cpuUsPerReq.toFixed(0)} µs CPU/req, wrk ${(rep.wrkCpuShare * 100).toFixed(0)}% of a core, others ${rep.othersBusy.toFixed(2)} cores, steal ${rep.steal.toFixed(2)} cores` +
            (before ? `${spanDelta(before, await t.spans!())}, sink ${rep.sideUsPerReq!.toFixed(0)} µs CPU/req` : ''),
        );
      }
    }
    if (!values['no-streams']) {
      for (const c of [1, 32]) {
        r.stream[c] = [];
        for (let i = 0; i < REPS; i++) {
          const s = await measureStream(t, c);
          r.stream[c].push(s);
          console.log(
            `  ${def.name} stream c=${c} rep ${i + 1}: ${s.streamsPerS.toFixed(0)} streams/s, ttft p50 ${s.ttftP50.toFixed(2)} p99 ${s.ttftP99.toFixed(2)} ms, gap p50 ${s.gapP50.toFixed(2)} p99 ${s.gapP99.toFixed(2)} ms, errors ${s.errors}`,
          );
        }
      }
    }
    if (t.spans) {
      // What is still queued leaves within the schedule delay (fewer than a batch, no load now).
      await new Promise((res) => setTimeout(res, Number(TRACE_QUEUE.OTEL_BSP_SCHEDULE_DELAY) + 1000));
      r.spans = await t.spans();
      console.log(`  ${def.name} ${spanLine(r.spans)}`);
    }
  } catch (err) {
    r.error = (err as Error).message;
    console.log(`  ${def.name}: ${r.error}`);
  } finally {
    await t?.stop();
  }
  r.check = t && (await checkBooks(t));
  if (r.check) console.log(`  ${def.name} ${r.check}`);
  if (values.diagnose && (def.name.startsWith('gateway') || def.name === 'bare')) {
    r.diagnosis = await diagnoseTarget(def).catch((err) => `diagnosis failed: ${(err as Error).message}`);
    console.log(r.diagnosis);
  }
  return r;
}

/** A trace target's span counts: exported, dropped, per request served, what the sink received. */
function spanLine(s: SpanCounts): string {
  const dropped = s.droppedQueueFull + s.droppedExportFailed;
  return (
    `spans: ${s.exported} exported, ${dropped} dropped (queue full ${s.droppedQueueFull}, export failed ${s.droppedExportFailed}) ` +
    `over ${s.requests} requests (${((s.exported + dropped) / Math.max(1, s.requests)).toFixed(2)} spans/request); ` +
    `sink: ${s.sinkPosts} exports, ${(s.sinkBytes / 2 ** 20).toFixed(1)} MiB${dropped ? ' => SPANS DROPPED' : ''}`
  );
}

/** What one repetition (its warm-up included) added to the span counts; exports lag by up to the schedule delay. */
function spanDelta(a: SpanCounts, b: SpanCounts): string {
  const dropped = b.droppedQueueFull + b.droppedExportFailed - a.droppedQueueFull - a.droppedExportFailed;
  return `, spans +${b.exported - a.exported} exported, +${dropped} dropped`;
}

/** The billing check of a gateway target after it stopped (undefined for the others); a check that fails counts as not exact. */
async function checkBooks(t: Running): Promise<string | undefined> {
  return t.check?.().catch((err) => {
    EXACT_ALL = false;
    return `billing check failed: ${(err as Error).message}`;
  });
}

/**
 * Where the time goes, on fresh starts of the target (their books checked too): a CPU profile, event-loop delay and GC of
 * one c=32 run; then, without the profiler (its signals would be counted), syscalls per request.
 */
async function diagnoseTarget(def: TargetDef): Promise<string> {
  const diag = {
    profDir: fs.mkdtempSync(path.join(WORK_DIR, `prof-${def.name}-`)),
    probeFile: path.join(WORK_DIR, `probe-${def.name}.json`),
  };
  const lines: string[] = [];
  let t = await def.start(diag);
  try {
    await firstAnswer(t);
    let from = 0n;
    let to = 0n;
    const rep = await measureChat(t, 32, {
      begin: () => {
        process.kill(t.nodePid!, 'SIGUSR2');
        from = process.hrtime.bigint();
      },
      end: () => {
        to = process.hrtime.bigint();
        process.kill(t.nodePid!, 'SIGUSR2');
      },
    });
    await new Promise((res) => setTimeout(res, 300));
    lines.push(
      `  profiled run: ${rep.rps.toFixed(0)} req/s at c=32, p50 ${rep.p50.toFixed(2)} ms, p99 ${rep.p99.toFixed(2)} ms, ${rep.cpuUsPerReq.toFixed(0)} µs CPU/req, others ${rep.othersBusy.toFixed(2)} cores`,
    );
    lines.push(await diagnose(t, diag, { from, to }));
  } finally {
    await t.stop();
    const books = await checkBooks(t);
    if (books) lines.push(`  profiled run's ${books}`);
  }
  t = await def.start(undefined);
  try {
    await firstAnswer(t);
    lines.push(await syscallsPerRequest(t));
  } finally {
    await t.stop();
    const books = await checkBooks(t);
    if (books) lines.push(`  strace run's ${books}`);
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------- report

function report(results: TargetResult[], machine: string): string {
  const out: string[] = [];
  const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  const pad = (cells: string[], widths: number[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' ');
  const byName = new Map(results.map((r) => [r.name, r]));
  const med = (name: string, c: number, k: keyof Rep) =>
    median((byName.get(name)?.chat[c] ?? []).map((x) => x[k] ?? NaN));
  const direct = { p50c1: med('direct', 1, 'p50') };
  out.push(`machine: ${machine}`);
  out.push(
    `wrk ${WRK} (1 thread), ${REPS} x ${SECONDS} s per cell after a ${WARMUP} s warm-up; unstreamed chat (16 output tokens); billing on, rate limits off; gateway log level ${LOG_LEVEL} (to a file)${NICE ? `; measured processes at nice ${NICE}` : ''}`,
  );
  out.push('');
  out.push(
    'unstreamed chat: median of the repetitions, spread ±% (half the range over the median); latency in ms (wrk); CPU µs/r: the',
  );
  out.push(
    "target's own CPU per request at c=32 (with its database server); others: most cores used by other processes (and interrupt",
  );
  out.push(
    'work not charged to a process) during a repetition; steal: most cores taken from this VM by its hypervisor during a repetition',
  );
  // The name column fits the longest target name measured (18 unless gateway-3-deployments is).
  const nameWidth = Math.max(18, ...results.map((r) => r.name.length));
  const w = [nameWidth, 16, 7, 7, 8, 16, 7, 7, 8, 9, 7, 7, 7];
  out.push(
    pad(
      [
        'target',
        'c=1 req/s',
        'p50',
        'p99',
        '+p50',
        'c=32 req/s',
        'p50',
        'p99',
        'p99/p50',
        'CPU µs/r',
        'errors',
        'others',
        'steal',
      ],
      w,
    ),
  );
  for (const r of results) {
    if (!r.chat[1]?.length) {
      out.push(`${r.name.padEnd(nameWidth)} ${r.error ?? 'not measured'}`);
      continue;
    }
    const c1 = r.chat[1]!;
    const c32 = r.chat[32] ?? [];
    const rps = (reps: Rep[]) =>
      `${f(median(reps.map((x) => x.rps)), 0)} ±${f(spread(reps.map((x) => x.rps)) * 100, 0)}%`;
    const p50_32 = median(c32.map((x) => x.p50));
    const p99_32 = median(c32.map((x) => x.p99));
    out.push(
      pad(
        [
          r.name,
          rps(c1),
          f(median(c1.map((x) => x.p50))),
          f(median(c1.map((x) => x.p99))),
          r.name === 'direct' ? '' : f(median(c1.map((x) => x.p50)) - direct.p50c1),
          c32.length ? rps(c32) : '-',
          f(p50_32),
          f(p99_32),
          f(p99_32 / p50_32, 1),
          f(median(c32.map((x) => x.cpuUsPerReq)), 0),
          String([...c1, ...c32].reduce((a, x) => a + x.errors, 0)),
          f(Math.max(...[...c1, ...c32].map((x) => x.othersBusy))),
          f(Math.max(...[...c1, ...c32].map((x) => x.steal))),
        ],
        w,
      ),
    );
  }
  const ratio = (a: string, b: string) => med(a, 32, 'rps') / med(b, 32, 'rps');
  out.push('');
  for (const g of ['gateway-embedded', 'gateway-postgres']) {
    if (!byName.get(g)?.chat[32]?.length) continue;
    const parts = [`${g} at c=32: ${f(ratio(g, 'bare'))}x the bare pass-through (target >= 0.5)`];
    if (byName.get('portkey')?.chat[32]?.length) parts.push(`${f(ratio(g, 'portkey'))}x Portkey (target >= 3)`);
    if (byName.get('litellm')?.chat[32]?.length) parts.push(`${f(ratio(g, 'litellm'))}x LiteLLM`);
    const reps = byName.get(g)!.chat[32]!;
    parts.push(
      `spread ±${f(spread(reps.map((x) => x.rps)) * 100, 0)}% (target < 15), worst p99/p50 ${f(Math.max(...reps.map((x) => x.p99 / x.p50)), 1)} (target <= 4)`,
    );
    parts.push(`added p50 at c=1 ${f(med(g, 1, 'p50') - direct.p50c1)} ms (target <= 0.3)`);
    out.push(parts.join('; '));
  }
  // Routing over three deployments against the same gateway on one (both measured in this run).
  if (byName.get('gateway-3-deployments')?.chat[32]?.length && byName.get('gateway-postgres')?.chat[32]?.length) {
    const [three, one] = ['gateway-3-deployments', 'gateway-postgres'];
    const cpu = (g: string) => med(g, 32, 'cpuUsPerReq');
    out.push(
      `${three} against ${one}: c=32 ${f(ratio(three, one))}x the throughput, c=1 ${f(med(three, 1, 'rps') / med(one, 1, 'rps'))}x; ` +
        `CPU ${f(cpu(three), 0)} against ${f(cpu(one), 0)} µs/req (${cpu(three) >= cpu(one) ? '+' : ''}${f(cpu(three) - cpu(one), 0)})`,
    );
  }
  // Tracing on against off (gateway-postgres), when both are measured in this run; the sink's CPU apart.
  for (const { percent } of TRACE_SAMPLING) {
    const traced = `gateway-trace-${percent}`;
    const off = 'gateway-postgres';
    if (!byName.get(traced)?.chat[32]?.length || !byName.get(off)?.chat[32]?.length) continue;
    const cpu = (g: string) => med(g, 32, 'cpuUsPerReq');
    const d = cpu(traced) - cpu(off);
    out.push(
      `${traced} against ${off}: c=32 ${f(ratio(traced, off))}x the throughput, c=1 ${f(med(traced, 1, 'rps') / med(off, 1, 'rps'))}x; ` +
        `CPU ${f(cpu(traced), 0)} against ${f(cpu(off), 0)} µs/req (${d >= 0 ? '+' : ''}${f(d, 0)}, ${d >= 0 ? '+' : ''}${f((d / cpu(off)) * 100, 0)}%); ` +
        `the OTLP sink ${f(med(traced, 32, 'sideUsPerReq'), 0)} µs/req more, in its own process`,
    );
  }
  if (!values['no-streams']) {
    out.push('');
    out.push(
      'streamed chat (16 chunks, 2 ms apart upstream): time to first token and gaps between chunks, ms, median of the repetitions',
    );
    const ws = [nameWidth, 10, 9, 9, 9, 9, 11, 9, 9, 9, 9, 7];
    out.push(
      pad(
        [
          'target',
          'c=1 ttft',
          '+ttft',
          'ttft p99',
          'gap p50',
          'gap p99',
          'c=32 str/s',
          'ttft',
          '+ttft',
          'ttft p99',
          'gap p99',
          'errors',
        ],
        ws,
      ),
    );
    const sm = (name: string, c: number, k: keyof StreamRep) =>
      median((byName.get(name)?.stream[c] ?? []).map((x) => x[k]));
    for (const r of results) {
      if (!r.stream[1]?.length) continue;
      const errs = [...(r.stream[1] ?? []), ...(r.stream[32] ?? [])].reduce((a, x) => a + x.errors, 0);
      out.push(
        pad(
          [
            r.name,
            f(sm(r.name, 1, 'ttftP50')),
            r.name === 'direct' ? '' : f(sm(r.name, 1, 'ttftP50') - sm('direct', 1, 'ttftP50')),
            f(sm(r.name, 1, 'ttftP99')),
            f(sm(r.name, 1, 'gapP50')),
            f(sm(r.name, 1, 'gapP99')),
            f(sm(r.name, 32, 'streamsPerS'), 0),
            f(sm(r.name, 32, 'ttftP50')),
            r.name === 'direct' ? '' : f(sm(r.name, 32, 'ttftP50') - sm('direct', 32, 'ttftP50')),
            f(sm(r.name, 32, 'ttftP99')),
            f(sm(r.name, 32, 'gapP99')),
            String(errs),
          ],
          ws,
        ),
      );
    }
  }
  out.push('');
  for (const r of results) if (r.check) out.push(`${r.name} ${r.check}`);
  for (const r of results) if (r.spans) out.push(`${r.name} ${spanLine(r.spans)}`);
  return out.join('\n');
}

// ---------------------------------------------------------------- main

async function main() {
  WRK = findWrk();
  if (NICE) os.setPriority(NICE);
  // Tracing is what the trace targets set, nothing else: OpenTelemetry settings of this shell
  // would turn it on in every gateway target (or send the trace targets' spans elsewhere).
  const inherited = Object.keys(process.env).filter((k) => k.startsWith('OTEL_'));
  for (const k of inherited) delete process.env[k];
  if (inherited.length)
    console.log(`not passed to the targets: ${inherited.join(', ')} (tracing only where a target sets it)`);
  WORK_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-bench-'));
  fs.chmodSync(WORK_DIR, 0o755); // the embedded target's PostgreSQL server (as root: another user) reaches its DATA_DIR in here
  const wanted = values.targets ? values.targets.split(',') : TARGETS.filter((t) => !t.optional).map((t) => t.name);
  for (const n of wanted)
    if (!TARGETS.some((t) => t.name === n))
      throw new Error(`unknown target ${n}; targets: ${TARGETS.map((t) => t.name).join(', ')}`);
  const cpus = os.cpus();
  const machine = `${cpus[0]?.model ?? 'cpu'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, node ${process.version}, load average at start ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
  console.log(`machine: ${machine}\nwork folder: ${WORK_DIR}`);

  const sim = await startChild(process.execPath, ['bench/simulator-main.ts'], {
    env: { SIM_API_KEY: UPSTREAM_KEY },
    readyLine: /^http/,
  });
  SIM_URL = sim.line.trim();
  SIM_PID = sim.child.pid!;
  const results: TargetResult[] = [];
  try {
    for (const def of TARGETS.filter((t) => wanted.includes(t.name))) {
      console.log(`\n${def.name}: ${def.what}`);
      results.push(await runTarget(def));
    }
  } finally {
    await stopChild(sim.child);
    await pgServer?.stop();
  }
  const text = report(results, machine);
  console.log('\n' + text);
  for (const r of results) if (r.diagnosis) console.log(`\n${r.name} diagnosis:\n${r.diagnosis}`);
  fs.mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  const file = path.join(ROOT, 'bench', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(
    file,
    JSON.stringify({ machine, reps: REPS, seconds: SECONDS, logLevel: LOG_LEVEL, results }, null, 2),
  );
  console.log(`\nresults: ${path.relative(ROOT, file)}; logs: ${WORK_DIR}`);
  if (!EXACT_ALL) process.exitCode = 1;
}

const deadline = setTimeout(() => {
  console.error('bench: over its time limit (45 min), stopping');
  void cleanup().then(() => process.exit(2));
}, 45 * 60_000);
deadline.unref();

async function cleanup() {
  for (const c of children) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await pgServer?.stop().catch(() => {});
}

process.on('SIGINT', () => {
  void cleanup().then(() => process.exit(130));
});
main().then(
  () => process.exit(process.exitCode ?? 0),
  async (err) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  },
);
