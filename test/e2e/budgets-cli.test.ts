// The operator CLI's budget commands as an operator runs them (`npm run cli -- budgets …`): a
// budget set on an organisation and on a team, listed (as a table, JSON and CSV) with the figures
// the database holds, changed keeping what is not given, raised and reset with the window's row
// and the audit log saying so, and deleted. Wrong usage (negative, NaN, 1e400 or 30-digit amounts,
// an unknown time zone or period) is one line on stderr naming the flag, exit 2, and nothing is
// written; another organisation's budget is the gateway's refusal, exit 1.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { db, openai } from '../support/context.ts';
import { newOrganisation } from '../support/organisations.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

async function cli(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, ['src/cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, GATEWAY_RPC_URL: inject('rpcUrl'), ADMIN_TOKEN: '' },
  });
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('the command succeeded');
    },
    (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr.trim() }),
  );

const budgetRows = async (orgId: string) =>
  (
    await db().query(
      `SELECT id, scope, scope_id, name, amount_nano::text AS amount, period, time_zone, start_day, mode, deleted_at IS NOT NULL AS deleted
       FROM budgets WHERE account_id = $1 ORDER BY created_at, id`,
      [orgId],
    )
  ).rows;

describe('the budget commands of the operator CLI', () => {
  it('set, list, change, raise, reset and delete budgets, each in the audit log as the CLI', async () => {
    const org = await newOrganisation('5');
    const team = (await cli('teams', 'create', org.id, 'Backend')).stdout.trim();
    const daily = (
      await cli('budgets', 'set', org.id, '20', '--period', 'day', '--time-zone', 'Europe/Berlin')
    ).stdout.trim();
    expect(daily).toMatch(/^bud_/);
    const made = await cli(
      'budgets',
      'set',
      org.id,
      '2',
      '--period',
      'month',
      '--start-day',
      '15',
      '--scope',
      'member',
      '--scope-id',
      org.people.member.memberId,
      '--name',
      'intern',
    );
    const monthly = made.stdout.trim();
    expect(made.stderr).toContain('made: member Pat member, month from day 15 (UTC)');
    expect(await budgetRows(org.id)).toMatchObject([
      { id: daily, scope: 'organisation', amount: '20000000000', period: 'day', time_zone: 'Europe/Berlin' },
      { id: monthly, scope: 'member', scope_id: org.people.member.memberId, name: 'intern', start_day: 15 },
    ]);

    // The member spends; the list's figures are the window row's and the usage rows'.
    await openai(org.people.member.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=4]' }],
    });
    const spent = BigInt(
      (await db().query('SELECT sum(cost_nano)::text AS c FROM usage_records WHERE account_id = $1', [org.id])).rows[0]
        .c,
    );
    const listed = JSON.parse((await cli('budgets', 'list', org.id, '--json')).stdout) as {
      budgetId: string;
      spentNano: string;
      remainingNano: string;
      scopeName: string;
    }[];
    expect(listed.map((b) => [b.budgetId, BigInt(b.spentNano)])).toEqual([
      [daily, spent],
      [monthly, spent],
    ]);
    expect(BigInt(listed[0]!.remainingNano)).toBe(usdToNano('20') - spent);
    const table = (await cli('budgets', 'list', org.id)).stdout.split('\n');
    expect(table[0]).toMatch(
      /^budget id\s+name\s+over\s+period\s+mode\s+amount\s+raise\s+spent\s+held\s+left\s+resets$/,
    );
    expect(table[2]).toContain('member Pat member');
    const csv = (await cli('budgets', 'list', org.id, '--csv')).stdout.trim().split('\n');
    expect(csv[0]).toBe('budget id,name,over,period,mode,amount,raise,spent,held,left,resets');
    expect(csv[1]).toContain(`,${spent},`);

    // A change keeps what it does not name; a team budget names the team.
    await cli('budgets', 'set', org.id, '25', '--budget', daily);
    expect((await budgetRows(org.id))[0]).toMatchObject({
      amount: '25000000000',
      period: 'day',
      time_zone: 'Europe/Berlin',
    });
    const teamBudget = await cli(
      'budgets',
      'set',
      org.id,
      '3',
      '--period',
      'rolling',
      '--hours',
      '24',
      '--scope',
      'team',
      '--scope-id',
      team,
    );
    expect(teamBudget.stderr).toContain('team Backend, rolling 24 h');

    const raised = await cli('budgets', 'raise', org.id, monthly, '1.5');
    expect(raised.stdout).toContain('raised by $1.50 until the window ends');
    const reset = await cli('budgets', 'reset', org.id, monthly, '--json');
    expect(BigInt(JSON.parse(reset.stdout).forgivenNano)).toBe(spent);
    const window = await db().query(
      'SELECT raise_nano::text AS r, forgiven_nano::text AS f, spent_nano::text AS s FROM budget_windows WHERE budget_id = $1',
      [monthly],
    );
    expect(window.rows).toEqual([{ r: '1500000000', f: spent.toString(), s: spent.toString() }]);

    expect((await cli('budgets', 'delete', org.id, daily)).stdout.trim()).toBe('deleted');
    expect((await budgetRows(org.id))[0]).toMatchObject({ id: daily, deleted: true });
    const audit = await db().query(
      `SELECT actor, via, action FROM audit_log WHERE account_id = $1 AND action LIKE 'budget.%' ORDER BY id`,
      [org.id],
    );
    expect(audit.rows.map((r) => `${r.actor} ${r.via} ${r.action}`)).toEqual([
      'operator cli budget.created',
      'operator cli budget.created',
      'operator cli budget.changed',
      'operator cli budget.created',
      'operator cli budget.raised',
      'operator cli budget.spend_reset',
      'operator cli budget.deleted',
    ]);
  }, 120_000);

  it('refuses bad amounts, time zones and periods in its own words (exit 2), and another organisation’s budget (exit 1), writing nothing', async () => {
    const [org, other] = [await newOrganisation('0'), await newOrganisation('0')];
    const theirs = (await cli('budgets', 'set', other.id, '1', '--period', 'day')).stdout.trim();
    const before = { ours: await budgetRows(org.id), theirs: await budgetRows(other.id) };
    const usage: [string[], RegExp][] = [
      [
        ['budgets', 'set', org.id, '-1', '--period', 'day'],
        /-1 is negative: amounts, hours and days are never negative/,
      ],
      [['budgets', 'set', org.id, 'NaN', '--period', 'day'], /the amount must be a plain USD amount .*not "NaN"/],
      [['budgets', 'set', org.id, '1e400', '--period', 'day'], /the amount must be a plain USD amount .*not "1e400"/],
      [
        ['budgets', 'set', org.id, '123456789012345678901234567890', '--period', 'day'],
        /the amount must be a plain USD amount/,
      ],
      [['budgets', 'set', org.id, '1000001', '--period', 'day'], /the amount is at most 1000000 USD/],
      [
        ['budgets', 'set', org.id, '5', '--period', 'fortnight'],
        /--period must be day, week, month, rolling or lifetime; not "fortnight"/,
      ],
      [
        ['budgets', 'set', org.id, '5', '--period', 'day', '--time-zone', 'Mars/Olympus_Mons'],
        /--time-zone must be an IANA time zone/,
      ],
      [['budgets', 'set', org.id, '5'], /budgets set needs --period/],
      [['budgets', 'set', org.id, '5', '--period', 'rolling', '--hours', '-3'], /-3 is negative/],
      [
        ['budgets', 'set', org.id, '5', '--period', 'day', '--scope', 'galaxy'],
        /--scope must be organisation, team, member, key or customer/,
      ],
      [['budgets', 'raise', org.id, theirs, '-5'], /-5 is negative/],
      [['budgets', 'raise', org.id, theirs, 'NaN'], /the raise must be a plain USD amount/],
      [['budgets', 'raise', org.id, theirs], /budgets raise needs <organisation> <budget> <usd>/],
      [['budgets', 'frobnicate', org.id], /unknown command "budgets frobnicate"/],
    ];
    for (const [args, said] of usage) {
      const f = await failure(cli(...args));
      expect([args.join(' '), f.code]).toEqual([args.join(' '), 2]);
      expect(f.stderr).toMatch(said);
      expect(f.stderr.split('\n')).toHaveLength(1);
    }
    // The gateway's refusals: its words, exit 1.
    for (const args of [
      ['budgets', 'raise', org.id, theirs, '5'],
      ['budgets', 'reset', org.id, theirs],
      ['budgets', 'delete', org.id, theirs],
    ]) {
      const f = await failure(cli(...args));
      expect([args.join(' '), f.code, f.stderr]).toEqual([
        args.join(' '),
        1,
        'error: No budget of this organisation has this id.',
      ]);
    }
    const foreignTeam = (await cli('teams', 'create', other.id, 'Theirs')).stdout.trim();
    const f = await failure(
      cli('budgets', 'set', org.id, '5', '--period', 'day', '--scope', 'team', '--scope-id', foreignTeam),
    );
    expect([f.code, f.stderr]).toEqual([1, 'error: No team of this organisation has this id.']);
    expect({ ours: await budgetRows(org.id), theirs: await budgetRows(other.id) }).toEqual(before);
    const windows = await db().query('SELECT count(*)::int AS n FROM budget_windows WHERE budget_id = $1', [theirs]);
    expect(windows.rows[0].n).toBe(0);
  }, 120_000);
});
