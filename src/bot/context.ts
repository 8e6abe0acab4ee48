// What every feature of the bot reaches through its context (grammY's "context flavor"): the
// services, settings and log the bot was made with, set on each update by createBot, so each
// feature can be a Composer of its own file instead of a closure inside createBot.
import type { Context } from 'grammy';
import type { Client } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { BillingService } from '../gen/gateway/v1/billing_pb.js';
import type { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import type { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import type { BotConfig } from '../config/bot-config.ts';

export type BillingClient = Client<typeof BillingService>;
export type CatalogueClient = Client<typeof CatalogueService>;
export type OrganisationClient = Client<typeof OrganisationService>;

export interface BotFlavor {
  config: BotConfig;
  billing: BillingClient;
  /** The models and their prices in force (the price book), for /prices. */
  catalogue: CatalogueClient;
  /** Organisations, called as the update's Telegram user, never as the operator (`asUser`, acting.ts). */
  organisations: OrganisationClient;
  /** The bot's own log (component telegram-bot). */
  log: Logger;
  /** Ledger entries per /history page. */
  historyPageSize: number;
}

export type BotContext = Context & BotFlavor;
