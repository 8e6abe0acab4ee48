// `npm run soak -- --seeds 1000 [--steps 30] [--start 1]`, or `--seed 42` to replay one seed.
// Starts its own PostgreSQL, upstream simulator and two gateway processes (one with a hold per
// request, one with credit leases; the test suite's seeds run two of the first kind), runs the seeds one
// after another and prints every broken invariant with the seed that broke it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createDatabase, startPostgres } from '../support/postgres.ts';
import { startSimulator } from '../upstream/simulator.ts';
import { runSeed, type SoakGateway } from './soak.ts';
import { SOAK_APP_NAME, SOAK_HOLD_TTL_MS, SOAK_SWEEP_MS, soakGateway } from './gateways.ts';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string' },
    seed: { type: 'string' },
    steps: { type: 'string' },
    start: { type: 'string' },
    verbose: { type: 'boolean' },
    'no-lease': { type: 'boolean' },
  },
});
const first = Number(values.seed ?? values.start ?? 1);
const count = values.seed ? 1 : Number(values.seeds ?? 20);
const steps = Number(values.steps ?? 30);
const UPSTREAM_KEY = 'sk-soak-upstream';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-soak-'));
const pg = await startPostgres();
await createDatabase(pg.url(), 'soak');
const sim = await startSimulator({ apiKey: UPSTREAM_KEY });
const opts = { databaseUrl: pg.url('soak'), simulatorUrl: sim.url, upstreamKey: UPSTREAM_KEY, logDir: dir };
const gateways: (SoakGateway & { stop?: () => Promise<void> })[] = [
  await soakGateway({ ...opts, name: 'a' }),
  await soakGateway({ ...opts, name: 'b', billing: values['no-lease'] ? 'hold' : 'lease' }),
];
const env = {
  databaseUrl: pg.url('soak'),
  gatewayAppName: SOAK_APP_NAME,
  gateways,
  holdTtlMs: SOAK_HOLD_TTL_MS,
  sweepMs: SOAK_SWEEP_MS,
  log: values.verbose ? (l: string) => console.log(l) : undefined,
};

// A stop signal ends the run after the current seed, through the cleanup below, so its gateways
// and PostgreSQL server do not outlive it (a second signal exits at once).
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    console.log(`${signal}: stopping after this seed`);
  });
}

let failed = 0;
let ran = 0;
const started = Date.now();
try {
  for (let seed = first; seed < first + count && !stopping; seed++) {
    ran++;
    const r = await runSeed(seed, env, steps);
    if (r.failures.length > 0) {
      failed++;
      console.log(
        `seed ${seed}: FAILED\n  ${r.failures.join('\n  ')}\n  replay: npm run soak -- --seed ${seed} --steps ${steps} --verbose`,
      );
    } else {
      console.log(`seed ${seed}: ok (${r.steps} steps, ${r.requests} requests)`);
    }
  }
} finally {
  for (const g of env.gateways) await (g as { stop?: () => Promise<void> }).stop?.().catch(() => {});
  await sim.close();
  await pg.stop();
}
console.log(
  `\n${ran - failed} of ${ran} seeds kept every invariant (${Math.round((Date.now() - started) / 1000)} s); gateway logs in ${dir}`,
);
process.exit(failed > 0 ? 1 : stopping ? 130 : 0);
