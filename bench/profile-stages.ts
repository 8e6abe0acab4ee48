// Where a gateway's request CPU goes, stage by stage (docs/benchmark.md, Stages): each busy
// sample of a V8 CPU profile is given to the stage of the innermost frame on its stack that a
// rule below names (our file, or the package doing the work), so a library's or the runtime's
// work counts for the stage of ours that asked for it. Samples no rule names are Node's own
// sockets, timers and streams between stages.
import { samplesIn, type Profile } from './profile-summary.ts';

/** The stages in the order a request meets them; each rule is a test on a frame's file and function. */
const STAGES: { stage: string; match: (url: string, fn: string) => boolean }[] = [
  {
    stage: 'spans (traces)',
    match: (u) =>
      has(
        u,
        'src/tracing/',
        'src/facade/tracing.ts',
        'src/rpc/rpc-spans.ts',
        'src/inference/upstream/attempt-spans.ts',
        'src/metering/money-spans.ts',
        '@opentelemetry/',
      ),
  },
  { stage: 'metrics', match: (u) => has(u, 'src/log/metrics.ts', 'prom-client/') },
  { stage: 'log line', match: (u) => has(u, 'src/log/', 'pino/', 'sonic-boom/', 'thread-stream/', 'fast-redact/') },
  {
    stage: 'usage row and charges (batch writes)',
    match: (u, f) => has(u, 'src/billing/leases.ts') && /flush|Statement|Columns/.test(f),
  },
  {
    stage: 'database client (pg, knex)',
    match: (u) => has(u, 'src/db/', '/pg/', 'pg-protocol/', 'pg-pool/', 'knex/', 'pg-types/'),
  },
  {
    stage: 'key',
    match: (u) =>
      has(u, 'src/billing/key-cache.ts', 'src/billing/key-check.ts', 'src/facade/access.ts', 'src/billing/caller.ts'),
  },
  { stage: 'budgets', match: (u) => has(u, 'src/budgets/', 'src/billing/budget-holds.ts') },
  {
    stage: 'hold and settle (leases, ledger, metering)',
    match: (u) =>
      has(
        u,
        'src/billing/leases.ts',
        'src/billing/ledger.ts',
        'src/billing/rate-limits.ts',
        'src/billing/in-flight.ts',
        'src/metering/metering.ts',
        'src/metering/outcomes.ts',
      ),
  },
  {
    stage: 'route and price (body, model, policy, tokens)',
    match: (u) =>
      has(
        u,
        'src/inference/routes/',
        'src/inference/request-body.ts',
        'src/inference/tokens.ts',
        'src/inference/translate/',
        'src/inference/providers/',
        'src/catalogue/',
        'src/metering/',
        'src/billing/pricing.ts',
        'src/billing/markup.ts',
        'src/money/',
        'src/tenancy/',
        'tiktoken',
        'gpt-tokenizer/',
      ),
  },
  { stage: 'deployment choice and limits', match: (u) => has(u, 'src/inference/routing/') },
  { stage: 'stream relay (stream run, SSE)', match: (u) => has(u, 'src/inference/streams/') },
  {
    stage: 'upstream call and reply',
    match: (u) => has(u, 'src/inference/upstream/', 'src/secrets/', 'undici/', 'node:internal/deps/undici'),
  },
  {
    stage: 'in-process RPC (Connect, protobuf)',
    match: (u) => has(u, 'src/rpc/', 'src/services/', 'src/gen/', '@connectrpc/', '@bufbuild/'),
  },
  { stage: 'answer (facade)', match: (u) => has(u, 'src/facade/', 'src/errors/') },
  {
    stage: 'accept, parse, write (Fastify, node:http)',
    match: (u) =>
      has(u, 'fastify/', 'find-my-way/', 'avvio/', 'light-my-request/', '@fastify/', 'node:_http', 'node:http'),
  },
];

const has = (url: string, ...parts: string[]) => parts.some((p) => url.includes(p));

export interface StageShare {
  stage: string;
  share: number;
}

/** Busy samples (idle and `(program)` left out) by stage, within [fromMs, toMs] of the profile's start; GC is a stage of its own. */
export function stagesOf(profile: Profile, fromMs = 0, toMs = Infinity): { busy: number; stages: StageShare[] } {
  const { byId, parent, samples } = samplesIn(profile, fromMs, toMs);
  const stageOfNode = new Map<number, string>();
  const stageOf = (id: number): string => {
    const known = stageOfNode.get(id);
    if (known) return known;
    let found = 'Node between stages (sockets, timers, streams)';
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = byId.get(at)!.callFrame;
      const rule = STAGES.find((s) => s.match(f.url, f.functionName));
      if (rule) {
        found = rule.stage;
        break;
      }
    }
    stageOfNode.set(id, found);
    return found;
  };
  const counts = new Map<string, number>();
  let busy = 0;
  for (const node of samples) {
    const fn = node.callFrame.functionName;
    if (fn === '(idle)' || fn === '(program)') continue;
    const stage = fn === '(garbage collector)' ? 'garbage collector' : stageOf(node.id);
    counts.set(stage, (counts.get(stage) ?? 0) + 1);
    busy++;
  }
  const stages = [...counts].sort((a, b) => b[1] - a[1]).map(([stage, c]) => ({ stage, share: c / Math.max(1, busy) }));
  return { busy, stages };
}

/** The stages as lines, with each one's µs per request where the node process's CPU per request is known. */
export function formatStages(s: { busy: number; stages: StageShare[] }, nodeUsPerUnit?: number, unit = 'req'): string {
  return [
    `  busy samples by stage (${s.busy}; the innermost frame a stage names):`,
    ...s.stages.map(
      (x) =>
        `    ${(x.share * 100).toFixed(1).padStart(5)}%${nodeUsPerUnit === undefined ? '' : ` ${(x.share * nodeUsPerUnit).toFixed(0).padStart(4)} µs/${unit}`}  ${x.stage}`,
    ),
  ].join('\n');
}
