// /start, /help and /paysupport: what the gateway is, where to point an SDK, every command.
import { Composer } from 'grammy';
import { COMMANDS } from './commands.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml } from './format.ts';
import { starRate, topUpBounds } from './stars.ts';

export const help = new Composer<BotContext>();

help.command('start', async (ctx) => {
  const { config } = ctx;
  await ctx.reply(
    [
      '<b>Welcome to the metered AI gateway.</b>',
      'One endpoint for OpenAI, Anthropic, xAI and DeepSeek models that your SDKs already speak, paid from the prepaid credit on your key.',
      '',
      `OpenAI SDKs (and Codex): base URL <code>${escapeHtml(config.publicBaseUrl)}/v1</code>`,
      `Anthropic SDKs (and Claude Code): base URL <code>${escapeHtml(config.publicBaseUrl)}</code>`,
      '',
      `Credit is bought with Telegram Stars: ${starRate(config)}; top-ups from ${topUpBounds(config)}.`,
      '',
      '/newkey creates your key. /help lists every command.',
    ].join('\n'),
    HTML,
  );
});

help.command('help', async (ctx) => {
  await ctx.reply(COMMANDS.map((c) => `/${c.command} – ${c.description}`).join('\n'));
});

help.command('paysupport', async (ctx) => {
  await ctx.reply(ctx.config.supportText);
});
