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
//
// The parts: options.ts (the options and what a run learns), servers.ts (processes, tools, CPU
// from /proc), targets.ts (what is measured), load.ts (wrk and the stream probe), measure.ts (one
// target's repetitions, billing check and diagnosis), report.ts (the tables).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mergeResults, runTarget, type TargetResult } from './measure.ts';
import { LOG_LEVEL, NICE, REPS, ROOT, ROUNDS, SECONDS, state, UPSTREAM_KEY, USAGE, values } from './options.ts';
import { report } from './report.ts';
import { sideBySide } from './side-by-side.ts';
import { children, findWrk, startChild, stopChild } from './servers.ts';
import { TARGETS } from './targets.ts';

async function main() {
  state.wrk = findWrk();
  if (NICE) os.setPriority(NICE);
  // Tracing is what the trace targets set, nothing else: OpenTelemetry settings of this shell
  // would turn it on in every gateway target (or send the trace targets' spans elsewhere).
  const inherited = Object.keys(process.env).filter((k) => k.startsWith('OTEL_'));
  for (const k of inherited) delete process.env[k];
  if (inherited.length)
    console.log(`not passed to the targets: ${inherited.join(', ')} (tracing only where a target sets it)`);
  state.workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-bench-'));
  fs.chmodSync(state.workDir, 0o755); // the embedded target's PostgreSQL server (as root: another user) reaches its DATA_DIR in here
  const wanted = values.targets ? values.targets.split(',') : TARGETS.filter((t) => !t.optional).map((t) => t.name);
  for (const n of wanted)
    if (!TARGETS.some((t) => t.name === n))
      throw new Error(`unknown target ${n}; targets: ${TARGETS.map((t) => t.name).join(', ')}`);
  const cpus = os.cpus();
  const machine = `${cpus[0]?.model ?? 'cpu'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, node ${process.version}, load average at start ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
  console.log(`machine: ${machine}\nwork folder: ${state.workDir}`);

  const sim = await startChild(process.execPath, ['bench/simulator-main.ts'], {
    env: { SIM_API_KEY: UPSTREAM_KEY },
    readyLine: /^http/,
  });
  state.simUrl = sim.line.trim();
  state.simPid = sim.child.pid!;
  if (values['side-by-side']) {
    const defs = wanted.map((n) => TARGETS.find((t) => t.name === n)!);
    if (defs.length !== 2) throw new Error('--side-by-side takes two --targets');
    try {
      console.log(`\n${defs[0]!.name} and ${defs[1]!.name}, side by side`);
      console.log(`\n${await sideBySide(defs[0]!, defs[1]!)}`);
    } finally {
      await stopChild(sim.child);
      for (const s of state.pgServers) await s.stop();
    }
    if (!state.exactAll) process.exitCode = 1;
    return;
  }
  const byName = new Map<string, TargetResult>();
  try {
    // Rounds over the targets (--rounds): each target alone each time, its diagnosis in the last.
    for (let round = 1; round <= ROUNDS; round++)
      for (const def of TARGETS.filter((t) => wanted.includes(t.name))) {
        console.log(`\n${def.name}${ROUNDS > 1 ? ` (round ${round} of ${ROUNDS})` : ''}: ${def.what}`);
        const r = await runTarget(def, round === ROUNDS);
        const had = byName.get(def.name);
        byName.set(def.name, had ? mergeResults(had, r) : r);
      }
  } finally {
    await stopChild(sim.child);
    for (const s of state.pgServers) await s.stop();
  }
  const results = [...byName.values()];
  const text = report(results, machine);
  console.log('\n' + text);
  for (const r of results) if (r.diagnosis) console.log(`\n${r.name} diagnosis:\n${r.diagnosis}`);
  fs.mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  const file = path.join(ROOT, 'bench', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(
    file,
    JSON.stringify({ machine, reps: REPS, rounds: ROUNDS, seconds: SECONDS, logLevel: LOG_LEVEL, results }, null, 2),
  );
  console.log(`\nresults: ${path.relative(ROOT, file)}; logs: ${state.workDir}`);
  if (!state.exactAll) process.exitCode = 1;
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
  for (const s of state.pgServers) await s.stop().catch(() => {});
}

if (values.help) {
  console.log(USAGE);
  process.exit(0);
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
