// Budget alerts (docs/budgets.md#alerts): each threshold fires once per window, whatever the
// number of requests past it; to the organisation's webhook and the operator's, signed, retried
// until answered, with a delivery log; counted in a metric and put on the request's span. An
// organisation's webhook is https at a public address, never somewhere inside.
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { budgetSpec, newOrganisation, orgs, refused, type TestOrg } from '../support/organisations.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { callsOf, FakeTelegram } from '../support/fake-telegram.ts';
import { billing } from '../support/context.ts';
import { usdToNano } from '../../src/money/money.ts';

const OPERATOR_SECRET = 'operator-alert-secret-0123456789';
/** FLUX.2-pro at 1024 × 1024: held and charged exactly 31,457,280 nano-USD. */
const FLUX = 31_457_280n;

interface Received {
  path: string;
  body: Record<string, unknown>;
  raw: string;
  signature: string;
}

let receiver: http.Server;
let receiverUrl = '';
const received: Received[] = [];
/** Paths whose next N posts are answered 500. */
const failNext = new Map<string, number>();
let otlp: OtlpReceiver;
let telegram: FakeTelegram;
let hold: GatewayProcess;
let lease: GatewayProcess;

const sim = () => inject('simulatorUrl');
const gatewayEnv = (billing: 'hold' | 'lease') => ({
  BILLING_MODE: billing,
  BFL_API_KEY: UPSTREAM_KEY,
  BFL_BASE_URL: `${sim()}/bfl/v1`,
  IMAGE_POLL_INTERVAL_MS: '20',
  ALERT_WEBHOOK_ALLOW_PRIVATE: '1',
  ALERT_RETRY_BASE_MS: '200',
  BUDGET_ALERT_WEBHOOK_URL: `${receiverUrl}/operator`,
  BUDGET_ALERT_WEBHOOK_SECRET: OPERATOR_SECRET,
  LEASE_FLUSH_MS: '50',
  OTEL_EXPORTER_OTLP_ENDPOINT: otlp.httpEndpoint,
  OTEL_BSP_SCHEDULE_DELAY: '50',
  // The gateway runs the Telegram bot: owners and admins tied to Telegram are told too.
  TELEGRAM_BOT_TOKEN: '333:ALERTS',
  TELEGRAM_API_ROOT: telegram.url,
  PUBLIC_BASE_URL: 'https://gateway.example.com',
});

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => {
      raw += d;
    });
    req.on('end', () => {
      const path = req.url ?? '';
      const failing = failNext.get(path) ?? 0;
      if (failing > 0) {
        failNext.set(path, failing - 1);
        res.writeHead(500).end('not now');
        return;
      }
      received.push({
        path,
        raw,
        body: JSON.parse(raw) as Record<string, unknown>,
        signature: String(req.headers['x-gateway-signature'] ?? ''),
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  otlp = await startOtlpReceiver();
  telegram = await FakeTelegram.start();
  [hold, lease] = await Promise.all([
    extraGateway('alerts-hold', gatewayEnv('hold')),
    extraGateway('alerts-lease', gatewayEnv('lease')),
  ]);
});
afterAll(async () => {
  await Promise.all([hold?.stop(), lease?.stop()]);
  await otlp?.close();
  await telegram?.close();
  receiver?.close();
});

const flux = (g: GatewayProcess, apiKey: string) =>
  new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 }).images
    .generate({ model: 'FLUX.2-pro', prompt: 'a lighthouse', size: '1024x1024' })
    .then(
      () => 200,
      (e: { status?: number }) => e.status ?? 0,
    );

const spec = (over: Record<string, unknown>) => budgetSpec({ name: 'monthly', period: 'month', startDay: 1, ...over });

async function until<T>(what: string, f: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const mine = (org: TestOrg, path: string) =>
  received.filter((r) => r.path === path && r.body.organisation_id === org.id);

function verify(r: Received, secret: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(r.signature);
  if (!m) return false;
  return createHmac('sha256', secret).update(`${m[1]}.${r.raw}`).digest('hex') === m[2];
}

describe('budget alerts', () => {
  it('50, 80 and 100 % each fire once per window, to the organisation’s webhook and the operator’s, signed; a failed delivery is tried again and logged', {
    timeout: 60_000,
  }, async () => {
    const org = await newOrganisation('5', hold.rpcUrl);
    const admin = orgs(org.people.admin.apiKey, hold.rpcUrl);
    const hook = await admin.setAlertWebhook({ organisationId: org.id, url: `${receiverUrl}/org/${org.id}` });
    expect(hook.secret).toMatch(/^whsec_/);
    failNext.set(`/org/${org.id}`, 1); // its first delivery is answered 500
    const budget = await admin.setBudget({ organisationId: org.id, spec: spec({ amountUsd: '0.12582912' }) });
    // Four images fill the budget exactly (4 × 31,457,280); the fifth is refused; none fires twice.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await flux(hold, org.people.member.apiKey));
    expect(statuses).toEqual([200, 200, 200, 200, 402, 402]);
    await until(
      'three deliveries to each webhook',
      () => mine(org, `/org/${org.id}`).length >= 3 && mine(org, '/operator').length >= 3,
    );
    await new Promise((r) => setTimeout(r, 500)); // nothing more comes
    for (const [path, secret] of [
      [`/org/${org.id}`, hook.secret],
      ['/operator', OPERATOR_SECRET],
    ] as const) {
      const got = mine(org, path);
      expect(got.map((r) => r.body.threshold_percent).sort()).toEqual([100, 50, 80]);
      expect(got.every((r) => verify(r, secret))).toBe(true);
      expect(got.every((r) => !verify(r, secret === OPERATOR_SECRET ? hook.secret : OPERATOR_SECRET))).toBe(true);
    }
    const at100 = mine(org, '/operator').find((r) => r.body.threshold_percent === 100)!.body;
    expect(at100).toMatchObject({
      type: 'budget.threshold_reached',
      budget: { id: budget.budget!.budgetId, scope: 'organisation', name: 'monthly', mode: 'hard' },
      spent_nano_usd: String(4n * FLUX),
      amount_nano_usd: String(4n * FLUX),
      customer: null,
    });
    // Thresholds reached: 2 images (50 %) and 4 (100 %); 80 % with the fourth, at 100 % spend.
    const at50 = mine(org, '/operator').find((r) => r.body.threshold_percent === 50)!.body;
    expect(at50.spent_nano_usd).toBe(String(2n * FLUX));
    const log = await until('the retried delivery logged', async () => {
      const d = (await admin.listAlertDeliveries({ organisationId: org.id })).deliveries;
      return d.length === 6 && d.every((x) => x.state === 'delivered') ? d : undefined;
    });
    const retried = log.filter((d) => d.target === 'organisation' && d.attempts === 2);
    expect(retried).toHaveLength(1);
    expect(retried[0]!.lastStatus).toBe(204);
    expect(log.filter((d) => d.attempts === 1)).toHaveLength(5);
    // Counted, and on the request's span.
    const metrics = await (await fetch(`${hold.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/gateway_budget_alerts_total\{scope="organisation",threshold="100"\} [1-9]/);
    const events = await otlp.waitFor((s) =>
      s.events.some(
        (e) => e.name === 'gateway.budget_alert' && e.attributes['gateway.budget.id'] === budget.budget!.budgetId,
      ),
    );
    const thresholds = events.flatMap((s) =>
      s.events
        .filter((e) => e.name === 'gateway.budget_alert')
        .map((e) => Number(e.attributes['gateway.budget.threshold'])),
    );
    expect(thresholds.sort()).toEqual([100, 50, 80]);
  });

  it('with credit leases the batch that writes the charges fires them, once', { timeout: 60_000 }, async () => {
    const org = await newOrganisation('5', lease.rpcUrl);
    const admin = orgs(org.people.admin.apiKey, lease.rpcUrl);
    await admin.setBudget({
      organisationId: org.id,
      spec: spec({ scope: 'member', scopeId: org.people.member.memberId, amountUsd: '0.06291456', mode: 'soft' }),
    });
    for (let i = 0; i < 3; i++) expect(await flux(lease, org.people.member.apiKey)).toBe(200);
    await until('50, 80 and 100 % to the operator', () => mine(org, '/operator').length >= 3);
    await new Promise((r) => setTimeout(r, 500));
    expect(
      mine(org, '/operator')
        .map((r) => r.body.threshold_percent)
        .sort(),
    ).toEqual([100, 50, 80]);
  });

  it('owners and admins tied to Telegram are told in their chat by the bot the gateway runs', {
    timeout: 60_000,
  }, async () => {
    const userId = 600_000_000 + Math.floor(Math.random() * 1_000_000);
    const made = await orgs(undefined, hold.rpcUrl).createOrganisation({
      name: 'Telegram Acme',
      ownerTelegramUser: `telegram:${userId}`,
      createOwnerKey: true,
    });
    const orgId = made.organisation!.id;
    await billing().topUp({ accountId: orgId, amountNano: usdToNano('5'), externalId: `tg-${orgId}`, cause: 'test' });
    await orgs(undefined, hold.rpcUrl).setBudget({
      organisationId: orgId,
      spec: spec({ amountUsd: '0.06291456', name: 'images', thresholds: [100] }),
    });
    for (let i = 0; i < 2; i++) expect(await flux(hold, made.ownerApiKey)).toBe(200);
    const told = await until('the owner told', () =>
      callsOf(telegram.calls, 'sendMessage').find((c) => String(c.params.chat_id) === String(userId)),
    );
    expect(told.params.text).toBe(
      `Budget alert: Telegram Acme's organisation budget "images" reached 100%: $${'0.06291456'} of $${'0.06291456'} this month.`,
    );
  });

  it('an organisation’s webhook is https at a public address, set by owners and admins only', async () => {
    const org = await newOrganisation('1');
    const admin = org.people.admin.client;
    for (const url of [
      'http://example.com/hook',
      'https://localhost/hook',
      'https://127.0.0.1/hook',
      'https://10.1.2.3/hook',
      'https://169.254.169.254/latest',
      'https://[::1]/hook',
      'https://[fd00::1]/hook',
      'https://user:pw@example.com/hook',
      'not a url',
    ])
      expect(await refused(admin.setAlertWebhook({ organisationId: org.id, url })), url).toMatchObject({
        status: 400,
        code: 'invalid_value',
      });
    expect(
      await refused(org.people.member.client.setAlertWebhook({ organisationId: org.id, url: 'https://example.com/h' })),
    ).toMatchObject({ status: 403, code: 'not_allowed' });
    const set = await admin.setAlertWebhook({ organisationId: org.id, url: 'https://example.com/h' });
    expect(set).toMatchObject({ url: 'https://example.com/h', secret: expect.stringMatching(/^whsec_/) });
    expect(await admin.setAlertWebhook({ organisationId: org.id, url: '' })).toMatchObject({ url: '', secret: '' });
  });
});
