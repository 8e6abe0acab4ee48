// The bench's options (`npm run bench -- --help`), its constants, and what a run learns once started.
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { TestPostgres } from '../test/support/postgres.ts';

export const { values } = parseArgs({
  options: {
    reps: { type: 'string' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    targets: { type: 'string' },
    'no-streams': { type: 'boolean' },
    diagnose: { type: 'boolean' },
    'log-level': { type: 'string' },
    'quiet-wait': { type: 'string' },
    nice: { type: 'string' },
    quick: { type: 'boolean' },
    baseline: { type: 'string' },
    'side-by-side': { type: 'boolean' },
    streamed: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});

export const USAGE = `npm run bench [-- options]: what this gateway costs, measured with wrk (docs/benchmark.md)

  --targets a,b,...   direct, bare, gateway-embedded, gateway-postgres, portkey, litellm (the default);
                      also, only when named: raw, raw-fastify, gateway-3-deployments,
                      gateway-trace-100, gateway-trace-1
  --reps N            repetitions per cell (3; --quick: 1)
  --rounds N          go over all the targets N times, --reps repetitions each time, and report them
                      together: a machine whose speed drifts during the run weighs on every target alike (1)
  --seconds N         seconds per repetition (10; --quick: 3)
  --warmup N          seconds of warm-up before each measurement (2)
  --no-streams        chat only, no stream measurements
  --diagnose          a CPU profile, syscalls per request, event-loop delay and GC per gateway target
  --log-level LEVEL   the gateway targets' LOG_LEVEL (info)
  --quiet-wait N      seconds to wait for a quiet machine before each target (15)
  --nice=N            run every measured process at this nice level (root for a negative one)
  --quick             1 x 3 s per cell, to see that it works
  --baseline DIR      also gateway-embedded@baseline and gateway-postgres@baseline: the gateway run from
                      DIR, a checkout of other code (a git worktree with node_modules), in the same run
                      (with --rounds, taken in turn with this code's targets: two versions compared
                      on one machine phase)
  --side-by-side      the two --targets measured at the same time, each under its own wrk (c=16,
                      unstreamed chat), --reps windows of --seconds: the second's req/s and CPU per
                      request over the first's, window by window (for a small difference between two
                      versions, e.g. gateway-embedded,gateway-embedded@baseline)
  --streamed          with --side-by-side: streamed chat (16 chunks, 2 ms apart) instead, CPU per stream
  --help              this text`;
export const REPS = Number(values.reps ?? (values.quick ? 1 : 3));
export const ROUNDS = Math.max(1, Number(values.rounds ?? 1));
export const SECONDS = Number(values.seconds ?? (values.quick ? 3 : 10));
export const WARMUP = Number(values.warmup ?? 2);
export const STREAM_SECONDS = Math.max(2, Math.min(SECONDS, 5));
export const LOG_LEVEL = values['log-level'] ?? 'info';
export const QUIET_WAIT_S = Number(values['quiet-wait'] ?? 15);
// On a machine shared with other work: run every measured process (and the load) at this nice
// level (negative = ahead of the rest; root only), so the figures are closer to "alone".
export const NICE = Number(values.nice ?? 0);
export const ROOT = path.resolve(import.meta.dirname, '..');
/** Another checkout whose gateway the @baseline targets run (--baseline). */
export const BASELINE = values.baseline ? path.resolve(values.baseline) : undefined;
export const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'gateway-bench');
export const UPSTREAM_KEY = 'sk-bench-upstream';
export const OPENING_NANO = 1_000_000_000_000n; // $1,000
export const LITELLM_MASTER_KEY = 'sk-bench-litellm-0123456789abcdef0123456789abcdef';

export const CHAT = JSON.stringify({
  model: 'gpt-4o-mini',
  max_tokens: 64,
  messages: [{ role: 'user', content: 'Say hello [sim tokens=16]' }],
});
// 16 content chunks, 2 ms apart upstream.
export const STREAM = JSON.stringify({
  model: 'gpt-4o-mini',
  max_tokens: 64,
  stream: true,
  messages: [{ role: 'user', content: 'Say hello [sim tokens=16 delay=2]' }],
});

/** What a run learns once started, shared by its parts. */
export const state = {
  /** The wrk binary (tools in servers.ts). */
  wrk: '',
  /** The run's folder: logs, profiles, data directories. */
  workDir: '',
  /** The upstream simulator, and its process (counted apart from every target). */
  simUrl: '',
  simPid: 0,
  /** The PostgreSQL servers of the targets running (gateway-postgres's; two side by side). */
  pgServers: new Set<TestPostgres>(),
  /** Every gateway target's billing added up exactly (a failure makes the run exit 1). */
  exactAll: true,
};
