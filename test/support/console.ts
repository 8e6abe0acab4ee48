// What the console's browser tests share: a gateway of the file's own on a database of its own
// (so sums over every usage row, such as the margin report, are this file's rows only), the
// simulator as its upstream; RPC clients for it; a browser context that records the page's
// errors and Content-Security-Policy violations; sign-in through the page's form; and reading
// the page's money back as nano-USD.
import path from 'node:path';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import OpenAI from 'openai';
import pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { inject } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { UPSTREAM_KEY } from './global-setup.ts';
import { createDatabase } from './postgres.ts';
import { uniqueMarker } from './context.ts';

export interface ConsoleGateway {
  gateway: GatewayProcess;
  url: string;
  db: pg.Pool;
  /** Its database, and every setting it started with: another instance of it starts on them. */
  databaseUrl: string;
  env: Record<string, string>;
  billing: ReturnType<typeof createClient<typeof BillingService>>;
  catalogue: ReturnType<typeof createClient<typeof CatalogueService>>;
  openai: (apiKey: string) => OpenAI;
  stop(): Promise<void>;
}

/** A gateway process on a new database, the simulator behind it; `env` adds settings (ADMIN_TOKEN, Temporal…). */
export async function startConsoleGateway(label: string, env: Record<string, string> = {}): Promise<ConsoleGateway> {
  const name = `${label}_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const dbUrl = new URL(admin);
  dbUrl.pathname = `/${name}`;
  const sim = inject('simulatorUrl');
  const settings = {
    DATABASE_URL: dbUrl.toString(),
    OPENAI_API_KEY: UPSTREAM_KEY,
    OPENAI_BASE_URL: `${sim}/v1`,
    ANTHROPIC_API_KEY: UPSTREAM_KEY,
    ANTHROPIC_BASE_URL: sim,
    ...env,
  };
  const gateway = await startGatewayProcess({ logFile: path.join(inject('workDir'), `${name}.log`), env: settings });
  const bearer: Interceptor = (next) => (req) => {
    if (env.ADMIN_TOKEN) req.header.set('authorization', `Bearer ${env.ADMIN_TOKEN}`);
    return next(req);
  };
  const transport = createGrpcTransport({ baseUrl: gateway.rpcUrl, interceptors: [bearer] });
  const db = new pg.Pool({ connectionString: dbUrl.toString(), max: 3 });
  return {
    gateway,
    url: gateway.httpUrl,
    db,
    databaseUrl: dbUrl.toString(),
    env: settings,
    billing: createClient(BillingService, transport),
    catalogue: createClient(CatalogueService, transport),
    openai: (apiKey) => new OpenAI({ apiKey, baseURL: `${gateway.httpUrl}/v1`, maxRetries: 0 }),
    async stop() {
      await gateway.stop();
      await db.end();
    },
  };
}

/** A second gateway instance of `gw`: its database and settings, a log of its own; stop() it when done. */
export async function anotherInstanceOf(gw: ConsoleGateway, label: string): Promise<GatewayProcess> {
  return startGatewayProcess({
    logFile: path.join(inject('workDir'), `${label}-${uniqueMarker().replace(/[^a-z0-9]/g, '')}.log`),
    env: gw.env,
  });
}

/** What went wrong in the pages of a context: script errors, console errors, CSP violations. */
export interface PageProblems {
  errors: string[];
  cspViolations: string[];
}

/** The widths every console page is checked at: a desktop and a phone. */
export const VIEWPORTS = [
  ['desktop', { width: 1280, height: 800 }],
  ['phone', { width: 390, height: 844 }],
] as const;

/**
 * A browser context at a viewport that records every page's problems. A 401 answer is not one:
 * the page asks /me at start, and that is how it learns there is no session.
 */
export async function recordingContext(
  browser: Browser,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; problems: PageProblems }> {
  const context = await browser.newContext({ viewport });
  const problems: PageProblems = { errors: [], cspViolations: [] };
  await context.exposeBinding('reportCspViolation', (_source, text: string) => {
    problems.cspViolations.push(text);
  });
  // Page-side code as text: the project's type-check has no DOM library.
  await context.addInitScript(`document.addEventListener('securitypolicyviolation', (e) =>
    window.reportCspViolation(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber))`);
  context.on('page', (page) => watch(page, problems));
  return { context, problems };
}

function watch(page: Page, problems: PageProblems): void {
  page.on('pageerror', (e) => problems.errors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (/status of 401/.test(m.text())) return;
    problems.errors.push(`console: ${m.text()}`);
  });
}

/**
 * Signs in through the form and waits for the signed-in frame: a member's own key (`member`, the
 * default: every key of an account is its owner's), a team's key (`holder`), or the admin token
 * (`operator`).
 */
export async function signIn(
  page: Page,
  secret: string,
  as: 'member' | 'holder' | 'operator' = 'member',
): Promise<void> {
  await page.waitForSelector('#signin-secret');
  if (as === 'operator') await page.getByRole('tab', { name: 'Operator' }).click();
  await page.fill('#signin-secret', secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector(`.who[data-role="${as}"]`, { state: 'attached' }); // folded behind Menu on a phone
}

/** A page of `baseUrl` at `path`, signed in as the operator with `adminToken`, loaded, in a context that records problems. */
export async function operatorPageOf(
  browser: Browser,
  baseUrl: string,
  adminToken: string,
  path: string,
  viewport?: { width: number; height: number },
): Promise<{ context: BrowserContext; page: Page; problems: PageProblems }> {
  const { context, problems } = await recordingContext(browser, viewport);
  const page = await context.newPage();
  await page.goto(`${baseUrl}${path}`);
  await signIn(page, adminToken, 'operator');
  await loaded(page);
  return { context, page, problems };
}

/** "$1,234.000123" or "−$0.02" (as the page writes money) -> nano-USD, exactly. */
export function nanoOf(text: string | null): bigint {
  const t = (text ?? '').trim();
  const m = /^(−|-)?\$([\d,]+(?:\.\d+)?)$/.exec(t);
  if (!m) throw new Error(`not money as the console writes it: ${JSON.stringify(text)}`);
  const n = usdToNano(m[2]!.replaceAll(',', ''));
  return m[1] ? -n : n;
}

/** "1,234" -> 1234n. */
export const countOf = (text: string | null): bigint => BigInt((text ?? '').trim().replaceAll(',', ''));

/** The text of each cell of the table's body rows, as shown (a cell's lines joined by a space; waits for the table). */
export async function tableRows(page: Page, selector: string): Promise<string[][]> {
  await page.waitForSelector(`${selector} tbody tr`);
  return page.$$eval(`${selector} tbody tr`, (rows) =>
    rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.innerText.replace(/\s+/g, ' ').trim())),
  );
}

/** Goes to a console path and waits until the page has shown its data (no "Loading…" left). */
export async function open(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.waitForSelector('.topbar, #signin-secret');
  await loaded(page);
}

/**
 * The few browser globals the page-side functions below use, typed here: the project's type-check
 * has no DOM library. (Page-side code is a function, not text: the console's CSP allows no eval,
 * and Playwright evaluates text that way.)
 */
interface PageGlobals {
  document: {
    querySelector(selector: string): unknown;
    querySelectorAll(selector: string): { length: number };
    cookie: string;
    documentElement: { scrollWidth: number; clientWidth: number };
  };
  localStorage: object;
  sessionStorage: object;
  location: { href: string; hash: string };
  navigator: { clipboard: { readText(): Promise<string> } };
}

/** Waits until the page shows no "Loading…". */
export async function loaded(page: Page): Promise<void> {
  await page.waitForFunction(() => !(globalThis as unknown as PageGlobals).document.querySelector('.loading, .boot'));
}

/** Waits until `selector` matches `n` elements. */
export async function countIs(page: Page, selector: string, n: number): Promise<void> {
  await page.waitForFunction(
    ([sel, count]) => (globalThis as unknown as PageGlobals).document.querySelectorAll(sel).length === count,
    [selector, n] as const,
  );
}

/** What the page could have kept: its storage, its readable cookies and its address. */
export async function keptByBrowser(page: Page): Promise<string> {
  return page.evaluate(() => {
    const w = globalThis as unknown as PageGlobals;
    return JSON.stringify({
      local: { ...w.localStorage },
      session: { ...w.sessionStorage },
      cookie: w.document.cookie,
      url: w.location.href,
    });
  });
}

/** The page's address fragment. */
export const hashOf = (page: Page): Promise<string> =>
  page.evaluate(() => (globalThis as unknown as PageGlobals).location.hash);

/** What the page's clipboard holds. */
export const clipboardOf = (page: Page): Promise<string> =>
  page.evaluate(() => (globalThis as unknown as PageGlobals).navigator.clipboard.readText());

/** The page lays out within its width: nothing makes the whole page scroll sideways. */
export async function sidewaysOverflow(page: Page): Promise<number> {
  return page.evaluate(() => {
    const root = (globalThis as unknown as PageGlobals).document.documentElement;
    return root.scrollWidth - root.clientWidth;
  });
}
