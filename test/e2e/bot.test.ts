// The Telegram bot end to end: the real bot (grammY, long polling) against a fake Telegram
// Bot API server, calling the real gateway's BillingService; keys it hands out used with the
// official openai SDK against the gateway's HTTP facade; money checked in the database.
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { nanoToUsd, usdToNano } from '../../src/money/money.ts';
import { loadBotConfig, type BotConfig } from '../../src/config/bot-config.ts';
import { formatUsd } from '../../src/money/format.ts';
import { ownerOf } from '../../src/bot/owner.ts';
import { paymentExternalId } from '../../src/bot/stars.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import {
  BOT_USER,
  FakeTelegram,
  callsOf,
  textsOf,
  tgUser,
  type ApiCall,
  type TgUser,
} from '../support/fake-telegram.ts';
import { startGatewayProcess } from '../support/gateway-process.ts';
import { freePort } from '../support/ports.ts';
import { balanceOf, billing, checkInvariants, db, gatewayUrl, openai } from '../support/context.ts';

const STAR_USD = '0.013';
const NANO_PER_STAR = usdToNano(STAR_USD); // 13_000_000
const WELCOME = usdToNano('0.10');
const MIN_STARS = 10;
const MAX_STARS = 2500;

// Fresh user ids per run, so nothing depends on what an earlier run left in a kept database.
const base = 100_000 + Math.floor(Math.random() * 1_000_000) * 10;
const alice = tgUser(base + 1, 'Alice');
const bob = tgUser(base + 2, 'Bob');
const carol = tgUser(base + 3, 'Carol');
const dave = tgUser(base + 4, 'Dave');
const admin = tgUser(base + 9, 'Operator');

let fake: FakeTelegram;
let running: RunningBot;
let config: BotConfig;

beforeAll(async () => {
  fake = await FakeTelegram.start();
  config = loadBotConfig({
    TELEGRAM_BOT_TOKEN: '123456:TEST-token',
    TELEGRAM_API_ROOT: fake.url,
    TELEGRAM_STAR_USD: STAR_USD,
    TELEGRAM_TOPUP_MIN_STARS: String(MIN_STARS),
    TELEGRAM_TOPUP_MAX_STARS: String(MAX_STARS),
    TELEGRAM_WELCOME_CREDIT_USD: '0.10',
    TELEGRAM_ADMIN_IDS: String(admin.id),
    PUBLIC_BASE_URL: gatewayUrl(),
  })!;
  running = await startBot({
    config,
    transport: networkTransport(inject('rpcUrl'), undefined),
    log: createLogger('silent'),
    historyPageSize: 2,
  });
});

afterAll(async () => {
  await running?.stop();
  await fake?.close();
});

/** One user action, handled: the calls the bot made for it. */
const say = (user: TgUser, text: string) => fake.deliver(fake.text(user, text));
const keyIn = (calls: ApiCall[]): string => {
  const m = /<code>(prx-[0-9A-Za-z_-]+)<\/code>/.exec(textsOf(calls));
  if (!m) throw new Error(`no key in: ${textsOf(calls)}`);
  return m[1]!;
};
const chat = (apiKey: string, text = 'hello [sim tokens=5]') =>
  openai(apiKey).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] });
const liveKeysOf = async (user: TgUser) => (await billing().listKeys({ owner: ownerOf(user.id) })).keys;
const buttons = (call: ApiCall): { text: string; callback_data: string }[] =>
  (call.params.reply_markup?.inline_keyboard ?? []).flat();
const ledgerRows = async (externalId: string) =>
  (
    await db().query('SELECT kind, amount_nano::text AS amount, cause FROM ledger WHERE external_id = $1 ORDER BY id', [
      externalId,
    ])
  ).rows as { kind: string; amount: string; cause: string }[];

/** /newkey for a user: their key, account and key id. */
async function newKeyFor(user: TgUser): Promise<{ apiKey: string; accountId: string; keyId: string }> {
  const apiKey = keyIn(await say(user, '/newkey'));
  const keys = await liveKeysOf(user);
  const k = keys.find((x) => apiKey.startsWith(x.prefix))!;
  return { apiKey, accountId: k.accountId, keyId: k.keyId };
}

/** /topup <stars> and the invoice the bot sent. */
async function invoiceFor(user: TgUser, stars: number): Promise<ApiCall> {
  const inv = callsOf(await say(user, `/topup ${stars}`), 'sendInvoice');
  expect(inv).toHaveLength(1);
  return inv[0]!;
}

async function payInvoice(user: TgUser, invoice: ApiCall, chargeId: string): Promise<ApiCall[]> {
  const total = invoice.params.prices[0].amount as number;
  const pre = await fake.deliver(
    fake.preCheckout(user, { total_amount: total, invoice_payload: invoice.params.payload }),
  );
  expect(callsOf(pre, 'answerPreCheckoutQuery')[0]!.params).toMatchObject({ ok: true });
  return fake.deliver(
    fake.successfulPayment(user, { total_amount: total, invoice_payload: invoice.params.payload, chargeId }),
  );
}

describe('telegram bot', () => {
  it('formats dollars exactly from nano-USD', () => {
    expect(formatUsd(5_000_000_000n)).toBe('$5.00');
    expect(formatUsd(1_300_000_000n)).toBe('$1.30');
    expect(formatUsd(1_234_567n)).toBe('$0.001234567');
    expect(formatUsd(123_456_789_012_345_678_901n)).toBe('$123456789012.345678901');
    expect(formatUsd(-500_000_000n)).toBe('-$0.50');
    expect(formatUsd(0n)).toBe('$0.00');
  });

  it("/prices lists every available model with the bot's customers' prices in force, their group's markup included, as they are charged", async () => {
    const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: inject('rpcUrl') }));
    // A markup for the bot's account group on a model the bot's requests here do not use.
    const marked = 'gpt-5.4-nano';
    await catalogue.setMarkup({ modelId: marked, accountGroup: 'bot', markup: '0.5', reason: 'bot test' });
    try {
      const { models } = await catalogue.listModels({ availableOnly: true });
      const mini = models.find((m) => m.id === 'gpt-4o-mini')!;
      const nano = models.find((m) => m.id === marked)!;
      const text = textsOf(await say(dave, '/prices'));
      expect(text).toContain(`$${mini.prices.input_per_mtok} input /1M tokens`);
      expect(text).toContain(`$${mini.prices.output_per_mtok} output /1M tokens`);
      // 1.5 times the provider's price, exactly: what a bot account pays for it.
      const marked150 = nanoToUsd((usdToNano(nano.prices.input_per_mtok!) * 3n) / 2n);
      const line = text.split('\n').find((l) => l.startsWith(`${marked}: `))!;
      expect(line).toContain(`, $${marked150} input /1M tokens`);
      expect(line).not.toContain(`, $${nano.prices.input_per_mtok} input`);
      for (const m of models) expect(text).toContain(`${m.id}: `);
    } finally {
      await catalogue.setMarkup({ modelId: marked, accountGroup: 'bot', markup: '', reason: 'bot test done' });
    }
  });

  it('a full conversation: /start, /newkey, the key works, /topup, /balance, /usage, /rotate', async () => {
    // /start: what this is, both base URLs and the rate, before anything is paid.
    const start = textsOf(await say(alice, '/start'));
    expect(start).toContain(`${gatewayUrl()}/v1`);
    expect(start).toContain(`<code>${gatewayUrl()}</code>`);
    expect(start).toContain('1 Star = $0.013 of credit');
    expect(start).toContain(`${MIN_STARS} to ${MAX_STARS} Stars`);

    // /newkey: the key once, in a tap-to-copy <code> block, on a fresh account with the welcome credit.
    const created = await say(alice, '/newkey');
    const apiKey = keyIn(created);
    expect(callsOf(created, 'sendMessage')[0]!.params.parse_mode).toBe('HTML');
    expect(textsOf(created)).toContain('only this once');
    const [key] = await liveKeysOf(alice);
    expect(key).toBeDefined();
    expect(apiKey.startsWith(key!.prefix)).toBe(true);
    expect(key!.owner).toBe(ownerOf(alice.id));
    expect((await balanceOf(key!.accountId)).balance).toBe(WELCOME);
    expect((await db().query('SELECT cause FROM ledger WHERE account_id = $1', [key!.accountId])).rows).toEqual([
      { cause: 'telegram-bot:newkey' },
    ]);

    // The key works with the official SDK against the gateway.
    const r1 = await chat(apiKey);
    expect(r1.choices[0]!.message.content).toBe('w1 w2 w3 w4 w5');
    const afterCall = (await balanceOf(key!.accountId)).balance;
    expect(afterCall).toBeLessThan(WELCOME);

    // /topup: the rate and bounds first, amounts as buttons; pressing one sends a Stars invoice.
    const menu = await say(alice, '/topup');
    const menuMsg = callsOf(menu, 'sendMessage')[0]!;
    expect(menuMsg.params.text).toContain('1 Star = $0.013 of credit');
    const b100 = buttons(menuMsg).find((b) => b.callback_data === `ta:${key!.keyId}:100`);
    expect(b100?.text).toBe('100 ⭐ → $1.30');
    const pressed = await fake.deliver(fake.press(alice, menuMsg.result, b100!.callback_data));
    expect(callsOf(pressed, 'answerCallbackQuery')).toHaveLength(1);
    const invoice = callsOf(pressed, 'sendInvoice')[0]!;
    expect(invoice.params).toMatchObject({
      chat_id: alice.id,
      currency: 'XTR',
      provider_token: '',
      prices: [{ amount: 100 }],
    });
    expect(invoice.params.description).toContain('$1.30');

    // Pre-checkout accepted, then the payment credits 100 x $0.013.
    const paid = await payInvoice(alice, invoice, `chg-alice-${base}`);
    expect(textsOf(paid)).toContain('$1.30 credited');
    const afterTopUp = (await balanceOf(key!.accountId)).balance;
    expect(afterTopUp).toBe(afterCall + 100n * NANO_PER_STAR);
    expect(await ledgerRows(paymentExternalId(`chg-alice-${base}`))).toEqual([
      { kind: 'topup', amount: '1300000000', cause: `telegram-bot:payment:telegram:${alice.id}` }, // names the payer
    ]);

    // /balance shows the credit, exactly.
    const bal = textsOf(await say(alice, '/balance'));
    expect(bal).toContain(`Balance: ${formatUsd(afterTopUp)}`);
    expect(bal).toContain(`Available: ${formatUsd(afterTopUp)}`);
    expect(bal).not.toContain(apiKey);

    // /usage: time, model, route, cost of the request made above.
    const usage = textsOf(await say(alice, '/usage'));
    const cost = WELCOME - afterCall;
    expect(usage).toMatch(
      new RegExp(`\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC · gpt-4o-mini · /v1/chat/completions · \\${formatUsd(cost)}`),
    );

    // /rotate asks first; the confirm button rotates: the old key is refused at once, the new one works on the same balance.
    const ask = callsOf(await say(alice, '/rotate'), 'sendMessage')[0]!;
    expect(buttons(ask).map((b) => b.callback_data)).toEqual([`rot:${key!.keyId}`, 'rotx']);
    expect((await liveKeysOf(alice)).map((k) => k.keyId)).toEqual([key!.keyId]); // nothing happened yet
    const rotated = await fake.deliver(fake.press(alice, ask.result, `rot:${key!.keyId}`));
    expect(callsOf(rotated, 'editMessageText')[0]!.params.text).toContain('old key no longer works');
    const newKey = keyIn(rotated);
    expect(newKey).not.toBe(apiKey);
    const err = await chat(apiKey).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
    const [rotatedKey] = await liveKeysOf(alice);
    expect(rotatedKey!.accountId).toBe(key!.accountId);
    await chat(newKey);
    const afterRotation = (await balanceOf(key!.accountId)).balance;
    expect(afterRotation).toBe(afterTopUp - cost); // same account, same balance, the same request costs the same
    expect(textsOf(await say(alice, '/balance'))).toContain(`Balance: ${formatUsd(afterRotation)}`);
    await checkInvariants(key!.accountId);
  });

  it('a redelivered successful_payment credits once', async () => {
    const k = await newKeyFor(carol);
    const invoice = await invoiceFor(carol, 50);
    const charge = `chg-carol-${base}`;
    const payment = fake.successfulPayment(carol, {
      total_amount: 50,
      invoice_payload: invoice.params.payload,
      chargeId: charge,
    });
    const first = await fake.deliver(payment);
    const second = await fake.deliver(payment); // Telegram delivering the same service message again
    const third = await fake.deliver(
      fake.successfulPayment(carol, { total_amount: 50, invoice_payload: invoice.params.payload, chargeId: charge }),
    );
    expect(textsOf(first)).toContain('$0.65 credited');
    expect(textsOf(second)).toContain('already credited');
    expect(textsOf(third)).toContain('already credited');
    expect(await ledgerRows(paymentExternalId(charge))).toHaveLength(1);
    expect((await balanceOf(k.accountId)).balance).toBe(WELCOME + 50n * NANO_PER_STAR);
    await checkInvariants(k.accountId);
  });

  it('pre-checkout refuses an amount out of bounds, a stale rate, a foreign invoice and a currency other than Stars', async () => {
    const k = await newKeyFor(dave);
    const invoice = await invoiceFor(dave, MIN_STARS);
    const payload = invoice.params.payload as string;
    const answers = async (user: TgUser, q: Parameters<FakeTelegram['preCheckout']>[1]) =>
      callsOf(await fake.deliver(fake.preCheckout(user, q)), 'answerPreCheckoutQuery')[0]!.params;

    expect(await answers(dave, { total_amount: MIN_STARS, invoice_payload: payload })).toMatchObject({ ok: true });
    const low = await answers(dave, { total_amount: MIN_STARS - 1, invoice_payload: payload });
    expect(low).toMatchObject({ ok: false });
    expect(low.error_message).toContain(`${MIN_STARS} to ${MAX_STARS} Stars`);
    expect(await answers(dave, { total_amount: MAX_STARS + 1, invoice_payload: payload })).toMatchObject({ ok: false });
    const stale = await answers(dave, { total_amount: 100, invoice_payload: `t1:${k.keyId}:12000000` });
    expect(stale).toMatchObject({ ok: false });
    expect(stale.error_message).toContain('rate has changed');
    expect(await answers(dave, { total_amount: 100, invoice_payload: payload, currency: 'USD' })).toMatchObject({
      ok: false,
    });
    expect(await answers(bob, { total_amount: 100, invoice_payload: payload })).toMatchObject({ ok: false }); // Dave's invoice, Bob paying

    // Out-of-bounds amounts never get an invoice either.
    const big = await say(dave, `/topup ${MAX_STARS + 1}`);
    expect(callsOf(big, 'sendInvoice')).toHaveLength(0);
    expect(textsOf(big)).toContain(`${MIN_STARS} to ${MAX_STARS} Stars`);
    expect((await balanceOf(k.accountId)).balance).toBe(WELCOME);
  });

  it('a refund debits the credit that payment bought, once; only operators refund by naming the payer', async () => {
    const user = tgUser(base + 5, 'Erin');
    const k = await newKeyFor(user);
    const charge = `chg-erin-${base}`;
    await payInvoice(user, await invoiceFor(user, 200), charge);
    const paidBalance = (await balanceOf(k.accountId)).balance;
    expect(paidBalance).toBe(WELCOME + 200n * NANO_PER_STAR);

    // A user cannot use the operator's form (not even for their own payment): no call to Telegram.
    // (An owner's /refund <payment id> is test/e2e/bot-organisations.test.ts's.)
    const refused = await say(user, `/refund ${user.id} ${charge}`);
    expect(callsOf(refused, 'refundStarPayment')).toHaveLength(0);
    expect((await balanceOf(k.accountId)).balance).toBe(paidBalance);

    // The operator refunds: Stars back through Telegram, the credit taken back, Telegram's
    // refunded_payment service message (queued by the fake) changes nothing more.
    const done = await say(admin, `/refund ${user.id} ${charge}`);
    expect(callsOf(done, 'refundStarPayment').map((c) => c.params)).toEqual([
      { user_id: user.id, telegram_payment_charge_id: charge },
    ]);
    expect(textsOf(done)).toContain(`Took back $2.60 of the $2.60 credited`);
    expect((await balanceOf(k.accountId)).balance).toBe(WELCOME);

    // Redelivered service message and a second /refund: still one refund.
    fake.refunded(user, { chargeId: charge });
    await fake.settled();
    const again = await say(admin, `/refund ${user.id} ${charge}`);
    expect(textsOf(again)).toContain('Had already taken back $2.60');
    const rows = await ledgerRows(paymentExternalId(charge));
    expect(rows).toEqual([
      { kind: 'topup', amount: '2600000000', cause: `telegram-bot:payment:telegram:${user.id}` },
      { kind: 'refund', amount: '-2600000000', cause: 'telegram-bot:refund' },
    ]);
    expect((await balanceOf(k.accountId)).balance).toBe(WELCOME);
    await checkInvariants(k.accountId);
  });

  it('RefundTopUp takes back at most the available balance, once, never below zero', async () => {
    const owner = `test:${base}`;
    const created = await billing().createKey({ owner, label: 'refund clamp', creditsNano: 0n, cause: 'test' });
    const externalId = `clamp-${base}`;
    await billing().topUp({
      key: { ref: { case: 'keyId', value: created.keyId } },
      amountNano: 100_000n,
      externalId,
      cause: 'test',
    });
    await chat(created.apiKey); // spends part of that top-up
    const left = (await balanceOf(created.accountId)).balance;
    expect(left).toBeGreaterThan(0n);
    expect(left).toBeLessThan(100_000n);

    const r = await billing().refundTopUp({ externalId, cause: 'test-refund' });
    expect(r).toMatchObject({ applied: true, topupNano: 100_000n, refundedNano: left, balanceNano: 0n });
    const again = await billing().refundTopUp({ externalId, cause: 'test-refund' });
    expect(again).toMatchObject({ applied: false, refundedNano: left, balanceNano: 0n });
    // Later credit is not touched by a repeated refund.
    await billing().topUp({
      key: { ref: { case: 'keyId', value: created.keyId } },
      amountNano: 5_000n,
      externalId: `${externalId}-later`,
      cause: 'test',
    });
    expect((await billing().refundTopUp({ externalId, cause: 'test-refund' })).applied).toBe(false);
    expect((await balanceOf(created.accountId)).balance).toBe(5_000n);
    await checkInvariants(created.accountId);

    const missing = await billing()
      .refundTopUp({ externalId: `no-such-${base}` })
      .catch((e: unknown) => e);
    expect(ConnectError.from(missing).code).toBe(Code.NotFound);
  });

  it("another Telegram user cannot read or rotate the first user's key", async () => {
    const victim = tgUser(base + 6, 'Frank');
    const k = await newKeyFor(victim);
    await chat(k.apiKey);
    const before = await balanceOf(k.accountId);

    // Bob's own views are empty: nothing of Frank's shows.
    for (const cmd of ['/balance', '/usage', '/history', '/rotate']) {
      const out = textsOf(await say(bob, cmd));
      expect(out).toContain('You have no key yet');
      expect(out).not.toContain(k.apiKey.slice(0, 10));
    }

    // Forged buttons carrying Frank's key id: refused, nothing rotated, no invoice, no history.
    const someMsg = callsOf(await say(bob, '/help'), 'sendMessage')[0]!.result;
    for (const data of [`rot:${k.keyId}`, `hist:${k.keyId}:`, `ta:${k.keyId}:100`, `tk:${k.keyId}`]) {
      const calls = await fake.deliver(fake.press(bob, someMsg, data));
      const answer = callsOf(calls, 'answerCallbackQuery')[0]!.params;
      expect(answer).toMatchObject({ show_alert: true, text: 'That key is not one of your active keys.' });
      expect(callsOf(calls, 'sendInvoice')).toHaveLength(0);
      expect(callsOf(calls, 'editMessageText')).toHaveLength(0);
      expect(callsOf(calls, 'sendMessage')).toHaveLength(0);
    }
    expect((await liveKeysOf(victim)).map((x) => x.keyId)).toEqual([k.keyId]);
    await chat(k.apiKey); // still Frank's working key

    // The service itself refuses an owner-scoped call for another owner's key.
    for (const call of [
      () => billing().rotateKey({ key: { ref: { case: 'keyId', value: k.keyId }, owner: ownerOf(bob.id) } }),
      () => billing().getBalance({ key: { ref: { case: 'keyId', value: k.keyId }, owner: ownerOf(bob.id) } }),
      () => billing().listLedger({ key: { ref: { case: 'keyId', value: k.keyId }, owner: ownerOf(bob.id) } }),
    ]) {
      expect(ConnectError.from(await call().catch((e: unknown) => e)).code).toBe(Code.NotFound);
    }
    expect((await balanceOf(k.accountId)).balance).toBeLessThan(before.balance);
  });

  it('commands in a group chat are refused, so a key is never posted there', async () => {
    const calls = await fake.deliver(fake.text(tgUser(base + 7, 'Grace'), '/newkey', 'group'));
    expect(textsOf(calls)).toContain('private chat');
    expect(textsOf(calls)).not.toContain('prx-');
    expect(await liveKeysOf(tgUser(base + 7, 'Grace'))).toHaveLength(0);
  });

  it("every update outside the sender's private chat is refused before any billing call: buttons pressed in a group rotate, show and sell nothing", async () => {
    const owner = tgUser(base + 10, 'Ivan');
    const k = await newKeyFor(owner);
    const now = Math.floor(Date.now() / 1000);
    const inGroup = {
      message_id: 900_001,
      date: now,
      chat: { id: -100_900_001, type: 'supergroup', title: 'team' },
      from: BOT_USER,
      text: 'Rotate key?',
    };
    const inOthersChat = { ...inGroup, chat: { id: bob.id, type: 'private', first_name: 'Bob' } };
    const presses = [
      ...[`rot:${k.keyId}`, `hist:${k.keyId}:`, `ta:${k.keyId}:100`, `tk:${k.keyId}`, 'rotx'].map((data) =>
        fake.press(owner, inGroup, data),
      ),
      fake.press(owner, inOthersChat, `rot:${k.keyId}`),
      // A button of an inline message carries no chat at all.
      {
        callback_query: {
          id: `cq-inline-${base}`,
          from: owner,
          inline_message_id: 'inline-1',
          chat_instance: 'ci-inline',
          data: `rot:${k.keyId}`,
        },
      },
    ];
    for (const press of presses) {
      const calls = await fake.deliver(press);
      expect(callsOf(calls, 'answerCallbackQuery').map((c) => c.params)).toEqual([
        expect.objectContaining({ show_alert: true, text: expect.stringContaining('private chat') }),
      ]);
      expect(calls.filter((c) => c.method !== 'answerCallbackQuery')).toEqual([]);
    }
    expect((await liveKeysOf(owner)).map((x) => x.keyId)).toEqual([k.keyId]);
    await chat(k.apiKey); // the key still works: nothing rotated it

    // Commands in a group get a pointer to the private chat and nothing of the account; other
    // group messages get no answer; an inline query gets an empty answer.
    for (const cmd of ['/balance', '/history', '/usage', '/rotate', '/topup 100', '/newkey']) {
      const calls = await fake.deliver(fake.text(owner, cmd, 'group'));
      expect(calls.map((c) => c.method)).toEqual(['sendMessage']);
      expect(calls[0]!.params.text).toContain('private chat');
    }
    expect(await fake.deliver(fake.text(owner, 'hello everyone', 'group'))).toEqual([]);
    const inline = await fake.deliver({
      inline_query: { id: `iq-${base}`, from: owner, query: 'balance', offset: '' },
    });
    expect(inline.map((c) => [c.method, c.params.results])).toEqual([['answerInlineQuery', []]]);
    expect(await liveKeysOf(owner)).toHaveLength(1);
  });

  it('odd input in a private chat gets a short, polite answer: unknown commands, long text, stickers', async () => {
    const user = tgUser(base + 11, 'Judy');
    const long = 'tell me everything '.repeat(215); // about 4,000 characters
    const cases: [Record<string, any>, string][] = [
      [fake.text(user, '/frobnicate now'), "I don't know that command"],
      [fake.text(user, long), 'commands only'],
      [fake.text(user, 'hello?'), 'commands only'],
      [
        fake.message(user, {
          sticker: {
            file_id: 'stk',
            file_unique_id: 'stk-u',
            type: 'regular',
            width: 512,
            height: 512,
            is_animated: false,
            is_video: false,
          },
        }),
        'commands only',
      ],
    ];
    for (const [update, expected] of cases) {
      const calls = await fake.deliver(update);
      expect(calls.map((c) => c.method)).toEqual(['sendMessage']);
      const text = calls[0]!.params.text as string;
      expect(text).toContain(expected);
      expect(text).toContain('/help');
      expect(text.length).toBeLessThan(120);
    }
  });

  it('invoices cannot be paid from forwarded copies, and a payment reported outside the private chat is credited and answered privately', async () => {
    const user = tgUser(base + 12, 'Mallory');
    const k = await newKeyFor(user);
    const invoice = await invoiceFor(user, 20);
    expect(invoice.params.start_parameter).toBeTruthy(); // forwarded copies link to the bot instead of a Pay button
    const pre = await fake.deliver(
      fake.preCheckout(user, { total_amount: 20, invoice_payload: invoice.params.payload }),
    );
    expect(callsOf(pre, 'answerPreCheckoutQuery')[0]!.params).toMatchObject({ ok: true });
    const before = (await balanceOf(k.accountId)).balance;
    const charge = `chg-group-${base}`;
    const paid = await fake.deliver(
      fake.message(
        user,
        {
          successful_payment: {
            currency: 'XTR',
            total_amount: 20,
            invoice_payload: invoice.params.payload,
            telegram_payment_charge_id: charge,
            provider_payment_charge_id: '',
          },
        },
        'group',
      ),
    );
    expect((await balanceOf(k.accountId)).balance).toBe(before + 20n * NANO_PER_STAR);
    expect(callsOf(paid, 'sendMessage').map((c) => c.params.chat_id)).toEqual([user.id]);
    expect(textsOf(paid)).toContain('credited');
  });

  it('/history and ListLedger page through the ledger with a cursor; every row names its cause', async () => {
    const user = tgUser(base + 8, 'Heidi');
    const k = await newKeyFor(user);
    await chat(k.apiKey);
    await payInvoice(user, await invoiceFor(user, 20), `chg-heidi-${base}`);
    await chat(k.apiKey);

    // Through the RPC: pages of 2, newest first, cursor to cursor, the same rows as the table.
    const seen: { id: string; cause: string; kind: string }[] = [];
    let cursor = '';
    do {
      const page = await billing().listLedger({ key: { ref: { case: 'keyId', value: k.keyId } }, pageSize: 2, cursor });
      expect(page.entries.length).toBeLessThanOrEqual(2);
      seen.push(...page.entries.map((e) => ({ id: e.id, cause: e.cause, kind: e.kind })));
      cursor = page.nextCursor;
    } while (cursor);
    const table = await db().query(
      'SELECT id::text AS id, cause, kind FROM ledger WHERE account_id = $1 ORDER BY ledger.id DESC',
      [k.accountId],
    );
    expect(seen).toEqual(table.rows);
    expect(seen.map((e) => e.cause)).toEqual([
      'request',
      `telegram-bot:payment:telegram:${user.id}`,
      'request',
      'telegram-bot:newkey',
    ]);

    // Through the bot: the newest page with an "Older" button; pressing it shows the rest.
    const first = callsOf(await say(user, '/history'), 'sendMessage')[0]!;
    expect(first.params.text).toContain(`+$0.26 top-up (telegram-bot:payment:telegram:${user.id})`);
    expect(first.params.text).not.toContain('telegram-bot:newkey');
    const older = buttons(first).find((b) => b.text === 'Older ›')!;
    expect(older.callback_data).toBe(`hist:${k.keyId}:${seen[1]!.id}`);
    const next = callsOf(
      await fake.deliver(fake.press(user, first.result, older.callback_data)),
      'editMessageText',
    )[0]!;
    expect(next.params.text).toContain('+$0.10 top-up (telegram-bot:newkey)');
    expect(buttons(next).map((b) => b.text)).toEqual(['« Newest']);

    const badCursor = await billing()
      .listLedger({ key: { ref: { case: 'keyId', value: k.keyId } }, cursor: 'abc' })
      .catch((e: unknown) => e);
    expect(ConnectError.from(badCursor).code).toBe(Code.InvalidArgument);
  });

  it('the operator CLI records its cause on the ledger', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['src/cli/main.ts', 'keys', 'create', '--credits', '0.5'],
      {
        cwd: path.resolve(import.meta.dirname, '..', '..'),
        env: { ...process.env, GATEWAY_RPC_URL: inject('rpcUrl') },
      },
    );
    const apiKey = stdout.trim();
    const r = await billing().getBalance({ key: { ref: { case: 'apiKey', value: apiKey } } });
    const rows = await db().query('SELECT cause FROM ledger WHERE account_id = $1', [r.accountId]);
    expect(rows.rows).toEqual([{ cause: 'operator-cli' }]);
  });

  it('runs by webhook when configured: secret required and checked, updates answered', async () => {
    expect(() =>
      loadBotConfig({ TELEGRAM_BOT_TOKEN: 'x', TELEGRAM_WEBHOOK_URL: 'https://bot.example.com/hook' }),
    ).toThrow(/TELEGRAM_WEBHOOK_SECRET/);
    const hookFake = await FakeTelegram.start();
    const port = await freePort();
    const hookConfig = loadBotConfig({
      TELEGRAM_BOT_TOKEN: '654321:HOOK',
      TELEGRAM_API_ROOT: hookFake.url,
      TELEGRAM_WEBHOOK_URL: `https://bot.example.com/telegram/hook`,
      TELEGRAM_WEBHOOK_SECRET: 'hook-secret',
      TELEGRAM_WEBHOOK_HOST: '127.0.0.1',
      TELEGRAM_WEBHOOK_PORT: String(port),
      PUBLIC_BASE_URL: 'https://gateway.example.com',
    })!;
    const hooked = await startBot({
      config: hookConfig,
      transport: networkTransport(inject('rpcUrl'), undefined),
      log: createLogger('silent'),
    });
    try {
      expect(hooked.mode).toBe('webhook');
      expect(callsOf(hookFake.calls, 'setWebhook')[0]!.params).toMatchObject({
        url: 'https://bot.example.com/telegram/hook',
        secret_token: 'hook-secret',
      });
      expect(callsOf(hookFake.calls, 'getUpdates')).toHaveLength(0);
      const post = (secret: string) =>
        fetch(`http://127.0.0.1:${port}/telegram/hook`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
          body: JSON.stringify({ update_id: 1, ...hookFake.text(alice, '/start') }),
        });
      expect((await post('wrong')).status).toBe(401);
      expect(callsOf(hookFake.calls, 'sendMessage')).toHaveLength(0);
      expect((await post('hook-secret')).status).toBe(200);
      expect(callsOf(hookFake.calls, 'sendMessage')[0]!.params.text).toContain('https://gateway.example.com/v1');
      // An update larger than Telegram ever sends is refused from its headers, unread.
      const big = await fetch(`http://127.0.0.1:${port}/telegram/hook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'hook-secret' },
        body: JSON.stringify({ update_id: 2, ...hookFake.text(alice, `/start ${'x'.repeat(2 * 1024 * 1024)}`) }),
      }).catch((err: Error) => err);
      if (!(big instanceof Error)) expect(big.status).toBe(413);
      expect(callsOf(hookFake.calls, 'sendMessage')).toHaveLength(1);
    } finally {
      await hooked.stop();
      await hookFake.close();
    }
  });

  it('the gateway starts the bot with itself when TELEGRAM_BOT_TOKEN is set, and stops it on close', async () => {
    const gwFake = await FakeTelegram.start();
    const gw = await startGatewayProcess({
      logFile: path.join(inject('workDir'), 'gateway-with-bot.log'),
      env: {
        DATABASE_URL: inject('databaseUrl'),
        TELEGRAM_BOT_TOKEN: '111:GW',
        TELEGRAM_API_ROOT: gwFake.url,
        LOG_LEVEL: 'warn',
        // No video jobs in this gateway: no worker, and no Temporal dev server found or started for it.
        VIDEO_WORKER: '0',
        TEMPORAL_CLI: '/nonexistent/temporal',
        TEMPORAL_DEV_PORT: String(await freePort()),
      },
    });
    try {
      const calls = await gwFake.deliver(gwFake.text(alice, '/start'));
      expect(textsOf(calls)).toContain(`${gw.httpUrl}/v1`); // the gateway's own URL when PUBLIC_BASE_URL is unset
      expect(callsOf(gwFake.calls, 'getMe')).toHaveLength(1);
    } finally {
      expect(await gw.stop()).toBe(0);
      await gwFake.close();
    }
    // On close the bot stopped polling and confirmed what it had handled (grammY's last, short
    // getUpdates), so nothing is handled twice by the next start.
    const last = gwFake.calls.at(-1)!;
    expect(last).toMatchObject({ method: 'getUpdates', params: { offset: 2, limit: 1 } });
  });
});
