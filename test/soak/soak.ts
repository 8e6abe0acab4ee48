// A seeded randomized run against real gateway processes over one PostgreSQL: keys, concurrent
// mixed requests with upstream faults and client aborts, top-ups (some repeated), rotations,
// dropped database connections, a gateway killed and restarted, and budgets (docs/budgets.md) of
// random scopes, amounts and periods in random time zones, with requests naming end customers.
// After every step the ledger invariants of docs/design.md (Money) and the budgets' are checked
// straight from the database. The seed decides every
// operation, so a failing seed replays the same run (timing aside).
import pg from 'pg';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { OrganisationService } from '../../src/gen/gateway/v1/organisations_pb.js';
import { mulberry32 } from '../support/random.ts';

export interface SoakGateway {
  httpUrl: string;
  rpcUrl: string;
  /** Kills the process (SIGKILL) and starts it again on the same ports' successors. */
  restart(): Promise<SoakGateway>;
}

export interface SoakEnv {
  databaseUrl: string;
  /** application_name the gateways' database connections carry (for dropping them). */
  gatewayAppName: string;
  gateways: SoakGateway[];
  /** Hold TTL and sweep interval the gateways run with: no active hold may outlive both. */
  holdTtlMs: number;
  sweepMs: number;
  log?: (line: string) => void;
}

export interface SoakResult {
  seed: number;
  steps: number;
  requests: number;
  failures: string[];
}

/** A seeded sequence (mulberry32) with the picks the soak makes. */
export function rng(seed: number) {
  const next = mulberry32(seed);
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!,
    chance: (p: number) => next() < p,
  };
}

interface Key {
  apiKey: string;
  keyId: string;
  accountId: string;
  revoked: string[];
}

/** End customers a request may name (x-gateway-customer), for the customer budgets. */
const CUSTOMERS = ['c1', 'c2', 'c3'];
const ZONES = ['UTC', 'America/New_York', 'Asia/Tokyo', 'Asia/Kolkata', 'Pacific/Chatham', 'Europe/London'];

/** A random budget over a new key, before it spends anything: its scope, amount, period and mode. */
function randomBudget(r: ReturnType<typeof rng>, key: { keyId: string }) {
  const scope = r.pick(['organisation', 'key', 'customer'] as const);
  const period = r.pick(['day', 'week', 'month', 'rolling', 'lifetime'] as const);
  return {
    scope,
    scopeId: scope === 'key' ? key.keyId : scope === 'customer' && r.chance(0.5) ? `key:${key.keyId}` : '',
    name: '',
    amountUsd: r.pick(['0', '0.00002', '0.0001', '0.0005', '0.002']),
    period,
    timeZone: r.pick(ZONES),
    startDay: period === 'week' ? r.int(0, 6) : period === 'month' ? r.int(1, 28) : 0,
    rollingHours: period === 'rolling' ? r.int(1, 48) : 0,
    mode: r.chance(0.8) ? 'hard' : 'soft',
    thresholds: [],
  };
}

const FAULTS = [
  '',
  '',
  '',
  '',
  ' fault=500',
  ' fault=429 fail=1 id=',
  ' fault=no_usage',
  ' fault=reset after=2',
  ' fault=error_stream',
  ' fault=400',
];

export async function runSeed(seed: number, env: SoakEnv, steps: number): Promise<SoakResult> {
  const r = rng(seed);
  const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 3 });
  const failures: string[] = [];
  const keys: Key[] = [];
  const externalIds: string[] = [];
  let requests = 0;
  const log = env.log ?? (() => {});
  const fail = (step: number, what: string) => {
    failures.push(`seed ${seed} step ${step}: ${what}`);
    log(`FAIL ${what}`);
  };
  const ownAccounts = () => keys.map((k) => k.accountId);
  const billing = (g: SoakGateway) => createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
  const orgs = (g: SoakGateway) => createClient(OrganisationService, createGrpcTransport({ baseUrl: g.rpcUrl }));

  const newKey = async (g: SoakGateway) => {
    const credits = r.pick([1_000_000n, 50_000_000n, 2_000_000_000n]); // $0.001 provokes 402s and lowered caps
    const k = await billing(g).createKey({ creditsNano: credits, label: `soak-${seed}` });
    keys.push({ apiKey: k.apiKey, keyId: k.keyId, accountId: k.accountId, revoked: [] });
    // Most new keys get budgets (up to three) before they spend anything.
    for (let b = r.int(0, 3); b > 0; b--)
      await orgs(g).setBudget({ organisationId: k.accountId, spec: randomBudget(r, k) });
  };

  try {
    for (let i = 0; i < 3; i++) await newKey(env.gateways[0]!);
    for (let step = 1; step <= steps; step++) {
      const g = r.pick(env.gateways);
      const action = r.pick([
        'requests',
        'requests',
        'requests',
        'requests',
        'topup',
        'topup',
        'newkey',
        'rotate',
        'dropdb',
        'restart',
      ] as const);
      log(`seed ${seed} step ${step}: ${action}`);
      try {
        if (action === 'newkey') await newKey(g);
        else if (action === 'topup') {
          const key = r.pick(keys);
          const repeat = externalIds.length > 0 && r.chance(0.4);
          const externalId = repeat ? r.pick(externalIds) : `soak-${seed}-${step}`;
          if (!repeat) externalIds.push(externalId);
          const res = await billing(g)
            .topUp({
              key: { ref: { case: 'apiKey', value: key.apiKey } },
              amountNano: BigInt(r.int(1, 5_000_000)),
              externalId,
              cause: 'soak',
            })
            .catch((e) => e as Error);
          if (!(res instanceof Error) && repeat && res.applied)
            fail(step, `a repeated top-up (${externalId}) applied again`);
        } else if (action === 'rotate') {
          const key = r.pick(keys);
          const res = await billing(g).rotateKey({ key: { ref: { case: 'apiKey', value: key.apiKey } } });
          key.revoked.push(key.apiKey);
          key.apiKey = res.apiKey;
          // The instance that rotated refuses the old key at once; another one that had it cached
          // does once the change notice arrives (revocation is bounded, not per request: see
          // src/billing/key-cache.ts), which on a busy machine may take a moment.
          const h = r.pick(env.gateways);
          const askOld = () =>
            new OpenAI({ apiKey: key.revoked.at(-1)!, baseURL: `${h.httpUrl}/v1`, maxRetries: 0 }).chat.completions
              .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'old key' }] })
              .then(
                () => undefined,
                (e: { status?: number }) => e.status,
              );
          let status = await askOld();
          for (
            const until = Date.now() + (h === g ? 0 : NOTICE_BOUND_MS);
            status !== 401 && Date.now() < until;
            status = await askOld()
          )
            await new Promise((res) => setTimeout(res, 20));
          if (status !== 401)
            fail(
              step,
              `a rotated-away key got ${status ?? 'a success'} ${h === g ? 'from the instance that rotated it' : `${NOTICE_BOUND_MS} ms after the rotation`}, not 401`,
            );
        } else if (action === 'dropdb') {
          await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [
            env.gatewayAppName,
          ]);
        } else if (action === 'restart') {
          // Kill a gateway while requests run on it; its holds are the sweeper's to release.
          const index = env.gateways.indexOf(g);
          const inFlight = Array.from({ length: r.int(1, 4) }, () => request(g, r, keys, step).catch(() => {}));
          await new Promise((res) => setTimeout(res, r.int(0, 150)));
          env.gateways[index] = await g.restart();
          await Promise.all(inFlight);
          requests += inFlight.length;
        } else {
          const n = r.int(1, 12);
          const outcomes = await Promise.all(
            Array.from({ length: n }, () => request(r.pick(env.gateways), r, keys, step)),
          );
          requests += n;
          for (const o of outcomes) if (o) fail(step, o);
        }
      } catch (err) {
        // A step may fail on its own (a dropped connection, a killed gateway): the books must not.
        log(`step error (allowed): ${(err as Error).message}`);
      }
      for (const v of await violations(pool, env, ownAccounts())) fail(step, v);
      if (failures.length > 0) break;
    }
    // In the end every hold is settled or released: wait out expiry + one sweep.
    const deadline = Date.now() + env.holdTtlMs + env.sweepMs + 5_000;
    while (Date.now() < deadline && (await activeHolds(pool, keys)) > 0)
      await new Promise((res) => setTimeout(res, 100));
    const left = await activeHolds(pool, keys);
    if (left > 0) fail(steps, `${left} holds still active after expiry + one sweep`);
    for (const v of await violations(pool, env, ownAccounts())) fail(steps, v);
  } finally {
    await pool.end();
  }
  return { seed, steps, requests, failures };
}

/** How long another instance may take to hear of a key change (the key cache tests allow the same). */
const NOTICE_BOUND_MS = 3_000;

/** One random request; returns a description of anything the caller saw that breaks a rule. */
async function request(
  g: SoakGateway,
  r: ReturnType<typeof rng>,
  keys: Key[],
  step: number,
): Promise<string | undefined> {
  const key = r.pick(keys);
  const fault = r.pick(FAULTS);
  const tag = `soak-${step}-${r.int(0, 1e9)}`;
  const directive = `[sim tokens=${r.int(1, 30)}${fault}${fault.endsWith('id=') ? tag : ''}]`;
  const customer = r.chance(0.5) ? { 'x-gateway-customer': r.pick(CUSTOMERS) } : undefined;
  const client = new OpenAI({
    apiKey: key.apiKey,
    baseURL: `${g.httpUrl}/v1`,
    maxRetries: 0,
    timeout: 15_000,
    ...(customer ? { defaultHeaders: customer } : {}),
  });
  const kind = r.pick(['chat', 'chat-stream', 'chat-stream-abort', 'embeddings', 'claude'] as const);
  try {
    if (kind === 'embeddings') {
      await client.embeddings.create({
        model: 'text-embedding-3-small',
        input: `${tag} ${directive.replace(' fault=reset after=2', '')}`,
      });
    } else if (kind === 'chat') {
      await client.chat.completions.create({
        model: 'gpt-4o-mini',
        max_tokens: r.int(1, 40),
        messages: [{ role: 'user', content: `${tag} ${directive}` }],
      });
    } else if (kind === 'claude') {
      await client.chat.completions.create({
        model: 'claude-haiku-4-5',
        messages: [{ role: 'user', content: `${tag} ${directive}` }],
      });
    } else {
      const abortAfter = kind === 'chat-stream-abort' ? r.int(0, 3) : -1;
      const stream = await client.chat.completions.create({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: `${tag} ${directive}` }],
      });
      let n = 0;
      for await (const _ of stream)
        if (n++ === abortAfter) {
          stream.controller.abort();
          break;
        }
    }
  } catch (err) {
    const status = (err as { status?: number }).status;
    // Refusals and upstream failures are expected outcomes; a 500 from the gateway itself is not,
    // unless its database connections were just dropped or it was killed (connection errors).
    if (status === 500 && !fault.includes('500') && !(err as Error).message.includes('server had an error'))
      return `unexpected 500: ${(err as Error).message}`;
  }
  return undefined;
}

async function activeHolds(pool: pg.Pool, keys: Key[]): Promise<number> {
  const ids = [...new Set(keys.map((k) => k.accountId))];
  const res = await pool.query(
    `SELECT count(*)::int AS n FROM holds WHERE status = 'active' AND account_id = ANY($1)`,
    [ids],
  );
  return res.rows[0].n as number;
}

/** The invariants of docs/design.md (Money), for every account, straight from the database. */
export async function violations(
  pool: Pick<pg.Pool, 'query'>,
  env: Pick<SoakEnv, 'holdTtlMs' | 'sweepMs'>,
  budgetAccounts: string[],
): Promise<string[]> {
  const out: string[] = [];
  const accounts = await pool.query(`
    SELECT a.id, a.balance_nano::text AS balance, a.held_nano::text AS held,
           (SELECT COALESCE(sum(amount_nano), 0) FROM ledger l WHERE l.account_id = a.id)::text AS ledger,
           (SELECT COALESCE(sum(amount_nano), 0) FROM holds h WHERE h.account_id = a.id AND h.status = 'active')::text AS active
    FROM accounts a`);
  for (const a of accounts.rows) {
    const [balance, held, ledger, active] = [BigInt(a.balance), BigInt(a.held), BigInt(a.ledger), BigInt(a.active)];
    if (balance < 0n) out.push(`account ${a.id}: balance ${balance} < 0`);
    if (held < 0n || held > balance) out.push(`account ${a.id}: held ${held} outside 0..balance ${balance}`);
    if (ledger !== balance) out.push(`account ${a.id}: ledger sum ${ledger} != balance ${balance}`);
    if (active !== held) out.push(`account ${a.id}: active holds ${active} != held ${held}`);
  }
  const settles = await pool.query(`
    SELECT h.request_id FROM holds h LEFT JOIN usage_records u ON u.request_id = h.request_id
    WHERE h.status <> 'active' AND u.request_id IS NULL LIMIT 5`);
  for (const s of settles.rows) out.push(`hold ${s.request_id} closed without its usage row`);
  const over = await pool.query(`
    SELECT u.request_id FROM usage_records u JOIN holds h ON h.request_id = u.request_id
    WHERE u.cost_nano > h.amount_nano OR u.cost_nano <> h.charged_nano LIMIT 5`);
  for (const s of over.rows) out.push(`request ${s.request_id}: charged more than its hold, or not what its hold says`);
  const charges = await pool.query(`
    SELECT l.request_id, count(*)::int AS n FROM ledger l WHERE l.kind = 'charge' GROUP BY l.request_id HAVING count(*) > 1 LIMIT 5`);
  for (const c of charges.rows) out.push(`request ${c.request_id} charged ${c.n} times`);
  const stale = await pool.query(
    `
    SELECT request_id FROM holds WHERE status = 'active' AND expires_at < now() - make_interval(secs => $1) LIMIT 5`,
    [(env.sweepMs + 3_000) / 1000],
  );
  for (const s of stale.rows) out.push(`hold ${s.request_id} outlived its expiry by more than one sweep`);
  return [...out, ...(await budgetViolations(pool, budgetAccounts))];
}

/**
 * The budgets' invariants (docs/budgets.md), in one snapshot: no hard budget's window (a rolling
 * one's span) spent past its amount; every window's held figure is what the holds and slices
 * recorded against it add up to; a lifetime organisation budget set before any spending has spent
 * exactly what its organisation was charged. Only the budgets of `accounts` (the soak's own): tests
 * sharing the database lower budgets below what they spent on purpose.
 */
async function budgetViolations(pool: Pick<pg.Pool, 'query'>, accounts: string[]): Promise<string[]> {
  const out: string[] = [];
  const snapshot = `
    WITH w AS (
      SELECT w.*, b.amount_nano, b.mode, b.period, b.rolling_hours, b.scope, b.account_id
      FROM budget_windows w JOIN budgets b ON b.id = w.budget_id WHERE b.account_id = ANY($1)
    ), rolling AS (
      SELECT budget_id, subject, max(window_start) AS latest FROM w WHERE period = 'rolling' GROUP BY 1, 2
    )
    SELECT 'over' AS kind, w.budget_id, w.subject, w.window_start::text AS at,
           (w.spent_nano - w.forgiven_nano)::text AS a, (w.amount_nano + w.raise_nano)::text AS b
    FROM w WHERE w.mode = 'hard' AND w.period <> 'rolling' AND w.spent_nano - w.forgiven_nano > w.amount_nano + w.raise_nano
    UNION ALL
    SELECT 'rolling', w.budget_id, w.subject, r.latest::text, sum(w.spent_nano - w.forgiven_nano)::text, max(w.amount_nano)::text
    FROM w JOIN rolling r USING (budget_id, subject)
    WHERE w.mode = 'hard' AND w.window_start > r.latest - make_interval(hours => w.rolling_hours)
    GROUP BY 1, 2, 3, 4 HAVING sum(w.spent_nano - w.forgiven_nano) > max(w.amount_nano)
    UNION ALL
    SELECT 'held', w.budget_id, w.subject, w.window_start::text, w.held_nano::text,
           COALESCE((SELECT sum(h.amount_nano) FROM hold_budgets h WHERE h.budget_id = w.budget_id AND h.subject = w.subject
                     AND h.window_start = w.window_start), 0)::text
    FROM w WHERE w.held_nano <> COALESCE((SELECT sum(h.amount_nano) FROM hold_budgets h WHERE h.budget_id = w.budget_id
                     AND h.subject = w.subject AND h.window_start = w.window_start), 0)
    UNION ALL
    SELECT 'lifetime', w.budget_id, w.subject, w.window_start::text, w.spent_nano::text,
           (SELECT COALESCE(sum(cost_nano), 0) FROM usage_records u WHERE u.account_id = w.account_id)::text
    FROM w WHERE w.period = 'lifetime' AND w.scope = 'organisation' AND w.forgiven_nano = 0
      AND w.spent_nano <> (SELECT COALESCE(sum(cost_nano), 0) FROM usage_records u WHERE u.account_id = w.account_id)
    LIMIT 10`;
  const client = pool instanceof pg.Pool ? await pool.connect() : undefined;
  try {
    const q = client ?? pool;
    if (client) await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const rows = (await q.query(snapshot, [accounts])).rows as Record<string, string>[];
    if (client) await client.query('COMMIT');
    for (const v of rows) {
      const where = `budget ${v.budget_id} (${v.subject || 'no subject'}) window ${v.at}`;
      if (v.kind === 'over') out.push(`${where}: spent ${v.a} past its amount ${v.b}`);
      else if (v.kind === 'rolling') out.push(`${where}: its rolling span spent ${v.a} past its amount ${v.b}`);
      else if (v.kind === 'held') out.push(`${where}: held ${v.a} but its holds and slices add up to ${v.b}`);
      else out.push(`${where}: a lifetime organisation budget spent ${v.a}, its organisation was charged ${v.b}`);
    }
  } finally {
    client?.release();
  }
  return out;
}
