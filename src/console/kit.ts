// What the console API's route modules share (src/console/api.ts registers them): the prefix,
// the access each route declares, the service clients, the request's session, and who acts on an
// organisation for it (OrganisationService reads the ACTOR context value and nothing else).
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { type CallOptions, type Client, createContextValues, type Transport } from '@connectrpc/connect';
import type { BillingService } from '../gen/gateway/v1/billing_pb.js';
import type { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import type { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import type { Caller } from '../billing/caller.ts';
import { ACTOR, type Actor } from '../organisations/actor.ts';
import type { ConsoleSession, ConsoleSessions } from '../billing/console-sessions.ts';
import type { SignInThrottle } from './throttle.ts';

export const API = '/console/api';

/** Ledger rows and changes the operator makes in the console name this cause (the book's versions: their source). */
export const OPERATOR_CAUSE = 'console:operator';

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

/**
 * Who may call a route: anyone (sign-in), any session, a session of one role, or `account`: a
 * session with an account of its own (a team key's holder or a member; the routes answer each as
 * its scope allows).
 */
export type Access = 'sign-in' | 'session' | 'holder' | 'member' | 'account' | 'operator';

export type Billing = Client<typeof BillingService>;
export type Catalogue = Client<typeof CatalogueService>;
export type Orgs = Client<typeof OrganisationService>;

/** What the route modules get: the clients, and the live session of the request. */
export interface RouteKit {
  billing: Billing;
  catalogue: Catalogue;
  orgs: Orgs;
  deps: ConsoleApiDeps;
  sessionOf: (req: FastifyRequest) => ConsoleSession;
}

/** The actor of a member's or the operator's session, as OrganisationService reads it. */
export function actorOf(req: FastifyRequest, session: ConsoleSession): Actor {
  if (session.role === 'member') return { kind: 'member', memberId: session.memberId, via: 'console', from: req.ip };
  if (session.role === 'operator') return { kind: 'operator', via: 'console', from: req.ip };
  // A team key's holder acts for no member: the routes that reach OrganisationService are not theirs.
  throw new Error('a key holder session has no organisation actor');
}

/** Call options that carry the request's actor to OrganisationService. */
export const asActor = (actor: Actor): CallOptions => ({ contextValues: createContextValues().set(ACTOR, actor) });

/** Route options that declare who may call. */
export const access = (a: Access, bodyLimit = 16 * 1024) => ({ config: { consoleAccess: a }, bodyLimit });
