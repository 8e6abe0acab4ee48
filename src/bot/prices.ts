// /prices: the prices in force for the bot's customers (their account group's markups
// included), as /v1/models lists them to their keys and as their requests are charged.
import { Composer } from 'grammy';
import type { Model } from '../gen/gateway/v1/catalogue_pb.js';
import type { BotContext } from './context.ts';

/** The price group every account the bot creates is in (migration 016), so its markups are the bot's customers' prices. */
const BOT_ACCOUNT_GROUP = 'bot';

/** Telegram takes 4096 characters a message; this leaves room. */
const MESSAGE_CHARS = 4000;

export const prices = new Composer<BotContext>();

prices.command('prices', async (ctx) => {
  const { models } = await ctx.catalogue.listModels({ availableOnly: true, accountGroup: BOT_ACCOUNT_GROUP });
  const lines = [
    'Prices per unit, in USD, as charged (other service tiers: GET /v1/models):',
    ...models.map(priceLine),
  ];
  for (const m of fillMessages(lines)) await ctx.reply(m);
});

/** As many lines as fit in a message, in as many messages as needed. */
function fillMessages(lines: string[]): string[] {
  const messages: string[] = [];
  for (const line of lines) {
    const last = messages.at(-1);
    if (last !== undefined && last.length + line.length + 1 <= MESSAGE_CHARS)
      messages[messages.length - 1] = `${last}\n${line}`;
    else messages.push(line);
  }
  return messages;
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

/** One model's customer prices on one line (the service tiers' and long-context variants left to /v1/models). */
function priceLine(m: Model): string {
  const prices = Object.entries(m.customerPrices)
    .filter(([k]) => !/^(priority|flex|long)_/.test(k))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `$${v} ${PRICE_LABELS[k] ?? k}`);
  return `${m.id}: ${prices.join(', ')}`;
}
