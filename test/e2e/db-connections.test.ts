// The database ends the gateway's connections under load (a failover, a restart,
// pg_terminate_backend): no request may get a 500 for it, and the books stay exact.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { checkInvariants, db, newKey } from '../support/context.ts';
import { openDb } from '../../src/db/db.ts';

const APP = 'gateway-terminated';
// A per-key limit these few seconds of requests stay far below: a 429 means requests were
// counted that were never admitted (grants taken while the key cache was off, and unused).
const RPM = '5000';
const gateways: GatewayProcess[] = [];
beforeAll(async () => {
  const url = new URL(inject('databaseUrl'));
  url.searchParams.set('application_name', APP);
  for (const billing of ['hold', 'lease']) {
    gateways.push(
      await startGatewayProcess({
        logFile: path.join(inject('workDir'), `terminated-${billing}.log`),
        env: {
          DATABASE_URL: url.toString(),
          OPENAI_API_KEY: UPSTREAM_KEY,
          OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
          BILLING_MODE: billing,
          LEASE_SLICE_USD: '0.001',
          LEASE_FLUSH_MS: '20',
          RATE_LIMIT_RPM: RPM,
        },
      }),
    );
  }
});
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
});

describe('database connections ended under load', () => {
  it.each(['hold', 'lease'])(
    'billing %s: every request answers 200 or a retryable 503, never 500, and the books balance',
    async (billing) => {
      const gw = gateways[billing === 'hold' ? 0 : 1]!;
      const key = await newKey('5');
      const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
      const statuses = new Map<string, number>();
      let stop = false;
      const worker = async () => {
        while (!stop) {
          const outcome = await client.chat.completions
            .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'under fire [sim tokens=3]' }] })
            .then(
              () => '200',
              (e: InstanceType<typeof OpenAI.APIError>) =>
                `${e.status ?? 'no status'} ${e.status === 200 ? '' : e.message}`,
            );
          statuses.set(outcome, (statuses.get(outcome) ?? 0) + 1);
        }
      };
      const workers = Array.from({ length: 8 }, worker);
      let terminated = 0;
      // A dozen times, every connection the gateway has is ended at once, as a restart or
      // failover of the server would.
      for (let round = 0; round < 12; round++) {
        await new Promise((r) => setTimeout(r, 250));
        const r = await db().query(
          'SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1',
          [APP],
        );
        terminated += r.rows[0].n as number;
      }
      stop = true;
      await Promise.all(workers);
      const seen = Object.fromEntries(statuses);
      expect(terminated).toBeGreaterThan(12);
      expect(seen['200']).toBeGreaterThan(100);
      for (const outcome of statuses.keys()) expect(outcome, JSON.stringify(seen)).toMatch(/^(200|503 )/);
      await expect
        .poll(
          async () =>
            (
              await db().query(
                `SELECT count(*)::int AS n FROM holds WHERE account_id = $1 AND status = 'active' AND request_id NOT LIKE 'lease\\_%'`,
                [key.accountId],
              )
            ).rows[0].n,
          {
            timeout: 10_000,
          },
        )
        .toBe(0);
      await checkInvariants(key.accountId);
    },
  );
});

describe('the pool after a lost connection', () => {
  it('hands out none of the connections it had before: a retry, and everything after it, runs on a fresh one', async () => {
    const knex = await openDb({ databaseUrl: inject('databaseUrl'), poolMax: 4 });
    try {
      const pids = async () =>
        (
          await Promise.all(Array.from({ length: 4 }, () => knex.raw('SELECT pg_backend_pid() AS pid, pg_sleep(0.05)')))
        ).map((r) => (r as { rows: { pid: number }[] }).rows[0]!.pid);
      // The pool's four connections, all held at once (four queries could share fewer, when one
      // connects slower than another's query takes on a loaded machine), then given back.
      const held = await Promise.all(Array.from({ length: 4 }, () => knex.client.acquireConnection()));
      const before = new Set(
        await Promise.all(
          held.map(
            async (c) =>
              ((await c.query('SELECT pg_backend_pid() AS pid')) as { rows: { pid: number }[] }).rows[0]!.pid,
          ),
        ),
      );
      for (const c of held) await knex.client.releaseConnection(c);
      expect(before.size).toBe(4);
      // One statement loses its connection (its session is ended under it, on every attempt).
      await expect(knex.raw('SELECT pg_terminate_backend(pg_backend_pid())')).rejects.toMatchObject({ code: '57P01' });
      // The other connections are alive, yet none of them is used again.
      const after = await pids();
      for (const pid of after) expect(before.has(pid)).toBe(false);
    } finally {
      await knex.destroy();
    }
  });
});
