// A few seeds of the randomized soak (test/soak/) on every test run, over one gateway billing by
// holds and one by credit leases (as `npm run soak` does, which runs many).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { runSeed, violations, type SoakEnv } from '../soak/soak.ts';
import { db, newKey } from '../support/context.ts';
import { SOAK_APP_NAME, SOAK_HOLD_TTL_MS, SOAK_SWEEP_MS, soakGateway } from '../soak/gateways.ts';

let env: SoakEnv;
beforeAll(async () => {
  const opts = {
    databaseUrl: inject('databaseUrl'),
    simulatorUrl: inject('simulatorUrl'),
    upstreamKey: UPSTREAM_KEY,
    logDir: path.join(inject('workDir')),
  };
  env = {
    databaseUrl: inject('databaseUrl'),
    gatewayAppName: SOAK_APP_NAME,
    holdTtlMs: SOAK_HOLD_TTL_MS,
    sweepMs: SOAK_SWEEP_MS,
    gateways: [
      await soakGateway({ ...opts, name: 'soak-a' }),
      await soakGateway({ ...opts, name: 'soak-b', billing: 'lease' }),
    ],
  };
});
afterAll(async () => {
  for (const g of env?.gateways ?? []) await (g as { stop?: () => Promise<void> }).stop?.();
});

// A seed runs hundreds of requests through a gateway of its own: 30 s is too little on a loaded machine.
describe('seeded randomized soak', { timeout: 120_000 }, () => {
  it.each([1, 2, 3])('seed %i keeps every ledger invariant after every step', async (seed) => {
    const r = await runSeed(seed, env, 15);
    // A failure's cause is in the gateways' logs, which a test run deletes: its errors go with it.
    if (r.failures.length > 0) r.failures.push(...gatewayErrors());
    expect(r.failures).toEqual([]);
    expect(r.requests).toBeGreaterThan(0);
  });

  it('the invariant checker catches a ledger that disagrees with the balance (inside a rolled-back transaction)', async () => {
    const key = await newKey('1');
    const client = await db().connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, cause, external_id) VALUES ($1, 5, 'topup', 5, 'soak-check', $2)`,
        [key.accountId, `soak-check-${key.accountId}`],
      );
      const found = await violations(client, { holdTtlMs: SOAK_HOLD_TTL_MS, sweepMs: SOAK_SWEEP_MS }, [key.accountId]);
      expect(found).toContain(`account ${key.accountId}: ledger sum 1000000005 != balance 1000000000`);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('the budget checker catches a window spent past its amount and a held figure its holds do not add up to (rolled back)', async () => {
    const key = await newKey('1');
    const client = await db().connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO budgets (id, account_id, scope, amount_nano, period, mode) VALUES ($1, $2, 'organisation', 100, 'lifetime', 'hard')`,
        [`bud_check_${key.accountId}`, key.accountId],
      );
      await client.query(
        `INSERT INTO budget_windows (budget_id, subject, window_start, spent_nano, held_nano) VALUES ($1, '', 'epoch', 101, 7)`,
        [`bud_check_${key.accountId}`],
      );
      const found = await violations(client, { holdTtlMs: SOAK_HOLD_TTL_MS, sweepMs: SOAK_SWEEP_MS }, [key.accountId]);
      const where = `budget bud_check_${key.accountId} (no subject) window 1970-01-01 00:00:00+00`;
      expect(found).toContain(`${where}: spent 101 past its amount 100`);
      expect(found).toContain(`${where}: held 7 but its holds and slices add up to 0`);
      expect(found).toContain(`${where}: a lifetime organisation budget spent 101, its organisation was charged 0`);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

/** The soak gateways' logged errors (errors, and warnings with an error), the last 30, each shortened. */
function gatewayErrors(): string[] {
  const dir = inject('workDir');
  return fs
    .readdirSync(dir)
    .filter((f) => /^soak-.*\.log$/.test(f))
    .flatMap((f) =>
      fs
        .readFileSync(path.join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => /"level":(5|6)0/.test(l) || (/"level":40/.test(l) && l.includes('"err"')))
        .map((l) => `${f}: ${l.slice(0, 600)}`),
    )
    .slice(-30);
}
