// Money an account must give up while a credit lease holds it: two gateway instances on one
// database, one (A) serving the customer's requests and holding a lease on their account, the
// other (B) serving the Telegram bot and BillingService. A lease is the gateway's reservation,
// not the customer's spending: a refund through B takes back what the customer has not spent,
// and a request through B is not refused for credit that A's lease holds.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { formatUsd } from '../../src/money/format.ts';
import { paymentExternalId } from '../../src/bot/stars.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import { FakeTelegram, callsOf, textsOf, tgUser, type ApiCall, type TgUser } from '../support/fake-telegram.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { balanceOf, checkInvariants, db, uniqueMarker } from '../support/context.ts';

const STAR_USD = '0.01';
const base = 200_000 + Math.floor(Math.random() * 1_000_000) * 10;
const admin = tgUser(base + 9, 'Operator');

let a: GatewayProcess;
let b: GatewayProcess;
let fake: FakeTelegram;
let bot: RunningBot;

async function leaseGateway(label: string): Promise<GatewayProcess> {
  const sim = inject('simulatorUrl');
  return startGatewayProcess({
    logFile: path.join(inject('workDir'), `${label}-${uniqueMarker()}.log`),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${sim}/v1`,
      BILLING_MODE: 'lease',
      LEASE_SLICE_USD: '1',
      LEASE_FLUSH_MS: '50',
      // Long enough that A's lease is still held when the refund comes.
      LEASE_IDLE_MS: '60000',
      RATE_LIMIT_RPM: '0',
      RATE_LIMIT_TPM: '0',
      // The lease of a killed instance is released soon after it expires.
      HOLD_SWEEP_INTERVAL_MS: '200',
    },
  });
}

beforeAll(async () => {
  [a, b] = await Promise.all([leaseGateway('refund-a'), leaseGateway('refund-b')]);
  fake = await FakeTelegram.start();
  const config = loadBotConfig({
    TELEGRAM_BOT_TOKEN: '123456:TEST-token',
    TELEGRAM_API_ROOT: fake.url,
    TELEGRAM_STAR_USD: STAR_USD,
    TELEGRAM_TOPUP_MIN_STARS: '10',
    TELEGRAM_TOPUP_MAX_STARS: '2500',
    TELEGRAM_WELCOME_CREDIT_USD: '0',
    TELEGRAM_ADMIN_IDS: String(admin.id),
    PUBLIC_BASE_URL: a.httpUrl,
  })!;
  // The bot is B's client: the refund is served by the instance that holds no lease.
  bot = await startBot({ config, transport: networkTransport(b.rpcUrl, undefined), log: createLogger('silent') });
});

afterAll(async () => {
  await bot?.stop();
  await fake?.close();
  await Promise.all([a, b].filter(Boolean).map((g) => g.stop()));
});

const billingOf = (g: GatewayProcess) => createClient(BillingService, createGrpcTransport({ baseUrl: g.rpcUrl }));
const clientOf = (g: GatewayProcess, apiKey: string) =>
  new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
const chatOn = (
  g: GatewayProcess,
  apiKey: string,
  content = 'spend a little [sim tokens=5]',
  extra: { max_tokens?: number } = {},
) =>
  clientOf(g, apiKey)
    .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], ...extra })
    .withResponse();
const say = (user: TgUser, text: string) => fake.deliver(fake.text(user, text));
const leasesOn = async (accountId: string) =>
  Number(
    (
      await db().query(
        `SELECT count(*) AS n FROM holds WHERE account_id = $1 AND status = 'active' AND starts_with(request_id, 'lease_')`,
        [accountId],
      )
    ).rows[0].n,
  );
const refundRows = async (externalId: string) =>
  (
    await db().query(`SELECT amount_nano::text AS amount FROM ledger WHERE kind = 'refund' AND external_id = $1`, [
      externalId,
    ])
  ).rows as { amount: string }[];

async function until(what: string, f: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A bot user with a key, paid `stars` Stars (no welcome credit): their key, account and the payment's charge id. */
async function paidUser(
  n: number,
  stars: number,
): Promise<{ user: TgUser; apiKey: string; accountId: string; charge: string }> {
  const user = tgUser(base + n, `Payer${n}`);
  const created = await say(user, '/newkey');
  const apiKey = /<code>(prx-[0-9A-Za-z_-]+)<\/code>/.exec(textsOf(created))![1]!;
  const [key] = (await billingOf(b).listKeys({ owner: `telegram:${user.id}` })).keys;
  const invoice = callsOf(await say(user, `/topup ${stars}`), 'sendInvoice')[0] as ApiCall;
  const charge = `chg-${n}-${base}`;
  await fake.deliver(fake.preCheckout(user, { total_amount: stars, invoice_payload: invoice.params.payload }));
  await fake.deliver(
    fake.successfulPayment(user, { total_amount: stars, invoice_payload: invoice.params.payload, chargeId: charge }),
  );
  expect((await balanceOf(key!.accountId)).balance).toBe(usdToNano(STAR_USD) * BigInt(stars));
  return { user, apiKey, accountId: key!.accountId, charge };
}

/** The customer spends a little through A, which then holds a lease on the account; what they have left. */
async function spendThroughA(apiKey: string, accountId: string): Promise<bigint> {
  const { response } = await chatOn(a, apiKey);
  const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
  expect(cost).toBeGreaterThan(0n);
  expect(await leasesOn(accountId)).toBe(1);
  // A writes the charge within its flush interval; the balance then shows it.
  await until(
    'the charge written',
    async () =>
      (await db().query(`SELECT 1 FROM usage_records WHERE account_id = $1 AND status = 'ok'`, [accountId])).rows
        .length === 1,
  );
  const { balance, held } = await balanceOf(accountId);
  // The lease holds (nearly) everything: before the fix a refund read this as spent.
  expect(held).toBe(balance);
  return balance;
}

describe('a refund while another instance holds a credit lease on the account', () => {
  it("the operator's /refund takes back all of the payment the customer has not spent", async () => {
    const { user, apiKey, accountId, charge } = await paidUser(1, 100);
    const paid = usdToNano(STAR_USD) * 100n;
    const left = await spendThroughA(apiKey, accountId);

    // Everything the payment bought but the little spent: the customer keeps no credit they did not pay for.
    const done = await say(admin, `/refund ${user.id} ${charge}`);
    expect(callsOf(done, 'refundStarPayment')).toHaveLength(1);
    expect(textsOf(done)).toContain(`Took back ${formatUsd(left)} of the ${formatUsd(paid)} credited`);
    expect(await refundRows(paymentExternalId(charge))).toEqual([{ amount: (-left).toString() }]);
    expect((await balanceOf(accountId)).balance).toBe(0n);
    // A gave its lease back (nothing in flight), so nothing is held for the account any more.
    await until('the lease returned', async () => (await leasesOn(accountId)) === 0);
    await checkInvariants(accountId);
  });

  it("Telegram's own refunded_payment takes back all of the payment the customer has not spent, once", async () => {
    const { user, apiKey, accountId, charge } = await paidUser(2, 100);
    const paid = usdToNano(STAR_USD) * 100n;
    const left = await spendThroughA(apiKey, accountId);

    const mark = fake.calls.length;
    fake.refunded(user, { chargeId: charge });
    await fake.settled();
    expect(await refundRows(paymentExternalId(charge))).toEqual([{ amount: (-left).toString() }]);
    expect(textsOf(fake.calls.slice(mark))).toContain(
      `${formatUsd(left)} of credit taken back of the ${formatUsd(paid)} it bought`,
    );
    expect((await balanceOf(accountId)).balance).toBe(0n);
    fake.refunded(user, { chargeId: charge });
    await fake.settled();
    expect(await refundRows(paymentExternalId(charge))).toHaveLength(1);
    await checkInvariants(accountId);
  });

  it('RefundTopUp over RPC leaves what a request in flight holds and takes the rest', async () => {
    const created = await billingOf(b).createKey({ creditsNano: 0n, label: 'refund under lease', cause: 'test' });
    const externalId = `refund-lease-${uniqueMarker()}`;
    const topup = usdToNano('1');
    await billingOf(b).topUp({
      key: { ref: { case: 'keyId', value: created.keyId } },
      amountNano: topup,
      externalId,
      cause: 'test',
    });
    const left = await spendThroughA(created.apiKey, created.accountId);

    // A request in flight on A's lease while the refund is made: its reservation stays held.
    const slow = chatOn(a, created.apiKey, 'slow [sim tokens=7 delay=1500]', { max_tokens: 2000 });
    await until(
      'the slow request reserved on the lease',
      async () =>
        (await db().query(`SELECT 1 FROM holds WHERE account_id = $1 AND status = 'active'`, [created.accountId])).rows
          .length > 0,
    );
    await new Promise((r) => setTimeout(r, 200));
    const r = await billingOf(b).refundTopUp({ externalId, cause: 'test-refund' });
    const atRefund = await balanceOf(created.accountId);
    expect(r.applied).toBe(true);
    // Everything but the slow request's reservation (gpt-4o-mini, 2,000 output tokens at most: well under $0.01).
    expect(r.refundedNano).toBeGreaterThan(left - usdToNano('0.01'));
    expect(r.refundedNano).toBeLessThan(left);
    expect(r.balanceNano).toBe(left - r.refundedNano);
    expect(atRefund.held).toBe(atRefund.balance);

    const { response } = await slow;
    const slowCost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
    expect(slowCost).toBeGreaterThan(0n);
    await until('the lease returned', async () => (await leasesOn(created.accountId)) === 0);
    expect(await balanceOf(created.accountId)).toEqual({ balance: left - r.refundedNano - slowCost, held: 0n });
    await checkInvariants(created.accountId);
  });

  it('a request through B is served from credit that A had leased, not refused with 402', async () => {
    const created = await billingOf(b).createKey({
      creditsNano: usdToNano('0.05'),
      label: 'two instances, small balance',
      cause: 'test',
    });
    const left = await spendThroughA(created.apiKey, created.accountId);
    const { data, response } = await chatOn(b, created.apiKey, 'through B [sim tokens=4]');
    expect(data.choices[0]!.message.content).toBe('w1 w2 w3 w4');
    const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
    expect(cost).toBeGreaterThan(0n);
    await until('both charges written and the leases settled', async () => {
      const { balance, held } = await balanceOf(created.accountId);
      return balance === left - cost && held <= balance;
    });
    await checkInvariants(created.accountId);
  });

  it('a refund fails, recording nothing, while a lease is held by an instance that does not answer; asked again later, it applies', async () => {
    const c = await leaseGateway('refund-c');
    const created = await billingOf(b).createKey({ creditsNano: 0n, label: 'lease of a dead instance', cause: 'test' });
    const externalId = `refund-dead-${uniqueMarker()}`;
    await billingOf(b).topUp({
      key: { ref: { case: 'keyId', value: created.keyId } },
      amountNano: usdToNano('1'),
      externalId,
      cause: 'test',
    });
    const { response } = await chatOn(c, created.apiKey);
    const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
    await until(
      'the charge written',
      async () => (await balanceOf(created.accountId)).balance === usdToNano('1') - cost,
    );
    expect(await leasesOn(created.accountId)).toBe(1);
    await c.stop('SIGKILL'); // its lease stays held until it expires

    const failed = await billingOf(b)
      .refundTopUp({ externalId, cause: 'test-refund' })
      .catch((e: unknown) => ConnectError.from(e));
    expect(failed).toBeInstanceOf(ConnectError);
    expect((failed as ConnectError).code).toBe(Code.Unavailable);
    expect((failed as ConnectError).rawMessage).toContain('did not give it back');
    expect(await refundRows(externalId)).toEqual([]);
    expect(
      (
        await db().query('SELECT 1 FROM refunds r JOIN ledger t ON t.id = r.topup_id WHERE t.external_id = $1', [
          externalId,
        ])
      ).rows,
    ).toEqual([]);

    // The dead instance's lease expires and a sweeper releases it: the same refund now applies, in full.
    await db().query(
      `UPDATE holds SET expires_at = now() - interval '1 second' WHERE account_id = $1 AND status = 'active'`,
      [created.accountId],
    );
    await until('the lease released', async () => (await leasesOn(created.accountId)) === 0);
    const r = await billingOf(b).refundTopUp({ externalId, cause: 'test-refund' });
    expect(r).toMatchObject({ applied: true, refundedNano: usdToNano('1') - cost, balanceNano: 0n });
    await checkInvariants(created.accountId);
  });
});
