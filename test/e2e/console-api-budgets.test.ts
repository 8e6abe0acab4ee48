// The console's JSON API for an organisation's budgets (docs/console.md#api) over real HTTP, as the
// Budgets page calls it: an admin makes, changes, raises, resets and deletes a budget, each answer
// the window the database holds; a member lists only the budgets over their own requests and may
// change none; bad values (negative, NaN, 1e400 or 30-digit amounts, an unknown time zone or
// period, numbers that are not whole) are 400 in the console's own error shape naming the field;
// another organisation's budget is 404; nothing refused is written.
import { describe, expect, it } from 'vitest';
import { db, gatewayUrl, openai } from '../support/context.ts';
import { ConsoleClient } from '../support/console-api.ts';
import { newOrganisation, type RoleName, type TestOrg } from '../support/organisations.ts';

type Row = Record<string, unknown>;

const consoleOf = (org: TestOrg, role: RoleName) =>
  new ConsoleClient(gatewayUrl()).signedIn({ key: org.people[role].apiKey });

const budget = (over: Row = {}) => ({
  scope: 'organisation',
  scope_id: '',
  name: '',
  amount_usd: '10',
  period: 'day',
  time_zone: 'UTC',
  start_day: 0,
  rolling_hours: 0,
  mode: 'hard',
  thresholds: [],
  ...over,
});

/** The organisation's budgets and windows and its audit log's length, to compare before and after a refusal. */
async function stateOf(orgId: string) {
  const budgets = await db().query(
    'SELECT id, amount_nano::text, scope, scope_id, deleted_at FROM budgets WHERE account_id = $1 ORDER BY id',
    [orgId],
  );
  const windows = await db().query(
    `SELECT w.* FROM budget_windows w JOIN budgets b ON b.id = w.budget_id WHERE b.account_id = $1 ORDER BY 1, 2, 3`,
    [orgId],
  );
  const audit = await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [orgId]);
  return { budgets: budgets.rows, windows: windows.rows, audit: audit.rows[0].n };
}

describe("an organisation's budgets in the console API", () => {
  it('an admin makes, changes, raises, resets and deletes a budget; each answer is the window as the database holds it', async () => {
    const org = await newOrganisation('5');
    const admin = await consoleOf(org, 'admin');
    const made = await admin.post<Row>(
      '/org/budgets',
      budget({ scope: 'member', scope_id: org.people.member.memberId, name: 'Pat’s day' }),
    );
    expect(made.status, made.text).toBe(200);
    expect(made.body).toMatchObject({
      scope: 'member',
      scope_name: 'Pat member',
      amount_usd: '10',
      amount_nano: '10000000000',
      spent_nano: '0',
      remaining_nano: '10000000000',
      subject: '',
    });
    const id = made.body.budget_id as string;
    await openai(org.people.member.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=5]' }],
    });
    const cost = (
      await db().query('SELECT sum(cost_nano)::text AS c FROM usage_records WHERE account_id = $1', [org.id])
    ).rows[0].c as string;
    const listed = await admin.get<{ rows: Row[] }>('/org/budgets');
    expect(listed.body.rows).toEqual([expect.objectContaining({ budget_id: id, spent_nano: cost, held_nano: '0' })]);

    const changed = await admin.post<Row>(
      `/org/budgets/${id}/change`,
      budget({
        scope: 'member',
        scope_id: org.people.member.memberId,
        amount_usd: '4',
        mode: 'soft',
        thresholds: [75, 25],
      }),
    );
    expect(changed.body).toMatchObject({
      amount_nano: '4000000000',
      mode: 'soft',
      thresholds: [25, 75],
      spent_nano: cost,
    });

    const raised = await admin.post<Row>(`/org/budgets/${id}/raise`, { raise_usd: '0.5' });
    expect(raised.body).toMatchObject({ raise_nano: '500000000' });
    const reset = await admin.post<{ budget: Row; forgiven_nano: string }>(`/org/budgets/${id}/reset`, {});
    expect(reset.body.budget).toMatchObject({ spent_nano: '0', raise_nano: '500000000', remaining_nano: '4500000000' });
    // The reset forgave the request's cost; the window's row keeps both figures.
    expect(reset.body.forgiven_nano).toBe(cost);
    const row = await db().query(
      'SELECT spent_nano::text AS s, forgiven_nano::text AS f, raise_nano::text AS r FROM budget_windows WHERE budget_id = $1',
      [id],
    );
    expect(row.rows).toEqual([{ s: cost, f: cost, r: '500000000' }]);

    expect((await admin.post(`/org/budgets/${id}/delete`, {})).body).toEqual({ deleted: true });
    expect((await admin.get<{ rows: Row[] }>('/org/budgets')).body.rows).toEqual([]);
  });

  it('a member lists the budgets over their own requests and may change none of them', async () => {
    const org = await newOrganisation('0');
    const owner = await consoleOf(org, 'owner');
    const mine = (
      await owner.post<Row>('/org/budgets', budget({ scope: 'member', scope_id: org.people.member.memberId }))
    ).body;
    await owner.post('/org/budgets', budget({ scope: 'member', scope_id: org.people.billing.memberId }));
    const all = (await owner.post<Row>('/org/budgets', budget())).body;
    const member = await consoleOf(org, 'member');
    const seen = await member.get<{ rows: Row[] }>('/org/budgets');
    expect(seen.body.rows.map((r) => r.budget_id).sort()).toEqual([mine.budget_id, all.budget_id].sort());
    const before = await stateOf(org.id);
    for (const [path, body] of [
      ['/org/budgets', budget({ scope: 'member', scope_id: org.people.member.memberId, amount_usd: '1000' })],
      [
        `/org/budgets/${mine.budget_id}/change`,
        budget({ scope: 'member', scope_id: org.people.member.memberId, amount_usd: '1000' }),
      ],
      [`/org/budgets/${mine.budget_id}/raise`, { raise_usd: '1000' }],
      [`/org/budgets/${mine.budget_id}/reset`, {}],
      [`/org/budgets/${mine.budget_id}/delete`, {}],
    ] as const) {
      const r = await member.post(path, body);
      expect([path, r.status, (r.body as { error: Row }).error.code]).toEqual([path, 403, 'not_allowed']);
    }
    expect(await stateOf(org.id)).toEqual(before);
  });

  it('bad values are 400 in the console’s error shape naming the field, and another organisation’s budget is 404: nothing written', async () => {
    const [org, other] = [await newOrganisation('0'), await newOrganisation('0')];
    const admin = await consoleOf(org, 'admin');
    const ours = (await admin.post<Row>('/org/budgets', budget())).body.budget_id as string;
    const theirs = (await (await consoleOf(other, 'admin')).post<Row>('/org/budgets', budget())).body
      .budget_id as string;
    const before = [await stateOf(org.id), await stateOf(other.id)];
    const bad: [string, Row, string][] = [
      ['/org/budgets', budget({ amount_usd: '-1' }), 'amount_usd'],
      ['/org/budgets', budget({ amount_usd: 'NaN' }), 'amount_usd'],
      ['/org/budgets', budget({ amount_usd: '1e400' }), 'amount_usd'],
      ['/org/budgets', budget({ amount_usd: '123456789012345678901234567890' }), 'amount_usd'],
      ['/org/budgets', budget({ amount_usd: 5 }), 'amount_usd'],
      ['/org/budgets', budget({ time_zone: 'Mars/Olympus_Mons' }), 'time_zone'],
      ['/org/budgets', budget({ period: 'fortnight' }), 'period'],
      ['/org/budgets', budget({ period: 'rolling', rolling_hours: 1.5 }), 'rolling_hours'],
      ['/org/budgets', budget({ period: 'month', start_day: 1e300 }), 'start_day'],
      ['/org/budgets', budget({ thresholds: ['50'] }), 'thresholds'],
      ['/org/budgets', budget({ scope: 'member', scope_id: other.people.member.memberId }), 'member'],
      [`/org/budgets/${ours}/raise`, { raise_usd: '-1' }, 'raise_usd'],
      [`/org/budgets/${ours}/raise`, { raise_usd: '1e400' }, 'raise_usd'],
      [`/org/budgets/${ours}/raise`, { raise_usd: '123456789012345678901234567890' }, 'raise_usd'],
      [`/org/budgets/${ours}/raise`, { raise_usd: 'NaN' }, 'raise_usd'],
      [`/org/budgets/${ours}/raise`, { raise_usd: '1', subject: 'cust_1' }, 'subject'],
      [`/org/budgets/${theirs}/raise`, { raise_usd: '100' }, 'budget'],
      [`/org/budgets/${theirs}/reset`, {}, 'budget'],
      [`/org/budgets/${theirs}/change`, budget({ amount_usd: '100' }), 'budget'],
      [`/org/budgets/${theirs}/delete`, {}, 'budget'],
    ];
    for (const [path, body, field] of bad) {
      const r = await admin.post<{ error: { code: string; message: string } }>(path, body);
      const where = `${path} ${JSON.stringify(body)}`;
      expect([where, r.status], r.text).toEqual([where, field === 'budget' || field === 'member' ? 404 : 400]);
      expect(r.body.error.message.toLowerCase(), where).toContain(field);
    }
    expect([await stateOf(org.id), await stateOf(other.id)]).toEqual(before);
  });
});
