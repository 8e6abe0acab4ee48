// `npm run trace-walk`
// The walk of the end-to-end traces test (test/e2e/traces.test.ts) against a real Jaeger v2
// instead of the test's OTLP receiver, printing what Jaeger has. It starts its own Jaeger
// (scripts/jaeger.sh: in memory, on free ports of 127.0.0.1), PostgreSQL, the upstream simulator
// (with a second deployment under /fallback), a Temporal dev server (as the test harness does; the
// video case is skipped, saying why, when no Temporal CLI can be had) and one gateway process
// exporting OTLP/HTTP to Jaeger with TRACE_CALLER_CONTEXT=continue. Then, one request each:
//   1. a unary chat (OpenAI SDK)           6. a refused 401 (no such key)
//   2. a stream (OpenAI SDK)               7. a refused 402 (a key without credit)
//   3. a Claude message (Anthropic SDK)    8. a video job across its workflow (Temporal)
//   4. a failed upstream (no charge)       9. a chat whose caller sent its own traceparent
//   5. a failover to the second deployment
// For each it finds the trace in Jaeger (the caller's trace id, else Jaeger's search by the tag
// gateway.request_id = the x-request-id answer header), reads it back (GET /api/traces/{id}, until
// the expected spans are in or a bounded wait ends), checks the essentials (the spans and how
// they nest, one trace, the money on the request's span against the answer and the usage row,
// attempts, statuses, the caller's trace continued, the workflow's spans) and prints the trace as
// an indented tree: `name  [kind] duration  key attributes`.
// Exits 0 when every check passed, 1 when one failed, 130 on SIGINT, 2 past its time limit; every
// process it started is stopped in every case. All its traffic is to 127.0.0.1.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import pg from 'pg';
import { Agent, fetch as undiciFetch } from 'undici';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { createDatabase, startPostgres, type TestPostgres } from '../support/postgres.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { freePort } from '../support/ports.ts';
import { startTemporal, type TestTemporal, videoEnv } from '../support/temporal.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { Checks, log, sleep } from './run-report.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** The whole run once Jaeger's binary is at hand (building it the first time takes minutes more). */
const HARD_LIMIT_MS = 240_000;
/** How long a request's trace may take to be complete in Jaeger. */
const TRACE_WAIT_MS = 20_000;
/** How long a video job may take to finish, and its workflow's spans to be in Jaeger. */
const VIDEO_WAIT_MS = 90_000;
const SERVICE = 'metered-ai-gateway';
const UPSTREAM_KEY = 'sk-trace-walk-upstream';
const RPC_CHAT = 'gateway.v1.InferenceService/ChatCompletion';

// ---------------------------------------------------------------- stopping

const stop = new AbortController();
let exitCode = 0;
let workDir: string | undefined;
let jaeger: Jaeger | undefined;
let pgServer: TestPostgres | undefined;
let sim: Simulator | undefined;
let temporal: TestTemporal | undefined;
let gw: GatewayProcess | undefined;
let db: pg.Pool | undefined;
/** Every connection this run opens (to the gateway and to Jaeger), closed before the gateway is stopped (it waits for open ones). */
const agent = new Agent({ connections: 16 });
const httpFetch = ((url: string, init?: RequestInit) =>
  undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as typeof fetch;
let cleaned: Promise<void> | undefined;

/** Stops everything this run started, once, the last started first. */
function cleanup(): Promise<void> {
  cleaned ??= (async () => {
    await agent.destroy().catch(() => {});
    await gw?.stop('SIGTERM').catch(() => {});
    await temporal?.stop().catch(() => {});
    await sim?.close().catch(() => {});
    await db?.end().catch(() => {});
    await pgServer?.stop().catch(() => {});
    await jaeger?.stop().catch(() => {});
  })();
  return cleaned;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stop.signal.aborted) return; // already stopping: the cleanup runs to its end
    console.log(`\n${signal}: stopping the walk and every process it started`);
    exitCode = 130;
    stop.abort(new Error(signal));
  });

// Should the walk itself fail past its cleanup, nothing it started outlives it.
process.on('uncaughtException', (err) => {
  console.error(`the walk failed: ${err.stack ?? err}`);
  exitCode = 1;
  stop.abort(err);
  void cleanup().then(() => finish());
});
process.on('exit', () => {
  for (const child of [gw?.child, jaeger?.child])
    if (child && child.exitCode === null && child.signalCode === null)
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {}
});

function armTimeLimit(): void {
  const limit = setTimeout(() => {
    console.log(`\nover the walk's time limit (${HARD_LIMIT_MS / 1000} s): stopping`);
    exitCode = 2;
    stop.abort(new Error('time limit'));
    void cleanup().then(() => finish());
  }, HARD_LIMIT_MS);
  limit.unref();
}

/** Between steps: a signal (or the time limit) ends the walk here. */
function alive(): void {
  if (stop.signal.aborted) throw stop.signal.reason;
}

// ---------------------------------------------------------------- Jaeger

interface Jaeger {
  otlpHttp: string;
  query: string;
  logFile: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Jaeger v2 all in one, in memory: OTLP receivers and the query API only, each on a free port of 127.0.0.1. */
async function startJaeger(bin: string, dir: string, attempt = 1): Promise<Jaeger> {
  const [otlpGrpc, otlpHttp, queryHttp, queryGrpc] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const config = path.join(dir, `jaeger-${attempt}.yaml`);
  fs.writeFileSync(
    config,
    `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 10000
  jaeger_query:
    # Jaeger traces itself by default (OTLP/gRPC to 127.0.0.1:4317, and its shutdown waits on that export): off.
    enable_tracing: false
    storage:
      traces: memory_store
    http:
      endpoint: 127.0.0.1:${queryHttp}
    grpc:
      endpoint: 127.0.0.1:${queryGrpc}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${otlpGrpc}
      http:
        endpoint: 127.0.0.1:${otlpHttp}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
`,
  );
  const logFile = path.join(dir, 'jaeger.log');
  const out = fs.openSync(logFile, 'a');
  const child = spawn(bin, [`--config=file:${config}`], { stdio: ['ignore', out, out], detached: true });
  fs.closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const j: Jaeger = {
    otlpHttp: `http://127.0.0.1:${otlpHttp}`,
    query: `http://127.0.0.1:${queryHttp}`,
    logFile,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const kill = (signal: NodeJS.Signals) => {
        try {
          process.kill(-child.pid!, signal);
        } catch {
          child.kill(signal);
        }
      };
      kill('SIGTERM');
      const killed = setTimeout(() => kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killed);
    },
  };
  for (const until = Date.now() + 30_000; ; await sleep(100)) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const text = fs.readFileSync(logFile, 'utf8');
      // A free port found here can be taken by another program before Jaeger binds it: once more, on others.
      if (attempt < 3 && /address already in use/i.test(text)) return startJaeger(bin, dir, attempt + 1);
      throw new Error(`jaeger exited with ${child.exitCode ?? child.signalCode}; its log: ${text.slice(-2000)}`);
    }
    const up = async (url: string) => (await httpFetch(url).catch(() => undefined))?.status;
    // The query API answers; the OTLP/HTTP receiver answers anything (405 to a GET).
    if ((await up(`${j.query}/api/services`)) === 200 && (await up(`${j.otlpHttp}/v1/traces`)) !== undefined) return j;
    if (Date.now() > until) {
      await j.stop();
      throw new Error(`jaeger not ready in 30 s; its log: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    }
  }
}

interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: { refType: string; traceID: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags?: { key: string; type: string; value: unknown }[];
  logs?: { timestamp: number; fields: { key: string; type: string; value: unknown }[] }[];
  processID: string;
}
interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags?: unknown[] }>;
}

/** A span as Jaeger gives it back, its tags as one record. */
interface Span {
  traceId: string;
  spanId: string;
  /** The span its CHILD_OF reference names (in this trace or not); '' for none. */
  parentId: string;
  name: string;
  kind: string;
  error: boolean;
  startUs: number;
  durationUs: number;
  attrs: Record<string, unknown>;
  events: { name: string; atUs: number }[];
  service: string;
}

/** Jaeger's JSON, with integers past 2^53 kept exact (as bigint). */
function parseJson(text: string): unknown {
  return JSON.parse(text, (_key, value, context?: { source?: string }) =>
    typeof value === 'number' && !Number.isSafeInteger(value) && context?.source && /^-?\d+$/.test(context.source)
      ? BigInt(context.source)
      : value,
  );
}

async function jaegerGet(pathAndQuery: string): Promise<{ status: number; data: JaegerTrace[] }> {
  const r = await httpFetch(`${jaeger!.query}${pathAndQuery}`, { signal: stop.signal });
  const body = parseJson(await r.text()) as { data?: JaegerTrace[] | null };
  return { status: r.status, data: body.data ?? [] };
}

function spansOf(t: JaegerTrace): Span[] {
  return t.spans.map((s) => {
    const attrs = Object.fromEntries((s.tags ?? []).map((tag) => [tag.key, tag.value]));
    return {
      traceId: s.traceID,
      spanId: s.spanID,
      parentId: s.references?.find((r) => r.refType === 'CHILD_OF')?.spanID ?? '',
      name: s.operationName,
      kind: String(attrs['span.kind'] ?? 'internal'),
      error: attrs['otel.status_code'] === 'ERROR' || attrs.error === true,
      startUs: s.startTime,
      durationUs: s.duration,
      attrs,
      events: (s.logs ?? []).map((l) => ({
        name: String(l.fields.find((f) => f.key === 'event')?.value ?? '(log)'),
        atUs: l.timestamp,
      })),
      service: t.processes[s.processID]?.serviceName ?? '?',
    };
  });
}

/** The trace ids Jaeger's search finds for the request `requestId` (by its server span's gateway.request_id). */
async function searchByRequestId(requestId: string): Promise<string[]> {
  const tags = encodeURIComponent(JSON.stringify({ 'gateway.request_id': requestId }));
  const { data } = await jaegerGet(`/api/traces?service=${SERVICE}&tags=${tags}&lookback=1h&limit=20`);
  return [...new Set(data.map((t) => t.traceID))];
}

interface Found {
  traceId: string;
  /** The trace ids the search found for the request (one, when all is well). */
  searched: string[];
  spans: Span[];
  /** What was still missing when the wait ended ('' when nothing). */
  missing: string;
}

/**
 * The trace of `requestId` (or `traceId`, when the caller chose it) once `missing(spans)` says
 * nothing is missing, or what Jaeger has when `timeoutMs` ends.
 */
async function traceOf(
  requestId: string,
  missing: (spans: Span[]) => string,
  opts: { traceId?: string; timeoutMs?: number } = {},
): Promise<Found> {
  const until = Date.now() + (opts.timeoutMs ?? TRACE_WAIT_MS);
  let searched: string[] = [];
  let spans: Span[] = [];
  let lack = 'the trace';
  for (; ; await sleep(200)) {
    alive();
    searched = await searchByRequestId(requestId);
    const traceId = opts.traceId ?? searched[0];
    if (traceId) {
      const { status, data } = await jaegerGet(`/api/traces/${traceId}`);
      spans = status === 200 && data[0] ? spansOf(data[0]) : [];
      lack = spans.length ? missing(spans) : 'the trace';
      if (!lack && searched.length > 0) return { traceId, searched, spans, missing: '' };
    }
    if (Date.now() > until)
      return { traceId: opts.traceId ?? searched[0] ?? '', searched, spans, missing: lack || 'the search hit' };
  }
}

/** A missing() for traceOf: each of `names` present. */
const hasNames =
  (...names: string[]) =>
  (spans: Span[]) =>
    names.filter((n) => !spans.some((s) => s.name === n)).join(', ');

// ---------------------------------------------------------------- printing

const ms = (us: number) => (us >= 10_000_000 ? `${(us / 1e6).toFixed(2)} s` : `${(us / 1000).toFixed(1)} ms`);

/** A list attribute as the OTLP to Jaeger translation gives it back (a JSON array in a string). */
function list(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  if (typeof v === 'string' && v.startsWith('['))
    try {
      return JSON.parse(v) as unknown[];
    } catch {
      return [v];
    }
  return v === undefined ? [] : [v];
}

/** The few attributes that matter, shortly. */
function keyAttrs(s: Span): string {
  const a = s.attrs;
  const out: string[] = [];
  const add = (label: string, key: string) => {
    if (a[key] !== undefined) out.push(`${label}=${a[key]}`);
  };
  add('status', 'http.response.status_code');
  add('error', 'error.type');
  add('outcome', 'gateway.outcome');
  add('charge', 'gateway.charge_nano');
  add('provider_cost', 'gateway.provider_cost_nano');
  if (s.name === 'gateway.hold') add('hold', 'gateway.hold_nano');
  add('deployment', 'gateway.deployment');
  add('attempt', 'gateway.attempt');
  add('after', 'gateway.attempt.after');
  if (a['gen_ai.usage.input_tokens'] !== undefined || a['gen_ai.usage.output_tokens'] !== undefined)
    out.push(`usage=${a['gen_ai.usage.input_tokens'] ?? '-'}in/${a['gen_ai.usage.output_tokens'] ?? '-'}out`);
  if (a['gen_ai.response.finish_reasons'] !== undefined)
    out.push(`finish=${list(a['gen_ai.response.finish_reasons']).join(',')}`);
  if (s.error) out.push('ERROR');
  for (const e of s.events) out.push(`event ${e.name} at +${ms(e.atUs - s.startUs)}`);
  return out.join('  ');
}

/** The trace as an indented tree, children by start time; a root whose parent Jaeger has not is marked. */
function printTree(spans: Span[]): void {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, Span[]>();
  const roots: Span[] = [];
  for (const s of spans) {
    if (s.parentId && ids.has(s.parentId)) children.set(s.parentId, [...(children.get(s.parentId) ?? []), s]);
    else roots.push(s);
  }
  const byStart = (x: Span, y: Span) => x.startUs - y.startUs;
  const line = (s: Span, lead: string, branch: string) =>
    console.log(`    ${lead}${branch}${s.name}  [${s.kind}] ${ms(s.durationUs)}  ${keyAttrs(s)}`.trimEnd());
  const walk = (s: Span, lead: string) => {
    const kids = (children.get(s.spanId) ?? []).sort(byStart);
    kids.forEach((k, i) => {
      const last = i === kids.length - 1;
      line(k, lead, last ? '└─ ' : '├─ ');
      walk(k, lead + (last ? '   ' : '│  '));
    });
  };
  for (const r of roots.sort(byStart)) {
    if (r.parentId) console.log(`    (parent ${r.parentId}: the caller's span, not in Jaeger)`);
    line(r, '', '');
    walk(r, '');
  }
}

// ---------------------------------------------------------------- checks

const checks = new Checks('  ');
const check = checks.check;

/** The differences of `attrs` from `want` (bigints and numbers compared as integers, lists as lists). */
function differences(attrs: Record<string, unknown> | undefined, want: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [k, w] of Object.entries(want)) {
    const v = attrs?.[k];
    const same =
      typeof w === 'bigint'
        ? (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'string') && asBig(v) === w
        : Array.isArray(w)
          ? JSON.stringify(list(v)) === JSON.stringify(w)
          : v === w;
    if (!same) out.push(`${k} ${v === undefined ? 'missing' : JSON.stringify(String(v))}, not ${String(w)}`);
  }
  return out;
}
function asBig(v: unknown): bigint | undefined {
  if (v === '' || v === null || v === undefined) return undefined;
  try {
    return BigInt(v as string);
  } catch {
    return undefined;
  }
}
const attrsCheck = (name: string, s: Span | undefined, want: Record<string, unknown>) => {
  const diff = s ? differences(s.attrs, want) : ['no such span'];
  check(name, diff.length === 0, diff.length ? diff.join('; ') : Object.keys(want).join(', '));
};

const named = (spans: Span[], name: string) => spans.find((s) => s.name === name);

/** The checks every request's trace gets: found, complete, one trace, nested as `nesting` says under the server span `root`. */
function shapeChecks(
  label: string,
  f: Found,
  root: string,
  nesting: [child: string, parent: string][],
): Span | undefined {
  check(
    `${label} found by Jaeger's search, complete`,
    f.searched.length > 0 && !f.missing,
    f.missing
      ? `missing after ${TRACE_WAIT_MS / 1000} s: ${f.missing}; has ${f.spans.map((s) => s.name).join(', ') || 'nothing'}`
      : `${f.spans.length} span${f.spans.length === 1 ? '' : 's'}`,
  );
  const ids = new Set(f.spans.map((s) => s.spanId));
  const orphans = f.spans.filter((s) => s.name !== root && !ids.has(s.parentId));
  check(
    `${label} one trace`,
    f.searched.length === 1 && f.spans.every((s) => s.traceId === f.traceId) && orphans.length === 0,
    `${f.searched.length} trace(s) for the request id; ${orphans.length ? `spans without their parent: ${orphans.map((s) => s.name).join(', ')}` : 'every span under the root'}`,
  );
  const server = named(f.spans, root);
  const wrong = nesting.filter(([child, parent]) => {
    const c = f.spans.filter((s) => s.name === child);
    const p = named(f.spans, parent);
    return c.length === 0 || !p || c.some((s) => s.parentId !== p.spanId);
  });
  check(
    `${label} nesting`,
    !!server && server.kind === 'server' && wrong.length === 0,
    wrong.length
      ? `not as expected: ${wrong.map(([c, p]) => `${c} under ${p}`).join('; ')}`
      : `${root} [server]${nesting.length ? `; ${nesting.map(([c, p]) => `${short(c)} under ${short(p)}`).join(', ')}` : ''}`,
  );
  return server;
}
const short = (name: string) => name.replace(/^gateway\.v1\./, '');

async function usageRow(requestId: string): Promise<Record<string, string> | undefined> {
  for (const until = Date.now() + 5000; ; await sleep(100)) {
    const r = await db!.query('SELECT to_jsonb(u) AS row FROM usage_records u WHERE request_id = $1', [requestId]);
    const row = r.rows[0]?.row as Record<string, unknown> | undefined;
    if (row) return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v === null ? '' : String(v)]));
    if (Date.now() > until) return undefined;
  }
}

/** The usage row's trace_id (when the column exists) names the trace Jaeger has. */
function rowTraceCheck(label: string, row: Record<string, string> | undefined, traceId: string): void {
  if (row && !('trace_id' in row)) return;
  check(
    `${label} the usage row names this trace`,
    row?.trace_id === traceId,
    row ? `trace_id ${row.trace_id || 'empty'}` : 'no usage row',
  );
}

function header(n: number, title: string, requestId: string, f: Found): void {
  console.log(`\n${n}. ${title}`);
  console.log(
    `   request ${requestId}, trace ${f.traceId || '(none found)'}, ${f.spans.length} span${f.spans.length === 1 ? '' : 's'}` +
      (f.spans.length ? ` of ${[...new Set(f.spans.map((s) => s.service))].join(', ')}` : ''),
  );
  printTree(f.spans);
}

// ---------------------------------------------------------------- the cases

interface Clients {
  key(creditsUsd: string): Promise<{ apiKey: string; accountId: string; keyId: string }>;
  openai(apiKey: string): OpenAI;
  anthropic(apiKey: string): Anthropic;
}

async function unaryChat(n: number, c: Clients): Promise<void> {
  const k = await c.key('2');
  const { data, response } = await c
    .openai(k.apiKey)
    .chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'trace walk [sim tokens=5]' }],
    })
    .withResponse();
  const requestId = response.headers.get('x-request-id')!;
  const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
  const names = ['POST /v1/chat/completions', RPC_CHAT, 'gateway.hold', 'chat gpt-4o-mini', 'gateway.settle'];
  const f = await traceOf(requestId, hasNames(...names));
  header(n, 'a unary chat (OpenAI SDK)', requestId, f);
  const l = `${n}`;
  shapeChecks(l, f, names[0]!, [
    [RPC_CHAT, names[0]!],
    ['gateway.hold', RPC_CHAT],
    ['chat gpt-4o-mini', RPC_CHAT],
    ['gateway.settle', RPC_CHAT],
  ]);
  const kinds = names.map((x) => named(f.spans, x)?.kind ?? 'none');
  check(`${l} span kinds`, kinds.join() === 'server,internal,internal,client,internal', kinds.join(', '));
  const row = await usageRow(requestId);
  const rpc = named(f.spans, RPC_CHAT);
  attrsCheck(`${l} the charge on the RPC span is the x-gateway-cost-nano-usd header (${cost}), the usage row's`, rpc, {
    'gateway.charge_nano': cost,
    'gateway.provider_cost_nano': asBig(row?.provider_cost_nano),
    'gateway.price_version': asBig(row?.price_version_id),
    'gateway.deployment': row?.deployment,
    'gateway.account.id': k.accountId,
    'gateway.billing_mode': 'hold',
    'gateway.outcome': 'ok',
  });
  const hold = asBig(rpc?.attrs['gateway.hold_nano']);
  check(
    `${l} money adds up`,
    cost > 0n &&
      asBig(row?.cost_nano) === cost &&
      hold !== undefined &&
      hold >= cost &&
      asBig(named(f.spans, 'gateway.settle')?.attrs['gateway.charge_nano']) === cost &&
      asBig(named(f.spans, 'gateway.hold')?.attrs['gateway.hold_nano']) === hold,
    `charge ${cost} > 0 = usage row ${row?.cost_nano} = settle's; hold ${hold} >= charge, the same on gateway.hold`,
  );
  attrsCheck(`${l} the GenAI attempt`, named(f.spans, 'chat gpt-4o-mini'), {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.response.id': data.id,
    'gen_ai.response.finish_reasons': ['stop'],
    'gen_ai.usage.input_tokens': BigInt(data.usage!.prompt_tokens),
    'gen_ai.usage.output_tokens': 5n,
    'server.address': '127.0.0.1',
    'http.response.status_code': 200n,
    'gateway.attempt': 1n,
  });
  rowTraceCheck(l, row, f.traceId);
}

async function stream(n: number, c: Clients): Promise<void> {
  const k = await c.key('2');
  const { data: chunks, response } = await c
    .openai(k.apiKey)
    .chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'trace walk stream [sim tokens=6]' }],
    })
    .withResponse();
  let text = '';
  let charged: string | undefined;
  for await (const chunk of chunks) {
    text += chunk.choices[0]?.delta?.content ?? '';
    charged ??= (chunk as { x_gateway?: { cost_nano_usd: string } }).x_gateway?.cost_nano_usd;
  }
  const requestId = response.headers.get('x-request-id')!;
  const rpcName = 'gateway.v1.InferenceService/StreamChatCompletion';
  const names = ['POST /v1/chat/completions', rpcName, 'gateway.hold', 'chat gpt-4o-mini', 'gateway.settle'];
  const f = await traceOf(requestId, hasNames(...names));
  header(n, 'a stream (OpenAI SDK)', requestId, f);
  const l = `${n}`;
  shapeChecks(l, f, names[0]!, [
    [rpcName, names[0]!],
    ['chat gpt-4o-mini', rpcName],
    ['gateway.settle', rpcName],
  ]);
  const attempt = named(f.spans, 'chat gpt-4o-mini');
  const first = attempt?.events.find((e) => e.name === 'gen_ai.first_token');
  check(
    `${l} the first token is an event on the attempt`,
    !!attempt && !!first && first.atUs >= attempt.startUs && first.atUs <= attempt.startUs + attempt.durationUs,
    first && attempt ? `at +${ms(first.atUs - attempt.startUs)} of ${ms(attempt.durationUs)}` : 'no gen_ai.first_token',
  );
  attrsCheck(`${l} the usage on the attempt when the stream ended`, attempt, {
    'gen_ai.usage.output_tokens': 6n,
    'gen_ai.response.finish_reasons': ['stop'],
  });
  const row = await usageRow(requestId);
  attrsCheck(
    `${l} the charge on the RPC span is the last chunk's x_gateway.cost_nano_usd (${charged}), the usage row's`,
    named(f.spans, rpcName),
    { 'gateway.charge_nano': asBig(charged), 'gateway.outcome': 'ok' },
  );
  check(
    `${l} what the caller read`,
    text === 'w1 w2 w3 w4 w5 w6' && (asBig(charged) ?? 0n) > 0n && row?.cost_nano === charged,
    `"${text}", charged ${charged}, usage row ${row?.cost_nano}`,
  );
  rowTraceCheck(l, row, f.traceId);
}

async function claude(n: number, c: Clients): Promise<void> {
  const k = await c.key('2');
  const { data, response } = await c
    .anthropic(k.apiKey)
    .messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'trace walk claude [sim tokens=3]' }],
    })
    .withResponse();
  const requestId = response.headers.get('x-request-id')!;
  const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
  const rpcName = 'gateway.v1.InferenceService/CreateMessage';
  const names = ['POST /v1/messages', rpcName, 'gateway.hold', 'chat claude-haiku-4-5', 'gateway.settle'];
  const f = await traceOf(requestId, hasNames(...names));
  header(n, 'a Claude message (Anthropic SDK)', requestId, f);
  const l = `${n}`;
  shapeChecks(l, f, names[0]!, [
    [rpcName, names[0]!],
    ['gateway.hold', rpcName],
    ['chat claude-haiku-4-5', rpcName],
    ['gateway.settle', rpcName],
  ]);
  attrsCheck(`${l} the GenAI attempt`, named(f.spans, 'chat claude-haiku-4-5'), {
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.operation.name': 'chat',
    'gen_ai.response.id': data.id,
    'gen_ai.response.finish_reasons': [data.stop_reason],
    'gen_ai.usage.output_tokens': BigInt(data.usage.output_tokens),
  });
  const row = await usageRow(requestId);
  attrsCheck(
    `${l} the charge on the RPC span is the x-gateway-cost-nano-usd header (${cost})`,
    named(f.spans, rpcName),
    {
      'gateway.charge_nano': cost,
      'gateway.provider_cost_nano': asBig(row?.provider_cost_nano),
    },
  );
  rowTraceCheck(l, row, f.traceId);
}

async function failedUpstream(n: number, c: Clients): Promise<void> {
  const k = await c.key('2');
  const err = await c
    .anthropic(k.apiKey)
    .messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'trace walk failure [sim fault=500]' }],
    })
    .then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
    );
  const requestId = err?.headers?.get('x-request-id') ?? '';
  const rpcName = 'gateway.v1.InferenceService/CreateMessage';
  const f = await traceOf(requestId, (spans) =>
    [
      hasNames('POST /v1/messages', rpcName, 'gateway.settle')(spans),
      spans.filter((s) => s.name === 'chat claude-haiku-4-5').length < 3 ? 'three attempts' : '',
    ]
      .filter(Boolean)
      .join(', '),
  );
  header(n, 'a failed upstream (the simulator answers 500; no charge)', requestId, f);
  const l = `${n}`;
  check(
    `${l} the caller got 500, charged 0`,
    err?.status === 500 && err.headers?.get('x-gateway-cost-nano-usd') === '0',
    `status ${err?.status ?? 'none (it succeeded)'}, x-gateway-cost-nano-usd ${err?.headers?.get('x-gateway-cost-nano-usd')}`,
  );
  shapeChecks(l, f, 'POST /v1/messages', [
    [rpcName, 'POST /v1/messages'],
    ['chat claude-haiku-4-5', rpcName],
    ['gateway.settle', rpcName],
  ]);
  const attempts = f.spans.filter((s) => s.name === 'chat claude-haiku-4-5').sort((x, y) => x.startUs - y.startUs);
  const afters = attempts.map((t) => String(t.attrs['gateway.attempt.after'] ?? '-'));
  check(
    `${l} every attempt failed on its span`,
    attempts.length === 3 &&
      attempts.every(
        (t) => t.error && asBig(t.attrs['http.response.status_code']) === 500n && t.attrs['error.type'] === '500',
      ) &&
      afters.join() === '-,retry,retry',
    `${attempts.length} attempts (the first try and UPSTREAM_RETRIES 2), status ${attempts.map((t) => t.attrs['http.response.status_code']).join('/')}, error ${attempts.map((t) => (t.error ? 'set' : 'unset')).join('/')}, after ${afters.join(', ')}`,
  );
  const rpc = named(f.spans, rpcName);
  attrsCheck(`${l} the RPC span failed, charged zero`, rpc, {
    'gateway.charge_nano': 0n,
    'gateway.outcome': 'upstream_error',
  });
  check(
    `${l} the RPC span's status is an error`,
    rpc?.error === true,
    `otel.status_code ${rpc?.attrs['otel.status_code']}`,
  );
  attrsCheck(`${l} the server span`, named(f.spans, 'POST /v1/messages'), { 'http.response.status_code': 500n });
  const row = await usageRow(requestId);
  check(`${l} the usage row costs 0`, row?.cost_nano === '0', `cost_nano ${row?.cost_nano ?? 'no row'}`);
}

async function failover(n: number, c: Clients): Promise<void> {
  const k = await c.key('2');
  const { response } = await c
    .openai(k.apiKey)
    .chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'trace walk failover [sim fault=500 tokens=2]' }],
    })
    .withResponse();
  const requestId = response.headers.get('x-request-id')!;
  const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
  const f = await traceOf(requestId, (spans) =>
    [
      hasNames('POST /v1/chat/completions', RPC_CHAT, 'gateway.settle')(spans),
      spans.filter((s) => s.name === 'chat gpt-4o-mini').length < 2 ? 'two attempts' : '',
    ]
      .filter(Boolean)
      .join(', '),
  );
  header(n, 'a failover (the first deployment answers 500, the fallback deployment serves)', requestId, f);
  const l = `${n}`;
  shapeChecks(l, f, 'POST /v1/chat/completions', [
    [RPC_CHAT, 'POST /v1/chat/completions'],
    ['chat gpt-4o-mini', RPC_CHAT],
    ['gateway.settle', RPC_CHAT],
  ]);
  const attempts = f.spans
    .filter((s) => s.name === 'chat gpt-4o-mini')
    .sort((x, y) => Number(x.attrs['gateway.attempt']) - Number(y.attrs['gateway.attempt']));
  const [one, two] = attempts;
  check(
    `${l} two attempts: the failed deployment, then the one that answered`,
    attempts.length === 2 &&
      !!one?.error &&
      asBig(one.attrs['http.response.status_code']) === 500n &&
      two?.attrs['gateway.attempt.after'] === 'failover' &&
      asBig(two.attrs['http.response.status_code']) === 200n &&
      !two.error &&
      one.attrs['gateway.deployment'] !== two.attrs['gateway.deployment'],
    attempts
      .map(
        (t) =>
          `${t.attrs['gateway.deployment']} ${t.attrs['http.response.status_code']}${t.attrs['gateway.attempt.after'] ? ` after=${t.attrs['gateway.attempt.after']}` : ''}`,
      )
      .join(' → ') || 'none',
  );
  const row = await usageRow(requestId);
  attrsCheck(`${l} one charge (${cost}), at the deployment that answered`, named(f.spans, RPC_CHAT), {
    'gateway.charge_nano': cost,
    'gateway.deployment': two?.attrs['gateway.deployment'],
  });
  check(
    `${l} one settle, the usage row's`,
    f.spans.filter((s) => s.name === 'gateway.settle').length === 1 &&
      asBig(row?.cost_nano) === cost &&
      row?.deployment === two?.attrs['gateway.deployment'] &&
      asBig(two?.attrs['gen_ai.usage.output_tokens']) === 2n,
    `settles ${f.spans.filter((s) => s.name === 'gateway.settle').length}; usage row ${row?.cost_nano} at ${row?.deployment}`,
  );
  rowTraceCheck(l, row, f.traceId);
}

async function refused401(n: number, gatewayUrl: string): Promise<void> {
  const r = await httpFetch(`${gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer prx-notakeyatall', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await r.arrayBuffer();
  const requestId = r.headers.get('x-request-id') ?? '';
  const found = await traceOf(requestId, hasNames('POST /v1/chat/completions'));
  // Anything else of this request would have come in the same export: wait a few more batches.
  await sleep(1000);
  const f = await traceOf(requestId, () => '', { traceId: found.traceId || undefined, timeoutMs: 2000 });
  header(n, 'a refused 401 (no such key)', requestId, f);
  const l = `${n}`;
  check(`${l} the caller got 401`, r.status === 401, `status ${r.status}`);
  const server = shapeChecks(l, f, 'POST /v1/chat/completions', []);
  attrsCheck(`${l} the server span says so`, server, { 'http.response.status_code': 401n, 'error.type': '401' });
  check(
    `${l} a 4xx is the caller's: the server span is not failed, and nothing ran behind it`,
    !!server && !server.error && f.spans.length === 1,
    `status ${server?.attrs['otel.status_code'] ?? 'unset'}; spans: ${f.spans.map((s) => s.name).join(', ')}`,
  );
}

async function refused402(n: number, c: Clients): Promise<void> {
  const k = await c.key('0');
  const err = await c
    .openai(k.apiKey)
    .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    .then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
  const requestId = err?.headers?.get('x-request-id') ?? '';
  const f = await traceOf(requestId, hasNames('POST /v1/chat/completions', RPC_CHAT, 'gateway.hold'));
  header(n, 'a refused 402 (a key without credit)', requestId, f);
  const l = `${n}`;
  check(`${l} the caller got 402`, err?.status === 402, `status ${err?.status ?? 'none (it succeeded)'}`);
  shapeChecks(l, f, 'POST /v1/chat/completions', [
    [RPC_CHAT, 'POST /v1/chat/completions'],
    ['gateway.hold', RPC_CHAT],
  ]);
  const hold = named(f.spans, 'gateway.hold');
  attrsCheck(`${l} the hold refused on its span`, hold, {
    'error.type': 'insufficient_quota',
    'http.response.status_code': 402n,
  });
  check(
    `${l} the hold span's status is an error`,
    hold?.error === true,
    `otel.status_code ${hold?.attrs['otel.status_code']}`,
  );
  attrsCheck(`${l} the RPC span`, named(f.spans, RPC_CHAT), { 'error.type': 'insufficient_quota' });
  attrsCheck(`${l} the server span`, named(f.spans, 'POST /v1/chat/completions'), {
    'http.response.status_code': 402n,
  });
  const clients = f.spans.filter((s) => s.kind === 'client');
  check(`${l} no upstream attempt`, clients.length === 0, `${clients.length} client spans`);
}

async function video(n: number, c: Clients, gatewayUrl: string): Promise<void> {
  const k = await c.key('5');
  const auth = { authorization: `Bearer ${k.apiKey}` };
  const r = await httpFetch(`${gatewayUrl}/v1/videos`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sora-2', prompt: 'a kite over the sea, trace walk [sim ms=200]', seconds: '4' }),
  });
  const job = (await r.json()) as { id?: string; error?: unknown };
  const requestId = r.headers.get('x-request-id') ?? '';
  let status = `the create answered ${r.status}`;
  let costNano = '';
  for (const until = Date.now() + VIDEO_WAIT_MS; r.status === 200 && job.id; await sleep(250)) {
    alive();
    const v = (await (await httpFetch(`${gatewayUrl}/v1/videos/${job.id}`, { headers: auth })).json()) as {
      status: string;
      x_gateway?: { cost_nano_usd?: string };
    };
    status = v.status;
    costNano = v.x_gateway?.cost_nano_usd ?? '';
    if (status === 'completed' || status === 'failed' || Date.now() > until) break;
  }
  const rpcName = 'gateway.v1.VideoService/CreateVideo';
  const f = await traceOf(
    requestId,
    (spans) => {
      const lack = [hasNames('POST /v1/videos', rpcName)(spans)];
      for (const prefix of ['StartWorkflow:', 'RunWorkflow:', 'StartActivity:', 'RunActivity:'])
        if (!spans.some((s) => s.name.startsWith(prefix))) lack.push(`${prefix}…`);
      if (!spans.some((s) => s.name === 'RunActivity:recordOutcome')) lack.push('RunActivity:recordOutcome');
      const starts = spans.filter((s) => s.name.startsWith('StartActivity:')).length;
      const runs = spans.filter((s) => s.name.startsWith('RunActivity:')).length;
      if (starts !== runs) lack.push(`a RunActivity for each of ${starts} StartActivity (${runs})`);
      return lack.filter(Boolean).join(', ');
    },
    { timeoutMs: 30_000 },
  );
  header(n, 'a video job across its workflow (sora-2 on Temporal)', requestId, f);
  const l = `${n}`;
  check(
    `${l} the job completed`,
    status === 'completed',
    `job ${job.id ?? JSON.stringify(job.error)}: ${status}${costNano ? `, cost ${costNano} nano-USD` : ''}`,
  );
  shapeChecks(l, f, 'POST /v1/videos', [[rpcName, 'POST /v1/videos']]);
  const start = f.spans.find((s) => s.name.startsWith('StartWorkflow:'));
  const run = f.spans.find((s) => s.name.startsWith('RunWorkflow:'));
  const rpc = named(f.spans, rpcName);
  const ids = new Map(f.spans.map((s) => [s.spanId, s]));
  const underRpc = (s: Span | undefined): boolean => {
    for (let p = s; p; p = ids.get(p.parentId)) if (p === rpc) return true;
    return false;
  };
  check(
    `${l} the workflow joined the request's trace`,
    !!start && !!run && run.parentId === start.spanId && underRpc(start),
    `${start?.name ?? 'no StartWorkflow'} ${underRpc(start) ? 'under' : 'NOT under'} ${short(rpcName)}, ` +
      `${run?.name ?? 'no RunWorkflow'} ${run && run.parentId === start?.spanId ? 'under' : 'NOT under'} it`,
  );
  const startActivities = new Map(f.spans.filter((s) => s.name.startsWith('StartActivity:')).map((s) => [s.spanId, s]));
  const activities = f.spans.filter((s) => s.name.startsWith('RunActivity:'));
  const stray = activities.filter((a) => !startActivities.has(a.parentId));
  const inRun = [...startActivities.values()].filter((s) => s.parentId === run?.spanId).length;
  check(
    `${l} every activity ran under its StartActivity, in the workflow`,
    activities.length > 0 && stray.length === 0 && inRun === startActivities.size,
    `${activities.length} activities (${[...new Set(activities.map((a) => a.name.slice('RunActivity:'.length)))].join(', ')}); ${stray.length} not under a StartActivity; ${inRun} of ${startActivities.size} StartActivity under RunWorkflow`,
  );
  // The job's charge, when its settle activity's span carries one: the job's cost.
  const settle = named(f.spans, 'RunActivity:settleCharge');
  if (settle?.attrs['gateway.charge_nano'] !== undefined)
    attrsCheck(
      `${l} the charge on RunActivity:settleCharge is the job's x_gateway.cost_nano_usd (${costNano})`,
      settle,
      {
        'gateway.charge_nano': asBig(costNano),
      },
    );
}

async function continued(n: number, c: Clients): Promise<void> {
  const k = await c.key('1');
  const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('hex');
  const caller = { traceId: hex(16), spanId: hex(8) };
  const { response } = await c
    .openai(k.apiKey)
    .chat.completions.create(
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'trace walk continued [sim tokens=1]' }] },
      { headers: { traceparent: `00-${caller.traceId}-${caller.spanId}-01`, tracestate: 'vendor=abc' } },
    )
    .withResponse();
  const requestId = response.headers.get('x-request-id')!;
  const names = ['POST /v1/chat/completions', RPC_CHAT, 'chat gpt-4o-mini', 'gateway.settle'];
  const f = await traceOf(requestId, hasNames(...names), { traceId: caller.traceId });
  header(n, `a chat whose caller sent its traceparent (trace ${caller.traceId}, span ${caller.spanId})`, requestId, f);
  const l = `${n}`;
  const server = named(f.spans, names[0]!);
  check(
    `${l} the caller's trace continued`,
    f.searched.length === 1 &&
      f.searched[0] === caller.traceId &&
      f.spans.length >= names.length &&
      f.spans.every((s) => s.traceId === caller.traceId) &&
      server?.parentId === caller.spanId,
    `search found ${f.searched.join(', ') || 'nothing'}; server span's parent ${server?.parentId || 'none'}; ${f.spans.length} spans in the caller's trace`,
  );
  const ids = new Set(f.spans.map((s) => s.spanId));
  const orphans = f.spans.filter((s) => s !== server && !ids.has(s.parentId));
  check(
    `${l} complete and nested under the server span`,
    !f.missing && orphans.length === 0 && named(f.spans, RPC_CHAT)?.parentId === server?.spanId,
    f.missing ? `missing: ${f.missing}` : `${orphans.length} spans without their parent`,
  );
  const row = await usageRow(requestId);
  attrsCheck(`${l} the charge on the RPC span is the header's`, named(f.spans, RPC_CHAT), {
    'gateway.charge_nano': BigInt(response.headers.get('x-gateway-cost-nano-usd')!),
  });
  rowTraceCheck(l, row, caller.traceId);
}

// ---------------------------------------------------------------- the run

async function startAll(): Promise<{ videoProblem: string }> {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-trace-walk-'));
  fs.chmodSync(workDir, 0o755);
  const bin = execFileSync('bash', [path.join(ROOT, 'scripts', 'jaeger.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  armTimeLimit();
  jaeger = await startJaeger(bin, workDir);
  alive();
  log(`Jaeger ${path.relative(os.homedir(), bin).startsWith('..') ? bin : `~/${path.relative(os.homedir(), bin)}`}`);
  log(`  OTLP/HTTP ${jaeger.otlpHttp}, query API ${jaeger.query} (in memory)`);
  pgServer = await startPostgres();
  await createDatabase(pgServer.url(), 'walk');
  db = new pg.Pool({ connectionString: pgServer.url('walk'), max: 2 });
  // An idle connection can still be open when PostgreSQL stops at the end (the pool's end() does
  // not wait for the server to see it go): what the server says to it then is no news.
  db.on('error', () => {});
  sim = await startSimulator({ apiKey: UPSTREAM_KEY });
  alive();
  log(`PostgreSQL on 127.0.0.1:${pgServer.port}, simulator ${sim.url} (fallback deployment ${sim.url}/fallback/v1)`);
  temporal = await startTemporal(workDir);
  alive();
  log(temporal.address ? `Temporal dev server ${temporal.address}` : `no Temporal: ${temporal.problem}`);
  gw = await startGatewayProcess({
    logFile: path.join(workDir, 'gateway.log'),
    env: {
      DATABASE_URL: pgServer.url('walk'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim.url}/v1`,
      OPENAI_FALLBACK_BASE_URL: `${sim.url}/fallback/v1`,
      OPENAI_FALLBACK_API_KEY: `${UPSTREAM_KEY}-fallback`,
      ANTHROPIC_API_KEY: UPSTREAM_KEY,
      ANTHROPIC_BASE_URL: sim.url,
      ...videoEnv(temporal.address, path.join(workDir, 'videos'), 'trace-walk'),
      // Tracing: OTLP/HTTP protobuf to Jaeger, exported every 200 ms; callers' traceparents continue their traces.
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttp,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_SDK_DISABLED: '',
      OTEL_SERVICE_NAME: SERVICE,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      TRACE_CALLER_CONTEXT: 'continue',
      UPSTREAM_RETRY_BASE_MS: '10',
      // The first deployment keeps failing in the failover case: never cooled, so it is tried first.
      DEPLOYMENT_ALLOWED_FAILS: '1000',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '5000',
    },
  });
  alive();
  log(`gateway ${gw.httpUrl} (RPC ${gw.rpcUrl}), exporting to Jaeger as service ${SERVICE}`);
  return { videoProblem: temporal.address ? '' : temporal.problem };
}

async function run(): Promise<void> {
  const { videoProblem } = await startAll();
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw!.rpcUrl }));
  const clients: Clients = {
    key: async (usd) => {
      const r = await billing.createKey({ creditsNano: usdToNano(usd), label: 'trace walk' });
      return { apiKey: r.apiKey, accountId: r.accountId, keyId: r.keyId };
    },
    openai: (apiKey) => new OpenAI({ apiKey, baseURL: `${gw!.httpUrl}/v1`, maxRetries: 0, fetch: httpFetch }),
    anthropic: (apiKey) => new Anthropic({ apiKey, baseURL: gw!.httpUrl, maxRetries: 0, fetch: httpFetch }),
  };
  const cases: [string, (n: number) => Promise<void>][] = [
    ['a unary chat', (n) => unaryChat(n, clients)],
    ['a stream', (n) => stream(n, clients)],
    ['a Claude message', (n) => claude(n, clients)],
    ['a failed upstream', (n) => failedUpstream(n, clients)],
    ['a failover', (n) => failover(n, clients)],
    ['a refused 401', (n) => refused401(n, gw!.httpUrl)],
    ['a refused 402', (n) => refused402(n, clients)],
    ['a video job', (n) => video(n, clients, gw!.httpUrl)],
    ['a continued trace', (n) => continued(n, clients)],
  ];
  for (const [i, [title, walk]] of cases.entries()) {
    alive();
    if (title === 'a video job' && videoProblem) {
      console.log(`\n${i + 1}. a video job: skipped, no Temporal (${videoProblem})`);
      continue;
    }
    try {
      await walk(i + 1);
    } catch (err) {
      if (stop.signal.aborted) throw err;
      const e = err as Error & { cause?: { message?: string } };
      check(`${i + 1} ${title} ran`, false, `${e.message ?? e}${e.cause?.message ? ` (${e.cause.message})` : ''}`);
    }
  }
}

function finish(): never {
  exitCode = checks.exitCode(exitCode);
  if (exitCode === 0 && workDir) fs.rmSync(workDir, { recursive: true, force: true });
  console.log(
    `\n${checks.summary(exitCode, (c) => c.name, '; ')}${exitCode !== 0 && workDir ? `; logs in ${workDir}` : ''}`,
  );
  process.exit(exitCode);
}

try {
  await run();
} catch (err) {
  if (!stop.signal.aborted) {
    console.error(`the walk failed: ${(err as Error).stack ?? err}`);
    exitCode = 1;
  }
} finally {
  await cleanup();
}
finish();
