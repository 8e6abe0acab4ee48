// What the console API's route modules share (src/console/api.ts registers them): the prefix,
// the access each route declares, the service clients and the request's session.
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Client, Transport } from '@connectrpc/connect';
import type { BillingService } from '../gen/gateway/v1/billing_pb.js';
import type { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import type { Caller } from '../billing/caller.ts';
import type { ConsoleSession, ConsoleSessions } from '../billing/console-sessions.ts';
import type { SignInThrottle } from './throttle.ts';

export const API = '/console/api';

export interface ConsoleApiDeps {
  transport: Transport;
  /** The sessions and one-time links (PostgreSQL), from server.ts. */
  sessions: ConsoleSessions;
  /** The caller of a live gateway key (KeyCheck.authenticate), or undefined. */
  authenticate: (apiKey: string | undefined) => Promise<Caller | undefined>;
  /** ADMIN_TOKEN: the operator signs in with it; without one, nobody signs in as operator. */
  adminToken: string | undefined;
  /** A video job's workflow page in the Temporal UI ('' when unknown). */
  workflowPage: (workflowId: string) => string;
  /**
   * TRACE_UI_URL (config.tracing.uiUrl): a trace's address in the operator's trace UI, `{trace_id}`
   * standing for its id; the operator's request rows link there. Unset: no links.
   */
  traceUiUrl?: string | undefined;
  log: Logger;
  throttle?: SignInThrottle;
}

/** Who may call a route: anyone (sign-in), any session, or a session of one role. */
export type Access = 'sign-in' | 'session' | 'holder' | 'operator';

export type Billing = Client<typeof BillingService>;
export type Catalogue = Client<typeof CatalogueService>;

/** What the route modules get: the clients, and the live session of the request. */
export interface RouteKit {
  billing: Billing;
  catalogue: Catalogue;
  deps: ConsoleApiDeps;
  sessionOf: (req: FastifyRequest) => ConsoleSession;
}

/** Route options that declare who may call. */
export const access = (a: Access, bodyLimit = 16 * 1024) => ({ config: { consoleAccess: a }, bodyLimit });
