// The Telegram bot: commands, buttons and Stars payments, all in terms of BillingService and
// OrganisationService calls (the latter as the user: acting.ts). It holds no money logic: the
// ledger decides every credit, debit and refund, once per payment id. Each feature is a Composer
// in its own file; createBot only assembles them.
import { Bot } from 'grammy';
import type { Logger } from 'pino';
import type { BotConfig } from '../config/bot-config.ts';
import { balance } from './balance.ts';
import { budgets } from './budgets.ts';
import { consoleLink } from './console-link.ts';
import type { BillingClient, BotContext, BotFlavor, CatalogueClient, OrganisationClient } from './context.ts';
import { fallbacks } from './fallbacks.ts';
import { help } from './help.ts';
import { history } from './history.ts';
import { inviting } from './invite.ts';
import { joining } from './join.ts';
import { keys } from './keys.ts';
import { organisations } from './organisations.ts';
import { payments } from './payments.ts';
import { prices } from './prices.ts';
import { privateChatOnly } from './private-chat.ts';
import { refunds } from './refunds.ts';
import { topUp } from './topup.ts';

export interface BotDeps {
  config: BotConfig;
  billing: BillingClient;
  /** The models and their prices in force (the price book), for /prices. */
  catalogue: CatalogueClient;
  /** Organisations, called as each update's Telegram user. */
  organisations: OrganisationClient;
  log: Logger;
  /** Ledger entries per /history page. */
  historyPageSize?: number;
}

export function createBot(
  deps: BotDeps,
  bot = new Bot<BotContext>(deps.config.token, { client: { apiRoot: deps.config.apiRoot } }),
): Bot<BotContext> {
  const flavor: BotFlavor = {
    config: deps.config,
    billing: deps.billing,
    catalogue: deps.catalogue,
    organisations: deps.organisations,
    log: deps.log.child({ component: 'telegram-bot' }),
    historyPageSize: deps.historyPageSize ?? 10,
  };
  // grammY's context flavor: each update carries what the features need, so they are plain
  // Composers of their own files rather than closures over these deps.
  bot.use(async (ctx, next) => {
    Object.assign(ctx, flavor);
    await next();
  });
  // First the guard: nothing of an account is read, changed or posted outside a private chat.
  bot.use(privateChatOnly);
  // joining before help: it takes the /start of an invitation link, help every other /start.
  bot.use(
    joining,
    help,
    prices,
    keys,
    balance,
    consoleLink,
    organisations,
    budgets,
    inviting,
    topUp,
    payments,
    refunds,
    history,
  );
  // Last: expired buttons and whatever no feature answered.
  bot.use(fallbacks);
  bot.catch((err) =>
    flavor.log.error({ err: err.error, update: err.ctx.update.update_id }, 'telegram middleware error'),
  );
  return bot;
}
