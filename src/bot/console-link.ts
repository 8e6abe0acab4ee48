// /console: a one-time sign-in link per key (10 minutes, single use). The token travels in the
// URL's fragment, which browsers never send to a server, so it reaches no access log; the
// console's page posts it once and takes it out of the address bar (docs/console.md).
import { Composer } from 'grammy';
import { keyRef } from './billing-calls.ts';
import type { BotContext } from './context.ts';
import { HTML, escapeHtml, keyName } from './format.ts';
import { NO_KEY, liveKeys, requireOwner } from './owner.ts';

export const consoleLink = new Composer<BotContext>();

consoleLink.command('console', async (ctx) => {
  const owner = requireOwner(ctx);
  const owned = await liveKeys(ctx, owner);
  if (owned.length === 0) return void (await ctx.reply(NO_KEY));
  const parts: string[] = [];
  for (const k of owned) {
    const link = await ctx.billing.createConsoleLink({ key: keyRef(k.keyId, owner) });
    const url = `${ctx.config.publicBaseUrl}/console/#link=${link.token}`;
    parts.push(`Key ${keyName(k.prefix)}:\n<a href="${escapeHtml(url)}">${escapeHtml(url)}</a>`);
  }
  const several = owned.length > 1;
  await ctx.reply(
    [
      `Your sign-in link${several ? 's' : ''} to the web console: each works <b>once</b>, within 10 minutes. Do not share ${several ? 'them' : 'it'}.`,
      '',
      parts.join('\n\n'),
    ].join('\n'),
    HTML,
  );
});
