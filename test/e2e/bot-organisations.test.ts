// Organisations in the Telegram bot (docs/bot.md#organisations): the real bot (grammY, long
// polling) against the fake Bot API server, calling the gateway's OrganisationService as each
// Telegram user (the x-gateway-telegram-user header over the RPC port, the ACTOR value in
// process) and BillingService for payments; keys it hands out used with the official openai SDK;
// money and memberships checked in the database.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { OrganisationService, Role } from '../../src/gen/gateway/v1/organisations_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { ownerOf } from '../../src/bot/owner.ts';
import { paymentExternalId } from '../../src/bot/stars.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import { FakeTelegram, callsOf, textsOf, tgUser, type ApiCall, type TgUser } from '../support/fake-telegram.ts';
import { balanceOf, billing, checkInvariants, db, openai, uniqueMarker } from '../support/context.ts';
import { orgs, refused, ROLE_NAMES, type RoleName } from '../support/organisations.ts';
import { may } from '../../src/organisations/roles.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import { NO_TEMPORAL_CLI } from '../support/temporal.ts';
import { freePort } from '../support/ports.ts';

const STAR_USD = '0.013';
const NANO_PER_STAR = usdToNano(STAR_USD);
const PUBLIC = 'https://gateway.example.com';

// Fresh user ids per run, so nothing depends on what an earlier run left in a kept database.
const base = 500_000_000 + Math.floor(Math.random() * 1_000_000) * 20;
let nextUser = 0;
const newUser = (name: string) => tgUser(base + ++nextUser, name);

let fake: FakeTelegram;
let running: RunningBot;

const botConfig = (fakeUrl: string, token = '123456:TEST-token') =>
  loadBotConfig({
    TELEGRAM_BOT_TOKEN: token,
    TELEGRAM_API_ROOT: fakeUrl,
    TELEGRAM_STAR_USD: STAR_USD,
    TELEGRAM_TOPUP_MIN_STARS: '10',
    TELEGRAM_TOPUP_MAX_STARS: '2500',
    PUBLIC_BASE_URL: PUBLIC,
  })!;

beforeAll(async () => {
  fake = await FakeTelegram.start();
  running = await startBot({
    config: botConfig(fake.url),
    transport: networkTransport(inject('rpcUrl'), undefined),
    log: createLogger('silent'),
  });
});

afterAll(async () => {
  await running?.stop();
  await fake?.close();
});

const say = (user: TgUser, text: string, telegram = fake) => telegram.deliver(telegram.text(user, text));
const press = (user: TgUser, message: unknown, data: string, telegram = fake) =>
  telegram.deliver(telegram.press(user, message, data));
const buttons = (call: ApiCall): { text: string; callback_data: string }[] =>
  (call.params.reply_markup?.inline_keyboard ?? []).flat();
const firstMessage = (calls: ApiCall[]) => callsOf(calls, 'sendMessage')[0]!;
const alertOf = (calls: ApiCall[]) => callsOf(calls, 'answerCallbackQuery')[0]?.params;

/** OrganisationService over the RPC port as a Telegram user, as the bot run apart calls it. */
const asTelegram = (user: TgUser, rpcUrl = inject('rpcUrl'), adminToken?: string) => {
  const headers: Interceptor = (next) => (req) => {
    req.header.set('x-gateway-telegram-user', ownerOf(user.id));
    if (adminToken) req.header.set('authorization', `Bearer ${adminToken}`);
    return next(req);
  };
  return createClient(OrganisationService, createGrpcTransport({ baseUrl: rpcUrl, interceptors: [headers] }));
};

/** An organisation the operator made for a Telegram owner, with `credits` on its balance. */
async function organisationOf(owner: TgUser, credits = '10'): Promise<{ id: string; name: string }> {
  const name = `Acme <b>${uniqueMarker('org')}</b>`;
  const made = await orgs().createOrganisation({ name, ownerTelegramUser: ownerOf(owner.id) });
  const id = made.organisation!.id;
  if (credits !== '0')
    await billing().topUp({ accountId: id, amountNano: usdToNano(credits), externalId: `seed-${id}`, cause: 'test' });
  return { id, name };
}

/** A test organisation's name as the bot's HTML shows it: its markup as text. */
const asHtml = (name: string) => name.replace('<b>', '&lt;b&gt;').replace('</b>', '&lt;/b&gt;');

/** The invitation token of the bot's /invite answer, checked to be in both links. */
function tokenIn(calls: ApiCall[]): string {
  const text = textsOf(calls);
  const m = /https:\/\/t\.me\/gateway_test_bot\?start=(inv-[A-Za-z0-9_-]{43})/.exec(text);
  if (!m) throw new Error(`no invitation link in: ${text}`);
  expect(text).toContain(`${PUBLIC}/console/#invite=${m[1]}`);
  return m[1]!;
}

/** `inviter` sends /invite <role> and `joiner` opens the link: the calls of the join. */
async function inviteAndJoin(inviter: TgUser, role: string, joiner: TgUser, telegram = fake): Promise<ApiCall[]> {
  const token = tokenIn(await say(inviter, `/invite ${role}`, telegram));
  return say(joiner, `/start ${token}`, telegram);
}

const roleIn = async (orgId: string, user: TgUser): Promise<string | undefined> =>
  (
    await db().query(
      `SELECT m.role FROM memberships m JOIN members p ON p.id = m.member_id
       WHERE m.account_id = $1 AND p.telegram_user = $2`,
      [orgId, ownerOf(user.id)],
    )
  ).rows[0]?.role;

const ledgerRows = async (externalId: string) =>
  (await db().query('SELECT account_id, amount_nano::text AS amount FROM ledger WHERE external_id = $1', [externalId]))
    .rows;

const ledgerCount = async (accountId: string) =>
  Number((await db().query('SELECT count(*)::int AS n FROM ledger WHERE account_id = $1', [accountId])).rows[0].n);

/** Pre-checkout of an invoice's payload by `payer`: Telegram's question before it takes the Stars. */
async function preCheckout(payer: TgUser, invoice: ApiCall) {
  const q = { total_amount: invoice.params.prices[0].amount as number, invoice_payload: invoice.params.payload };
  return callsOf(await fake.deliver(fake.preCheckout(payer, q)), 'answerPreCheckoutQuery')[0]!.params;
}

async function pay(payer: TgUser, invoice: ApiCall, chargeId: string): Promise<ApiCall[]> {
  expect(await preCheckout(payer, invoice)).toMatchObject({ ok: true });
  const total = invoice.params.prices[0].amount as number;
  return fake.deliver(
    fake.successfulPayment(payer, { total_amount: total, invoice_payload: invoice.params.payload, chargeId }),
  );
}

describe('organisations in the Telegram bot', () => {
  it('/invite by an owner or admin gives a one-time link; opened in Telegram it joins its user with its role, and a second time it works for nobody', async () => {
    const olive = newUser('Olive');
    const adam = newUser('Adam');
    const bill = newUser('Bill');
    const zed = newUser('Zed');
    const acme = await organisationOf(olive);

    const invited = await say(olive, '/invite admin');
    expect(textsOf(invited)).toContain('as <b>admin</b>');
    expect(textsOf(invited)).toContain('works <b>once</b>');
    const token = tokenIn(invited);
    expect(textsOf(invited)).toContain(`<b>${asHtml(acme.name)}</b>`); // the name's markup shown as text

    const joined = await say(adam, `/start ${token}`);
    expect(textsOf(joined)).toContain('You joined <b>Acme &lt;b&gt;');
    expect(textsOf(joined)).toContain('as <b>admin</b>');
    expect(textsOf(joined)).not.toContain('Welcome to the metered AI gateway'); // the link, not the plain /start
    expect(await roleIn(acme.id, adam)).toBe('admin');
    // The member is tied to the Telegram user who opened the link.
    const who = await asTelegram(adam).whoAmI({});
    expect(who.memberships.map((m) => [m.organisationId, m.role])).toEqual([[acme.id, Role.ADMIN]]);

    // The same link again, by anyone: not valid, nobody joins.
    for (const user of [zed, adam]) {
      const again = textsOf(await say(user, `/start ${token}`));
      expect(again).toContain('This invitation link is not valid');
    }
    expect(await roleIn(acme.id, zed)).toBeUndefined();

    // An admin invites too; the billing member the link makes cannot invite.
    expect(textsOf(await inviteAndJoin(adam, 'billing', bill))).toContain('as <b>billing</b>');
    expect(await roleIn(acme.id, bill)).toBe('billing');
    const before = Number(
      (await db().query('SELECT count(*) FROM invitations WHERE account_id = $1', [acme.id])).rows[0].count,
    );
    const notAdmin = await say(bill, '/invite member');
    expect(textsOf(notAdmin)).toContain('Only owners and admins may invite people to "Acme');
    expect(textsOf(notAdmin)).toContain('; your role there is billing.');
    // Only an owner invites an owner; a forged button for someone else's organisation makes nothing.
    expect(textsOf(await say(adam, '/invite owner'))).toContain('only an owner may invite an owner');
    const someMessage = firstMessage(await say(zed, '/help')).result;
    const forged = await press(zed, someMessage, `inv:${acme.id}:member`);
    expect(textsOf(forged)).toContain('That organisation is not one of yours');
    expect(textsOf(forged)).not.toContain('t.me');
    const after = Number(
      (await db().query('SELECT count(*) FROM invitations WHERE account_id = $1', [acme.id])).rows[0].count,
    );
    expect(after).toBe(before);
    for (const role of ['boss', 'constructor'])
      expect(textsOf(await say(olive, `/invite ${role}`))).toContain('usage: /invite');
  });

  it("the one who joins may make their first key there, shown once: it spends the organisation's balance", async () => {
    const olive = newUser('Olive');
    const mia = newUser('Mia');
    const acme = await organisationOf(olive, '5');
    const joined = await inviteAndJoin(olive, 'member', mia);
    const offer = firstMessage(joined);
    const button = buttons(offer).find((b) => b.callback_data === `okey:${acme.id}`);
    expect(button).toBeDefined();

    const made = await press(mia, offer.result, button!.callback_data);
    expect(callsOf(made, 'editMessageReplyMarkup')).toHaveLength(1); // the button is gone: one key from it
    const apiKey = /<code>(prx-[0-9A-Za-z_-]+)<\/code>/.exec(textsOf(made))?.[1];
    expect(apiKey).toBeDefined();
    expect(textsOf(made)).toContain('only this once');
    const r = await openai(apiKey!).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=3]' }],
    });
    expect(r.choices[0]!.message.content).toBe('w1 w2 w3');
    expect((await balanceOf(acme.id)).balance).toBeLessThan(usdToNano('5'));
    const keys = await db().query(
      `SELECT k.account_id FROM api_keys k JOIN members p ON p.id = k.member_id WHERE p.telegram_user = $1`,
      [ownerOf(mia.id)],
    );
    expect(keys.rows).toEqual([{ account_id: acme.id }]);
  });

  it('/org shows each organisation the user belongs to, their role in each and the balance left', async () => {
    const olive = newUser('Olive');
    const bill = newUser('Bill');
    const acme = await organisationOf(olive, '10');
    const beta = await organisationOf(bill, '2.5');
    await inviteAndJoin(olive, 'billing', bill);

    const shown = firstMessage(await say(bill, '/org'));
    const text = shown.params.text as string;
    expect(shown.params.parse_mode).toBe('HTML');
    // Each with the role there, the balance left, and what the role lets them do from the bot.
    expect(text).toContain(
      `<b>${asHtml(acme.name)}</b> · billing\nBalance: $10.00 · available: $10.00\n2 members · 0 live keys\nHere /topup adds credit.`,
    );
    expect(text).toContain(
      `<b>${asHtml(beta.name)}</b> · owner\nBalance: $2.50 · available: $2.50\n1 member · 0 live keys\nHere /topup adds credit; /invite makes an invitation link.`,
    );

    // A member of none is told how to get one.
    expect(textsOf(await say(newUser('Nobody'), '/org'))).toContain('You belong to no organisation yet');
  });

  it("a top-up by an owner or a billing member credits the organisation's balance, exactly once", async () => {
    const olive = newUser('Olive');
    const bill = newUser('Bill');
    const acme = await organisationOf(olive, '1');
    await inviteAndJoin(olive, 'billing', bill);

    // The owner, with no key of her own: straight to the amounts for the organisation.
    const menu = firstMessage(await say(olive, '/topup'));
    expect(menu.params.text).toContain('Top up the organisation <b>Acme');
    const b100 = buttons(menu).find((b) => b.callback_data === `oa:${acme.id}:100`)!;
    expect(b100.text).toBe('100 ⭐ → $1.30');
    const invoice = callsOf(await press(olive, menu.result, b100.callback_data), 'sendInvoice')[0]!;
    expect(invoice.params.payload).toBe(`o1:${acme.id}:${NANO_PER_STAR}`);
    expect(invoice.params.description).toContain('for the organisation "Acme');
    const charge = `chg-org-${base}-olive`;
    const paid = await pay(olive, invoice, charge);
    expect(textsOf(paid)).toContain('$1.30 credited');
    // Telegram delivering the same payment again credits nothing more.
    const again = await fake.deliver(
      fake.successfulPayment(olive, { total_amount: 100, invoice_payload: invoice.params.payload, chargeId: charge }),
    );
    expect(textsOf(again)).toContain('already credited');
    expect(await ledgerRows(paymentExternalId(charge))).toEqual([{ account_id: acme.id, amount: '1300000000' }]);
    expect((await balanceOf(acme.id)).balance).toBe(usdToNano('1') + 100n * NANO_PER_STAR);

    // The billing member, who also has an account of their own: they pick where the credit goes.
    await say(bill, '/newkey');
    const [own] = (await billing().listKeys({ owner: ownerOf(bill.id) })).keys;
    const picker = firstMessage(await say(bill, '/topup 50'));
    expect(picker.params.text).toBe('Where should the credit go?');
    expect(buttons(picker).map((b) => b.callback_data)).toEqual([`ta:${own!.keyId}:50`, `oa:${acme.id}:50`]);
    const billInvoice = callsOf(await press(bill, picker.result, `oa:${acme.id}:50`), 'sendInvoice')[0]!;
    await pay(bill, billInvoice, `chg-org-${base}-bill`);
    expect((await balanceOf(acme.id)).balance).toBe(usdToNano('1') + 150n * NANO_PER_STAR);
    expect((await balanceOf(own!.accountId)).balance).toBe(0n); // their own account got nothing
    await checkInvariants(acme.id);

    // A refund of an organisation's top-up (what the operator's /refund calls) takes it back from the organisation.
    const r = await billing().refundTopUp({ externalId: paymentExternalId(charge), cause: 'test' });
    expect(r).toMatchObject({ accountId: acme.id, refundedNano: 100n * NANO_PER_STAR });
  });

  it("a billing member refunds the organisation's Stars top-up: the Stars go back to whoever paid, the credit is taken back exactly, once", async () => {
    const olive = newUser('Olive');
    const bill = newUser('Bill');
    const acme = await organisationOf(olive, '1');
    await inviteAndJoin(olive, 'billing', bill);
    // Olive pays; the receipt names the payment, and its ledger row names her as the payer.
    const charge = `chg-refund-${base}-olive`;
    const paid = await pay(olive, callsOf(await say(olive, '/topup 100'), 'sendInvoice')[0]!, charge);
    expect(textsOf(paid)).toContain(`Payment id: ${charge}`);
    const paidBalance = usdToNano('1') + 100n * NANO_PER_STAR;
    expect((await balanceOf(acme.id)).balance).toBe(paidBalance);

    // Bill refunds it: the Stars go back to Olive, who paid; the credit leaves the organisation.
    const done = await say(bill, `/refund ${charge}`);
    expect(callsOf(done, 'refundStarPayment').map((c) => c.params)).toEqual([
      { user_id: olive.id, telegram_payment_charge_id: charge },
    ]);
    expect(textsOf(done)).toContain(`Refunded: the Stars of payment ${charge} went back to the one who paid`);
    expect(textsOf(done)).toContain('$1.30 of the $1.30 it credited was taken back from "Acme');
    expect((await balanceOf(acme.id)).balance).toBe(usdToNano('1'));
    const rows = async () =>
      (
        await db().query(
          `SELECT account_id, kind, amount_nano::text AS amount, cause FROM ledger WHERE external_id = $1 ORDER BY id`,
          [paymentExternalId(charge)],
        )
      ).rows;
    expect(await rows()).toEqual([
      { account_id: acme.id, kind: 'topup', amount: '1300000000', cause: `telegram-bot:payment:telegram:${olive.id}` },
      { account_id: acme.id, kind: 'refund', amount: '-1300000000', cause: `telegram-bot:refund:telegram:${bill.id}` },
    ]);

    // A second refund, by Bill or by the owner (the console's external id too): refused, no Stars, nothing written.
    const ledgerBefore = await ledgerCount(acme.id);
    for (const [user, arg] of [
      [bill, charge],
      [olive, paymentExternalId(charge)],
    ] as const) {
      const again = await say(user, `/refund ${arg}`);
      expect(callsOf(again, 'refundStarPayment')).toHaveLength(0);
      expect(textsOf(again)).toContain(`The payment ${charge} was already refunded`);
    }
    expect(await ledgerCount(acme.id)).toBe(ledgerBefore);
    expect(await rows()).toHaveLength(2);
    expect((await balanceOf(acme.id)).balance).toBe(usdToNano('1'));
    await checkInvariants(acme.id);
  });

  it('a refund is refused, with no Stars refunded and nothing written, to a member or admin, a member of another organisation, for an unknown payment, for a personal top-up of someone else, and once the credit is spent', async () => {
    const olive = newUser('Olive');
    const adam = newUser('Adam');
    const mia = newUser('Mia');
    const bea = newUser('Bea');
    const carl = newUser('Carl');
    const acme = await organisationOf(olive, '1');
    await inviteAndJoin(olive, 'admin', adam);
    await inviteAndJoin(olive, 'member', mia);
    await organisationOf(bea, '1'); // Bea: owner (so she may refund) of another organisation
    const acmeCharge = `chg-refuse-${base}-acme`;
    await pay(olive, callsOf(await say(olive, '/topup 100'), 'sendInvoice')[0]!, acmeCharge);
    // Carl's own account (from /newkey) and a top-up of it.
    await say(carl, '/newkey');
    const [carlKey] = (await billing().listKeys({ owner: ownerOf(carl.id) })).keys;
    const carlCharge = `chg-refuse-${base}-carl`;
    await pay(carl, callsOf(await say(carl, '/topup 50'), 'sendInvoice')[0]!, carlCharge);

    const written = async () =>
      (
        await db().query(
          `SELECT a.id, a.balance_nano::text AS balance,
                  (SELECT count(*) FROM ledger l WHERE l.account_id = a.id)::int AS ledger,
                  (SELECT count(*) FROM refunds r WHERE r.account_id = a.id)::int AS refunds,
                  (SELECT count(*) FROM audit_log g WHERE g.account_id = a.id)::int AS audit
           FROM accounts a WHERE a.id = ANY($1) ORDER BY a.id`,
          [[acme.id, carlKey!.accountId]],
        )
      ).rows;
    const before = await written();
    const tries: [TgUser, string, string][] = [
      [mia, acmeCharge, 'Only owners and billing members may refund top-ups of "Acme'],
      [mia, acmeCharge, '; your role there is member.'],
      [adam, acmeCharge, '; your role there is admin.'],
      [
        bea,
        acmeCharge,
        `No Stars top-up with the payment id ${acmeCharge} credited an organisation where you may refund`,
      ],
      [olive, `chg-no-such-${base}`, 'No Stars top-up with the payment id chg-no-such-'],
      [olive, carlCharge, `No Stars top-up with the payment id ${carlCharge}`],
      [bea, carlCharge, `No Stars top-up with the payment id ${carlCharge}`],
    ];
    for (const [user, charge, answer] of tries) {
      const calls = await say(user, `/refund ${charge}`);
      expect(callsOf(calls, 'refundStarPayment'), `${user.first_name} ${charge}`).toHaveLength(0);
      expect(textsOf(calls), `${user.first_name} ${charge}`).toContain(answer);
    }
    // The operator's form is not theirs: no user id may be named by a member.
    const named = await say(olive, `/refund ${olive.id} ${acmeCharge}`);
    expect(callsOf(named, 'refundStarPayment')).toHaveLength(0);
    expect(textsOf(named)).toContain('usage: /refund <payment id>');
    expect(await written()).toEqual(before);

    // Once requests have spent part of what the payment credited, Stars (which go back whole) are the operator's to refund.
    const spent = await organisationOf(olive, '0');
    const spentCharge = `chg-refuse-${base}-spent`;
    const picker = firstMessage(await say(olive, '/topup 100'));
    const invoice = callsOf(await press(olive, picker.result, `oa:${spent.id}:100`), 'sendInvoice')[0]!;
    await pay(olive, invoice, spentCharge);
    const { apiKey } = await asTelegram(olive).createOrganisationKey({ organisationId: spent.id });
    await openai(apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=3]' }],
    });
    const left = (await balanceOf(spent.id)).balance;
    expect(left).toBeLessThan(100n * NANO_PER_STAR);
    const ledgerBefore = await ledgerCount(spent.id);
    const refused = await say(olive, `/refund ${spentCharge}`);
    expect(callsOf(refused, 'refundStarPayment')).toHaveLength(0);
    expect(textsOf(refused)).toContain('the rest has been spent');
    expect(textsOf(refused)).toContain("only the gateway's operators refund it now");
    expect(await ledgerCount(spent.id)).toBe(ledgerBefore);
    expect((await balanceOf(spent.id)).balance).toBe(left);
  });

  it('a member may not top up the organisation: refused with a clear message at /topup, on a forged button and at pre-checkout, and nothing is credited', async () => {
    const olive = newUser('Olive');
    const mia = newUser('Mia');
    const bill = newUser('Bill');
    const acme = await organisationOf(olive, '1');
    await inviteAndJoin(olive, 'member', mia);
    await inviteAndJoin(olive, 'billing', bill);

    const topup = await say(mia, '/topup');
    expect(callsOf(topup, 'sendInvoice')).toHaveLength(0);
    expect(textsOf(topup)).toContain('Only owners and billing members may top up "Acme');
    expect(textsOf(topup)).toContain('; your role there is member.');
    const someMessage = firstMessage(topup).result;
    for (const data of [`to:${acme.id}`, `oa:${acme.id}:100`]) {
      const calls = await press(mia, someMessage, data);
      expect(alertOf(calls)).toMatchObject({
        show_alert: true,
        text: expect.stringContaining('Only owners and billing members may top up "Acme'),
      });
      expect(callsOf(calls, 'sendInvoice')).toHaveLength(0);
    }

    // Bill's invoice: Mia may not pay it; Bill, demoted to member before paying, may not either.
    const invoice = callsOf(await say(bill, '/topup 100'), 'sendInvoice')[0]!;
    expect((await preCheckout(mia, invoice)).ok).toBe(false);
    const billMember = (await asTelegram(bill).whoAmI({})).memberId;
    await orgs().setMemberRole({ organisationId: acme.id, memberId: billMember, role: Role.MEMBER });
    const refusedCheckout = await preCheckout(bill, invoice);
    expect(refusedCheckout).toMatchObject({ ok: false });
    expect(refusedCheckout.error_message).toContain('your role there is member');
    expect((await balanceOf(acme.id)).balance).toBe(usdToNano('1'));
  });

  it('a top-up tried by every role: owners and billing members get the invoice and pay it; admins and members are refused at /topup, on the button and at pre-checkout, and nothing is credited', async () => {
    const users: Record<RoleName, TgUser> = {
      owner: newUser('Olive'),
      admin: newUser('Adam'),
      billing: newUser('Bill'),
      member: newUser('Mia'),
    };
    const acme = await organisationOf(users.owner, '1');
    for (const role of ['admin', 'billing', 'member'] as const) await inviteAndJoin(users.owner, role, users[role]);
    const ownersInvoice = callsOf(await say(users.owner, '/topup 100'), 'sendInvoice')[0]!;
    let expected = usdToNano('1');
    for (const role of ROLE_NAMES) {
      const user = users[role];
      const ledgerBefore = await ledgerCount(acme.id);
      const topup = await say(user, '/topup 100');
      const someMessage = firstMessage(await say(user, '/help')).result;
      const pressed = await press(user, someMessage, `oa:${acme.id}:100`);
      const checkout = await preCheckout(user, ownersInvoice);
      if (may(role, 'billing.top_up')) {
        const invoices = [...callsOf(topup, 'sendInvoice'), ...callsOf(pressed, 'sendInvoice')];
        expect(
          invoices.map((i) => i.params.payload),
          role,
        ).toEqual([`o1:${acme.id}:${NANO_PER_STAR}`, `o1:${acme.id}:${NANO_PER_STAR}`]);
        expect(checkout.ok, role).toBe(true);
        expect(textsOf(await pay(user, invoices[0]!, `chg-roles-${base}-${role}`))).toContain('$1.30 credited');
        expected += 100n * NANO_PER_STAR;
        expect(await ledgerCount(acme.id)).toBe(ledgerBefore + 1);
      } else {
        expect(callsOf(topup, 'sendInvoice'), role).toHaveLength(0);
        expect(textsOf(topup)).toContain(`Only owners and billing members may top up "Acme`);
        expect(textsOf(topup)).toContain(`; your role there is ${role}.`);
        expect(alertOf(pressed), role).toMatchObject({
          show_alert: true,
          text: expect.stringContaining(`your role there is ${role}.`),
        });
        expect(callsOf(pressed, 'sendInvoice'), role).toHaveLength(0);
        expect(checkout, role).toMatchObject({
          ok: false,
          error_message: expect.stringContaining(`your role there is ${role}`),
        });
        expect(await ledgerCount(acme.id)).toBe(ledgerBefore);
      }
      expect((await balanceOf(acme.id)).balance, role).toBe(expected);
    }
    await checkInvariants(acme.id);
  });

  it('a member of one organisation reaches nothing of another through the bot: its top-ups, invitations, keys and invoices are refused, and nothing of it is written', async () => {
    const olive = newUser('Olive');
    const bea = newUser('Bea');
    const a = await organisationOf(olive, '1');
    // B: Bea's account from /newkey, an organisation of one she owns, with her key.
    await say(bea, '/newkey');
    const [bKey] = (await billing().listKeys({ owner: ownerOf(bea.id) })).keys;
    const b = bKey!.accountId;
    expect(b).not.toBe(a.id);
    await billing().topUp({ accountId: b, amountNano: usdToNano('1'), externalId: `seed-${b}`, cause: 'test' });
    const written = async () =>
      (
        await db().query(
          `SELECT (SELECT count(*) FROM invitations WHERE account_id = $1)::int AS invitations,
                  (SELECT count(*) FROM api_keys WHERE account_id = $1)::int AS keys,
                  (SELECT count(*) FROM memberships WHERE account_id = $1)::int AS members,
                  (SELECT count(*) FROM ledger WHERE account_id = $1)::int AS ledger,
                  (SELECT count(*) FROM audit_log WHERE account_id = $1)::int AS audit`,
          [b],
        )
      ).rows[0];
    const before = await written();

    // Olive, owner of A (she may top up and invite there), with B's ids on buttons she forges.
    const someMessage = firstMessage(await say(olive, '/help')).result;
    for (const data of [`to:${b}`, `oa:${b}:100`, `okey:${b}`]) {
      const calls = await press(olive, someMessage, data);
      expect(alertOf(calls), data).toMatchObject({
        show_alert: true,
        text: 'That organisation is not one of yours (any more).',
      });
      expect(
        calls.filter((c) => c.method !== 'answerCallbackQuery'),
        data,
      ).toEqual([]);
    }
    for (const role of ['owner', 'member']) {
      const calls = await press(olive, someMessage, `inv:${b}:${role}`);
      expect(textsOf(calls)).toContain('That organisation is not one of yours');
      expect(textsOf(calls)).not.toContain('inv-');
      expect(callsOf(calls, 'sendInvoice')).toHaveLength(0);
    }
    for (const data of [`rot:${bKey!.keyId}`, `hist:${bKey!.keyId}:`, `tk:${bKey!.keyId}`, `ta:${bKey!.keyId}:100`]) {
      const calls = await press(olive, someMessage, data);
      expect(alertOf(calls), data).toMatchObject({
        show_alert: true,
        text: 'That key is not one of your active keys.',
      });
      expect(
        calls.filter((c) => c.method !== 'answerCallbackQuery'),
        data,
      ).toEqual([]);
    }
    // Invoices for B (Bea's, or made up with B's ids): Olive's pre-checkout is refused.
    const beasInvoice = callsOf(await say(bea, '/topup 100'), 'sendInvoice')[0]!;
    for (const payload of [
      beasInvoice.params.payload,
      `o1:${b}:${NANO_PER_STAR}`,
      `t1:${bKey!.keyId}:${NANO_PER_STAR}`,
    ]) {
      const answer = callsOf(
        await fake.deliver(fake.preCheckout(olive, { total_amount: 100, invoice_payload: payload })),
        'answerPreCheckoutQuery',
      )[0]!.params;
      expect(answer.ok, payload).toBe(false);
    }
    // /org, /topup and /invite show her only A.
    for (const cmd of ['/org', '/topup', '/invite member'])
      expect(textsOf(await say(olive, cmd)), cmd).not.toContain(b);
    expect(await written()).toEqual(before);
    expect((await balanceOf(b)).balance).toBe(usdToNano('1'));
  });

  it("a removed member's bot commands reach nothing of the organisation they left, though its keys live on", async () => {
    const nora = newUser('Nora');
    const pete = newUser('Pete');
    // Nora's account from /newkey is her organisation of one; she makes Pete an owner too.
    const apiKey = /<code>(prx-[0-9A-Za-z_-]+)<\/code>/.exec(textsOf(await say(nora, '/newkey')))![1]!;
    const [key] = (await billing().listKeys({ owner: ownerOf(nora.id) })).keys;
    const orgId = key!.accountId;
    await billing().topUp({ accountId: orgId, amountNano: usdToNano('1'), externalId: `seed-${orgId}`, cause: 'test' });
    await inviteAndJoin(nora, 'owner', pete);
    expect(await roleIn(orgId, pete)).toBe('owner');
    const oldInvoice = callsOf(await say(nora, '/topup 20'), 'sendInvoice')[0]!;
    const rotateAsk = firstMessage(await say(nora, '/rotate'));

    // Pete removes Nora, handing her keys to himself: the keys live on, Nora's reach ends.
    const noraMember = (await asTelegram(nora).whoAmI({})).memberId;
    const peteMember = (await asTelegram(pete).whoAmI({})).memberId;
    await asTelegram(pete).removeMember({
      organisationId: orgId,
      memberId: noraMember,
      handKeysToMemberId: peteMember,
    });
    expect((await db().query('SELECT owner FROM accounts WHERE id = $1', [orgId])).rows[0].owner).toBeNull();

    for (const cmd of ['/balance', '/usage', '/history', '/rotate', '/console', '/topup']) {
      const out = textsOf(await say(nora, cmd));
      expect(out).toContain('You have no key yet');
      expect(out).not.toContain(key!.prefix);
    }
    expect(textsOf(await say(nora, '/org'))).not.toContain(orgId);
    expect(textsOf(await say(nora, '/org'))).toContain('You belong to no organisation yet');
    for (const data of [`rot:${key!.keyId}`, `hist:${key!.keyId}:`, `ta:${key!.keyId}:100`, `tk:${key!.keyId}`]) {
      const calls = await press(nora, rotateAsk.result, data);
      expect(alertOf(calls)).toMatchObject({ show_alert: true, text: 'That key is not one of your active keys.' });
      expect(calls.filter((c) => c.method !== 'answerCallbackQuery')).toEqual([]);
    }
    expect((await preCheckout(nora, oldInvoice)).ok).toBe(false);
    const before = (await balanceOf(orgId)).balance;
    await openai(apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
    });
    expect((await balanceOf(orgId)).balance).toBeLessThan(before); // Pete's key now, still working
  });

  it("an owner demoted to member loses the bot's owner commands on that account: its keys, its history, its top-ups", async () => {
    const nora = newUser('Nora');
    const pete = newUser('Pete');
    await say(nora, '/newkey');
    const [key] = (await billing().listKeys({ owner: ownerOf(nora.id) })).keys;
    await inviteAndJoin(nora, 'owner', pete);
    const noraMember = (await asTelegram(nora).whoAmI({})).memberId;
    await asTelegram(pete).setMemberRole({ organisationId: key!.accountId, memberId: noraMember, role: Role.MEMBER });

    expect(textsOf(await say(nora, '/rotate'))).toContain('You have no key yet');
    expect(textsOf(await say(nora, '/history'))).toContain('You have no key yet');
    const topup = await say(nora, '/topup');
    expect(callsOf(topup, 'sendInvoice')).toHaveLength(0);
    expect(textsOf(topup)).toContain('Only owners and billing members may top up');
    expect(textsOf(await say(nora, '/org'))).toMatch(/ · member\nBalance: /);
  });
});

describe('who the bot acts as on OrganisationService', () => {
  it("over the RPC port the Telegram user header makes an operator call that user's, never more; with a member's key it is not read", async () => {
    const olive = newUser('Olive');
    const acme = await organisationOf(olive, '0');
    const who = await asTelegram(olive).whoAmI({});
    expect(who.operator).toBe(false);
    expect(who.memberships.map((m) => m.organisationId)).toEqual([acme.id]);
    // As that user, another organisation is not there.
    const other = await organisationOf(newUser('Other'), '0');
    expect((await refused(asTelegram(olive).getOrganisation({ organisationId: other.id }))).code).toBe(
      'organisation_not_found',
    );
    // A member's key with the header acts as the key's member, not as the user named.
    const made = await orgs().createOrganisation({ name: 'Keyed', ownerName: 'Kim', createOwnerKey: true });
    const keyed = createClient(
      OrganisationService,
      createGrpcTransport({
        baseUrl: inject('rpcUrl'),
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${made.ownerApiKey}`);
            req.header.set('x-gateway-telegram-user', ownerOf(olive.id));
            return next(req);
          },
        ],
      }),
    );
    expect((await keyed.whoAmI({})).memberId).toBe(made.ownerMemberId);
    // A malformed user is refused, naming the header.
    const bad = await refused(
      createClient(
        OrganisationService,
        createGrpcTransport({
          baseUrl: inject('rpcUrl'),
          interceptors: [
            (next) => (req) => {
              req.header.set('x-gateway-telegram-user', 'operator');
              return next(req);
            },
          ],
        }),
      ).whoAmI({}),
    );
    expect(bad).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(bad.message).toContain('x-gateway-telegram-user');
    // The bot's own transport never calls OrganisationService without a user (so never as the operator).
    const unnamed = await createClient(OrganisationService, networkTransport(inject('rpcUrl'), undefined))
      .listOrganisations({})
      .catch((e: unknown) => e);
    expect(ConnectError.from(unnamed).code).toBe(Code.Internal);
  });

  it('with ADMIN_TOKEN: the header counts only with the token; the bot inside the gateway and the bot apart both act as their user', {
    timeout: 120_000,
  }, async () => {
    const ADMIN_TOKEN = `admin-${uniqueMarker()}`;
    const inside = await FakeTelegram.start();
    const gw = await extraGateway('bot-organisations', {
      ADMIN_TOKEN,
      TELEGRAM_BOT_TOKEN: '222:INSIDE',
      TELEGRAM_API_ROOT: inside.url,
      PUBLIC_BASE_URL: PUBLIC,
      LOG_LEVEL: 'warn',
      VIDEO_WORKER: '0',
      TEMPORAL_CLI: NO_TEMPORAL_CLI,
      TEMPORAL_DEV_PORT: String(await freePort()),
    });
    const apart = await FakeTelegram.start();
    let apartBot: RunningBot | undefined;
    try {
      const olive = newUser('Olive');
      const adam = newUser('Adam');
      const acme = await organisationOf(olive, '3');
      for (const token of [undefined, 'wrong-token']) {
        const r = await refused(asTelegram(olive, gw.rpcUrl, token).whoAmI({}));
        expect(r.status).toBe(401);
      }
      expect((await asTelegram(olive, gw.rpcUrl, ADMIN_TOKEN).whoAmI({})).memberships[0]?.organisationId).toBe(acme.id);

      // In process: the gateway's own bot.
      const orgText = textsOf(await say(olive, '/org', inside));
      expect(orgText).toContain(' · owner\nBalance: $3.00');
      expect(textsOf(await inviteAndJoin(olive, 'admin', adam, inside))).toContain('as <b>admin</b>');
      expect(await roleIn(acme.id, adam)).toBe('admin');

      // Apart, over the network with the token: the same user, the same answers.
      apartBot = await startBot({
        config: botConfig(apart.url, '333:APART'),
        transport: networkTransport(gw.rpcUrl, ADMIN_TOKEN),
        log: createLogger('silent'),
      });
      expect(textsOf(await say(adam, '/org', apart))).toContain(' · admin\nBalance: $3.00');
      expect(textsOf(await say(olive, '/org', apart))).toContain(' · owner\nBalance: $3.00');
    } finally {
      await apartBot?.stop();
      await apart.close();
      expect(await gw.stop()).toBe(0);
      await inside.close();
    }
  });
});
