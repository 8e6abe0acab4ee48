// --side-by-side: two targets measured at the same time, for a difference of a few percent that
// this machine's drift hides when they are measured one after the other (the same code measured a
// minute apart differs by 10–30 %: docs/benchmark.md). Both run for the whole measurement, each
// loaded by its own wrk (c=16, unstreamed chat, or streams with --streamed) in the same windows,
// so a slow phase of the VM weighs on both alike. Each window gives both targets' requests per second and CPU per request
// (gateway and database), and the second's over the first's; the summary is the median of those
// ratios and their range. The two share the machine, so their absolute figures are not those of a
// target alone: the ratio is the measure. Meant for two versions of the gateway (--baseline).
import { awaitQuiet, checkBooks, firstAnswer, median } from './measure.ts';
import { wrk } from './load.ts';
import { CHAT, REPS, SECONDS, STREAM, values, WARMUP } from './options.ts';
import { cpuMsOf, machineTimes } from './servers.ts';
import type { Running, TargetDef } from './targets.ts';

const CONNECTIONS = 16;
// --streamed: each request a 16-chunk stream; its figures are then per stream.
const BODY = values.streamed ? STREAM : CHAT;
const KIND = values.streamed ? 'streamed chat (16 chunks), per stream' : 'unstreamed chat';

interface Side {
  rps: number;
  cpuUsPerReq: number;
  /** The gateway process alone (its database's processes left out). */
  nodeUsPerReq?: number;
}

/** Runs `a` and `b` together for REPS windows of SECONDS; prints each window and the ratios' medians. */
export async function sideBySide(a: TargetDef, b: TargetDef): Promise<string> {
  const started: Running[] = [];
  const windows: [Side, Side][] = [];
  let failure: string | undefined;
  try {
    for (const def of [a, b]) started.push(await def.start(undefined));
    for (const t of started) await firstAnswer(t);
    const [ta, tb] = started as [Running, Running];
    for (let i = 0; i < REPS; i++) {
      await awaitQuiet();
      await Promise.all([ta, tb].map((t) => wrk(t, '/v1/chat/completions', BODY, CONNECTIONS, WARMUP)));
      const before = [ta, tb].map(cpuOf);
      const steal0 = machineTimes().steal;
      const runs = await Promise.all([ta, tb].map((t) => wrk(t, '/v1/chat/completions', BODY, CONNECTIONS, SECONDS)));
      const steal = (machineTimes().steal - steal0) / (SECONDS * 1000);
      const sides = [ta, tb].map((t, k): Side => {
        const after = cpuOf(t);
        const ok = Math.max(1, runs[k]!.rps * runs[k]!.durationS);
        const node = t.nodePid;
        return {
          rps: runs[k]!.rps,
          cpuUsPerReq: (cpuBetween(before[k]!, after) * 1000) / ok,
          ...(node ? { nodeUsPerReq: (((after.get(node) ?? 0) - (before[k]!.get(node) ?? 0)) * 1000) / ok } : {}),
        };
      }) as [Side, Side];
      windows.push(sides);
      const errors = runs.map((r) => r.errors);
      console.log(
        `  window ${i + 1}: ${a.name} ${line(sides[0])}; ${b.name} ${line(sides[1])}; ` +
          `${b.name} / ${a.name}: req/s ${ratio(sides[1].rps, sides[0].rps)}, CPU/req ${ratio(sides[1].cpuUsPerReq, sides[0].cpuUsPerReq)}; ` +
          `errors ${errors.join(' and ')}, steal ${steal.toFixed(2)} cores`,
      );
    }
  } catch (err) {
    failure = (err as Error).message;
    console.log(`  side by side: ${failure}`);
  } finally {
    for (const t of started) await t.stop();
  }
  const books = [];
  for (const [k, t] of started.entries()) books.push(`${[a, b][k]!.name} ${await checkBooks(t)}`);
  for (const line of books) console.log(`  ${line}`);
  return failure ? `side by side failed: ${failure}` : summary(a.name, b.name, windows);
}

/** CPU so far by process: a process that ends during a window (a database backend) must not take its past CPU with it. */
function cpuOf(t: Running): Map<number, number> {
  return new Map(t.pids().map((p) => [p, cpuMsOf([p])]));
}

/** CPU ms between two snapshots, over the processes alive at the second (a new one's CPU is all the window's). */
function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let ms = 0;
  for (const [pid, now] of after) ms += now - (before.get(pid) ?? 0);
  return ms;
}

const line = (s: Side) =>
  `${s.rps.toFixed(0)} req/s, ${s.cpuUsPerReq.toFixed(0)} µs CPU/req` +
  (s.nodeUsPerReq === undefined ? '' : ` (gateway ${s.nodeUsPerReq.toFixed(0)})`);

const ratio = (x: number, y: number) => (x / y).toFixed(3);

function summary(a: string, b: string, windows: [Side, Side][]): string {
  const of = (f: (s: Side) => number | undefined) => {
    const rs = windows.map(([x, y]) => f(y)! / f(x)!).filter((r) => Number.isFinite(r));
    return rs.length ? `${median(rs).toFixed(3)} (${Math.min(...rs).toFixed(3)}–${Math.max(...rs).toFixed(3)})` : '-';
  };
  return (
    `side by side, ${windows.length} windows of ${SECONDS} s, c=${CONNECTIONS} each, ${KIND}: ${b} / ${a}, median (range) of the windows' ratios:\n` +
    `  req/s ${of((s) => s.rps)}; CPU per request ${of((s) => s.cpuUsPerReq)}; gateway process alone ${of((s) => s.nodeUsPerReq)}`
  );
}
