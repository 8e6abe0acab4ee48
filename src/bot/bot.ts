// The Telegram bot: commands, buttons and Stars payments, all in terms of BillingService
// calls. It holds no money logic: the ledger decides every credit, debit and refund, once per
// payment id. The one thing it computes is Stars x configured rate, which it shows before the
// user pays and carries in the invoice payload so the credit is what was shown.
import { Bot, GrammyError, InlineKeyboard, type Context } from 'grammy';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { BillingService, KeyInfo } from '../gen/gateway/v1/billing_pb.js';
import type { CatalogueService, Model } from '../gen/gateway/v1/catalogue_pb.js';
import type { BotConfig } from '../config/bot-config.ts';
import { formatSignedUsd, formatUsd } from '../money/format.ts';
import { escapeHtml, formatTime, keyName } from './format.ts';

export type BillingClient = Client<typeof BillingService>;
export type CatalogueClient = Client<typeof CatalogueService>;

export interface BotDeps {
  config: BotConfig;
  billing: BillingClient;
  /** The models and their prices in force (the price book), for /prices. */
  catalogue: CatalogueClient;
  log: Logger;
  /** Ledger entries per /history page. */
  historyPageSize?: number;
}

/** Causes written on the ledger rows the bot brings about. */
export const CAUSES = {
  newKey: 'telegram-bot:newkey',
  payment: 'telegram-bot:payment',
  refund: 'telegram-bot:refund',
} as const;

/** External id of the top-up a Stars payment buys; its refund is found by the same id. */
export const paymentExternalId = (telegramPaymentChargeId: string): string =>
  `telegram-stars:${telegramPaymentChargeId}`;

/** Owner string of a Telegram user's accounts. */
export const ownerOf = (userId: number): string => `telegram:${userId}`;

export const COMMANDS = [
  { command: 'start', description: 'What this is and where to point your SDK' },
  { command: 'newkey', description: 'Create an API key (shown once)' },
  { command: 'balance', description: 'Balance, held and available' },
  { command: 'topup', description: 'Buy credit with Telegram Stars' },
  { command: 'usage', description: 'Your last requests and what they cost' },
  { command: 'prices', description: 'What each model costs, as charged' },
  { command: 'history', description: 'Top-ups, charges and refunds' },
  { command: 'rotate', description: 'Replace a key; the old one stops at once' },
  { command: 'console', description: 'A one-time sign-in link to the web console' },
  { command: 'paysupport', description: 'Help with payments and refunds' },
  { command: 'help', description: 'All commands' },
];

// Invoice payload: key id and the rate shown, so the credit is exactly what the user saw.
const PAYLOAD = /^t1:(key_[0-9A-Za-z]+):([1-9]\d{0,17})$/;
const payloadFor = (keyId: string, nanoPerStar: bigint) => `t1:${keyId}:${nanoPerStar}`;
function parsePayload(payload: string): { keyId: string; nanoPerStar: bigint } | undefined {
  const m = PAYLOAD.exec(payload);
  return m ? { keyId: m[1]!, nanoPerStar: BigInt(m[2]!) } : undefined;
}

/** Message contents people send (service messages, such as a pinned message, get no answer). */
const USER_CONTENT = [
  'sticker',
  'photo',
  'document',
  'voice',
  'video',
  'video_note',
  'audio',
  'animation',
  'location',
  'contact',
  'poll',
  'dice',
  'venue',
] as const;

const isNotFound = (err: unknown) => err instanceof ConnectError && err.code === Code.NotFound;
const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Internal, Code.Unknown, Code.Aborted]);

/** Retries a billing call that failed on the way (not one the service refused): a paid update must not be lost to a blip. */
async function withRetries<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !(err instanceof ConnectError && TRANSIENT.has(err.code))) throw err;
      await new Promise((r) => setTimeout(r, 250 * 2 ** i));
    }
  }
}

export function createBot(
  deps: BotDeps,
  bot: Bot = new Bot(deps.config.token, { client: { apiRoot: deps.config.apiRoot } }),
): Bot {
  const { config, billing } = deps;
  const log = deps.log.child({ component: 'telegram-bot' });
  const pageSize = deps.historyPageSize ?? 10;
  const html = { parse_mode: 'HTML' as const, link_preview_options: { is_disabled: true } };
  const rate = `1 Star = ${formatUsd(config.nanoPerStar)} of credit`;
  const bounds = `${config.minStars} to ${config.maxStars} Stars`;

  const ref = (keyId: string, owner: string) => ({ ref: { case: 'keyId' as const, value: keyId }, owner });
  const liveKeys = async (owner: string): Promise<KeyInfo[]> => (await billing.listKeys({ owner })).keys;
  const noKey = 'You have no key yet. /newkey creates one.';

  /** The sender's own private chat with the bot (in a private chat, its id is the user's). */
  function inPrivateChat(ctx: Context): boolean {
    return ctx.chat?.type === 'private' && ctx.from !== undefined && ctx.chat.id === ctx.from.id;
  }

  const paymentMessage = (ctx: Context) =>
    ctx.message?.successful_payment !== undefined || ctx.message?.refunded_payment !== undefined;

  /** A short refusal where the update allows one, and nothing else: no billing call. */
  async function refuseOutsidePrivateChat(ctx: Context): Promise<void> {
    const text = 'Please talk to me in a private chat: keys and balances are not for groups.';
    if (ctx.callbackQuery)
      return void (await ctx.answerCallbackQuery({ text, show_alert: true }).catch(() => undefined));
    if (ctx.inlineQuery)
      return void (await ctx.answerInlineQuery([], { cache_time: 0, is_personal: true }).catch(() => undefined));
    // In a group, answer commands only: replying to every message there would be noise.
    if (ctx.message?.text?.startsWith('/') && ctx.chat) await ctx.reply(text).catch(() => undefined);
  }

  /** Where to answer a payment message: the payer's private chat, wherever the message came. */
  const payerChat = (ctx: Context) => (inPrivateChat(ctx) ? ctx.chat!.id : ctx.from!.id);
  const tellPayer = (ctx: Context, text: string) => ctx.api.sendMessage(payerChat(ctx), text);

  function requireOwner(ctx: Context): string {
    if (!ctx.from) throw new Error('update without a sender');
    return ownerOf(ctx.from.id);
  }

  // Keys and balances are private: every update is refused outside the sender's own private
  // chat with the bot (commands, button presses, inline queries, anything), before any billing
  // call, so nothing of an account is ever read, changed or posted in a group. Two exceptions,
  // both Telegram's own record of money, never a user's: the pre-checkout query (it has no chat;
  // it only checks the payer holds the key) and the payment service messages (the Stars were
  // taken: they are credited, and answered in the payer's private chat only).
  bot.use(async (ctx, next) => {
    if (!inPrivateChat(ctx) && !ctx.preCheckoutQuery && !paymentMessage(ctx)) return refuseOutsidePrivateChat(ctx);
    try {
      await next();
    } catch (err) {
      log.error({ err, update: ctx.update.update_id }, 'telegram update failed');
      if (inPrivateChat(ctx))
        await ctx
          .reply('Sorry, something went wrong on our side. Please try again in a moment.')
          .catch(() => undefined);
    }
  });

  bot.command('start', async (ctx) => {
    await ctx.reply(
      [
        '<b>Welcome to the metered AI gateway.</b>',
        'One endpoint for OpenAI, Anthropic, xAI and DeepSeek models that your SDKs already speak, paid from the prepaid credit on your key.',
        '',
        `OpenAI SDKs (and Codex): base URL <code>${escapeHtml(config.publicBaseUrl)}/v1</code>`,
        `Anthropic SDKs (and Claude Code): base URL <code>${escapeHtml(config.publicBaseUrl)}</code>`,
        '',
        `Credit is bought with Telegram Stars: ${rate}; top-ups from ${bounds}.`,
        '',
        '/newkey creates your key. /help lists every command.',
      ].join('\n'),
      html,
    );
  });

  bot.command('help', async (ctx) => {
    await ctx.reply(COMMANDS.map((c) => `/${c.command} – ${c.description}`).join('\n'));
  });

  // /prices: the prices in force for the bot's customers (their account group's markups
  // included), as /v1/models lists them to their keys and as their requests are charged.
  bot.command('prices', async (ctx) => {
    const { models } = await deps.catalogue.listModels({ availableOnly: true, accountGroup: BOT_ACCOUNT_GROUP });
    const lines = models.map(priceLine);
    // Telegram takes 4096 characters a message: as many lines as fit, in as many messages as needed.
    const messages: string[] = [];
    for (const line of ['Prices per unit, in USD, as charged (other service tiers: GET /v1/models):', ...lines]) {
      const last = messages.at(-1);
      if (last !== undefined && last.length + line.length + 1 <= 4000)
        messages[messages.length - 1] = `${last}\n${line}`;
      else messages.push(line);
    }
    for (const m of messages) await ctx.reply(m);
  });

  bot.command('paysupport', async (ctx) => {
    await ctx.reply(config.supportText);
  });

  bot.command('newkey', async (ctx) => {
    const owner = requireOwner(ctx);
    const had = await liveKeys(owner);
    const name = ctx.from!.username ? `@${ctx.from!.username}` : String(ctx.from!.id);
    const r = await billing.createKey({
      owner,
      label: `telegram ${name}`,
      cause: CAUSES.newKey,
      // The welcome credit is one top-up per Telegram user: its external id makes a second /newkey credit nothing.
      creditsNano: config.welcomeCreditNano,
      externalId: config.welcomeCreditNano > 0n ? `telegram-welcome:${ctx.from!.id}` : '',
    });
    log.info({ owner, keyId: r.keyId, accountId: r.accountId }, 'key created');
    await ctx.reply(
      [
        'Your new API key. It is shown <b>only this once</b>: copy it now (tap to copy).',
        '',
        `<code>${escapeHtml(r.apiKey)}</code>`,
        '',
        `Balance: ${formatUsd(r.balanceNano)}${r.balanceNano > 0n ? ' (welcome credit)' : ''}. /topup adds credit.`,
        `Use it as the API key with base URL <code>${escapeHtml(config.publicBaseUrl)}/v1</code> (OpenAI) or <code>${escapeHtml(config.publicBaseUrl)}</code> (Anthropic).`,
        ...(had.length > 0
          ? [
              '',
              'This key has its own account and balance; your other keys keep working. To replace a key instead, use /rotate.',
            ]
          : []),
      ].join('\n'),
      html,
    );
  });

  bot.command('balance', async (ctx) => {
    const owner = requireOwner(ctx);
    const keys = await liveKeys(owner);
    if (keys.length === 0) return void (await ctx.reply(noKey));
    const parts: string[] = [];
    for (const k of keys) {
      const b = await billing.getBalance({ key: ref(k.keyId, owner) });
      parts.push(
        `Key ${keyName(k.prefix)}\nBalance: ${formatUsd(b.balanceNano)}\nHeld by running requests: ${formatUsd(b.heldNano)}\nAvailable: ${formatUsd(b.availableNano)}`,
      );
    }
    await ctx.reply(parts.join('\n\n'), html);
  });

  // /console: a one-time sign-in link per key (10 minutes, single use). The token travels in the
  // URL's fragment, which browsers never send to a server, so it reaches no access log; the
  // console's page posts it once and takes it out of the address bar (docs/console.md).
  bot.command('console', async (ctx) => {
    const owner = requireOwner(ctx);
    const keys = await liveKeys(owner);
    if (keys.length === 0) return void (await ctx.reply(noKey));
    const parts: string[] = [];
    for (const k of keys) {
      const link = await billing.createConsoleLink({ key: ref(k.keyId, owner) });
      const url = `${config.publicBaseUrl}/console/#link=${link.token}`;
      parts.push(`Key ${keyName(k.prefix)}:\n<a href="${escapeHtml(url)}">${escapeHtml(url)}</a>`);
    }
    await ctx.reply(
      [
        `Your sign-in link${keys.length > 1 ? 's' : ''} to the web console: each works <b>once</b>, within 10 minutes. Do not share ${keys.length > 1 ? 'them' : 'it'}.`,
        '',
        parts.join('\n\n'),
      ].join('\n'),
      html,
    );
  });

  // /topup [stars]: with one key straight to the amount (or the invoice); with several, pick the key first.
  async function amountMenu(ctx: Context, key: KeyInfo): Promise<void> {
    const presets = [
      ...new Set(
        [config.minStars, 100, 250, 500, 1000, 2500, 5000].filter((s) => s >= config.minStars && s <= config.maxStars),
      ),
    ];
    const kb = new InlineKeyboard();
    presets.forEach((s, i) => {
      kb.text(`${s} ⭐ → ${formatUsd(BigInt(s) * config.nanoPerStar)}`, `ta:${key.keyId}:${s}`);
      if (i % 2 === 1) kb.row();
    });
    await ctx.reply(
      `Top up key ${keyName(key.prefix)}\nRate: ${rate}.\nAmounts from ${bounds}. Pick one, or send /topup &lt;stars&gt;.`,
      { ...html, reply_markup: kb },
    );
  }

  async function sendInvoice(ctx: Context, key: KeyInfo, stars: number): Promise<void> {
    const credit = formatUsd(BigInt(stars) * config.nanoPerStar);
    await ctx.replyWithInvoice(
      `API credit ${credit}`,
      `${stars} Stars buy ${credit} of gateway credit for key ${key.prefix}… (${rate}).`,
      payloadFor(key.keyId, config.nanoPerStar),
      'XTR',
      [{ label: `${credit} of credit`, amount: stars }],
      // Stars: no payment provider. A start parameter makes forwarded copies of the invoice a
      // link to this bot instead of a Pay button, so an invoice is paid in the private chat only.
      { provider_token: '', start_parameter: 'topup' },
    );
  }

  const validStars = (n: number) => Number.isSafeInteger(n) && n >= config.minStars && n <= config.maxStars;

  bot.command('topup', async (ctx) => {
    const owner = requireOwner(ctx);
    const arg = ctx.match.trim();
    let stars: number | undefined;
    if (arg) {
      stars = /^\d+$/.test(arg) ? Number(arg) : NaN;
      if (!validStars(stars))
        return void (await ctx.reply(`Top-ups are whole numbers of Stars from ${bounds} (${rate}).`));
    }
    const keys = await liveKeys(owner);
    if (keys.length === 0) return void (await ctx.reply(noKey));
    if (keys.length === 1) return stars === undefined ? amountMenu(ctx, keys[0]!) : sendInvoice(ctx, keys[0]!, stars);
    const kb = new InlineKeyboard();
    for (const k of keys)
      kb.text(`${k.prefix}…`, stars === undefined ? `tk:${k.keyId}` : `ta:${k.keyId}:${stars}`).row();
    await ctx.reply('Which key should the credit go to?', { reply_markup: kb });
  });

  /** The caller's live key with this id, or undefined (not theirs, or no longer live). */
  async function ownedKey(ctx: Context, keyId: string): Promise<KeyInfo | undefined> {
    return (await liveKeys(requireOwner(ctx))).find((k) => k.keyId === keyId);
  }
  const notYours = 'That key is not one of your active keys.';

  bot.callbackQuery(/^tk:(key_[0-9A-Za-z]+)$/, async (ctx) => {
    const key = await ownedKey(ctx, ctx.match[1]!);
    if (!key) return void (await ctx.answerCallbackQuery({ text: notYours, show_alert: true }));
    await ctx.answerCallbackQuery();
    await amountMenu(ctx, key);
  });

  bot.callbackQuery(/^ta:(key_[0-9A-Za-z]+):(\d+)$/, async (ctx) => {
    const stars = Number(ctx.match[2]);
    const key = await ownedKey(ctx, ctx.match[1]!);
    if (!key) return void (await ctx.answerCallbackQuery({ text: notYours, show_alert: true }));
    if (!validStars(stars))
      return void (await ctx.answerCallbackQuery({ text: `Top-ups are from ${bounds}.`, show_alert: true }));
    await ctx.answerCallbackQuery();
    await sendInvoice(ctx, key, stars);
  });

  // Telegram asks before taking the Stars; answering within 10 s is required, so no retries here.
  bot.on('pre_checkout_query', async (ctx) => {
    const q = ctx.preCheckoutQuery;
    let problem: string | undefined;
    const p = parsePayload(q.invoice_payload);
    if (q.currency !== 'XTR' || !p) problem = 'This invoice is not one of ours. Send /topup for a fresh one.';
    else if (p.nanoPerStar !== config.nanoPerStar)
      problem = `The exchange rate has changed (now ${rate}). Send /topup for a fresh invoice.`;
    else if (!validStars(q.total_amount)) problem = `Top-ups are from ${bounds}.`;
    else {
      try {
        if (!(await ownedKey(ctx, p.keyId)))
          problem = 'This invoice is for a key you do not hold (any more). Send /topup for a fresh one.';
      } catch (err) {
        log.error({ err }, 'pre-checkout: billing unavailable');
        problem = 'Payments are briefly unavailable. Please try again in a minute.';
      }
    }
    if (problem) log.warn({ from: q.from.id, total: q.total_amount, problem }, 'pre-checkout refused');
    await (problem ? ctx.answerPreCheckoutQuery(false, { error_message: problem }) : ctx.answerPreCheckoutQuery(true));
  });

  // The Stars are taken: credit once per charge id (a redelivered update finds it applied).
  bot.on('message:successful_payment', async (ctx) => {
    const pay = ctx.message.successful_payment;
    const owner = requireOwner(ctx);
    const charge = pay.telegram_payment_charge_id;
    const p = parsePayload(pay.invoice_payload);
    if (pay.currency !== 'XTR' || !p) {
      log.error({ charge, owner, currency: pay.currency }, 'successful payment with an unknown invoice; not credited');
      return void (await tellPayer(
        ctx,
        `We could not match this payment to a key. Please send /paysupport with payment id ${charge}.`,
      ));
    }
    const amountNano = BigInt(pay.total_amount) * p.nanoPerStar;
    try {
      const r = await withRetries(() =>
        billing.topUp({
          key: ref(p.keyId, owner),
          amountNano,
          externalId: paymentExternalId(charge),
          cause: CAUSES.payment,
        }),
      );
      log.info(
        { charge, owner, stars: pay.total_amount, amountNano: amountNano.toString(), applied: r.applied },
        'stars payment',
      );
      await tellPayer(
        ctx,
        r.applied
          ? `Thank you! ${pay.total_amount} Stars: ${formatUsd(amountNano)} credited. Balance: ${formatUsd(r.balanceNano)}.`
          : `This payment (${pay.total_amount} Stars) was already credited. Balance: ${formatUsd(r.balanceNano)}.`,
      );
    } catch (err) {
      // Paid but not credited: loud in the log with the charge id, so an operator can reconcile.
      log.error({ err, charge, owner, stars: pay.total_amount }, 'stars payment NOT credited');
      await tellPayer(
        ctx,
        `Your payment arrived but crediting it failed. Please send /paysupport with payment id ${charge}.`,
      );
    }
  });

  // Telegram tells both sides when Stars go back (our /refund or otherwise): take back that payment's credit, once.
  bot.on('message:refunded_payment', async (ctx) => {
    const rp = ctx.message.refunded_payment;
    try {
      const r = await withRetries(() =>
        billing.refundTopUp({ externalId: paymentExternalId(rp.telegram_payment_charge_id), cause: CAUSES.refund }),
      );
      log.info(
        { charge: rp.telegram_payment_charge_id, applied: r.applied, refundedNano: r.refundedNano.toString() },
        'stars refund',
      );
      if (r.applied) await tellPayer(ctx, refundText(rp.total_amount, r.topupNano, r.refundedNano, r.balanceNano));
    } catch (err) {
      if (isNotFound(err))
        return void log.warn({ charge: rp.telegram_payment_charge_id }, 'refund of a payment that was never credited');
      // Nothing was taken back (nor recorded): an operator's /refund of the same payment repeats it.
      log.error(
        { err, charge: rp.telegram_payment_charge_id, user: ctx.from?.id },
        'stars refunded but the credit NOT taken back; /refund repeats it',
      );
      throw err;
    }
  });

  function refundText(stars: number, topupNano: bigint, refundedNano: bigint, balanceNano: bigint): string {
    const spent =
      refundedNano < topupNano ? ` of the ${formatUsd(topupNano)} it bought (the rest had already been used)` : '';
    return `Your payment of ${stars} Stars was refunded: ${formatUsd(refundedNano)} of credit taken back${spent}. Balance: ${formatUsd(balanceNano)}.`;
  }

  // /refund <user id> <payment id>: operators only. Stars first; the credit follows (also via refunded_payment).
  bot.command('refund', async (ctx) => {
    if (!ctx.from || !config.adminIds.has(ctx.from.id))
      return void (await ctx.reply(`Refunds are made by the gateway's operators. ${config.supportText}`));
    const m = /^(\d+)\s+(\S+)$/.exec(ctx.match.trim());
    if (!m) return void (await ctx.reply('usage: /refund <user id> <telegram payment charge id>'));
    const [userId, charge] = [Number(m[1]), m[2]!];
    try {
      await ctx.api.refundStarPayment(userId, charge);
    } catch (err) {
      const already = err instanceof GrammyError && /ALREADY_REFUNDED/i.test(err.description);
      if (!already)
        return void (await ctx.reply(
          `Telegram refused the refund: ${err instanceof GrammyError ? err.description : String(err)}`,
        ));
    }
    try {
      const r = await withRetries(() =>
        billing.refundTopUp({ externalId: paymentExternalId(charge), cause: CAUSES.refund }),
      );
      log.info(
        { charge, by: ctx.from.id, applied: r.applied, refundedNano: r.refundedNano.toString() },
        'stars refund by operator',
      );
      await ctx.reply(
        `Stars refunded for ${charge}. ${r.applied ? 'Took back' : 'Had already taken back'} ${formatUsd(r.refundedNano)} of the ${formatUsd(r.topupNano)} credited; account ${r.accountId} balance ${formatUsd(r.balanceNano)}.`,
      );
    } catch (err) {
      if (isNotFound(err))
        return void (await ctx.reply(`Stars refunded for ${charge}; no credit had been applied for this payment.`));
      if (!(err instanceof ConnectError && TRANSIENT.has(err.code))) throw err;
      // Nothing was taken back nor recorded (e.g. a lease held by an instance that did not answer): asking again repeats it.
      log.error({ err, charge, by: ctx.from.id }, 'stars refunded but the credit NOT taken back yet');
      await ctx.reply(
        `Stars refunded for ${charge}, but the credit could not be taken back yet: ${err.rawMessage} Send /refund ${userId} ${charge} again in a minute.`,
      );
    }
  });

  bot.command('rotate', async (ctx) => {
    const keys = await liveKeys(requireOwner(ctx));
    if (keys.length === 0) return void (await ctx.reply(noKey));
    for (const k of keys) {
      await ctx.reply(
        `Rotate key ${keyName(k.prefix)}?\nA new key replaces it on the same balance, and the old key stops working at once.`,
        {
          ...html,
          reply_markup: new InlineKeyboard().text('Rotate now', `rot:${k.keyId}`).text('Cancel', 'rotx'),
        },
      );
    }
  });

  bot.callbackQuery(/^rot:(key_[0-9A-Za-z]+)$/, async (ctx) => {
    const owner = requireOwner(ctx);
    let r;
    try {
      // The owner travels with the key: the service itself refuses another owner's key.
      r = await billing.rotateKey({ key: ref(ctx.match[1]!, owner) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return void (await ctx.answerCallbackQuery({ text: notYours, show_alert: true }));
    }
    log.info({ owner, keyId: r.keyId, revoked: r.revokedKeyId }, 'key rotated');
    await ctx.answerCallbackQuery({ text: 'Rotated' });
    await ctx.editMessageText('Key rotated: the old key no longer works.');
    await ctx.reply(
      [
        'Your new API key, on the same balance. It is shown <b>only this once</b>: copy it now.',
        '',
        `<code>${escapeHtml(r.apiKey)}</code>`,
      ].join('\n'),
      html,
    );
  });

  bot.callbackQuery('rotx', async (ctx) => {
    await ctx.answerCallbackQuery({ text: 'Cancelled' });
    await ctx.editMessageText('Rotation cancelled; your key is unchanged.');
  });

  bot.command('usage', async (ctx) => {
    const owner = requireOwner(ctx);
    const keys = await liveKeys(owner);
    if (keys.length === 0) return void (await ctx.reply(noKey));
    const parts: string[] = [];
    for (const k of keys) {
      const u = await billing.listUsage({ key: ref(k.keyId, owner), limit: 10 });
      const lines = u.records.map(
        (r) =>
          `${formatTime(r.createdAt)} · ${escapeHtml(r.model)} · ${escapeHtml(r.route)} · ${formatUsd(r.costNano)}${r.status === 'ok' ? '' : ` (${escapeHtml(r.status)})`}`,
      );
      parts.push(`Last requests on key ${keyName(k.prefix)}:\n${lines.join('\n') || 'none yet'}`);
    }
    await ctx.reply(parts.join('\n\n'), html);
  });

  const KIND: Record<string, string> = { topup: 'top-up', charge: 'request', refund: 'refund' };

  async function historyPage(
    owner: string,
    keyId: string,
    cursor: string,
  ): Promise<{ text: string; kb: InlineKeyboard }> {
    const page = await billing.listLedger({ key: ref(keyId, owner), pageSize, cursor });
    const lines = page.entries.map(
      (e) =>
        `${formatTime(e.createdAt)} · ${formatSignedUsd(e.amountNano)} ${KIND[e.kind] ?? e.kind} (${escapeHtml(e.cause)}) → ${formatUsd(e.balanceAfterNano)}`,
    );
    const kb = new InlineKeyboard();
    if (cursor) kb.text('« Newest', `hist:${keyId}:`);
    if (page.nextCursor) kb.text('Older ›', `hist:${keyId}:${page.nextCursor}`);
    return { text: `${cursor ? 'Earlier' : 'Latest'} account history:\n${lines.join('\n') || 'nothing yet'}`, kb };
  }

  bot.command('history', async (ctx) => {
    const owner = requireOwner(ctx);
    const keys = await liveKeys(owner);
    if (keys.length === 0) return void (await ctx.reply(noKey));
    for (const k of keys) {
      const { text, kb } = await historyPage(owner, k.keyId, '');
      await ctx.reply(`Key ${keyName(k.prefix)}\n${text}`, { ...html, reply_markup: kb });
    }
  });

  bot.callbackQuery(/^hist:(key_[0-9A-Za-z]+):(\d*)$/, async (ctx) => {
    let page;
    try {
      page = await historyPage(requireOwner(ctx), ctx.match[1]!, ctx.match[2]!);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return void (await ctx.answerCallbackQuery({ text: notYours, show_alert: true }));
    }
    await ctx.answerCallbackQuery();
    await ctx.editMessageText(page.text, { ...html, reply_markup: page.kb });
  });

  // Buttons of old messages the bot no longer knows.
  bot.on('callback_query:data', async (ctx) => {
    await ctx.answerCallbackQuery({ text: 'This button has expired.' });
  });

  // Anything else a person sends (an unknown command, plain or very long text, a sticker, a
  // photo...): a short, polite pointer, never an echo of what they sent.
  bot.on('message', async (ctx) => {
    const m = ctx.message;
    if (m.text?.startsWith('/')) return void (await ctx.reply("I don't know that command. /help lists what I can do."));
    const sent = m.text !== undefined || USER_CONTENT.some((kind) => m[kind] !== undefined);
    if (sent) await ctx.reply('I answer to commands only. /help lists them; /start says what this is.');
  });

  bot.catch((err) => log.error({ err: err.error, update: err.ctx.update.update_id }, 'telegram middleware error'));
  return bot;
}

/** What a price key means to a person. Keys the bot does not know are shown as they are. */
const PRICE_LABELS: Record<string, string> = {
  input_per_mtok: 'input /1M tokens',
  cached_input_per_mtok: 'cached input /1M tokens',
  cache_write_per_mtok: 'cache write /1M tokens',
  cache_write_1h_per_mtok: '1 h cache write /1M tokens',
  output_per_mtok: 'output /1M tokens',
  web_search_per_call: 'web search /call',
  per_audio_minute: '/audio minute',
  per_megapixel: '/megapixel',
  per_second: '/second of video',
  per_mchar: '/1M characters',
};

/** The price group every account the bot creates is in (migration 016), so its markups are the bot's customers' prices. */
const BOT_ACCOUNT_GROUP = 'bot';

/** One model's customer prices on one line (the service tiers' and long-context variants left to /v1/models). */
function priceLine(m: Model): string {
  const prices = Object.entries(m.customerPrices)
    .filter(([k]) => !/^(priority|flex|long)_/.test(k))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `$${v} ${PRICE_LABELS[k] ?? k}`);
  return `${m.id}: ${prices.join(', ')}`;
}
