// The console in a real headless Chromium (test/support/browser.ts), as a key holder uses it: a
// gateway of this file's own on a database of its own, real requests through the official openai
// SDK against the simulator, then the pages read back and compared with the database: balance,
// spend per day, request rows, a filter and its CSV, key rotation, another account's data, a bad
// or expired session, the page's cold load, and screenshots of every page at desktop and phone
// width (test-results/screenshots/console-<page>-desktop|phone.png), each page checked by axe.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import zlib from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { type AxeFinding, axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import {
  type ConsoleGateway,
  clipboardOf,
  countIs,
  countOf,
  hashOf,
  keptByBrowser,
  loaded,
  nanoOf,
  open,
  recordingContext,
  sidewaysOverflow,
  signIn,
  startConsoleGateway,
  tableRows,
  VIEWPORTS,
} from '../support/console.ts';

interface Holder {
  apiKey: string;
  keyId: string;
  accountId: string;
}

let gw: ConsoleGateway;
let browser: Browser;
const holders: Record<'alice' | 'bob' | 'carol' | 'dave', Holder> = {} as never;

async function newHolder(label: string, credits = 5_000_000_000n): Promise<Holder> {
  const k = await gw.billing.createKey({ creditsNano: credits, label, externalId: `${label}-opening` });
  return { apiKey: k.apiKey, keyId: k.keyId, accountId: k.accountId };
}

async function chat(h: Holder, model: string, text: string) {
  return gw.openai(h.apiKey).chat.completions.create({ model, messages: [{ role: 'user', content: text }] });
}

beforeAll(async () => {
  [gw, browser] = await Promise.all([startConsoleGateway('console_holder'), launchBrowser()]);
  for (const name of ['alice', 'bob', 'carol', 'dave'] as const) holders[name] = await newHolder(name);
  const { alice, bob, carol, dave } = holders;
  for (const [model, tokens] of [
    ['gpt-4o-mini', 12],
    ['gpt-4o-mini', 30],
    ['gpt-4o-mini', 7],
    ['gpt-5.4-mini', 25],
    ['gpt-5.4-mini', 40],
    ['claude-sonnet-4-6', 18],
    ['claude-sonnet-5-5', 9], // an alias: the row names the model that served it, and what was asked for
  ] as const)
    await chat(alice, model, `hello [sim tokens=${tokens}]`);
  // A request the upstream refuses: a usage row with its status, charged nothing.
  await expect(chat(alice, 'gpt-4o-mini', 'refused [sim fault=400]')).rejects.toMatchObject({ status: 400 });
  await chat(bob, 'gpt-4o-mini', 'bob [sim tokens=11]');
  await chat(bob, 'gpt-5.4-mini', 'bob [sim tokens=13]');
  // More than one page of the request log (50 rows a page).
  for (let i = 0; i < 53; i++) await chat(carol, 'gpt-4o-mini', `carol ${i} [sim tokens=3]`);
  await chat(dave, 'gpt-4o-mini', 'dave [sim tokens=5]');
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

/** The account's usage rows, newest first, as the page names their fields. */
async function usageRows(accountId: string) {
  const r = await gw.db.query(
    `SELECT request_id, route, model, coalesce(requested_model, '') AS requested_model, input_tokens::text AS input,
            output_tokens::text AS output, cost_nano::text AS cost, status, http_status, latency_ms,
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day
       FROM usage_records WHERE account_id = $1 ORDER BY created_at DESC, request_id`,
    [accountId],
  );
  return r.rows as {
    request_id: string;
    route: string;
    model: string;
    requested_model: string;
    input: string;
    output: string;
    cost: string;
    status: string;
    http_status: number;
    latency_ms: number;
    day: string;
  }[];
}

/** The request ids of the request log's rows on the page, in order. */
const shownRequestIds = (page: Page) =>
  page.$$eval('#request-rows tbody tr', (rows) => rows.map((r) => r.dataset.requestId ?? ''));

async function signedInPage(h: Holder, path = '/console', viewport?: { width: number; height: number }) {
  const { context, problems } = await recordingContext(browser, viewport);
  const page = await context.newPage();
  await page.goto(`${gw.url}${path}`);
  await signIn(page, h.apiKey);
  await loaded(page);
  return { context, page, problems };
}

describe('the console, for a key holder, in a browser', () => {
  it('a key holder signs in with their key; the overview shows balance, held and available as GetBalance and the ledger have them; the key is kept nowhere in the browser', async () => {
    const { alice } = holders;
    const { context, page, problems } = await signedInPage(alice);
    await page.waitForSelector('[data-figure=balance]');
    const account = (
      await gw.db.query(
        `SELECT balance_nano::text AS balance, held_nano::text AS held,
                (SELECT sum(amount_nano) FROM ledger WHERE account_id = accounts.id)::text AS ledger
           FROM accounts WHERE id = $1`,
        [alice.accountId],
      )
    ).rows[0];
    const rpc = await gw.billing.getBalance({ key: { ref: { case: 'keyId', value: alice.keyId } } });
    const balance = nanoOf(await page.textContent('[data-figure=balance]'));
    const held = nanoOf(await page.textContent('[data-figure=held]'));
    const available = nanoOf(await page.textContent('[data-figure=available]'));
    expect(balance).toBe(BigInt(account.balance));
    expect(balance).toBe(BigInt(account.ledger));
    expect([balance, held, available]).toEqual([rpc.balanceNano, rpc.heldNano, rpc.availableNano]);
    // Real requests were charged: less than the opening $5, and not a float's approximation of it.
    expect(balance).toBeLessThan(5_000_000_000n);

    // The key went to the server once; the browser keeps only an HttpOnly cookie that is not the key.
    const kept = await keptByBrowser(page);
    expect(kept).not.toContain(alice.apiKey);
    expect(await page.content()).not.toContain(alice.apiKey);
    const cookies = await context.cookies();
    expect(cookies.map((c) => c.name)).toEqual(['gw_console']);
    expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/console' });
    expect(cookies[0]!.value).not.toContain(alice.apiKey.slice(4));
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it("the overview's spend and tokens per day, by day and by model, are the sums of the account's usage rows", async () => {
    const { alice } = holders;
    const { context, page, problems } = await signedInPage(alice);
    const rows = await usageRows(alice.accountId);
    const sum = (key: (r: (typeof rows)[number]) => string) => {
      const out = new Map<string, { requests: bigint; input: bigint; output: bigint; cost: bigint }>();
      for (const r of rows) {
        const t = out.get(key(r)) ?? { requests: 0n, input: 0n, output: 0n, cost: 0n };
        t.requests += 1n;
        t.input += BigInt(r.input);
        t.output += BigInt(r.output);
        t.cost += BigInt(r.cost);
        out.set(key(r), t);
      }
      return out;
    };
    const byDay = sum((r) => r.day);
    const byModel = sum((r) => r.model);

    const dayRows = await tableRows(page, '#usage-by-day');
    expect(dayRows.map(([day]) => day)).toEqual([...byDay.keys()].sort().reverse());
    for (const [day, requests, tokens, spend] of dayRows) {
      const t = byDay.get(day!)!;
      expect([countOf(requests!), countOf(tokens!), nanoOf(spend!)]).toEqual([t.requests, t.input + t.output, t.cost]);
    }
    const modelRows = await tableRows(page, '#usage-by-model');
    expect(new Set(modelRows.map(([m]) => m))).toEqual(new Set(byModel.keys()));
    for (const [model, requests, input, output, spend] of modelRows) {
      const t = byModel.get(model!)!;
      expect([countOf(requests!), countOf(input!), countOf(output!), nanoOf(spend!)]).toEqual([
        t.requests,
        t.input,
        t.output,
        t.cost,
      ]);
    }
    const total = [...byModel.values()].reduce((a, t) => a + t.cost, 0n);
    expect(nanoOf(await page.textContent('#usage-by-model [data-figure=total-cost]'))).toBe(total);

    // Two charts (spend, tokens), each with a band per model in its legend.
    expect(await page.locator('.chart canvas').count()).toBe(2);
    const legend = await page.locator('.chart').first().locator('.u-legend').innerText();
    for (const model of byModel.keys()) expect(legend).toContain(model);
    // The legend's totals (shown when the pointer is off the chart) are exact too.
    expect(legend).toContain(`30 days, totals`);

    // 90 days: the same rows (there are no older ones), and the address says which period.
    await page.getByRole('button', { name: '90 days' }).click();
    await page.waitForURL(/\/console\?days=90$/);
    await page.waitForSelector('.chart .u-legend >> text=90 days, totals');
    expect((await tableRows(page, '#usage-by-day')).map((r) => r[0])).toEqual(dayRows.map((r) => r[0]));
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the request log shows each of the account’s requests as its usage row has it, newest first, and no other account’s', async () => {
    const { alice, bob } = holders;
    const { context, page, problems } = await signedInPage(alice, '/console/requests');
    const rows = await usageRows(alice.accountId);
    await page.waitForSelector('#request-rows');
    expect(await shownRequestIds(page)).toEqual(rows.map((r) => r.request_id));
    for (const r of rows) {
      const cells = (
        await page.$$eval(`#request-rows tr[data-request-id="${r.request_id}"] td`, (tds) =>
          tds.map((td) => td.innerText.trim()),
        )
      ).map((t) => t.replace(/\s+/g, ' '));
      const [, chargedTo, route, model, input, output, cost, status, latency, id] = cells;
      // Whom it was charged to: the key's member (the account's owner) and the key.
      expect(chargedTo).toBe(`alice ${alice.apiKey.slice(0, 10)}…`);
      expect(route).toBe(r.route);
      expect(model).toBe(
        r.requested_model && r.requested_model !== r.model ? `${r.model} asked for ${r.requested_model}` : r.model,
      );
      expect(countOf(input!.split(' ')[0]!)).toBe(BigInt(r.input));
      expect(countOf(output!)).toBe(BigInt(r.output));
      expect(nanoOf(cost!)).toBe(BigInt(r.cost));
      expect(status).toBe(`${r.status} ${r.http_status}`);
      expect(latency).toBe(`${r.latency_ms.toLocaleString('en-US')} ms`);
      expect(id).toBe(r.request_id);
    }
    // The refused request is there with its status, and the alias request names both models.
    expect(rows.some((r) => r.status !== 'ok' && r.http_status === 400)).toBe(true);
    expect(rows.some((r) => r.requested_model === 'claude-sonnet-5-5' && r.model === 'claude-sonnet-4-6')).toBe(true);
    const bobs = await usageRows(bob.accountId);
    const text = await page.content();
    for (const b of bobs) expect(text).not.toContain(b.request_id);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('a filter by model and status shows exactly the matching requests, and the CSV download of the same filters has exactly those rows', async () => {
    const { alice } = holders;
    const { context, page, problems } = await signedInPage(alice, '/console/requests');
    const rows = await usageRows(alice.accountId);
    await page.fill('input[name=model]', 'gpt-4o-mini');
    await page.selectOption('select[name=status]', 'ok');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/model=gpt-4o-mini&status=ok/);
    const expected = rows.filter((r) => r.model === 'gpt-4o-mini' && r.status === 'ok');
    expect(expected.length).toBe(3);
    await countIs(page, '#request-rows tbody tr', expected.length);
    expect(await shownRequestIds(page)).toEqual(expected.map((r) => r.request_id));

    // The CSV link carries the same filters; its rows are the table's, with the same figures.
    expect(await page.getAttribute('#csv-link', 'href')).toBe('/console/api/requests.csv?model=gpt-4o-mini&status=ok');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#csv-link')]);
    const csv = fs
      .readFileSync((await download.path())!, 'utf8')
      .trim()
      .split('\n');
    const header = csv[0]!.split(',');
    const lines = csv.slice(1).map((l) => Object.fromEntries(l.split(',').map((v, i) => [header[i]!, v])));
    expect(lines.map((l) => l.request_id)).toEqual(expected.map((r) => r.request_id));
    for (const [i, l] of lines.entries()) {
      expect(l.cost_nano).toBe(expected[i]!.cost);
      expect(l.model).toBe('gpt-4o-mini');
      expect(l.status).toBe('ok');
    }

    // Failed requests only: the refused one.
    await page.selectOption('select[name=status]', 'error');
    await page.fill('input[name=model]', '');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/\?status=error$/);
    await countIs(page, '#request-rows tbody tr', 1);
    expect(await shownRequestIds(page)).toEqual(rows.filter((r) => r.status !== 'ok').map((r) => r.request_id));
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('Older and Newer walk the request log in pages of 50 that together hold every request once', async () => {
    const { carol } = holders;
    const { context, page, problems } = await signedInPage(carol, '/console/requests');
    const all = (await usageRows(carol.accountId)).map((r) => r.request_id);
    expect(all.length).toBe(53);
    await page.waitForSelector('#request-rows');
    const first = await shownRequestIds(page);
    expect(first).toEqual(all.slice(0, 50));
    await page.getByRole('button', { name: 'Older ›' }).click();
    await countIs(page, '#request-rows tbody tr', 3);
    expect(await shownRequestIds(page)).toEqual(all.slice(50));
    expect(await page.getByRole('button', { name: 'Older ›' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: '‹ Newer' }).click();
    await countIs(page, '#request-rows tbody tr', 50);
    expect(await shownRequestIds(page)).toEqual(first);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the Billing page lists the account’s top-ups and refunds as the ledger has them, and every entry on asking', async () => {
    const { alice } = holders;
    const { context, page, problems } = await signedInPage(alice, '/console/billing');
    const ledger = async (kinds: string[]) =>
      (
        await gw.db.query(
          `SELECT id::text AS id, kind, amount_nano::text AS amount FROM ledger
            WHERE account_id = $1 AND kind = ANY($2) ORDER BY ledger.id DESC`,
          [alice.accountId, kinds],
        )
      ).rows as { id: string; kind: string; amount: string }[];
    const shown = async () =>
      page.$$eval('#ledger-rows tbody tr', (trs) =>
        trs.map((t) => [t.dataset.ledgerId, t.querySelector('[data-figure=amount]')?.textContent]),
      );
    const credits = await ledger(['topup', 'refund']);
    expect(credits.length).toBe(1); // the opening credit
    await page.waitForSelector('#ledger-rows');
    expect((await shown()).map(([id, amount]) => [id, nanoOf(amount ?? '')])).toEqual(
      credits.map((c) => [c.id, BigInt(c.amount)]),
    );
    await page.getByRole('button', { name: 'All entries' }).click();
    const all = await ledger(['topup', 'refund', 'charge']);
    await countIs(page, '#ledger-rows tbody tr', all.length);
    expect((await shown()).map(([id, amount]) => [id, nanoOf(amount ?? '')])).toEqual(
      all.map((c) => [c.id, BigInt(c.amount)]),
    );
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the Models page shows each available model at the prices ListModels gives the account’s group', async () => {
    const { alice } = holders;
    const { context, page, problems } = await signedInPage(alice, '/console/models');
    const { models } = await gw.catalogue.listModels({ availableOnly: true, accountGroup: '' });
    await page.waitForSelector('[id^=prices-] tbody tr');
    const shown = await page.$$eval('[id^=prices-] tbody tr', (trs) => trs.map((t) => t.dataset.model));
    expect(new Set(shown)).toEqual(new Set(models.map((m) => m.id)));
    const mini = models.find((m) => m.id === 'gpt-4o-mini')!;
    for (const key of ['input_per_mtok', 'cached_input_per_mtok', 'output_per_mtok']) {
      const cell = await page.textContent(`#prices-chat tr[data-model="gpt-4o-mini"] [data-price-key=${key}]`);
      expect(usdToNano((cell ?? '').replace('$', ''))).toBe(usdToNano(mini.customerPrices[key]!));
    }
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('a one-time link (CreateConsoleLink, as the bot’s /console sends it) signs the key’s member in, leaves the address bar, and works only once', async () => {
    const { alice } = holders;
    const link = await gw.billing.createConsoleLink({ key: { ref: { case: 'keyId', value: alice.keyId } } });
    const first = await recordingContext(browser);
    const page = await first.context.newPage();
    await page.goto(`${gw.url}/console/#link=${link.token}`);
    await page.waitForSelector('.who[data-role=member]');
    await page.waitForSelector('[data-figure=balance]');
    expect(page.url()).toBe(`${gw.url}/console/`);
    expect(await hashOf(page)).toBe('');
    // The key's member, the owner of the account (an organisation of one named as the account).
    expect(await page.textContent('.who')).toBe('alice · Owner');
    expect(first.problems).toEqual({ errors: [], cspViolations: [] });
    await first.context.close();

    // Used: another browser with the same link gets the sign-in form, saying why.
    const second = await recordingContext(browser);
    const again = await second.context.newPage();
    await again.goto(`${gw.url}/console/#link=${link.token}`);
    await again.waitForSelector('#signin-secret');
    expect(await again.textContent('.note')).toContain('That sign-in link is not valid any more');
    expect(again.url()).toBe(`${gw.url}/console/`);
    await second.context.close();
  });

  it('rotating the key on the Keys page shows the new key once, with a working copy button; the old key is refused and the new one works', async () => {
    const { dave } = holders;
    // The Key page's address is a member's Keys page, where the key they signed in with comes first.
    const { context, page, problems } = await signedInPage(dave, '/console/key');
    await page.waitForURL(`${gw.url}/console/keys`);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
    await page.getByRole('button', { name: 'Rotate key…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate this key?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Rotate now' }).click();
    const fresh = (await page.textContent('#new-key'))!.trim();
    expect(fresh).toMatch(/^prx-/);
    expect(fresh).not.toBe(dave.apiKey);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await clipboardOf(page)).toBe(fresh);

    await expect(chat(dave, 'gpt-4o-mini', 'old key [sim tokens=2]')).rejects.toMatchObject({ status: 401 });
    const { response } = await gw
      .openai(fresh)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'new key [sim tokens=2]' }],
      })
      .withResponse();
    const charged = await gw.db.query('SELECT account_id FROM usage_records WHERE request_id = $1', [
      response.headers.get('x-request-id'),
    ]);
    expect(charged.rows[0]?.account_id).toBe(dave.accountId);
    const keys = (
      await gw.db.query('SELECT id, prefix, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY created_at', [
        dave.accountId,
      ])
    ).rows;
    expect(keys.map((k) => k.revoked_at !== null)).toEqual([true, false]);
    expect(fresh.startsWith(keys[1].prefix)).toBe(true);
    // The session moved to the new key: the page names it, and a reload stays signed in.
    expect(await page.textContent('[data-figure=key-prefix]')).toContain(keys[1].prefix);

    // Shown once: after a reload the page has it nowhere, and the browser kept it nowhere.
    await open(page, `${gw.url}/console/keys`);
    await page.waitForSelector('[data-figure=key-prefix]');
    expect(await page.locator('#new-key').count()).toBe(0);
    expect(await page.content()).not.toContain(fresh);
    expect(await keptByBrowser(page)).not.toContain(fresh);
    expect(await page.textContent('[data-figure=key-prefix]')).toContain(keys[1].prefix);
    dave.apiKey = fresh;
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('another account’s data is unreachable: its account page shows nothing of it, and every API call with its ids answers nothing of it', async () => {
    const { alice, bob } = holders;
    const { context, page } = await signedInPage(alice);
    const bobRows = await usageRows(bob.accountId);
    const bobBalance = (
      await gw.db.query('SELECT balance_nano::text AS b FROM accounts WHERE id = $1', [bob.accountId])
    ).rows[0].b as string;
    const secrets = [bob.accountId, bob.keyId, ...bobRows.map((r) => r.request_id)];

    await open(page, `${gw.url}/console/admin/accounts/${bob.accountId}`);
    await page.waitForSelector('#operator-only');
    const body = await page.innerText('main');
    for (const s of [bob.keyId, ...bobRows.map((r) => r.request_id)]) expect(body).not.toContain(s);
    expect(body).not.toContain(bobBalance);

    // Every API path the pages call, given bob's ids wherever an id could go.
    const answers = await page.evaluate(
      async ({ account, key, request }) => {
        const me = (await (await fetch('/console/api/me')).json()) as { csrf: string };
        const gets = [
          `/console/api/admin/accounts/${account}`,
          `/console/api/admin/accounts/${account}/requests`,
          `/console/api/admin/accounts/${account}/requests.csv`,
          `/console/api/admin/accounts/${account}/ledger`,
          `/console/api/admin/accounts/${account}/usage/daily`,
          `/console/api/admin/accounts?q=${account}`,
          `/console/api/admin/videos?account_id=${account}`,
          `/console/api/balance?account_id=${account}&key_id=${key}`,
          `/console/api/usage/daily?account_id=${account}`,
          `/console/api/requests?account_id=${account}&key_id=${key}`,
          `/console/api/requests?model=gpt-4o-mini&account=${account}`,
          `/console/api/requests.csv?account_id=${account}`,
          `/console/api/ledger?account_id=${account}`,
          `/console/api/models?account_id=${account}`,
          `/console/api/requests?cursor=${request}`,
        ];
        const out: { path: string; status: number; body: string }[] = [];
        for (const path of gets) {
          const r = await fetch(path);
          out.push({ path, status: r.status, body: await r.text() });
        }
        for (const path of [`/console/api/admin/keys/${key}/revoke`, `/console/api/admin/keys/${key}/limits`]) {
          const r = await fetch(path, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-csrf-token': me.csrf },
            body: JSON.stringify({ rpm: 1, tpm: 1 }),
          });
          out.push({ path, status: r.status, body: await r.text() });
        }
        return out;
      },
      { account: bob.accountId, key: bob.keyId, request: bobRows[0]!.request_id },
    );
    for (const a of answers) {
      if (a.path.startsWith('/console/api/admin/')) expect([a.path, a.status]).toEqual([a.path, 403]);
      for (const s of secrets) expect(a.body, `${a.path} (${a.status})`).not.toContain(s);
    }
    // Bob's key is untouched.
    await expect(chat(bob, 'gpt-4o-mini', 'still works [sim tokens=2]')).resolves.toBeDefined();
    await context.close();
  });

  it('a bad, an expired or an ended session gets the sign-in page', async () => {
    const { alice } = holders;
    // A cookie the gateway never issued.
    const bad = await recordingContext(browser);
    await bad.context.addCookies([
      {
        name: 'gw_console',
        value: 'A'.repeat(43),
        domain: '127.0.0.1',
        path: '/console',
        httpOnly: true,
        sameSite: 'Strict',
      },
    ]);
    const page = await bad.context.newPage();
    await page.goto(`${gw.url}/console/requests`);
    await page.waitForSelector('#signin-secret');
    expect(await page.locator('#request-rows').count()).toBe(0);
    await bad.context.close();

    // A session that expired while the page was open: the next page it asks for lands on sign-in.
    const { context, page: open1 } = await signedInPage(alice);
    await open1.waitForSelector('[data-figure=balance]');
    const ended = await gw.db.query(
      `UPDATE console_sessions SET expires_at = now() - interval '1 second'
        WHERE account_id = $1 AND ended_at IS NULL AND expires_at > now()`,
      [alice.accountId],
    );
    expect(ended.rowCount).toBeGreaterThanOrEqual(1);
    await open1.getByRole('link', { name: 'Requests' }).click();
    await open1.waitForSelector('#signin-secret');
    expect(await open1.textContent('.note')).toContain('Your session has ended');
    await open(open1, `${gw.url}/console`);
    await open1.waitForSelector('#signin-secret');

    // Sign out: the sign-in page, and the cookie the browser had no longer opens anything.
    await signIn(open1, alice.apiKey);
    await open1.waitForSelector('[data-figure=balance]');
    const cookie = (await context.cookies()).find((c) => c.name === 'gw_console')!.value;
    await open1.getByRole('button', { name: 'Sign out' }).click();
    await open1.waitForSelector('#signin-secret');
    expect(await open1.textContent('.note')).toContain('You are signed out');
    const me = await fetch(`${gw.url}/console/api/me`, { headers: { cookie: `gw_console=${cookie}` } });
    expect(me.status).toBe(401);
    await context.close();
  });

  it('a cold load fetches one script and one stylesheet, then asks for the session and the page’s data at the same time', async () => {
    const { alice } = holders;
    const { context, page } = await signedInPage(alice);
    const fresh = await context.newPage();
    const seen: string[] = [];
    fresh.on('requestfinished', (r) => seen.push(r.url()));
    // No waterfall: every API answer is held back until all three requests are in flight. A page
    // that waited for one answer before asking the next would never get there.
    const inFlight: string[] = [];
    let allAsked!: () => void;
    const asked = new Promise<void>((resolve) => (allAsked = resolve));
    await fresh.route(/\/console\/api\//, async (route) => {
      inFlight.push(route.request().url());
      if (inFlight.length === 3) allAsked();
      await asked;
      await route.continue();
    });
    const loading = fresh.goto(`${gw.url}/console/requests?model=gpt-4o-mini`);
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      asked,
      new Promise((_, reject) => {
        waited = setTimeout(
          () =>
            reject(new Error(`only ${inFlight.length} API request(s) asked before any answer: ${inFlight.join(', ')}`)),
          15_000,
        );
      }),
    ]).finally(() => clearTimeout(waited));
    await loading;
    await fresh.waitForSelector('#request-rows');
    await page.close();
    const paths = seen.map((u) => new URL(u).pathname);
    expect(paths.filter((p) => p.endsWith('.js'))).toHaveLength(1);
    expect(paths.filter((p) => p.endsWith('.css'))).toHaveLength(1);
    expect(inFlight.map((u) => new URL(u).pathname + new URL(u).search).sort()).toEqual([
      '/console/api/me',
      '/console/api/models',
      '/console/api/requests?model=gpt-4o-mini&limit=50',
    ]);
    await context.close();
  });

  it('serves the page with its security headers, and the script and stylesheet compressed, named by their content and cached for good', async () => {
    const page = await fetch(`${gw.url}/console/billing`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    const html = await page.text();
    // No inline script or style: only the two files, by name.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)/);
    expect(html).not.toMatch(/\sstyle=|<style/);
    const names = [...html.matchAll(/\/console\/assets\/([A-Za-z0-9_-]{16}\.(?:js|css))/g)].map((m) => m[1]!);
    expect(names.map((n) => n.split('.')[1]).sort()).toEqual(['css', 'js']);
    let gzipBytes = 0;
    for (const name of names) {
      const br = await fetch(`${gw.url}/console/assets/${name}`, { headers: { 'accept-encoding': 'br' } });
      expect(br.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(br.headers.get('content-encoding')).toBe('br');
      const identity = Buffer.from(await br.arrayBuffer()); // fetch decodes it
      expect(createHash('sha256').update(identity).digest('base64url').slice(0, 16)).toBe(name.split('.')[0]);
      const gz = await fetch(`${gw.url}/console/assets/${name}`, { headers: { 'accept-encoding': 'gzip' } });
      expect(gz.headers.get('content-encoding')).toBe('gzip');
      gzipBytes += zlib.gzipSync(identity, { level: 9 }).length;
    }
    // The whole front-end (Preact, uPlot and the pages, the organisations', the Providers page's
    // changes and the Budgets page included) stays small on the wire: docs/console.md (Size) says
    // what each step added.
    expect(gzipBytes).toBeLessThan(72_000);
    expect((await fetch(`${gw.url}/console/assets/nothere.js`)).status).toBe(404);
    const unknownApi = await fetch(`${gw.url}/console/api/no-such-thing`);
    expect(unknownApi.status).toBe(404);
    expect(await unknownApi.json()).toMatchObject({ error: { code: 'not_found' } });
  });

  it('every page, at desktop (1280×800) and phone (390×844) width, fits its width, passes axe (accessibility) and is written to test-results/screenshots', {
    timeout: 120_000,
  }, async () => {
    const { alice } = holders;
    for (const [label, viewport] of VIEWPORTS) {
      const { context, problems } = await recordingContext(browser, viewport);
      await withAxe(context);
      const findings: Record<string, AxeFinding[]> = {};
      const page = await context.newPage();
      await page.goto(`${gw.url}/console`);
      await page.waitForSelector('#signin-secret');
      await screenshot(page, `console-signin-${label}`);
      findings.signin = await axeFindings(page);
      await signIn(page, alice.apiKey);
      for (const [name, path] of [
        ['overview', '/console'],
        ['requests', '/console/requests'],
        ['billing', '/console/billing'],
        ['models', '/console/models'],
        ['keys', '/console/keys'],
      ] as const) {
        await open(page, `${gw.url}${path}`);
        if (name === 'overview') await page.waitForSelector('.chart canvas');
        expect([name, await sidewaysOverflow(page)]).toEqual([name, 0]);
        await screenshot(page, `console-${name}-${label}`);
        findings[name] = await axeFindings(page);
      }
      await page.getByRole('button', { name: 'Rotate key…' }).click();
      await page.getByRole('dialog').waitFor();
      await screenshot(page, `console-key-rotate-${label}`);
      findings['key-rotate'] = await axeFindings(page);
      await page.getByRole('button', { name: 'Cancel' }).click();
      // On a phone the pages fold behind Menu.
      const nav = page.locator('#main-nav');
      if (label === 'phone') {
        expect(await nav.isVisible()).toBe(false);
        await page.getByRole('button', { name: 'Menu' }).click();
        expect(await nav.isVisible()).toBe(true);
        await screenshot(page, 'console-menu-phone');
        findings.menu = await axeFindings(page);
      } else expect(await nav.isVisible()).toBe(true);
      // axe on every page and state above, as shown at this width: not one finding, of any impact.
      expect(Object.entries(findings).filter(([, found]) => found.length > 0)).toEqual([]);
      expect(problems).toEqual({ errors: [], cspViolations: [] });
      await context.close();
    }
  });
});
