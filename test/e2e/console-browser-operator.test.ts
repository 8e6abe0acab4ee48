// The console in a real headless Chromium, as the operator uses it: a gateway of this file's own
// with ADMIN_TOKEN, on a database of its own (so the margin report's sums are this file's usage
// rows only), with its own Temporal dev server and web UI (as `npm start` has it), customers'
// real requests through the official openai SDK against the simulator; then the operator's pages
// read back and compared with the database, each change made from a page checked there, and
// screenshots of every operator page at desktop and phone width, each page checked by axe. (The
// Providers page with deployments of its own: console-browser-providers.test.ts.)
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AxeFinding, axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import {
  type ConsoleGateway,
  countIs,
  countOf,
  nanoOf,
  open,
  operatorPageOf,
  sidewaysOverflow,
  startConsoleGateway,
  tableRows,
  VIEWPORTS,
} from '../support/console.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_TOKEN = 'console-operator-test-token-0123456789abcdef';

interface Holder {
  apiKey: string;
  keyId: string;
  accountId: string;
  prefix: string;
}

let gw: ConsoleGateway;
let browser: Browser;
let uiPort: number;
let erin: Holder;
let frank: Holder;
let videoJobId: string;

async function newHolder(label: string, credits: bigint): Promise<Holder> {
  const k = await gw.billing.createKey({
    creditsNano: credits,
    label,
    owner: `test:${label}`,
    externalId: `${label}-opening`,
  });
  return { apiKey: k.apiKey, keyId: k.keyId, accountId: k.accountId, prefix: k.prefix };
}

const chat = (h: Holder, model: string, text: string) =>
  gw.openai(h.apiKey).chat.completions.create({ model, messages: [{ role: 'user', content: text }] });

/** A sora-2 job through the gateway's waiting route; 503 while its Temporal dev server is still starting. */
async function makeVideo(h: Holder): Promise<string> {
  const deadline = Date.now() + 150_000;
  for (;;) {
    const r = await fetch(`${gw.url}/v1/videos/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'application/json', prefer: 'wait=60' },
      body: JSON.stringify({ model: 'sora-2', prompt: 'a lighthouse [sim ms=200]', seconds: 4, size: '720x1280' }),
    });
    if (r.status === 200) {
      await r.arrayBuffer();
      const job = await gw.db.query(
        'SELECT id FROM video_jobs WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1',
        [h.accountId],
      );
      return job.rows[0].id;
    }
    if (r.status !== 503 || Date.now() > deadline) throw new Error(`video: ${r.status} ${await r.text()}`);
    await new Promise((res) => setTimeout(res, 500));
  }
}

beforeAll(async () => {
  uiPort = await freePort();
  [gw, browser] = await Promise.all([
    startConsoleGateway('console_operator', {
      ADMIN_TOKEN,
      // Its own Temporal dev server, whose web UI the video page links into.
      TEMPORAL_ADDRESS: '',
      TEMPORAL_CLI: '',
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(uiPort),
      VIDEO_POLL_INITIAL_MS: '100',
      VIDEO_POLL_MAX_MS: '400',
      VIDEO_WAIT_MS: '60000',
      // Traced, with a trace UI: the request rows link to each request's trace. (No collector
      // listens: the spans are dropped, the trace ids are kept on the usage rows all the same.)
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      TRACE_UI_URL: 'http://traces.example/trace/{trace_id}',
    }),
    launchBrowser(),
  ]);
  // Customers pay 25% over the provider's prices: a margin to report.
  await gw.catalogue.setMarkup({ markup: '0.25', source: 'console-test', reason: 'a margin to see' });
  erin = await newHolder('erin', 20_000_000_000n);
  frank = await newHolder('frank', 5_000_000_000n);
  for (const [model, tokens] of [
    ['gpt-4o-mini', 40],
    ['gpt-4o-mini', 15],
    ['gpt-5.4-mini', 60],
    ['claude-sonnet-4-6', 25],
  ] as const)
    await chat(erin, model, `erin [sim tokens=${tokens}]`);
  await chat(frank, 'gpt-4o-mini', 'frank [sim tokens=20]');
  await chat(frank, 'gpt-5.4-mini', 'frank [sim tokens=30]');
  videoJobId = await makeVideo(erin);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

const operatorPage = (path: string, viewport?: { width: number; height: number }) =>
  operatorPageOf(browser, gw.url, ADMIN_TOKEN, path, viewport);

/** Clicks a dialog's confirming button and waits for the dialog to close. */
async function confirm(page: Page, title: string, button: string) {
  const dialog = page.getByRole('dialog', { name: title });
  await dialog.waitFor();
  await dialog.getByRole('button', { name: button }).click();
  await dialog.waitFor({ state: 'hidden' });
}

describe('the console, for the operator, in a browser', () => {
  it("the operator signs in with ADMIN_TOKEN; the accounts list shows each account's balance, held and 30-day spend as the database has them, and a search by key prefix finds one", async () => {
    const { context, page, problems } = await operatorPage('/console');
    // The operator has no account: their pages start at the accounts.
    await page.waitForURL(/\/console\/admin\/accounts$/);
    const rows = await tableRows(page, '#account-rows');
    const db = (
      await gw.db.query(
        `SELECT a.id, a.balance_nano::text AS balance, a.held_nano::text AS held,
                (SELECT coalesce(sum(cost_nano), 0) FROM usage_records u
                  WHERE u.account_id = a.id AND u.created_at > now() - interval '30 days')::text AS spend
           FROM accounts a ORDER BY a.created_at DESC, a.id DESC`,
      )
    ).rows;
    expect(rows.map((r) => r[0]!.split(/\s/)[0])).toEqual(db.map((d) => d.id));
    for (const [i, d] of db.entries()) {
      const [, , , balance, held, spend] = rows[i]!;
      expect([nanoOf(balance!), nanoOf(held!), nanoOf(spend!)]).toEqual([
        BigInt(d.balance),
        BigInt(d.held),
        BigInt(d.spend),
      ]);
    }
    await page.fill('input[name=q]', frank.prefix);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/\?q=/);
    await countIs(page, '#account-rows tbody tr', 1);
    expect((await tableRows(page, '#account-rows'))[0]![0]).toContain(frank.accountId);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it("on an account's page the operator sets a key's rate limits, tops up, refunds the top-up and revokes the key, and the database has each", async () => {
    const { context, page, problems } = await operatorPage('/console/admin/accounts');
    await page.getByRole('link', { name: frank.accountId }).click();
    await page.waitForURL(new RegExp(`/console/admin/accounts/${frank.accountId}$`));
    await page.waitForSelector(`#key-rows tr[data-key-id="${frank.keyId}"]`);
    const row = page.locator(`#key-rows tr[data-key-id="${frank.keyId}"]`);

    await row.getByRole('button', { name: 'Limits…' }).click();
    await page.fill('input[name=rpm]', '7');
    await page.fill('input[name=tpm]', '9000');
    await confirm(page, `Rate limits of ${frank.prefix}…`, 'Save limits');
    await page.waitForSelector('.note-ok');
    const limits = await gw.db.query('SELECT rpm_limit, tpm_limit FROM api_keys WHERE id = $1', [frank.keyId]);
    expect(limits.rows[0]).toEqual({ rpm_limit: 7, tpm_limit: '9000' });
    await row.locator('[data-figure=tpm]', { hasText: '9,000' }).waitFor();
    expect(await row.locator('[data-figure=rpm]').textContent()).toBe('7');

    const before = BigInt(
      (await gw.db.query('SELECT balance_nano FROM accounts WHERE id = $1', [frank.accountId])).rows[0].balance_nano,
    );
    await page.fill('input[name=amount]', '2.50');
    const reference = await page.inputValue('input[name=external_id]');
    expect(reference).toMatch(/^console:[0-9a-f-]{36}$/);
    await page.getByRole('button', { name: 'Top up…' }).click();
    await confirm(page, 'Credit this account?', 'Credit $2.50');
    await page.waitForSelector('text=Credited $2.50');
    const topup = await gw.db.query(
      'SELECT amount_nano::text AS amount, cause FROM ledger WHERE account_id = $1 AND external_id = $2',
      [frank.accountId, reference],
    );
    expect(topup.rows).toEqual([{ amount: '2500000000', cause: 'console:operator' }]);
    await expect
      .poll(async () => nanoOf(await page.textContent('.tiles [data-figure=balance]')))
      .toBe(before + 2_500_000_000n);

    const topupRow = page.locator('#ledger-rows tr[data-kind=topup]', { hasText: reference });
    await topupRow.getByRole('button', { name: 'Refund…' }).click();
    await confirm(page, 'Refund this top-up?', 'Refund');
    await topupRow.getByText('Refunded $2.50').waitFor();
    const refund = await gw.db.query(
      "SELECT amount_nano::text AS amount FROM ledger WHERE account_id = $1 AND kind = 'refund'",
      [frank.accountId],
    );
    expect(refund.rows).toEqual([{ amount: '-2500000000' }]);
    const after = BigInt(
      (await gw.db.query('SELECT balance_nano FROM accounts WHERE id = $1', [frank.accountId])).rows[0].balance_nano,
    );
    expect(after).toBe(before);

    await row.getByRole('button', { name: 'Revoke…' }).click();
    await confirm(page, 'Revoke this key?', 'Revoke key');
    await row.getByText('revoked').waitFor();
    const revoked = await gw.db.query('SELECT revoked_at FROM api_keys WHERE id = $1', [frank.keyId]);
    expect(revoked.rows[0].revoked_at).not.toBeNull();
    await expect(chat(frank, 'gpt-4o-mini', 'after revoke')).rejects.toMatchObject({ status: 401 });
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it("an account's usage and requests on its page are its usage rows", async () => {
    const { context, page, problems } = await operatorPage(`/console/admin/accounts/${erin.accountId}?tab=usage`);
    const sums = (
      await gw.db.query(
        `SELECT model, count(*)::text AS requests, sum(cost_nano)::text AS cost FROM usage_records
          WHERE account_id = $1 GROUP BY model`,
        [erin.accountId],
      )
    ).rows;
    const rows = await tableRows(page, '#usage-by-model');
    expect(new Set(rows.map((r) => r[0]))).toEqual(new Set(sums.map((s) => s.model)));
    for (const s of sums) {
      const r = rows.find((x) => x[0] === s.model)!;
      expect([countOf(r[1]!), nanoOf(r[4]!)]).toEqual([BigInt(s.requests), BigInt(s.cost)]);
    }
    await page.getByRole('button', { name: 'Requests' }).click();
    await page.waitForURL(/tab=requests/);
    await page.waitForSelector('#request-rows');
    const ids = await page.$$eval('#request-rows tbody tr', (trs) => trs.map((t) => t.dataset.requestId));
    const db = await gw.db.query(
      'SELECT request_id FROM usage_records WHERE account_id = $1 ORDER BY created_at DESC, request_id DESC',
      [erin.accountId],
    );
    expect(ids).toEqual(db.rows.map((r) => r.request_id));
    // Each row links to its request's trace in the trace UI, in a new tab.
    const traces = await page.$$eval('#request-rows tbody tr', (trs) =>
      trs.map((t) => {
        const a = t.querySelector('a[data-trace-id]');
        return {
          id: t.dataset.requestId,
          href: a?.getAttribute('href'),
          target: a?.getAttribute('target'),
          rel: a?.getAttribute('rel'),
        };
      }),
    );
    const traceIds = await gw.db.query('SELECT request_id, trace_id FROM usage_records WHERE account_id = $1', [
      erin.accountId,
    ]);
    for (const row of traceIds.rows) {
      expect(row.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(traces.find((t) => t.id === row.request_id)).toEqual({
        id: row.request_id,
        href: `http://traces.example/trace/${row.trace_id}`,
        target: '_blank',
        rel: 'noopener noreferrer',
      });
    }
    expect(await page.getAttribute('#csv-link', 'href')).toBe(
      `/console/api/admin/accounts/${erin.accountId}/requests.csv`,
    );
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the margin page’s revenue, provider cost and margin, in total, by day, model, deployment, organisation, team, member and key, are the sums of the usage rows', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/margin');
    const q = async (key: string) =>
      (
        await gw.db.query(
          `SELECT ${key} AS key, count(*)::text AS requests, sum(cost_nano)::text AS revenue,
                  sum(provider_cost_nano)::text AS cost, count(provider_cost_nano)::text AS priced
             FROM usage_records WHERE created_at > now() - interval '29 days' GROUP BY 1`,
        )
      ).rows;
    const byModel = await q('model');
    const byDay = await q(`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`);
    // The deployment that answered: here each model's one, named after its provider (gpt-4o-mini/openai).
    const byDeployment = await q('COALESCE(deployment, model)');
    expect(byDeployment.map((r) => r.key)).toContain('gpt-4o-mini/openai');
    // Every row here was priced by the book: the provider's cost is on each.
    for (const r of byModel) expect(r.priced).toBe(r.requests);
    const total = byModel.reduce(
      (t, r) => ({ revenue: t.revenue + BigInt(r.revenue), cost: t.cost + BigInt(r.cost) }),
      { revenue: 0n, cost: 0n },
    );
    await page.waitForSelector('[data-figure=revenue]');
    expect(nanoOf(await page.textContent('.tiles [data-figure=revenue]'))).toBe(total.revenue);
    expect(nanoOf(await page.textContent('.tiles [data-figure=provider-cost]'))).toBe(total.cost);
    expect(nanoOf(await page.textContent('.tiles [data-figure=margin]'))).toBe(total.revenue - total.cost);
    // With a 25% markup the margin is a fifth of revenue (each charge rounded up once).
    expect(total.revenue - total.cost).toBeGreaterThan(0n);

    // Whom each request was charged to: the customers' keys here are each their organisation's owner's.
    const byOrganisation = await q('account_id');
    const byTeam = await q(`COALESCE(team_id, '')`);
    const byMember = await q(`COALESCE(member_id, '')`);
    const byKey = await q('key_id');
    expect(byOrganisation.length).toBeGreaterThan(1);
    for (const [table, want, blank = ''] of [
      ['#margin-by-day', byDay],
      ['#margin-by-model', byModel],
      ['#margin-by-deployment', byDeployment],
      ['#margin-by-organisation', byOrganisation],
      ['#margin-by-team', byTeam, '(no team)'],
      ['#margin-by-member', byMember, '(a team’s key)'],
      ['#margin-by-key', byKey],
    ] as const) {
      const rows = await tableRows(page, table);
      const shown = (key: string) => key || blank;
      expect(new Set(rows.map((r) => r[0])), table).toEqual(new Set(want.map((w) => shown(w.key))));
      for (const w of want) {
        const [, requests, revenue, cost, margin] = rows.find((r) => r[0] === shown(w.key))!;
        expect([countOf(requests!), nanoOf(revenue!), nanoOf(cost!), nanoOf(margin!)]).toEqual([
          BigInt(w.requests),
          BigInt(w.revenue),
          BigInt(w.cost),
          BigInt(w.revenue) - BigInt(w.cost),
        ]);
      }
    }
    expect(await page.locator('.chart canvas').count()).toBe(1);

    // A range of days before any usage: nothing.
    await page.fill('input[name=from]', '2020-01-01');
    await page.fill('input[name=to]', '2020-01-31');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(/from=2020-01-01&to=2020-01-31/);
    await page.waitForSelector('text=No priced usage in this period.');
    expect(nanoOf(await page.textContent('.tiles [data-figure=revenue]'))).toBe(0n);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the price book page shows the book’s models, markups and a model’s price history; a changed document is previewed, then applied from the page', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/book');
    const book = JSON.parse((await gw.catalogue.exportBook({})).document) as {
      models: { id: string; prices: Record<string, string> }[];
      markups: { markup: string }[];
    };
    await page.waitForSelector('#markups-in-force');
    expect((await tableRows(page, '#markups-in-force')).map((r) => [r[0], r[1]])).toEqual([['default', '25%']]);
    const shown = await page.$$eval('[id^=prices-] tbody tr', (trs) => trs.map((t) => t.dataset.model));
    expect(new Set(shown)).toEqual(new Set(book.models.map((m) => m.id)));
    const mini = book.models.find((m) => m.id === 'gpt-4o-mini')!;
    expect(await page.textContent('#prices-chat tr[data-model="gpt-4o-mini"] [data-price-key=input_per_mtok]')).toBe(
      `$${mini.prices.input_per_mtok}`,
    );

    await page.getByRole('link', { name: 'gpt-4o-mini', exact: true }).click();
    await page.waitForURL(/model=gpt-4o-mini/);
    await page.waitForSelector('#price-history tbody tr');
    const history = await gw.catalogue.getPriceHistory({ modelId: 'gpt-4o-mini' });
    expect(await page.locator('#price-history tbody tr').count()).toBe(history.versions.length);

    // Propose: the default markup from 25% to 40%.
    await page.getByRole('button', { name: 'Propose a change' }).click();
    await page.waitForURL(/tab=edit/);
    const text = await page.inputValue('textarea[name=document]');
    const doc = JSON.parse(text);
    doc.markups = [{ markup: '0.4' }];
    await page.fill('textarea[name=document]', JSON.stringify(doc, null, 2));
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.waitForSelector('#book-changes');
    const changes = await tableRows(page, '#book-changes');
    expect(changes.map((c) => [c[0], c[1]])).toEqual([['set markup', 'default']]);
    const preview = await tableRows(page, '#book-preview');
    const revenue = (
      await gw.db.query(
        `SELECT model, sum(cost_nano)::text AS revenue FROM usage_records
          WHERE created_at > now() - interval '30 days' GROUP BY model`,
      )
    ).rows;
    for (const r of revenue) {
      const [, , now, proposed] = preview.find((p) => p[0]!.startsWith(r.model))!;
      expect(nanoOf(now!)).toBe(BigInt(r.revenue));
      expect(nanoOf(proposed!)).toBeGreaterThan(BigInt(r.revenue));
    }
    // Nothing is applied by a preview.
    expect((await gw.catalogue.listMarkups({})).inForce.map((m) => m.markup)).toEqual(['0.25']);

    await page.getByRole('button', { name: 'Apply…' }).click();
    await confirm(page, 'Apply this book?', 'Apply the book');
    await page.waitForSelector('text=Applied 1 change');
    expect((await gw.catalogue.listMarkups({})).inForce.map((m) => m.markup)).toEqual(['0.4']);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('video jobs are listed with a link to each job’s workflow in the Temporal UI, which answers there', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/videos');
    const row = page.locator(`#video-rows tr[data-video-id="${videoJobId}"]`);
    await row.waitFor();
    const job = (
      await gw.db.query('SELECT account_id, model, status, cost_nano::text AS cost FROM video_jobs WHERE id = $1', [
        videoJobId,
      ])
    ).rows[0];
    const text = (await row.innerText()).replace(/\s+/g, ' ');
    expect(text).toContain(job.account_id);
    expect(text).toContain('sora-2');
    expect(text).toContain(job.status);
    expect(job.status).toBe('completed');
    const href = await row.getByRole('link', { name: 'Temporal UI' }).getAttribute('href');
    expect(href).toMatch(
      new RegExp(`^http://(127\\.0\\.0\\.1|localhost):${uiPort}/namespaces/default/workflows/${videoJobId}$`),
    );
    expect(await row.getByRole('link', { name: 'Temporal UI' }).getAttribute('target')).toBe('_blank');
    expect((await fetch(href!)).status).toBe(200);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('every operator page, at desktop (1280×800) and phone (390×844) width, fits its width, passes axe (accessibility) and is written to test-results/screenshots', {
    timeout: 120_000,
  }, async () => {
    for (const [label, viewport] of VIEWPORTS) {
      const { context, page, problems } = await operatorPage('/console/admin/accounts', viewport);
      await withAxe(context); // in every page from here: each is opened anew below
      const findings: Record<string, AxeFinding[]> = {};
      for (const [name, path] of [
        ['accounts', '/console/admin/accounts'],
        ['account', `/console/admin/accounts/${erin.accountId}`],
        ['account-usage', `/console/admin/accounts/${erin.accountId}?tab=usage`],
        ['account-requests', `/console/admin/accounts/${erin.accountId}?tab=requests`],
        ['margin', '/console/admin/margin'],
        ['book', '/console/admin/book'],
        ['book-history', '/console/admin/book?model=gpt-4o-mini'],
        ['book-edit', '/console/admin/book?tab=edit'],
        ['providers', '/console/admin/providers'],
        ['videos', '/console/admin/videos'],
      ] as const) {
        await open(page, `${gw.url}${path}`);
        if (name === 'margin' || name === 'account-usage') await page.waitForSelector('.chart canvas');
        if (name === 'book-edit') {
          await page.getByRole('button', { name: 'Preview' }).click();
          await page.getByText('Had it been in force').waitFor();
        }
        expect([name, await sidewaysOverflow(page)]).toEqual([name, 0]);
        await screenshot(page, `console-${name}-${label}`);
        findings[name] = await axeFindings(page);
      }
      // axe on every page above, as shown at this width: not one finding, of any impact.
      expect(Object.entries(findings).filter(([, found]) => found.length > 0)).toEqual([]);
      expect(problems).toEqual({ errors: [], cspViolations: [] });
      await context.close();
    }
  });
});
