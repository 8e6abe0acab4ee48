// Measuring one target: warm-up, repetitions of chat and stream load, its CPU per request, the
// billing check after it stops, and the diagnosis (profile, syscalls, loop delay) when asked.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { formatSummary, summarise } from './profile-summary.ts';
import { formatStages, stagesOf } from './profile-stages.ts';
import { streamProbe, wrk } from './load.ts';
import { CHAT, QUIET_WAIT_S, REPS, SECONDS, STREAM, STREAM_SECONDS, state, values, WARMUP } from './options.ts';
import { cpuMsOf, ensureStrace, machineTimes } from './servers.ts';
import {
  TRACE_QUEUE,
  type DbCounters,
  type Diagnose,
  type Running,
  type SpanCounts,
  type TargetDef,
} from './targets.ts';

export interface Rep {
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
  /** Of cpuUsPerReq, what the target's Node process used (the rest is its database server's). */
  nodeUsPerReq?: number;
  /** The CPU per request of the target's side processes (the OTLP sink), when it has any. */
  sideUsPerReq?: number;
}
export interface StreamRep {
  streamsPerS: number;
  ttftP50: number;
  ttftP99: number;
  gapP50: number;
  gapP99: number;
  errors: number;
}

export function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
export const median = (xs: number[]) => pct(xs, 50);
/** Half the range around the median, as a share: ±x. */
export const spread = (xs: number[]) => (xs.length < 2 ? 0 : (Math.max(...xs) - Math.min(...xs)) / 2 / median(xs));

/**
 * These two cores may be shared (other users, a test suite): before each measurement, wait (up
 * to QUIET_WAIT_S) until the rest of the machine uses less than a quarter of a core, so the
 * figures are the targets', not the neighbours'. Every measurement reports what others used.
 */
export async function awaitQuiet(): Promise<void> {
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

export async function measureChat(
  t: Running,
  connections: number,
  window?: { begin(): void; end(): void },
): Promise<Rep> {
  await awaitQuiet();
  await wrk(t, '/v1/chat/completions', CHAT, connections, WARMUP);
  window?.begin();
  const pids = t.pids();
  const cpu0 = cpuMsOf(pids);
  const node0 = t.nodePid ? cpuMsOf([t.nodePid]) : 0;
  const sim0 = cpuMsOf([state.simPid]);
  const sidePids = t.sidePids?.() ?? [];
  const side0 = cpuMsOf(sidePids);
  const times0 = machineTimes();
  const w = await wrk(t, '/v1/chat/completions', CHAT, connections, SECONDS);
  window?.end();
  const cpu = cpuMsOf(pids) - cpu0;
  const node = t.nodePid ? cpuMsOf([t.nodePid]) - node0 : 0;
  const sim = t.pids().includes(state.simPid) ? 0 : cpuMsOf([state.simPid]) - sim0;
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
    ...(t.nodePid && pids.length > 1 ? { nodeUsPerReq: (node * 1000) / Math.max(1, ok) } : {}),
    ...(sidePids.length ? { sideUsPerReq: (side * 1000) / Math.max(1, ok) } : {}),
  };
}

export async function measureStream(t: Running, connections: number): Promise<StreamRep> {
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

export interface TargetResult {
  name: string;
  chat: Record<number, Rep[]>;
  stream: Record<number, StreamRep[]>;
  check?: string;
  diagnosis?: string;
  error?: string;
  /** The trace targets: span counts once the run's spans were exported (before the gateway stopped). */
  spans?: SpanCounts;
}

/** A profiled window: what ran in it, when (process.hrtime), and the gateway's CPU per request (or per stream) in it. */
export interface ProfiledWindow {
  label: string;
  from: bigint;
  to: bigint;
  usPerUnit?: number;
  unit: string;
}

export async function diagnose(t: Running, diag: Diagnose, windows: readonly ProfiledWindow[]): Promise<string> {
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
    for (const w of windows) {
      // Profile times are CLOCK_MONOTONIC microseconds, as process.hrtime is.
      const from = (Number(w.from / 1000n) - p.startTime) / 1000;
      const to = (Number(w.to / 1000n) - p.startTime) / 1000;
      lines.push(
        `  CPU profile of the ${w.label} window (${prof}):`,
        formatStages(stagesOf(p, from, to), w.usPerUnit, w.unit),
        formatSummary(summarise(p, 30, from, to)),
      );
    }
  }
  return lines.join('\n');
}

/** What the database did per request in the window (pg_stat_database's counters, each backend's flushed about once a second). */
function databasePerRequest(a: DbCounters, b: DbCounters, requests: number): string {
  const per = (k: keyof DbCounters) => ((b[k] - a[k]) / Math.max(1, requests)).toFixed(3);
  return `  database per request (pg_stat_database): ${per('commits')} transactions, ${per('inserted')} rows inserted, ${per('updated')} updated, ${per('deleted')} deleted, ${per('read')} read`;
}

/** c=32 streams (wrk) in a window of their own, for the profile: when it ran and the gateway's CPU per stream. */
async function profiledStreams(t: Running) {
  await awaitQuiet();
  await wrk(t, '/v1/chat/completions', STREAM, 32, WARMUP);
  const from = process.hrtime.bigint();
  const node0 = cpuMsOf([t.nodePid!]);
  const w = await wrk(t, '/v1/chat/completions', STREAM, 32, STREAM_SECONDS);
  const node = cpuMsOf([t.nodePid!]) - node0;
  const to = process.hrtime.bigint();
  await new Promise((res) => setTimeout(res, 300));
  return { from, to, streamsPerS: w.rps, usPerStream: (node * 1000) / Math.max(1, w.rps * w.durationS) };
}

/** strace -c -f attached to the running Node process for one wrk run: syscalls per request. */
export async function syscallsPerRequest(t: Running): Promise<string> {
  const strace = ensureStrace();
  const out = path.join(state.workDir, `strace-${t.nodePid}.txt`);
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
export async function firstAnswer(t: Running): Promise<void> {
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

/** `diagnosis`: run --diagnose's profile and syscalls after the measurements (when asked for). */
export async function runTarget(def: TargetDef, diagnosis = true): Promise<TargetResult> {
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
            `${rep.cpuUsPerReq.toFixed(0)} µs CPU/req${rep.nodeUsPerReq === undefined ? '' : ` (gateway ${rep.nodeUsPerReq.toFixed(0)}, database ${(rep.cpuUsPerReq - rep.nodeUsPerReq).toFixed(0)})`}, wrk ${(rep.wrkCpuShare * 100).toFixed(0)}% of a core, others ${rep.othersBusy.toFixed(2)} cores, steal ${rep.steal.toFixed(2)} cores` +
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
  if (diagnosis && values.diagnose && (def.name.startsWith('gateway') || def.name === 'bare')) {
    r.diagnosis = await diagnoseTarget(def).catch((err) => `diagnosis failed: ${(err as Error).message}`);
    console.log(r.diagnosis);
  }
  return r;
}

/** One target's results of two rounds (--rounds) as one: every repetition, each round's books and errors. */
export function mergeResults(a: TargetResult, b: TargetResult): TargetResult {
  const joined = (x: string | undefined, y: string | undefined) => (x && y ? `${x}\n${y}` : (x ?? y));
  const cells = <T>(x: Record<number, T[]>, y: Record<number, T[]>) =>
    Object.fromEntries([1, 32].filter((c) => x[c] || y[c]).map((c) => [c, [...(x[c] ?? []), ...(y[c] ?? [])]]));
  const check = joined(a.check, b.check);
  const error = joined(a.error, b.error);
  const diagnosis = joined(a.diagnosis, b.diagnosis);
  const spans = b.spans ?? a.spans;
  return {
    name: a.name,
    chat: cells(a.chat, b.chat),
    stream: cells(a.stream, b.stream),
    ...(check ? { check } : {}),
    ...(error ? { error } : {}),
    ...(diagnosis ? { diagnosis } : {}),
    ...(spans ? { spans } : {}),
  };
}

/** A trace target's span counts: exported, dropped, per request served, what the sink received. */
export function spanLine(s: SpanCounts): string {
  const dropped = s.droppedQueueFull + s.droppedExportFailed;
  return (
    `spans: ${s.exported} exported, ${dropped} dropped (queue full ${s.droppedQueueFull}, export failed ${s.droppedExportFailed}) ` +
    `over ${s.requests} requests (${((s.exported + dropped) / Math.max(1, s.requests)).toFixed(2)} spans/request); ` +
    `sink: ${s.sinkPosts} exports, ${(s.sinkBytes / 2 ** 20).toFixed(1)} MiB${dropped ? ' => SPANS DROPPED' : ''}`
  );
}

/** What one repetition (its warm-up included) added to the span counts; exports lag by up to the schedule delay. */
export function spanDelta(a: SpanCounts, b: SpanCounts): string {
  const dropped = b.droppedQueueFull + b.droppedExportFailed - a.droppedQueueFull - a.droppedExportFailed;
  return `, spans +${b.exported - a.exported} exported, +${dropped} dropped`;
}

/** The billing check of a gateway target after it stopped (undefined for the others); a check that fails counts as not exact. */
export async function checkBooks(t: Running): Promise<string | undefined> {
  return t.check?.().catch((err) => {
    state.exactAll = false;
    return `billing check failed: ${(err as Error).message}`;
  });
}

/**
 * Where the time goes, on fresh starts of the target (their books checked too): a CPU profile, event-loop delay and GC of
 * one c=32 run; then, without the profiler (its signals would be counted), syscalls per request.
 */
export async function diagnoseTarget(def: TargetDef): Promise<string> {
  const diag = {
    profDir: fs.mkdtempSync(path.join(state.workDir, `prof-${def.name}-`)),
    probeFile: path.join(state.workDir, `probe-${def.name}.json`),
  };
  const lines: string[] = [];
  let t = await def.start(diag);
  try {
    await firstAnswer(t);
    let from = 0n;
    let to = 0n;
    let db0: Promise<DbCounters> | undefined;
    let db1: Promise<DbCounters> | undefined;
    const rep = await measureChat(t, 32, {
      begin: () => {
        process.kill(t.nodePid!, 'SIGUSR2');
        from = process.hrtime.bigint();
        db0 = t.dbCounters?.();
      },
      end: () => {
        to = process.hrtime.bigint();
        process.kill(t.nodePid!, 'SIGUSR2');
        db1 = t.dbCounters?.();
      },
    });
    await new Promise((res) => setTimeout(res, 300));
    lines.push(
      `  profiled run: ${rep.rps.toFixed(0)} req/s at c=32, p50 ${rep.p50.toFixed(2)} ms, p99 ${rep.p99.toFixed(2)} ms, ${rep.cpuUsPerReq.toFixed(0)} µs CPU/req${rep.nodeUsPerReq === undefined ? '' : ` (gateway ${rep.nodeUsPerReq.toFixed(0)})`}, others ${rep.othersBusy.toFixed(2)} cores`,
    );
    if (db0 && db1) lines.push(databasePerRequest(await db0, await db1, rep.rps * SECONDS));
    const windows: ProfiledWindow[] = [
      { label: 'c=32 unstreamed', from, to, usPerUnit: rep.nodeUsPerReq ?? rep.cpuUsPerReq, unit: 'req' },
    ];
    if (!values['no-streams']) {
      const s = await profiledStreams(t);
      lines.push(
        `  profiled streams: ${s.streamsPerS.toFixed(0)} streams/s at c=32, ${s.usPerStream.toFixed(0)} µs of the gateway's CPU per stream`,
      );
      windows.push({ label: 'c=32 streamed', from: s.from, to: s.to, usPerUnit: s.usPerStream, unit: 'stream' });
    }
    lines.push(await diagnose(t, diag, windows));
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
