// The report: one table per measure over every target, medians and spreads, and what it means.
import { median, spanLine, spread, type Rep, type StreamRep, type TargetResult } from './measure.ts';
import { LOG_LEVEL, NICE, REPS, ROUNDS, SECONDS, state, values, WARMUP } from './options.ts';
import { TRACE_SAMPLING } from './targets.ts';

const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
const pad = (cells: string[], widths: number[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' ');

/** The results by target, a chat figure's median, and the name column's width. */
interface Figures {
  results: TargetResult[];
  byName: Map<string, TargetResult>;
  med: (name: string, c: number, k: keyof Rep) => number;
  direct: { p50c1: number };
  nameWidth: number;
}

export function report(results: TargetResult[], machine: string): string {
  const out: string[] = [];
  const byName = new Map(results.map((r) => [r.name, r]));
  const med = (name: string, c: number, k: keyof Rep) =>
    median((byName.get(name)?.chat[c] ?? []).map((x) => x[k] ?? NaN));
  // The name column fits the longest target name measured (18 unless gateway-3-deployments is).
  const nameWidth = Math.max(18, ...results.map((r) => r.name.length));
  const figures: Figures = { results, byName, med, direct: { p50c1: med('direct', 1, 'p50') }, nameWidth };
  out.push(`machine: ${machine}`);
  out.push(
    `wrk ${state.wrk} (1 thread), ${REPS * ROUNDS} x ${SECONDS} s per cell${ROUNDS > 1 ? ` (${ROUNDS} rounds over the targets)` : ''} after a ${WARMUP} s warm-up; unstreamed chat (16 output tokens); billing on, rate limits off; gateway log level ${LOG_LEVEL} (to a file)${NICE ? `; measured processes at nice ${NICE}` : ''}`,
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
  out.push(...chatTable(figures), '', ...comparisons(figures));
  if (!values['no-streams']) out.push('', ...streamTable(figures));
  out.push('');
  for (const r of results) for (const line of r.check?.split('\n') ?? []) out.push(`${r.name} ${line}`);
  for (const r of results) if (r.spans) out.push(`${r.name} ${spanLine(r.spans)}`);
  return out.join('\n');
}

/** Unstreamed chat: a row per target at c=1 and c=32. */
function chatTable({ results, direct, nameWidth }: Figures): string[] {
  const out: string[] = [];
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
  return out;
}

/** The gateway against the others, routing over three deployments, tracing on against off. */
function comparisons({ byName, med, direct }: Figures): string[] {
  const out: string[] = [];
  const ratio = (a: string, b: string) => med(a, 32, 'rps') / med(b, 32, 'rps');
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
  return out;
}

/** Streamed chat: time to first token and the gaps between chunks. */
function streamTable({ results, byName, nameWidth }: Figures): string[] {
  const out: string[] = [];
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
  return out;
}
