// The operator CLI's organisation commands as an operator runs them (`npm run cli -- orgs …`): an
// organisation made with its owner and credit, a member invited and their first key, a call with
// it, the spend by member (also as CSV), a team and its key, a member removed, the audit log (all
// of it, page after page, with where each change came from). Each one-result command prints that
// result alone on stdout, as the README's quick start uses it.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { db, openai } from '../support/context.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

async function cli(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, ['src/cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, GATEWAY_RPC_URL: inject('rpcUrl'), ADMIN_TOKEN: '' },
  });
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: { code: number; stderr: string }) => e,
  );

describe('the organisation commands of the operator CLI', () => {
  it('make an organisation, invite a member who calls with their first key, and show who spent what', async () => {
    const made = await cli('orgs', 'create', 'Acme CLI', '--owner', 'Alice', '--credits', '20');
    const org = made.stdout.trim();
    expect(org).toMatch(/^acct_[0-9A-Za-z]{20}$/);
    expect(made.stderr).toMatch(/balance \$20\.00/);
    const aliceKey = /first key \(shown once\): (prx-[0-9A-Za-z]{38})/.exec(made.stderr)?.[1];
    expect(aliceKey).toBeDefined();

    const token = (await cli('invites', 'create', org, '--role', 'member', '--note', 'for Bob')).stdout.trim();
    expect(token).toMatch(/^inv-/);
    const bob = (await cli('invites', 'redeem', token, '--name', 'Bob')).stdout.trim();
    expect(bob).toMatch(/^prx-/);
    await openai(bob).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=4]' }],
    });

    const spend = JSON.parse((await cli('orgs', 'spend', org, '--by', 'member', '--json')).stdout) as {
      rows: { label: string; requests: string; costNano: string }[];
      total: { costNano: string };
    };
    expect(spend.rows.map((r) => [r.label, r.requests])).toEqual([['Bob', '1']]);
    expect(BigInt(spend.total.costNano)).toBeGreaterThan(0n);
    const csv = (await cli('orgs', 'spend', org, '--by', 'member', '--csv')).stdout.trim().split('\n');
    expect(csv[0]).toBe('member,name,requests,input,output,spent');
    expect(csv[1]).toMatch(/^mem_[0-9A-Za-z]+,Bob,1,\d+,\d+,\d+$/);

    const members = JSON.parse((await cli('members', 'list', org, '--json')).stdout) as {
      memberId: string;
      name: string;
      role: number;
    }[];
    expect(members.map((m) => m.name)).toEqual(['Alice', 'Bob']);
    const bobId = members[1]!.memberId;

    const team = (await cli('teams', 'create', org, 'Backend')).stdout.trim();
    expect(team).toMatch(/^team_/);
    await cli('teams', 'add', org, team, bobId);
    const teamKey = (await cli('orgs', 'add-key', org, '--team', team, '--name', 'prod')).stdout.trim();
    expect(teamKey).toMatch(/^prx-/);

    const removed = await cli('members', 'remove', org, bobId);
    expect(removed.stdout).toMatch(/keys revoked 1/);
    const refused = await openai(bob)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => 200,
        (e: { status?: number }) => e.status,
      );
    expect(refused).toBe(401);

    const audit = (await cli('orgs', 'audit', org, '--csv')).stdout;
    expect(audit.split('\n')[0]).toBe('time,who,via,from,action,target,before,after');
    for (const action of [
      'organisation.created',
      'invitation.created',
      'member.added',
      'team.created',
      'key.created',
      'member.removed',
    ])
      expect(audit).toContain(action);
    // Where each change came from: the CLI's address as the gateway saw it.
    const removal = await db().query(
      `SELECT from_address FROM audit_log WHERE account_id = $1 AND action = 'member.removed'`,
      [org],
    );
    const from = removal.rows[0].from_address as string;
    expect(from).toMatch(/127\.0\.0\.1|::1/);
    expect(audit).toContain(`,operator,cli,${from},member.removed,`);

    // The whole log, past the first page (500 entries), newest first: every entry once; --limit its newest n.
    await db().query(
      `INSERT INTO audit_log (account_id, actor, via, from_address, action, target)
       SELECT $1, 'system', 'test', '', 'test.filler', 'filler-' || g FROM generate_series(1, 520) g`,
      [org],
    );
    const total = Number(
      (await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [org])).rows[0].n,
    );
    expect(total).toBeGreaterThan(520);
    const whole = (await cli('orgs', 'audit', org, '--csv')).stdout.trim().split('\n');
    expect(whole).toHaveLength(1 + total);
    expect(whole[1]).toContain(',test.filler,filler-520,');
    expect(whole.filter((l) => l.includes(',test.filler,'))).toHaveLength(520);
    expect(whole.at(-1)).toContain(',organisation.created,');
    const newest = (await cli('orgs', 'audit', org, '--csv', '--limit', '3')).stdout.trim().split('\n');
    expect(newest.slice(1).map((l) => l.split(',')[5])).toEqual(['filler-520', 'filler-519', 'filler-518']);
    expect((await failure(cli('orgs', 'audit', org, '--limit', '0')))?.code).toBe(2);

    // Wrong usage is one line and exit 2; a refusal from the gateway exit 1.
    expect((await failure(cli('orgs', 'create', 'No owner')))?.code).toBe(2);
    const missing = await failure(cli('orgs', 'show', 'acct_nope'));
    expect(missing?.code).toBe(1);
    expect(missing?.stderr).toMatch(/No organisation has this id/);
  }, 180_000);
});
