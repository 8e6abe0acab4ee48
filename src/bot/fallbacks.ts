// What no feature answered: used last, after every feature, so it only sees the rest.
import { Composer } from 'grammy';
import type { BotContext } from './context.ts';

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

export const fallbacks = new Composer<BotContext>();

// Buttons of old messages the bot no longer knows.
fallbacks.on('callback_query:data', async (ctx) => {
  await ctx.answerCallbackQuery({ text: 'This button has expired.' });
});

// Anything else a person sends (an unknown command, plain or very long text, a sticker, a
// photo...): a short, polite pointer, never an echo of what they sent.
fallbacks.on('message', async (ctx) => {
  const m = ctx.message;
  if (m.text?.startsWith('/')) return void (await ctx.reply("I don't know that command. /help lists what I can do."));
  const sent = m.text !== undefined || USER_CONTENT.some((kind) => m[kind] !== undefined);
  if (sent) await ctx.reply('I answer to commands only. /help lists them; /start says what this is.');
});
