// /newkey and /rotate: a key is shown once, tap-to-copy, and never again.
import { Composer, InlineKeyboard } from 'grammy';
import { formatUsd } from '../money/format.ts';
import { CAUSES, isNotFound, keyRef } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, keyName } from './format.ts';
import { NO_KEY, NOT_YOURS, liveKeys, requireOwner } from './owner.ts';

export const keys = new Composer<BotContext>();

keys.command('newkey', async (ctx) => {
  const { config } = ctx;
  const owner = requireOwner(ctx);
  const had = await liveKeys(ctx, owner);
  const name = ctx.from!.username ? `@${ctx.from!.username}` : String(ctx.from!.id);
  const r = await ctx.billing.createKey({
    owner,
    label: `telegram ${name}`,
    cause: CAUSES.newKey,
    // The welcome credit is one top-up per Telegram user: its external id makes a second /newkey credit nothing.
    creditsNano: config.welcomeCreditNano,
    externalId: config.welcomeCreditNano > 0n ? `telegram-welcome:${ctx.from!.id}` : '',
  });
  ctx.log.info({ owner, keyId: r.keyId, accountId: r.accountId }, 'key created');
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
    HTML,
  );
});

// /rotate asks first, one message per key, each with its own confirm button.
keys.command('rotate', async (ctx) => {
  const owned = await liveKeys(ctx, requireOwner(ctx));
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  for (const k of owned) {
    await ctx.reply(
      `Rotate key ${keyName(k.prefix)}?\nA new key replaces it on the same balance, and the old key stops working at once.`,
      {
        ...HTML,
        reply_markup: new InlineKeyboard().text('Rotate now', `rot:${k.keyId}`).text('Cancel', 'rotx'),
      },
    );
  }
});

keys.callbackQuery(/^rot:(key_[0-9A-Za-z]+)$/, async (ctx) => {
  const owner = requireOwner(ctx);
  let r;
  try {
    // The owner travels with the key: the service itself refuses another owner's key.
    r = await ctx.billing.rotateKey({ key: keyRef(ctx.match[1]!, owner) });
  } catch (err) {
    if (!isNotFound(err)) throw err;
    return void (await ctx.answerCallbackQuery({ text: NOT_YOURS, show_alert: true }));
  }
  ctx.log.info({ owner, keyId: r.keyId, revoked: r.revokedKeyId }, 'key rotated');
  await ctx.answerCallbackQuery({ text: 'Rotated' });
  await ctx.editMessageText('Key rotated: the old key no longer works.');
  await ctx.reply(
    [
      'Your new API key, on the same balance. It is shown <b>only this once</b>: copy it now.',
      '',
      `<code>${escapeHtml(r.apiKey)}</code>`,
    ].join('\n'),
    HTML,
  );
});

keys.callbackQuery('rotx', async (ctx) => {
  await ctx.answerCallbackQuery({ text: 'Cancelled' });
  await ctx.editMessageText('Rotation cancelled; your key is unchanged.');
});
