// The Providers page's actions in a real headless Chromium, as the operator uses them (a gateway
// of this file's own: ADMIN_TOKEN, CREDENTIALS_KEY, a database of its own, the shared simulator):
// add a provider, set and rotate its credential, edit a deployment (weight, limits, its own
// prices), drain, disable and enable one, end a cooldown by hand, each previewed then applied and
// compared with the CatalogueService RPCs and the book's history; the error rate's window and
// counts as ListDeployments gives them; a change previewed before another apply refused; bad input
// refused in the dialog; the credential nowhere in the page. Then the page and its dialogs at
// desktop (1280×800) and phone (390×844) width: screenshots, no sideways scroll, axe clean.
import { randomBytes } from 'node:crypto';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import {
  type ConsoleGateway,
  open,
  operatorPageOf,
  recordingContext,
  sidewaysOverflow,
  signIn,
  startConsoleGateway,
  tableRows,
  VIEWPORTS,
} from '../support/console.ts';
import { addProviders, addRoutedModel } from '../support/console-providers.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_TOKEN = 'console-provider-actions-ui-0123456789abcdef';
/** Typed into the credential dialog: the simulator refuses it, and no page may show it. */
const TYPED_SECRET = `sk-CONSOLE-TYPED-${randomBytes(12).toString('hex')}`;
const ROUTED = 'routed-chat';
const FAILOVER = 'failover-chat';

let gw: ConsoleGateway;
let browser: Browser;
let customerKey: string;

const chat = (model: string, text: string) =>
  gw.openai(customerKey).chat.completions.create({ model, messages: [{ role: 'user', content: text }] });

beforeAll(async () => {
  [gw, browser] = await Promise.all([
    startConsoleGateway('console_provider_actions_ui', {
      ADMIN_TOKEN,
      CREDENTIALS_KEY: randomBytes(32).toString('base64'),
      DEPLOYMENT_COOLDOWN_MS: '600000',
      DEPLOYMENT_MAX_COOLDOWN_MS: '600000',
    }),
    launchBrowser(),
  ]);
  const v1 = `${inject('simulatorUrl')}/v1`;
  await addProviders(gw, [
    { id: 'sim-east', baseUrl: v1, credential: { env: 'OPENAI_API_KEY' } },
    { id: 'sim-west', baseUrl: v1, credential: { secret: UPSTREAM_KEY } },
    { id: 'sim-down', baseUrl: `http://127.0.0.1:${await freePort()}/v1`, credential: { env: 'OPENAI_API_KEY' } },
  ]);
  await addRoutedModel(gw, ROUTED, [
    { id: 'east', provider: 'sim-east', weight: 3 },
    { id: 'west', provider: 'sim-west', weight: 1 },
  ]);
  await addRoutedModel(gw, FAILOVER, [
    { id: 'primary', provider: 'sim-down', priority: 0 },
    { id: 'standby', provider: 'sim-east', priority: 1 },
  ]);
  customerKey = (await gw.billing.createKey({ creditsNano: 10_000_000_000n, label: 'provider-actions-ui' })).apiKey;
  for (let i = 0; i < 6; i++) await chat(ROUTED, `routed ${i} [sim tokens=8]`);
  // The primary refuses every connection: three failures cool it down (for the whole file).
  for (let i = 0; i < 3; i++) await chat(FAILOVER, `failover ${i} [sim tokens=8]`);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
});

const operatorPage = (viewport?: { width: number; height: number }) =>
  operatorPageOf(browser, gw.url, ADMIN_TOKEN, '/console/admin/providers', viewport);

/** The open dialog. */
const dialogOf = (page: Page, title: string | RegExp): Locator => page.getByRole('dialog', { name: title });

/** Clicks Preview in the dialog and waits for what it changes; its rows' text. */
async function preview(dialog: Locator): Promise<string[]> {
  await dialog.getByRole('button', { name: 'Preview' }).click();
  return previewShown(dialog);
}

async function previewShown(dialog: Locator): Promise<string[]> {
  const shown = dialog.locator('[data-figure=book-preview]');
  await shown.waitFor();
  return shown
    .locator('tbody tr')
    .evaluateAll((rows) =>
      rows.map((r) => (r as unknown as { innerText: string }).innerText.replace(/\s+/g, ' ').trim()),
    );
}

/** Clicks Apply and waits for the dialog to close; the note the page shows then. */
async function apply(page: Page, dialog: Locator, card: string): Promise<string> {
  await dialog.getByRole('button', { name: 'Apply' }).click();
  await dialog.waitFor({ state: 'hidden' });
  return (await page.locator(`${card} .note-ok`).innerText()).trim();
}

const deploymentRow = (page: Page, key: string) => page.locator(`#deployment-rows tr[data-deployment="${key}"]`);
const cells = (row: Locator) =>
  row
    .locator('td')
    .evaluateAll((tds) =>
      tds.map((td) => (td as unknown as { innerText: string }).innerText.replace(/\s+/g, ' ').trim()),
    );
const deploymentOf = async (model: string, id: string) =>
  (await gw.catalogue.listDeployments({ modelId: model })).models[0]!.deployments.find((d) => d.id === id)!;
const lastVersion = async (kind: 'provider' | 'model') =>
  (await gw.catalogue.listBookHistory({ limit: 1, kinds: [kind] })).versions[0]!;

describe('the Providers page’s actions, for the operator, in a browser', () => {
  it('adds a provider: the preview says what it changes, Apply writes it into the book, its history and the page', async () => {
    const { context, page, problems } = await operatorPage();
    await page.click('#add-provider');
    const dialog = dialogOf(page, 'Add a provider');
    await dialog.getByLabel('Provider id').fill('sim-north');
    await dialog.getByLabel('Dialect').selectOption('openai');
    await dialog.getByLabel('Base URL').fill(`${inject('simulatorUrl')}/v1`);
    await dialog.getByLabel('Reason').fill('more capacity');
    expect(await preview(dialog)).toEqual([
      `add provider sim-north new openai provider at ${inject('simulatorUrl')}/v1`,
    ]);
    const version = (await gw.catalogue.exportBook({})).version;
    expect(await dialog.locator('[data-figure=book-preview]').innerText()).toContain(`book version ${version}`);
    // Nothing is written by the preview.
    expect((await gw.catalogue.listProviders({})).providers.map((p) => p.id)).not.toContain('sim-north');
    const note = await apply(page, dialog, '#providers');
    const now = (await gw.catalogue.exportBook({})).version;
    expect(note).toBe(`Provider sim-north added: 1 change applied; the book is version ${now}.`);
    await page.waitForSelector('#provider-rows tr[data-provider="sim-north"]');
    const row = (await tableRows(page, '#provider-rows')).find((r) => r[0] === 'sim-north')!;
    expect(row.slice(0, 5)).toEqual(['sim-north', 'openai', `${inject('simulatorUrl')}/v1`, 'none', '0']);
    expect(await lastVersion('provider')).toMatchObject({
      subject: 'sim-north',
      source: 'console:operator',
      reason: 'more capacity',
    });
    // The history card shows it, newest first.
    await page.waitForSelector('#book-history-rows tr[data-subject="sim-north"]');
    const history = await tableRows(page, '#book-history-rows');
    expect(history[0]!.slice(2)).toEqual(['sim-north', 'console:operator', 'more capacity']);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('sets and rotates a credential: typed once, sealed, its state shown, never the credential; the test call uses it', async () => {
    const { context, page, problems } = await operatorPage();
    const row = page.locator('#provider-rows tr[data-provider="sim-north"]');
    await row.getByRole('button', { name: 'Set credential…' }).click();
    let dialog = dialogOf(page, 'Set the credential of sim-north');
    await dialog.getByLabel('API key').fill(TYPED_SECRET);
    await dialog.getByRole('button', { name: 'Seal and use it' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await page.locator('#providers .note-ok').innerText()).toBe(
      'Credential of sim-north stored: sealed, version 1. It is never shown again.',
    );
    await expect
      .poll(async () => (await tableRows(page, '#provider-rows')).find((r) => r[0] === 'sim-north')![3])
      .toMatch(/^sealed v1 by console:operator, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    // The simulator refuses that key: the test call shows it was sent.
    await row.getByRole('button', { name: 'Test connection' }).click();
    await expect.poll(() => row.locator('[data-figure=test-result]').innerText()).toMatch(/^failed 401 Unauthorized/);
    // Rotated to the key the simulator takes; the dialog opens empty.
    await row.getByRole('button', { name: 'Rotate credential…' }).click();
    dialog = dialogOf(page, 'Rotate the credential of sim-north');
    expect(await dialog.getByLabel('API key').inputValue()).toBe('');
    expect(await dialog.getByLabel('API key').getAttribute('type')).toBe('password');
    await dialog.getByLabel('API key').fill(UPSTREAM_KEY);
    await dialog.getByRole('button', { name: 'Seal and use it' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const credential = (await gw.catalogue.listProviders({})).providers.find((p) => p.id === 'sim-north')!.credential!;
    expect(credential).toMatchObject({ form: 'sealed', version: 2n, source: 'console:operator', usable: true });
    await row.getByRole('button', { name: 'Test connection' }).click();
    await expect.poll(() => row.locator('[data-figure=test-result]').innerText()).toMatch(/^ok 200 OK/);
    const html = await page.content();
    for (const secret of [TYPED_SECRET, UPSTREAM_KEY]) expect(html.includes(secret), secret).toBe(false);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('edits a deployment: weight, a limit and its own price, previewed field by field, applied, and shown', async () => {
    const { context, page, problems } = await operatorPage();
    await deploymentRow(page, `${ROUTED}/west`).getByRole('button', { name: 'Edit…' }).click();
    const dialog = dialogOf(page, `Edit ${ROUTED}/west`);
    await dialog.getByLabel('Weight').fill('5');
    await dialog.getByLabel('Requests / min').fill('300');
    await dialog.getByLabel('input_per_mtok', { exact: true }).fill('0.07');
    expect(await preview(dialog)).toEqual([
      `change model ${ROUTED} deployments[west].limits: unset -> {"rpm":300}; deployments[west].prices: unset -> {"input_per_mtok":"0.07"}; deployments[west].weight: 1 -> 5`,
    ]);
    // A field changed after the preview is previewed again before Apply is offered.
    await dialog.getByLabel('Weight').fill('6');
    await dialog.getByText('The form changed since the preview').waitFor();
    expect(await preview(dialog)).toHaveLength(1);
    const note = await apply(page, dialog, '#deployments');
    expect(note).toMatch(new RegExp(`^${ROUTED}/west changed: 1 change applied; the book is version [0-9a-f]{16}\\.$`));
    expect(await deploymentOf(ROUTED, 'west')).toMatchObject({ weight: 6, rpm: 300, ownPrices: true });
    await expect.poll(async () => (await cells(deploymentRow(page, `${ROUTED}/west`)))[3]).toBe('6');
    const row = await cells(deploymentRow(page, `${ROUTED}/west`));
    expect(row[0]).toBe('west own prices');
    expect(row[8]).toMatch(/^\d+ \/ 300 rpm$/);
    expect(await lastVersion('model')).toMatchObject({
      subject: ROUTED,
      source: 'console:operator',
      reason: `console: weight, limits, prices of deployment ${ROUTED}/west`,
    });
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('refuses bad input in the dialog, and an apply after another change of the book since the preview', async () => {
    const { context, page, problems } = await operatorPage();
    await deploymentRow(page, `${ROUTED}/east`).getByRole('button', { name: 'Edit…' }).click();
    const dialog = dialogOf(page, `Edit ${ROUTED}/east`);
    await dialog.getByLabel('Weight').fill('lots');
    await dialog.getByRole('button', { name: 'Preview' }).click();
    await expect.poll(() => dialog.locator('.note-error').innerText()).toBe('Weight is a whole number.');
    await dialog.getByLabel('Weight').fill('2000000');
    await dialog.getByRole('button', { name: 'Preview' }).click();
    await expect.poll(() => dialog.locator('.note-error').innerText()).toContain('weight 2000000 is above 1000000');
    await dialog.getByLabel('Weight').fill('2');
    const seen = await preview(dialog);
    expect(seen).toEqual([`change model ${ROUTED} deployments[east].weight: 3 -> 2`]);
    // Another operator applies a change meanwhile: this preview no longer says what Apply would do.
    await gw.catalogue.setMarkup({ modelId: ROUTED, markup: '0.3', source: 'another operator', reason: 'meanwhile' });
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => dialog.locator('.note-error').innerText()).toMatch(/^The book changed since version/);
    expect((await deploymentOf(ROUTED, 'east')).weight).toBe(3);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    // The browser reports the two refusals it was answered, and nothing else went wrong.
    expect(problems).toEqual({
      errors: [
        'console: Failed to load resource: the server responded with a status of 400 (Bad Request)',
        'console: Failed to load resource: the server responded with a status of 409 (Conflict)',
      ],
      cspViolations: [],
    });
    await context.close();
  });

  it('drains, disables and enables a deployment, each previewed when its dialog opens', async () => {
    const { context, page, problems } = await operatorPage();
    const key = `${ROUTED}/east`;
    const step = async (button: string, title: string, detail: string, state: string) => {
      await deploymentRow(page, key).getByRole('button', { name: button }).click();
      const dialog = dialogOf(page, title);
      expect(await previewShown(dialog)).toEqual([`change model ${ROUTED} ${detail}`]);
      await apply(page, dialog, '#deployments');
      expect((await deploymentOf(ROUTED, 'east')).state).toBe(state);
      await expect.poll(() => deploymentRow(page, key).getAttribute('data-state')).toBe(state);
    };
    await step('Drain…', `Drain ${key}?`, 'deployments[east].state: unset -> "draining"', 'draining');
    expect((await cells(deploymentRow(page, key)))[5]).toContain('draining: tried after every other');
    // Drained: west serves.
    await chat(ROUTED, 'drained [sim tokens=4]');
    const served = await gw.db.query(
      'SELECT deployment FROM usage_records WHERE model = $1 ORDER BY created_at DESC LIMIT 1',
      [ROUTED],
    );
    expect(served.rows[0].deployment).toBe(`${ROUTED}/west`);
    await step('Disable…', `Disable ${key}?`, 'deployments[east].state: "draining" -> "disabled"', 'disabled');
    expect((await cells(deploymentRow(page, key)))[5]).toBe('not served here disabled in the book');
    await step('Enable…', `Enable ${key}?`, 'deployments[east].state: "disabled" -> unset', 'enabled');
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('says over what the error rate is and out of how many answers, and ends a cooldown by hand', async () => {
    const { context, page, problems } = await operatorPage();
    const key = `${FAILOVER}/primary`;
    const d = await deploymentOf(FAILOVER, 'primary');
    expect(d).toMatchObject({ admission: 'cooling', recentAnswers: 3, recentFailures: 3 });
    const since = new Date(Number(d.recentSince!.seconds) * 1000).toISOString().slice(11, 19);
    const row = await cells(deploymentRow(page, key));
    expect(row[6]).toBe(`100% 3 of 3 failed, since ${since} UTC`);
    expect(await page.locator('#deployment-rows thead th').nth(6).textContent()).toBe('Error rate (last 50 answers)');
    expect(await page.locator('#deployments-updated').innerText()).toContain(
      'among a deployment’s last 50 answers here, however old',
    );
    await deploymentRow(page, key).getByRole('button', { name: 'End cooldown…' }).click();
    const dialog = dialogOf(page, `End the cooldown of ${key}?`);
    await dialog.getByRole('button', { name: 'End the cooldown' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await page.locator('#deployments .note-ok').innerText()).toBe(
      `Cooldown of ${key} ended (it was cooling here); every instance was told.`,
    );
    expect((await deploymentOf(FAILOVER, 'primary')).admission).toBe('open');
    await expect.poll(() => deploymentRow(page, key).getAttribute('data-admission')).toBe('open');
    expect(await deploymentRow(page, key).getByRole('button', { name: 'End cooldown…' }).count()).toBe(0);
    expect(problems).toEqual({ errors: [], cspViolations: [] });
    await context.close();
  });

  it('a member who opens the Providers page sees “Not available”, and no action', { timeout: 60_000 }, async () => {
    const { context, problems } = await recordingContext(browser);
    const page = await context.newPage();
    await page.goto(`${gw.url}/console`);
    await signIn(page, customerKey);
    await open(page, `${gw.url}/console/admin/providers`);
    await page.waitForSelector('#operator-only');
    expect(await page.locator('#add-provider, #deployment-rows, dialog').count()).toBe(0);
    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });

  it('at desktop (1280×800) and phone (390×844) width the page and its dialogs fit, pass axe, and are written as screenshots', {
    timeout: 240_000,
  }, async () => {
    for (const [label, viewport] of VIEWPORTS) {
      const { context, page, problems } = await operatorPage(viewport);
      await withAxe(context);
      await open(page, `${gw.url}/console/admin/providers`);
      await page.waitForSelector('#deployment-rows');
      await page.waitForSelector('#book-history-rows');
      const found: Record<string, unknown[]> = {};
      const look = async (name: string) => {
        expect(await sidewaysOverflow(page), name).toBe(0);
        // A dialog as the window shows it; the page whole.
        await screenshot(page, `console-provider-actions-${name}-${label}`, { viewport: name !== 'page' });
        found[name] = await axeFindings(page);
      };
      await look('page');
      // The edit dialog with its preview.
      await deploymentRow(page, `${ROUTED}/west`).getByRole('button', { name: 'Edit…' }).click();
      let dialog = dialogOf(page, `Edit ${ROUTED}/west`);
      await dialog.locator('input[name=priority]').fill('1');
      await preview(dialog);
      await look('edit');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      // Drain, previewed as it opens.
      await deploymentRow(page, `${FAILOVER}/standby`).getByRole('button', { name: 'Drain…' }).click();
      dialog = dialogOf(page, `Drain ${FAILOVER}/standby?`);
      await previewShown(dialog);
      await look('drain');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      // A new provider's dialog with its preview, and the credential dialog.
      await page.click('#add-provider');
      dialog = dialogOf(page, 'Add a provider');
      await dialog.getByLabel('Provider id').fill(`sim-${label}`);
      await dialog.getByLabel('Dialect').selectOption('azure-openai');
      await dialog.getByLabel('Base URL').fill('https://example.openai.azure.com');
      await dialog.getByLabel('API version').fill('2024-10-21');
      await preview(dialog);
      await look('add-provider');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await page
        .locator('#provider-rows tr[data-provider="sim-west"]')
        .getByRole('button', { name: /credential…/ })
        .click();
      dialog = dialogOf(page, /the credential of sim-west/);
      await dialog.getByLabel('API key').fill('sk-not-sent');
      await look('credential');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      expect(Object.entries(found).filter(([, f]) => f.length > 0)).toEqual([]);
      expect(problems).toEqual({ errors: [], cspViolations: [] });
      await context.close();
    }
    // Nothing was applied by looking.
    expect((await deploymentOf(ROUTED, 'west')).priority).toBe(0);
    expect((await deploymentOf(FAILOVER, 'standby')).state).toBe('enabled');
  });
});
