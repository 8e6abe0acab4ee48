// An organisation's Budgets page in a real headless Chromium (test/support/browser.ts), on a gateway
// of this file's own (with ADMIN_TOKEN) and a database of its own: budgets on the organisation, a
// member, a team and a key, requests through the official openai SDK against the simulator, then
// the page read back and compared with the window rows and usage rows in the database: each bar's
// spent, held, left and amount. The owner makes a budget through the dialog (a team's, weekly in a
// time zone), changes it, raises a window, resets a member's spend and deletes one, each checked in
// the database and the audit log; a bad amount is refused in the dialog with nothing written. A
// `member` sees only the budgets over their own requests, read-only; the operator sees them all on
// the organisation's Budgets tab. Screenshots at desktop and phone width (test-results/screenshots/
// console-budgets-*.png), each checked by axe and for sideways overflow.
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AxeFinding, axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import {
  type ConsoleGateway,
  loaded,
  nanoOf,
  open,
  type PageProblems,
  recordingContext,
  sidewaysOverflow,
  signIn,
  startConsoleGateway,
  VIEWPORTS,
} from '../support/console.ts';
import { budgetSpec, newOrganisation, operatorClients, type TestOrg } from '../support/organisations.ts';

const ADMIN_TOKEN = `console-browser-budgets-${'c'.repeat(16)}`;

let gw: ConsoleGateway;
let browser: Browser;
let org: TestOrg;
let team: { id: string; apiKey: string; keyId: string };
/** Budget ids by their names. */
const budgets: Record<string, string> = {};

const chat = (apiKey: string, tokens: number) =>
  gw.openai(apiKey).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `budget page [sim tokens=${tokens}]` }],
  });

const spec = (over: Record<string, unknown>) => budgetSpec({ amountUsd: '20', ...over });

beforeAll(async () => {
  [gw, browser] = await Promise.all([startConsoleGateway('console_budgets', { ADMIN_TOKEN }), launchBrowser()]);
  const operator = operatorClients(gw.gateway.rpcUrl, ADMIN_TOKEN);
  org = await newOrganisation('25', gw.gateway.rpcUrl, { operator, name: 'Acme Budgets' });
  const owner = org.people.owner.client;
  const t = await owner.createTeam({ organisationId: org.id, name: 'Backend' });
  await owner.addTeamMember({ organisationId: org.id, teamId: t.team!.teamId, memberId: org.people.member.memberId });
  const k = await owner.createOrganisationKey({ organisationId: org.id, teamId: t.team!.teamId, name: 'api server' });
  team = { id: t.team!.teamId, apiKey: k.apiKey, keyId: k.key!.keyId };
  for (const [name, over] of [
    ['company', { amountUsd: '20' }],
    ['intern', { scope: 'member', scopeId: org.people.member.memberId, amountUsd: '0.00003' }],
    ['backend', { scope: 'team', scopeId: team.id, amountUsd: '0.00002', period: 'rolling', rollingHours: 24 }],
    ['laptop', { scope: 'key', scopeId: org.people.member.keyId, amountUsd: '1', period: 'lifetime' }],
    ['billing person', { scope: 'member', scopeId: org.people.billing.memberId, amountUsd: '2' }],
    ['admin soft', { scope: 'member', scopeId: org.people.admin.memberId, amountUsd: '0', mode: 'soft' }],
  ] as const)
    budgets[name] = (await owner.setBudget({ organisationId: org.id, spec: spec({ ...over, name }) })).budget!.budgetId;
  for (const [key, tokens] of [
    [org.people.member.apiKey, 8],
    [org.people.member.apiKey, 5],
    [team.apiKey, 12],
    [org.people.admin.apiKey, 6],
    [org.people.owner.apiKey, 3],
  ] as const)
    await chat(key, tokens);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

async function signedIn(
  secret: string,
  path: string,
  as: 'member' | 'operator' = 'member',
  viewport?: { width: number; height: number },
): Promise<{ context: BrowserContext; page: Page; problems: PageProblems }> {
  const { context, problems } = await recordingContext(browser, viewport);
  const page = await context.newPage();
  await page.goto(`${gw.url}${path}`);
  await signIn(page, secret, as);
  await loaded(page);
  return { context, page, problems };
}

/** A budget's current window as the database holds it: the budget's amount, the window row's figures. */
async function windowOf(budgetId: string) {
  const r = await gw.db.query(
    `SELECT b.amount_nano::text AS amount, b.period, b.rolling_hours,
            COALESCE(sum(w.spent_nano - w.forgiven_nano) FILTER (WHERE w.window_start >= CASE
              WHEN b.period = 'day' THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
              WHEN b.period = 'rolling' THEN date_trunc('hour', now()) - (b.rolling_hours - 1) * interval '1 hour'
              ELSE 'epoch' END), 0)::text AS spent,
            COALESCE(sum(w.held_nano), 0)::text AS held,
            COALESCE(max(w.raise_nano) FILTER (WHERE w.window_start = CASE
              WHEN b.period = 'day' THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
              WHEN b.period = 'rolling' THEN date_trunc('hour', now())
              ELSE 'epoch' END), 0)::text AS raise
     FROM budgets b LEFT JOIN budget_windows w ON w.budget_id = b.id WHERE b.id = $1 GROUP BY b.id`,
    [budgetId],
  );
  const row = r.rows[0];
  const [amount, spent, held, raise] = [row.amount, row.spent, row.held, row.raise].map((v: string) => BigInt(v));
  const left = amount! + raise! - spent! - held!;
  return { amount: amount!, spent: spent!, held: held!, raise: raise!, left: left > 0n ? left : 0n };
}

/** The figures one budget's row shows. */
async function shownOf(page: Page, budgetId: string) {
  const row = page.locator(`#budget-rows tr[data-budget-id="${budgetId}"]`);
  const figure = async (name: string) => nanoOf(await row.locator(`[data-figure=${name}]`).textContent());
  return {
    amount: await figure('amount'),
    spent: await figure('spent'),
    held: await figure('held'),
    raise: (await row.locator('[data-figure=raise]').count()) ? await figure('raise') : 0n,
    left: await figure('left'),
  };
}

const usageOf = async (where: string, id: string) =>
  BigInt(
    (await gw.db.query(`SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE ${where} = $1`, [id]))
      .rows[0].c,
  );

describe('the Budgets page, in a browser', () => {
  it("shows the owner every budget, each bar's figures the window row's, and each window's spend the usage rows'", async () => {
    const { context, page, problems } = await signedIn(org.people.owner.apiKey, '/console/budgets');
    await page.waitForSelector('#budget-rows');
    expect(await page.$$eval('#budget-rows tbody tr', (trs) => trs.map((t) => t.dataset.budgetId))).toEqual(
      Object.values(budgets),
    );
    for (const [name, id] of Object.entries(budgets)) expect(await shownOf(page, id), name).toEqual(await windowOf(id));
    // And the windows counted what the ledger charged: the organisation's, the member's, the team key's.
    expect((await windowOf(budgets.company!)).spent).toBe(await usageOf('account_id', org.id));
    expect((await windowOf(budgets.intern!)).spent).toBe(await usageOf('member_id', org.people.member.memberId));
    expect((await windowOf(budgets.backend!)).spent).toBe(await usageOf('team_id', team.id));
    expect((await windowOf(budgets.laptop!)).spent).toBe(await usageOf('key_id', org.people.member.keyId));
    const row = (name: string) => page.locator(`#budget-rows tr[data-budget-id="${budgets[name]}"]`);
    expect(await row('company').locator('td').first().innerText()).toContain('The whole organisation');
    expect(await row('backend').innerText()).toContain('Team Backend');
    expect(await row('backend').innerText()).toContain('Rolling 24 hours');
    expect(await row('backend').locator('[data-figure=resets]').innerText()).toMatch(/^Oldest hour drops out /);
    expect(await row('laptop').locator('[data-figure=resets]').innerText()).toBe('Never: lifetime');
    expect(await row('company').locator('[data-figure=resets]').innerText()).toMatch(
      new RegExp(`^${new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)} 00:00 \\(in `),
    );
    // The soft budget of $0 is over by what was spent, and says so.
    const soft = await windowOf(budgets['admin soft']!);
    expect(await row('admin soft').innerText()).toContain(`over by $`);
    expect(soft.spent).toBeGreaterThan(0n);
    expect(await row('admin soft').locator('svg[role=img]').getAttribute('aria-label')).toContain(
      'left $0.00 of $0.00',
    );
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the owner makes a weekly team budget in a time zone, changes it, raises and resets windows and deletes one; each in the database and the audit log', {
    timeout: 120_000,
  }, async () => {
    const { context, page, problems } = await signedIn(org.people.owner.apiKey, '/console/budgets');
    await page.getByRole('button', { name: 'New budget…' }).click();
    const form = page.getByRole('dialog', { name: 'New budget' });
    await form.locator('select[name=scope]').selectOption('team');
    await form.locator('input[name=team-search]').fill('Back');
    await expect.poll(() => form.locator(`select[name=team] option[value="${team.id}"]`).count()).toBe(1);
    await form.locator('select[name=team]').selectOption(team.id);
    await form.locator('input[name=amount]').fill('-5');
    await form.locator('select[name=period]').selectOption('week');
    await form.locator('input[name=time-zone]').fill('Europe/Berlin');
    await form.locator('select[name=week-start]').selectOption('1');
    await form.locator('input[name=budget-name]').fill('Backend <b>weekly</b>');
    const before = (await gw.db.query('SELECT count(*)::int AS n FROM budgets WHERE account_id = $1', [org.id])).rows[0]
      .n;
    await form.getByRole('button', { name: 'Make budget' }).click();
    await form.getByText('amount_usd must be a plain USD amount').waitFor();
    expect(
      (await gw.db.query('SELECT count(*)::int AS n FROM budgets WHERE account_id = $1', [org.id])).rows[0].n,
    ).toBe(before);
    await form.locator('input[name=amount]').fill('12.5');
    await form.getByRole('button', { name: 'Make budget' }).click();
    await page.getByText('The budget of $12.50 was made.').waitFor();
    const made = (
      await gw.db.query(
        `SELECT id, scope, scope_id, name, amount_nano::text AS amount, period, time_zone, start_day FROM budgets
         WHERE account_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC LIMIT 1`,
        [org.id],
      )
    ).rows[0];
    expect(made).toMatchObject({
      scope: 'team',
      scope_id: team.id,
      name: 'Backend <b>weekly</b>',
      amount: '12500000000',
      period: 'week',
      time_zone: 'Europe/Berlin',
      start_day: 1,
    });
    const row = page.locator(`#budget-rows tr[data-budget-id="${made.id}"]`);
    expect(await row.innerText()).toContain('Backend <b>weekly</b>');
    expect(await row.innerText()).toContain('Weekly from Monday (Europe/Berlin)');
    // The week so far: the team key's request counts.
    expect(await shownOf(page, made.id)).toMatchObject({
      spent: await usageOf('team_id', team.id),
      amount: 12_500_000_000n,
    });

    await row.getByRole('button', { name: 'Edit…' }).click();
    const edit = page.getByRole('dialog', { name: 'Change this budget' });
    expect(await edit.locator('input[name=amount]').inputValue()).toBe('12.5');
    await edit.locator('input[name=amount]').fill('15');
    await edit.locator('select[name=mode]').selectOption('soft');
    await edit.getByRole('button', { name: 'Save budget' }).click();
    await page.getByText('The budget was changed.').waitFor();
    await row.getByText('soft: alerts only').waitFor();
    expect(
      (await gw.db.query('SELECT amount_nano::text AS a, mode FROM budgets WHERE id = $1', [made.id])).rows[0],
    ).toEqual({
      a: '15000000000',
      mode: 'soft',
    });

    // The intern's budget is full: a raise lets them through, a reset forgives their spend.
    const intern = page.locator(`#budget-rows tr[data-budget-id="${budgets.intern}"]`);
    await intern.getByRole('button', { name: 'Raise…' }).click();
    const raise = page.getByRole('dialog', { name: 'Raise this window' });
    await raise.locator('input[name=raise]').fill('1e400');
    await raise.getByRole('button', { name: 'Raise' }).click();
    await raise.getByText('raise_usd must be a plain USD amount').waitFor();
    await raise.locator('input[name=raise]').fill('0.5');
    await raise.getByRole('button', { name: 'Raise' }).click();
    await page.getByText(/^Raised by \$0\.50 until the window ends/).waitFor();
    // The list is asked again after each change: it shows the window as the database has it now.
    const interned = await windowOf(budgets.intern!);
    await expect.poll(() => shownOf(page, budgets.intern!)).toEqual(interned);
    expect((await windowOf(budgets.intern!)).raise).toBe(500_000_000n);

    const spentBefore = (await windowOf(budgets.intern!)).spent;
    await intern.getByRole('button', { name: 'Reset spend…' }).click();
    await page
      .getByRole('dialog', { name: 'Reset this window’s spend?' })
      .getByRole('button', { name: 'Reset spend' })
      .click();
    await page.getByText(/^Forgave \$[\d.]+ spent in this window/).waitFor();
    expect(nanoOf(/Forgave (\$[\d.,]+)/.exec((await page.locator('.note-ok').textContent())!)![1]!)).toBe(spentBefore);
    const reset = await windowOf(budgets.intern!);
    expect(reset.spent).toBe(0n);
    await expect.poll(() => shownOf(page, budgets.intern!)).toEqual(reset);

    await row.getByRole('button', { name: 'Delete…' }).click();
    await page
      .getByRole('dialog', { name: 'Delete this budget?' })
      .getByRole('button', { name: 'Delete budget' })
      .click();
    await page.getByText('The budget was deleted.').waitFor();
    await expect.poll(() => page.locator(`#budget-rows tr[data-budget-id="${made.id}"]`).count()).toBe(0);
    const audit = await gw.db.query(
      `SELECT actor, via, action, target FROM audit_log WHERE account_id = $1 AND via = 'console' AND action LIKE 'budget.%' ORDER BY id`,
      [org.id],
    );
    expect(audit.rows.map((r) => [r.action, r.target])).toEqual([
      ['budget.created', made.id],
      ['budget.changed', made.id],
      ['budget.raised', budgets.intern],
      ['budget.spend_reset', budgets.intern],
      ['budget.deleted', made.id],
    ]);
    expect(new Set(audit.rows.map((r) => r.actor))).toEqual(new Set([`member:${org.people.owner.memberId}`]));
    // The two refusals the browser saw are the bad amounts'.
    expect(problems).toEqual({
      errors: [
        'console: Failed to load resource: the server responded with a status of 400 (Bad Request)',
        'console: Failed to load resource: the server responded with a status of 400 (Bad Request)',
      ],
      cspViolations: [],
    });
    await context.close();
  });

  it("a `member` sees only the budgets over their own requests, read-only, with the database's figures", async () => {
    const { context, page, problems } = await signedIn(org.people.member.apiKey, '/console/budgets');
    expect(await page.$$eval('#main-nav .nav-link', (a) => a.map((l) => l.textContent))).toEqual([
      'Overview',
      'Requests',
      'Teams',
      'Keys',
      'Budgets',
      'Models',
    ]);
    await page.waitForSelector('#budget-rows');
    expect(await page.textContent('#budgets h2')).toBe('Budgets over your requests');
    const shown = await page.$$eval('#budget-rows tbody tr', (trs) => trs.map((t) => t.dataset.budgetId));
    expect(shown).toEqual([budgets.company, budgets.intern, budgets.backend, budgets.laptop]);
    for (const id of shown) expect(await shownOf(page, id!)).toEqual(await windowOf(id!));
    expect(await page.locator(`#budget-rows tr[data-budget-id="${budgets.intern}"] td`).first().innerText()).toContain(
      'You',
    );
    expect(await page.getByRole('button', { name: /New budget|Edit|Raise|Reset|Delete/ }).count()).toBe(0);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it("the operator sees every budget on the organisation's Budgets tab", async () => {
    const { context, page, problems } = await signedIn(
      ADMIN_TOKEN,
      `/console/admin/organisations/${org.id}`,
      'operator',
    );
    await page.getByRole('button', { name: 'Budgets', exact: true }).click();
    await page.waitForSelector('#budget-rows');
    const live = (
      await gw.db.query('SELECT id FROM budgets WHERE account_id = $1 AND deleted_at IS NULL ORDER BY created_at, id', [
        org.id,
      ])
    ).rows.map((r) => r.id);
    expect(await page.$$eval('#budget-rows tbody tr', (trs) => trs.map((t) => t.dataset.budgetId))).toEqual(live);
    for (const id of live) expect(await shownOf(page, id)).toEqual(await windowOf(id));
    expect(await page.getByRole('button', { name: 'New budget…' }).count()).toBe(1);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });
});

describe('screenshots', () => {
  for (const [label, viewport] of VIEWPORTS)
    it(`the Budgets page at ${label} width fits its width, passes axe and is written to test-results/screenshots`, {
      timeout: 240_000,
    }, async () => {
      const findings: Record<string, AxeFinding[]> = {};
      const shoot = async (page: Page, name: string) => {
        expect([name, await sidewaysOverflow(page)]).toEqual([name, 0]);
        await screenshot(page, `console-budgets-${name}-${label}`);
        findings[name] = await axeFindings(page);
      };
      const session = async (secret: string, as: 'member' | 'operator' = 'member') => {
        const { context, problems } = await recordingContext(browser, viewport);
        await withAxe(context);
        const page = await context.newPage();
        await page.goto(`${gw.url}/console`);
        await signIn(page, secret, as);
        await loaded(page);
        return { context, page, problems };
      };
      const owner = await session(org.people.owner.apiKey);
      await open(owner.page, `${gw.url}/console/budgets`);
      await owner.page.waitForSelector('#budget-rows');
      await shoot(owner.page, 'owner');
      await owner.page.getByRole('button', { name: 'New budget…' }).click();
      const form = owner.page.getByRole('dialog', { name: 'New budget' });
      await form.locator('select[name=scope]').selectOption('team');
      await form.locator('select[name=period]').selectOption('week');
      await shoot(owner.page, 'new');
      await form.getByRole('button', { name: 'Cancel' }).click();
      await owner.page
        .locator(`#budget-rows tr[data-budget-id="${budgets.intern}"]`)
        .getByRole('button', { name: 'Raise…' })
        .click();
      await shoot(owner.page, 'raise');
      await owner.page
        .getByRole('dialog', { name: 'Raise this window' })
        .getByRole('button', { name: 'Cancel' })
        .click();
      expect(owner.problems).toEqual({ errors: [], cspViolations: [] });
      await owner.context.close();

      const member = await session(org.people.member.apiKey);
      await open(member.page, `${gw.url}/console/budgets`);
      await member.page.waitForSelector('#budget-rows');
      await shoot(member.page, 'member');
      await member.context.close();

      const operator = await session(ADMIN_TOKEN, 'operator');
      await open(operator.page, `${gw.url}/console/admin/organisations/${org.id}?tab=budgets`);
      await operator.page.waitForSelector('#budget-rows');
      await shoot(operator.page, 'operator');
      expect(operator.problems).toEqual({ errors: [], cspViolations: [] });
      await operator.context.close();
      expect(Object.entries(findings).filter(([, found]) => found.length > 0)).toEqual([]);
    });
});
