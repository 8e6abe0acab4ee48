// Budget slices (docs/budgets.md#held-not-counted-after): with credit leases on, an instance holds
// a slice of each budget window as it holds a slice of the balance, and requests reserve in both
// in memory. No request under budgets takes a hold of its own; the batch moves each charge from
// held to spent; a returned lease gives its slices back; an instance refused for want of room gets
// what another instance's slices hold back, so a budget is spent to the nano-dollar and no
// further; and after a crash the sweeper gives the dead instance's slices back.
import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { checkInvariants, db } from '../support/context.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { budgetSpec, newOrganisation, type TestOrg } from '../support/organisations.ts';

const started: GatewayProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.stop('SIGKILL')));
});

async function leaseGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  const g = await extraGateway('slices', {
    BILLING_MODE: 'lease',
    LEASE_SLICE_USD: '1',
    LEASE_FLUSH_MS: '50',
    LEASE_IDLE_MS: '800',
    RATE_LIMIT_RPM: '0',
    RATE_LIMIT_TPM: '0',
    ...env,
  });
  started.push(g);
  return g;
}

const spec = budgetSpec;

const chat = (g: GatewayProcess, apiKey: string, tokens: number) =>
  new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 }).chat.completions
    .create({
      model: 'gpt-4o-mini',
      max_tokens: 32,
      messages: [{ role: 'user', content: `hi [sim tokens=${tokens}]` }],
    })
    .withResponse()
    .then(
      ({ response }) => ({ status: 200, code: '', requestId: response.headers.get('x-request-id') ?? '' }),
      (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status ?? 0, code: e.code ?? '', requestId: '' }),
    );

/** Each of the organisation's budget windows: what it spent and holds, and the budget's amount. */
async function windowsOf(org: TestOrg) {
  const r = await db().query(
    `SELECT b.id, b.amount_nano::text AS amount, w.spent_nano::text AS spent, w.held_nano::text AS held
     FROM budgets b JOIN budget_windows w ON w.budget_id = b.id WHERE b.account_id = $1 ORDER BY b.id`,
    [org.id],
  );
  return r.rows as { id: string; amount: string; spent: string; held: string }[];
}

async function charged(org: TestOrg): Promise<bigint> {
  const r = await db().query('SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE account_id = $1', [
    org.id,
  ]);
  return BigInt(r.rows[0].c);
}

async function until(what: string, f: () => Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const leaseSlices = async (org: TestOrg) =>
  Number(
    (
      await db().query(
        `SELECT count(*) AS n FROM hold_budgets h JOIN budgets b ON b.id = h.budget_id
         WHERE b.account_id = $1 AND starts_with(h.request_id, 'lease_') AND h.amount_nano > 0`,
        [org.id],
      )
    ).rows[0].n,
  );

describe('budget slices with credit leases', () => {
  it('a request under three budgets takes no hold of its own; each charge moves from held to spent in every window; the returned lease gives its slices back', {
    timeout: 60_000,
  }, async () => {
    // Idle for 4 s, the lease is returned: time enough to see its slices first on a loaded machine.
    const g = await leaseGateway({ LEASE_IDLE_MS: '4000' });
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    for (const s of [
      spec({ amountUsd: '2' }),
      spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '1', period: 'month' }),
      spec({ scope: 'key', scopeId: org.people.member.keyId, amountUsd: '0.5', period: 'lifetime' }),
    ])
      await admin.setBudget({ organisationId: org.id, spec: s });
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => chat(g, org.people.member.apiKey, 1 + (i % 9))),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    // In flight they were reserved in the lease's slices: no hold of their own.
    const own = await db().query('SELECT count(*)::int AS n FROM holds WHERE request_id = ANY($1)', [
      results.map((r) => r.requestId),
    ]);
    expect(own.rows[0].n).toBe(0);
    expect(await leaseSlices(org)).toBeGreaterThanOrEqual(3);
    // Idle, the lease is returned: every window has spent exactly the charges and holds nothing.
    await until('the lease to be returned', async () => (await leaseSlices(org)) === 0, 30_000);
    await until('no active holds', async () => {
      const r = await db().query(`SELECT count(*)::int AS n FROM holds WHERE account_id = $1 AND status = 'active'`, [
        org.id,
      ]);
      return r.rows[0].n === 0;
    });
    const total = await charged(org);
    expect(total).toBeGreaterThan(0n);
    const windows = await windowsOf(org);
    expect(windows).toHaveLength(3);
    for (const w of windows) expect({ spent: w.spent, held: w.held }).toEqual({ spent: String(total), held: '0' });
    await checkInvariants(org.id);
  });

  it('two instances spend a budget to its end and never past it: the one refused for want of room gets back what the slices hold, then no more passes', {
    timeout: 60_000,
  }, async () => {
    // Leases that stay open while the test runs (not returned idle): only a refusal takes their slices back.
    const [a, b] = await Promise.all([
      leaseGateway({ LEASE_IDLE_MS: '120000' }),
      leaseGateway({ LEASE_IDLE_MS: '120000' }),
    ]);
    const org = await newOrganisation('5');
    // Learn what one request is charged, then budget exactly eight of them on a fresh key's budget.
    const probe = await chat(a, org.people.owner.apiKey, 3);
    expect(probe.status).toBe(200);
    await until('the probe charged', async () => (await charged(org)) > 0n);
    const one = await charged(org);
    const eight = 8n * one;
    const usd = `${eight / 1_000_000_000n}.${(eight % 1_000_000_000n).toString().padStart(9, '0')}`;
    const budget = await org.people.admin.client.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'key', scopeId: org.people.member.keyId, amountUsd: usd, period: 'lifetime' }),
    });
    // max_tokens 32 holds more than the charge of 3 tokens: the last requests fit only by being lowered.
    const outcomes: { status: number; code: string }[] = [];
    outcomes.push(await chat(a, org.people.member.apiKey, 3));
    for (let i = 0; i < 14; i++) outcomes.push(await chat(b, org.people.member.apiKey, 3));
    const served = outcomes.filter((o) => o.status === 200).length;
    expect(outcomes.filter((o) => o.status !== 200).every((o) => o.code === 'budget_exceeded')).toBe(true);
    // Stopped, each instance writes its charges and returns its lease with its slices.
    await Promise.all([a.stop(), b.stop()]);
    expect(await leaseSlices(org)).toBe(0);
    const spent = (await windowsOf(org)).find((w) => w.id === budget.budget!.budgetId)!;
    // Never above the budget; and the slices A held did not keep B from reaching its end.
    expect(BigInt(spent.spent)).toBeLessThanOrEqual(eight);
    expect(served).toBeGreaterThanOrEqual(8);
    expect(BigInt(spent.spent)).toBeGreaterThan(eight - one);
    expect(spent.held).toBe('0');
    // The room came back from slices: at least one lease was asked to give back and did.
    const given = await db().query(
      `SELECT count(*)::int AS n FROM holds WHERE account_id = $1 AND starts_with(request_id, 'lease_') AND reclaimed_at IS NOT NULL`,
      [org.id],
    );
    expect(given.rows[0].n).toBeGreaterThan(0);
    await checkInvariants(org.id);
  });

  it('a crashed instance’s slices go back to their windows when the sweeper expires its lease', {
    timeout: 60_000,
  }, async () => {
    const g = await leaseGateway({ HOLD_TTL_SECONDS: '2', LEASE_FLUSH_MS: '60000', LEASE_IDLE_MS: '60000' });
    const sweeper = await leaseGateway({ HOLD_TTL_SECONDS: '2', HOLD_SWEEP_INTERVAL_MS: '300' });
    const org = await newOrganisation('5');
    await org.people.admin.client.setBudget({ organisationId: org.id, spec: spec({ amountUsd: '0.5' }) });
    expect((await chat(g, org.people.member.apiKey, 2)).status).toBe(200);
    await until('a slice held', async () => (await leaseSlices(org)) > 0);
    await g.stop('SIGKILL');
    expect(sweeper.httpUrl).toBeTruthy();
    await until('the slice swept', async () => (await leaseSlices(org)) === 0, 30_000);
    const [w] = await windowsOf(org);
    // The unwritten charge went with the process (leases' loss window): nothing spent, nothing held.
    expect(w).toMatchObject({ spent: '0', held: '0' });
    expect(await charged(org)).toBe(0n);
    await checkInvariants(org.id);
  });
});
