// `npm run bench [-- --seconds 5] [--quick] [--no-portkey] [--billing lease|hold] [--rpm N]`: the same load, on loopback, straight
// to the upstream simulator, through this gateway (billing on, real PostgreSQL) and through the
// Portkey gateway, at fixed concurrency; then a fixed 1,000 requests/s. Prints requests/s,
// p50/p99 latency, the added latency (target percentile minus direct percentile), ratios and
// peak RSS; streams add time to first token and the gap between chunks. Not a test: figures.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import pg from 'pg';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../src/gen/gateway/v1/billing_pb.js';
import { createDatabase, startPostgres } from '../test/support/postgres.ts';
import { startGatewayProcess } from '../test/support/gateway-process.ts';
import { freePort } from '../test/support/ports.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string' }, quick: { type: 'boolean' }, 'no-portkey': { type: 'boolean' }, billing: { type: 'string' }, rpm: { type: 'string' } } });
const SECONDS = Number(values.seconds ?? (values.quick ? 2 : 5));
const LEVELS = values.quick ? [1, 16] : [1, 16, 32, 128];
const BILLING = values.billing ?? 'lease';
// Per-key requests-per-minute limit of the bench key (0: none). Set high, it measures the cost of counting in grants.
const RPM = values.rpm ?? '0';
const ROOT = path.resolve(import.meta.dirname, '..');
const UPSTREAM_KEY = 'sk-bench-upstream';
const children: ChildProcess[] = [];

type Target = { name: string; url: string; headers: Record<string, string>; pid: number };
type Workload = { name: string; path: string; stream: boolean; body: string };

const workloads: Workload[] = [
  { name: 'chat', path: '/v1/chat/completions', stream: false, body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello [sim tokens=16]' }] }) },
  { name: 'chat-stream', path: '/v1/chat/completions', stream: true, body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'Say hello [sim tokens=16 delay=2]' }] }) },
  { name: 'embeddings', path: '/v1/embeddings', stream: false, body: JSON.stringify({ model: 'text-embedding-3-small', input: 'The quick brown fox jumps over the lazy dog', encoding_format: 'float' }) },
];

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

const reported = new Set<string>();

interface Sample { latency: number[]; ttft: number[]; gaps: number[]; errors: number; done: number; elapsed: number }

/** One request; for streams, the time to the first content chunk and the gaps between chunks. */
async function once(pool: Pool, t: Target, w: Workload, s: Sample): Promise<void> {
  const started = performance.now();
  const res = await pool.request({ method: 'POST', path: w.path, headers: { 'content-type': 'application/json', ...t.headers }, body: w.body });
  if (res.statusCode !== 200) {
    s.errors++;
    const text = await res.body.text();
    if (!reported.has(t.name)) { reported.add(t.name); console.error(`${t.name}: ${res.statusCode} ${text.slice(0, 300)}`); }
    return;
  }
  if (!w.stream) {
    await res.body.arrayBuffer();
  } else {
    let last = 0;
    for await (const chunk of res.body) {
      const now = performance.now();
      if ((chunk as Buffer).includes('"content"')) {
        if (last === 0) s.ttft.push(now - started);
        else s.gaps.push(now - last);
        last = now;
      }
    }
  }
  s.latency.push(performance.now() - started);
  s.done++;
}

async function closedLoop(t: Target, w: Workload, concurrency: number): Promise<Sample> {
  const pool = new Pool(new URL(t.url).origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const s: Sample = { latency: [], ttft: [], gaps: [], errors: 0, done: 0, elapsed: 0 };
  // Warm-up: connections and JIT, not measured.
  await Promise.all(Array.from({ length: concurrency }, () => once(pool, t, w, { latency: [], ttft: [], gaps: [], errors: 0, done: 0, elapsed: 0 }).catch(() => {})));
  const started = performance.now();
  const until = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) await once(pool, t, w, s).catch(() => { s.errors++; });
  }));
  s.elapsed = (performance.now() - started) / 1000;
  await pool.close();
  return s;
}

/** Open loop: requests started at a fixed rate whatever the answers do. */
async function fixedRate(t: Target, w: Workload, perSecond: number): Promise<Sample> {
  const pool = new Pool(new URL(t.url).origin, { connections: 256, pipelining: 1 });
  const s: Sample = { latency: [], ttft: [], gaps: [], errors: 0, done: 0, elapsed: 0 };
  await Promise.all(Array.from({ length: 32 }, () => once(pool, t, w, { latency: [], ttft: [], gaps: [], errors: 0, done: 0, elapsed: 0 }).catch(() => {})));
  const started = performance.now();
  const total = perSecond * SECONDS;
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(once(pool, t, w, s).catch(() => { s.errors++; }));
  }
  await Promise.all(pending);
  s.elapsed = (performance.now() - started) / 1000;
  await pool.close();
  return s;
}

async function startChild(cmd: string, args: string[], env: Record<string, string>, readyLine?: RegExp): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const rl = readline.createInterface({ input: child.stdout! });
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start`)), 30_000);
    rl.on('line', (l) => { if (!readyLine || readyLine.test(l)) { clearTimeout(timer); resolve(l); } });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
  child.stdout!.resume();
  return { child, line };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-bench-'));
  const pgServer = await startPostgres();
  await createDatabase(pgServer.url(), 'bench');
  try {
    const sim = await startChild(process.execPath, ['bench/simulator-main.ts'], { SIM_API_KEY: UPSTREAM_KEY });
    const simUrl = sim.line.trim();
    const gw = await startGatewayProcess({
      logFile: path.join(dir, 'gateway.log'),
      env: {
        DATABASE_URL: pgServer.url('bench'), OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${simUrl}/v1`,
        RATE_LIMIT_RPM: RPM, RATE_LIMIT_TPM: '0', LOG_LEVEL: 'warn', TEMPORAL_CLI: '/nonexistent', VIDEO_WORKER: '0', BILLING_MODE: BILLING,
      },
    });
    const billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
    const created = await billing.createKey({ creditsNano: 1_000_000_000_000n, label: 'bench' });

    const targets: Target[] = [
      { name: 'direct', url: `${simUrl}/v1`, headers: { authorization: `Bearer ${UPSTREAM_KEY}` }, pid: sim.child.pid! },
      { name: 'gateway', url: `${gw.httpUrl}/v1`, headers: { authorization: `Bearer ${created.apiKey}` }, pid: gw.child.pid! },
    ];
    // The floor: what any Node gateway pays for Fastify in and undici out, with nothing else.
    const bare = await startChild(process.execPath, ['bench/bare-passthrough.ts'], { UPSTREAM_URL: simUrl, UPSTREAM_KEY });
    targets.push({ name: 'bare', url: `${bare.line.trim()}/v1`, headers: {}, pid: bare.child.pid! });
    if (!values['no-portkey']) {
      const port = await freePort();
      const pk = await startChild(process.execPath, ['node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${port}`, '--headless'], { NODE_ENV: 'production' }, /localhost|listening|running|port/i);
      void pk;
      targets.push({ name: 'portkey', url: `http://127.0.0.1:${port}/v1`, headers: { authorization: `Bearer ${UPSTREAM_KEY}`, 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${simUrl}/v1` }, pid: pk.child.pid! });
    }

    const cpu = `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}`;
    console.log(`machine: ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}; ${SECONDS} s per cell, loopback only; gateway billing: ${BILLING}, key limit ${RPM === '0' ? 'none' : `${RPM} requests/minute`}`);
    const results: Record<string, unknown>[] = [];
    const row = (cells: (string | number)[]) => console.log(cells.map((c, i) => String(c).padStart(i === 0 ? 22 : 10)).join(''));
    const f = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '-');
    for (const w of workloads) {
      console.log(`\n${w.name}`);
      row(['target @ concurrency', 'req/s', 'p50 ms', 'p99 ms', '+p50 ms', '+p99 ms', 'x direct', ...(w.stream ? ['ttft p50', 'ttft p99', 'gap p50', 'gap p99'] : []), 'errors']);
      for (const c of LEVELS) {
        const byTarget: Record<string, Sample> = {};
        for (const t of targets) byTarget[t.name] = await closedLoop(t, w, c);
        const d = byTarget.direct!;
        for (const t of targets) {
          const s = byTarget[t.name]!;
          const rps = s.done / s.elapsed;
          row([`${t.name} @ ${c}`, rps.toFixed(0), f(pct(s.latency, 50)), f(pct(s.latency, 99)),
            t.name === 'direct' ? '' : f(pct(s.latency, 50) - pct(d.latency, 50)), t.name === 'direct' ? '' : f(pct(s.latency, 99) - pct(d.latency, 99)),
            (rps / (d.done / d.elapsed)).toFixed(2),
            ...(w.stream ? [f(pct(s.ttft, 50)), f(pct(s.ttft, 99)), f(pct(s.gaps, 50)), f(pct(s.gaps, 99))] : []), s.errors]);
          results.push({ workload: w.name, target: t.name, concurrency: c, rps, p50: pct(s.latency, 50), p99: pct(s.latency, 99), ttftP50: pct(s.ttft, 50), gapP50: pct(s.gaps, 50), errors: s.errors });
        }
        const gwRps = byTarget.gateway!.done / byTarget.gateway!.elapsed;
        if (byTarget.bare && byTarget.bare.done > 0) console.log(`${''.padStart(22)}gateway / bare pass-through throughput: ${(gwRps / (byTarget.bare.done / byTarget.bare.elapsed)).toFixed(2)}x`);
        if (byTarget.portkey && byTarget.portkey.done > 0) console.log(`${''.padStart(22)}gateway / portkey throughput: ${(gwRps / (byTarget.portkey.done / byTarget.portkey.elapsed)).toFixed(2)}x`);
      }
    }

    console.log('\nchat at a fixed 1,000 requests/s');
    row(['target', 'req/s', 'p50 ms', 'p99 ms', '+p50 ms', '+p99 ms', '', 'errors']);
    const fixed: Record<string, Sample> = {};
    for (const t of targets) fixed[t.name] = await fixedRate(t, workloads[0]!, 1000);
    for (const t of targets) {
      const s = fixed[t.name]!;
      const d = fixed.direct!;
      row([t.name, (s.done / s.elapsed).toFixed(0), f(pct(s.latency, 50)), f(pct(s.latency, 99)),
        t.name === 'direct' ? '' : f(pct(s.latency, 50) - pct(d.latency, 50)), t.name === 'direct' ? '' : f(pct(s.latency, 99) - pct(d.latency, 99)), '', s.errors]);
      results.push({ workload: 'chat@1000rps', target: t.name, p50: pct(s.latency, 50), p99: pct(s.latency, 99), errors: s.errors });
    }

    console.log('\npeak RSS (MB): ' + targets.map((t) => `${t.name === 'direct' ? 'simulator' : t.name} ${peakRssMb(t.pid)}`).join(', '));

    // Billing on, exactly: the key's balance went down by the sum of its usage rows. (Stopped
    // first: with leases, charges are written in batches and the lease returned at shutdown.)
    await gw.stop();
    const db = new pg.Pool({ connectionString: pgServer.url('bench'), max: 1 });
    const r = await db.query(`SELECT a.balance_nano::text AS balance, a.held_nano::text AS held,
      (SELECT COALESCE(sum(cost_nano), 0) FROM usage_records u WHERE u.account_id = a.id)::text AS charged,
      (SELECT count(*) FROM usage_records u WHERE u.account_id = a.id AND u.status <> 'lease_returned')::int AS requests FROM accounts a WHERE a.id = $1`, [created.accountId]);
    await db.end();
    const b = r.rows[0];
    const exact = BigInt(b.balance) + BigInt(b.charged) === 1_000_000_000_000n && b.held === '0';
    console.log(`billing: ${b.requests} requests charged ${b.charged} nano-USD; balance + charges = opening balance: ${exact ? 'yes' : 'NO'}; held now ${b.held}`);

    fs.mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
    const out = path.join(ROOT, 'bench', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    fs.writeFileSync(out, JSON.stringify({ machine: cpu, seconds: SECONDS, results }, null, 2));
    console.log(`results: ${path.relative(ROOT, out)}`);
    if (!exact) process.exitCode = 1;
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await pgServer.stop();
  }
}

const deadline = setTimeout(() => { console.error('bench: over its time limit, stopping'); for (const c of children) c.kill('SIGKILL'); process.exit(2); }, 15 * 60_000);
deadline.unref();
main().then(() => process.exit(process.exitCode ?? 0), (err) => { console.error(err); for (const c of children) c.kill('SIGKILL'); process.exit(1); });
