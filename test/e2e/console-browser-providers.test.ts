// The console's Providers page in a real headless Chromium, as the operator uses it: a gateway of
// this file's own (ADMIN_TOKEN, CREDENTIALS_KEY, a database of its own) whose book has four
// providers of its own in front of the simulator (a credential named by a variable, one sealed,
// one sealed with a key the simulator refuses, one on a port nobody listens on) and two models
// with two deployments each (weighted, with limits; a failover whose first deployment is down);
// customers' requests through the official openai SDK; then the page's providers and
// deployments compared with the CatalogueService RPCs, the live state refreshed without a reload,
// a test call made from the page, the margin by deployment compared with the usage rows, the
// rendered page searched for the credentials, and screenshots at desktop and phone width checked
// by axe.
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import {
  type ConsoleGateway,
  countOf,
  nanoOf,
  open,
  operatorPageOf,
  sidewaysOverflow,
  startConsoleGateway,
  tableRows,
  VIEWPORTS,
} from '../support/console.ts';
import { addProviders, addRoutedModel } from '../support/console-providers.ts';
import { awayFromMinuteEdge } from '../support/context.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_TOKEN = 'console-providers-ui-token-0123456789abcdef';
/** Sealed for sim-spare: the simulator refuses it (401), and no page may show it. */
const SPARE_SECRET = `sk-CONSOLE-UI-${randomBytes(12).toString('hex')}`;
const ROUTED = 'routed-chat';
const FAILOVER = 'failover-chat';
const WEST_PRICES = { input_per_mtok: '0.075', output_per_mtok: '0.30' };

let gw: ConsoleGateway;
let browser: Browser;
let holderKey: string;

const chat = (model: string, text: string) =>
  gw.openai(holderKey).chat.completions.create({ model, messages: [{ role: 'user', content: text }] });

beforeAll(async () => {
  [gw, browser] = await Promise.all([
    startConsoleGateway('console_providers_ui', {
      ADMIN_TOKEN,
      CREDENTIALS_KEY: randomBytes(32).toString('base64'),
      // A deployment that fails stays cooling for the whole file, so the page shows it so.
      DEPLOYMENT_COOLDOWN_MS: '600000',
      DEPLOYMENT_MAX_COOLDOWN_MS: '600000',
    }),
    launchBrowser(),
  ]);
  const v1 = `${inject('simulatorUrl')}/v1`;
  await addProviders(gw, [
    // OPENAI_API_KEY of this gateway holds the simulator's key.
    { id: 'sim-east', baseUrl: v1, credential: { env: 'OPENAI_API_KEY' } },
    { id: 'sim-west', baseUrl: v1, credential: { secret: UPSTREAM_KEY } },
    { id: 'sim-spare', baseUrl: v1, credential: { secret: SPARE_SECRET } },
    { id: 'sim-down', baseUrl: `http://127.0.0.1:${await freePort()}/v1`, credential: { env: 'OPENAI_API_KEY' } },
  ]);
  await addRoutedModel(gw, ROUTED, [
    { id: 'east', provider: 'sim-east', weight: 3, limits: { rpm: 500, tpm: 200_000 } },
    // Cheaper there: its provider cost is its own, what customers pay is the model's.
    { id: 'west', provider: 'sim-west', upstreamId: 'gpt-4o-mini', weight: 1, prices: WEST_PRICES },
  ]);
  await addRoutedModel(gw, FAILOVER, [
    { id: 'primary', provider: 'sim-down', priority: 0 },
    { id: 'standby', provider: 'sim-east', priority: 1, limits: { rpm: 100 } },
  ]);
  // Customers pay 25% over the provider's prices: a margin to report.
  await gw.catalogue.setMarkup({ markup: '0.25', source: 'console-test', reason: 'a margin to see' });
  holderKey = (await gw.billing.createKey({ creditsNano: 10_000_000_000n, label: 'providers-ui' })).apiKey;
  for (let i = 0; i < 8; i++) await chat(ROUTED, `routed ${i} [sim tokens=${10 + i}]`);
  // The primary refuses the connection: three failures cool it down, the standby answers each.
  for (let i = 0; i < 4; i++) await chat(FAILOVER, `failover ${i} [sim tokens=12]`);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

const operatorPage = (path: string, viewport?: { width: number; height: number }) =>
  operatorPageOf(browser, gw.url, ADMIN_TOKEN, path, viewport);

/** The state the page writes for a deployment, from the RPC's answer. */
function expectedState(d: { served: boolean; admission: string; coolUntil?: { seconds: bigint } }): string {
  if (!d.served) return 'not served here';
  if (d.admission === 'cooling')
    return `cooling until ${new Date(Number(d.coolUntil!.seconds) * 1000).toISOString().slice(11, 19)} UTC`;
  return d.admission === 'trial' ? 'trial' : 'healthy';
}

/** A deployment's row cells: deployment, provider, upstream, weight, priority, state, error rate, p50, limits. */
const deploymentCells = (page: Page, key: string) =>
  page
    .locator(`#deployment-rows tr[data-deployment="${key}"] td`)
    .evaluateAll((tds) =>
      tds.map((td) => (td as unknown as { innerText: string }).innerText.replace(/\s+/g, ' ').trim()),
    );

describe('the Providers page, for the operator, in a browser', () => {
  it('lists every provider with its credential’s form and state and its models, as ListProviders has them', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/providers');
    const rows = await tableRows(page, '#provider-rows');
    const rpc = (await gw.catalogue.listProviders({})).providers;
    expect(rows.map((r) => r[0])).toEqual(rpc.map((p) => p.id));
    const credentialOf = (id: string) => rows.find((r) => r[0] === id)![3]!;
    expect(credentialOf('sim-east')).toMatch(
      /^env OPENAI_API_KEY v1 by console-test, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/,
    );
    expect(credentialOf('sim-west')).toMatch(/^sealed v1 by console-test/);
    expect(credentialOf('sim-spare')).toMatch(/^sealed v1/);
    expect(credentialOf('openai')).toBe('setting this instance’s API key setting');
    expect(credentialOf('cohere')).toBe('none');
    for (const p of rpc) {
      const [, dialect, url, , models] = rows.find((r) => r[0] === p.id)!;
      expect(dialect).toBe(p.dialect);
      expect(url!.startsWith(p.servedBaseUrl || p.baseUrl)).toBe(true);
      expect(models).toBe(
        p.servedModels === p.models ? String(p.models) : `${p.servedModels} of ${p.models} served here`,
      );
    }
    // The shipped openai provider is called at the simulator here (OPENAI_BASE_URL): the book's URL is shown too.
    expect(rows.find((r) => r[0] === 'openai')![2]).toContain('book: https://api.openai.com/v1');
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('shows each model with several deployments: its routing, and each deployment’s weight, priority, state, error rate, latency and limit use, as ListDeployments has them', async () => {
    // Limit use is counted per clock minute: the page and the RPC are read within one minute,
    // one that has had a request to the standby.
    await awayFromMinuteEdge(20);
    await chat(FAILOVER, 'this minute [sim tokens=12]');
    const { context, page, problems } = await operatorPage('/console/admin/providers');
    await page.waitForSelector('#deployment-rows');
    const shown = await page.$$eval('#deployment-rows tbody', (tbs) =>
      tbs.map((t) => (t as unknown as { dataset: { model: string } }).dataset.model),
    );
    expect(shown).toEqual([FAILOVER, ROUTED]);
    for (const model of [ROUTED, FAILOVER]) {
      const m = (await gw.catalogue.listDeployments({ modelId: model })).models[0]!;
      expect(await page.textContent(`#deployment-rows tbody[data-model="${model}"] [data-figure=strategy]`)).toBe(
        m.strategy,
      );
      for (const d of m.deployments) {
        const [id, provider, upstream, weight, priority, state, errorRate, p50, limits] = await deploymentCells(
          page,
          d.key,
        );
        expect([id, provider, upstream, weight, priority]).toEqual([
          d.ownPrices ? `${d.id} own prices` : d.id,
          d.provider,
          d.upstreamId,
          String(d.weight),
          String(d.priority),
        ]);
        expect(state!.startsWith(expectedState(d)), `${d.key}: ${state}`).toBe(true);
        // The rate, then what it counts: how many of its last answers here failed, since when.
        const since = d.recentSince ? new Date(Number(d.recentSince.seconds) * 1000).toISOString().slice(11, 19) : '';
        expect(errorRate).toBe(
          d.errorRate === undefined
            ? '—'
            : `${Math.round(d.errorRate * 1000) / 10}% ${d.recentFailures} of ${d.recentAnswers} failed, since ${since} UTC`,
        );
        expect(p50).toBe(d.p50LatencyMs === undefined ? '—' : `${Number(d.p50LatencyMs).toLocaleString('en-US')} ms`);
        const rpm = d.rpm > 0 ? `${d.windowRequests} / ${d.rpm} rpm` : '';
        const tpm =
          d.tpm > 0n
            ? `${Number(d.windowTokens).toLocaleString('en-US')} / ${Number(d.tpm).toLocaleString('en-US')} tpm`
            : '';
        expect(limits).toBe([rpm, tpm].filter(Boolean).join(' ') || 'no limits');
      }
    }
    // The failover's primary refused every connection: cooling, all its calls failed; the standby answered.
    const primary = await deploymentCells(page, `${FAILOVER}/primary`);
    expect(primary[5]).toMatch(/^cooling until \d\d:\d\d:\d\d UTC 3 failures in a row 1 cooldown$/);
    expect(primary[6]).toMatch(/^100% 3 of 3 failed, since \d\d:\d\d:\d\d UTC$/);
    const standby = await deploymentCells(page, `${FAILOVER}/standby`);
    expect(standby[5]).toBe('healthy');
    expect(standby[8]).toMatch(/^[1-5] \/ 100 rpm$/);
    expect((await deploymentCells(page, `${ROUTED}/west`))[0]).toBe('west own prices');
    // Models on one deployment are behind "All models".
    expect(await page.locator('#deployment-rows tbody[data-model="gpt-4o-mini"]').count()).toBe(0);
    await page.getByRole('button', { name: 'All models' }).click();
    await page.waitForSelector(
      '#deployment-rows tbody[data-model="gpt-4o-mini"] tr[data-deployment="gpt-4o-mini/openai"]',
    );
    const all = (await gw.catalogue.listDeployments({})).models.map((m) => m.modelId);
    expect(await page.locator('#deployment-rows tbody').count()).toBe(all.length);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('asks for the live state again every few seconds while open: a new request shows without a reload', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/providers');
    const asked = { providers: 0, deployments: 0 };
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if (path === '/console/api/admin/providers') asked.providers++;
      if (path === '/console/api/admin/deployments') asked.deployments++;
    });
    const cell = `#deployment-rows tr[data-deployment="${FAILOVER}/standby"] [data-figure=limits]`;
    await page.waitForSelector(cell);
    const before = await page.textContent('#deployments-updated');
    await chat(FAILOVER, 'one more [sim tokens=5]');
    const want = async () => {
      const d = (await gw.catalogue.listDeployments({ modelId: FAILOVER })).models[0]!.deployments[1]!;
      return `${d.windowRequests} / 100 rpm`;
    };
    await expect
      .poll(async () => [await page.textContent(cell), await want()], { timeout: 15_000, interval: 250 })
      .toSatisfy(([shown, rpc]) => shown === rpc);
    await expect.poll(() => page.textContent('#deployments-updated'), { timeout: 15_000 }).not.toBe(before);
    expect(asked.providers).toBe(0);
    expect(asked.deployments).toBeGreaterThanOrEqual(1);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('Test connection makes the call from the page and shows its result in the provider’s row; no credential is anywhere in the page', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/providers');
    const result = async (id: string) => {
      const row = page.locator(`#provider-rows tr[data-provider="${id}"]`);
      await row.getByRole('button', { name: 'Test connection' }).click();
      const shown = row.locator('[data-figure=test-result]');
      await shown.waitFor();
      return { ok: await shown.getAttribute('data-ok'), text: (await shown.innerText()).replace(/\s+/g, ' ').trim() };
    };
    const sim = inject('simulatorUrl');
    expect(await result('sim-east')).toEqual({
      ok: 'true',
      text: expect.stringMatching(new RegExp(`^ok 200 OK · \\d+ ms GET ${sim}/v1/models$`)),
    });
    expect((await result('sim-west')).text).toMatch(/^ok 200 OK/);
    expect(await result('sim-spare')).toEqual({
      ok: 'false',
      text: expect.stringMatching(/^failed 401 Unauthorized · \d+ ms/),
    });
    expect((await result('sim-down')).text).toMatch(/^failed the call failed: ECONNREFUSED/);
    expect((await result('cohere')).text).toMatch(/^failed provider cohere has no credential on this instance/);
    const html = await page.content();
    expect(html).toContain('sim-spare');
    for (const secret of [UPSTREAM_KEY, SPARE_SECRET, ADMIN_TOKEN]) expect(html.includes(secret), secret).toBe(false);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('the margin page’s table by deployment is the usage rows’ sums by the deployment that answered', async () => {
    const { context, page, problems } = await operatorPage('/console/admin/margin');
    const want = (
      await gw.db.query(
        `SELECT COALESCE(deployment, model) AS key, count(*)::text AS requests, sum(cost_nano)::text AS revenue,
                sum(provider_cost_nano)::text AS cost
           FROM usage_records WHERE created_at > now() - interval '29 days' GROUP BY 1`,
      )
    ).rows;
    const rows = await tableRows(page, '#margin-by-deployment');
    expect(new Set(rows.map((r) => r[0]))).toEqual(new Set(want.map((w) => w.key)));
    expect(rows.map((r) => r[0])).toEqual(expect.arrayContaining([`${ROUTED}/east`, `${FAILOVER}/standby`]));
    for (const w of want) {
      const [, requests, revenue, cost, margin] = rows.find((r) => r[0] === w.key)!;
      expect([countOf(requests!), nanoOf(revenue!), nanoOf(cost!), nanoOf(margin!)]).toEqual([
        BigInt(w.requests),
        BigInt(w.revenue),
        BigInt(w.cost),
        BigInt(w.revenue) - BigInt(w.cost),
      ]);
    }
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('at desktop (1280×800) and phone (390×844) width the page fits its width (its tables scroll inside their cards), passes axe and is written to test-results/screenshots', {
    timeout: 120_000,
  }, async () => {
    for (const [label, viewport] of VIEWPORTS) {
      const { context, page, problems } = await operatorPage('/console/admin/providers', viewport);
      await withAxe(context);
      await open(page, `${gw.url}/console/admin/providers`);
      await page.waitForSelector('#deployment-rows');
      for (const id of ['sim-east', 'sim-down']) {
        const row = page.locator(`#provider-rows tr[data-provider="${id}"]`);
        await row.getByRole('button', { name: 'Test connection' }).click();
        await row.locator('[data-figure=test-result]').waitFor();
      }
      expect(await sidewaysOverflow(page)).toBe(0);
      // The deployments table is wider than a phone: it scrolls inside its card.
      if (label === 'phone') {
        const wrap = await page.$eval('#deployment-rows', (t) => {
          const w = (t as unknown as { parentElement: { scrollWidth: number; clientWidth: number } }).parentElement;
          return { scroll: w.scrollWidth, client: w.clientWidth };
        });
        expect(wrap.scroll).toBeGreaterThan(wrap.client);
      }
      await screenshot(page, `console-providers-live-${label}`);
      const found = { providers: await axeFindings(page) };
      await open(page, `${gw.url}/console/admin/margin`);
      await page.waitForSelector('#margin-by-deployment');
      expect(await sidewaysOverflow(page)).toBe(0);
      await screenshot(page, `console-margin-deployments-${label}`);
      Object.assign(found, { margin: await axeFindings(page) });
      expect(Object.entries(found).filter(([, f]) => f.length > 0)).toEqual([]);
      expect(problems).toEqual({ errors: [], cspViolations: [] });
      await context.close();
    }
  });
});
