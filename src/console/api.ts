// The console's JSON API under /console/api (docs/console.md#api), a Fastify plugin the facade
// registers on the HTTP port (server.ts hands it in). It is an edge like the facade: every figure
// comes from the services (BillingService, CatalogueService, OrganisationService) over the
// in-process transport. A holder's or member's account always comes from their session, never
// from the request; what a member may do there is OrganisationService's to decide, which the
// console asks as that member (the ACTOR context value), never deciding it itself.
//
// Each request is checked from its headers before its body is read (an onRequest hook): a state
// change must come from this origin as JSON; then the session (401 without a live one), its role
// (403), and for a state change its CSRF token (403). Sign-in is throttled (throttle.ts).
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { createClient } from '@connectrpc/connect';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import type { ConsoleSession, ConsoleSessions } from '../billing/console-sessions.ts';
import { visiblePrefix } from '../billing/keys.ts';
import { bearerMatches } from '../config/bearer.ts';
import { setConsoleHeaders } from './headers.ts';
import { csrfMatches, clearedSessionCookie, fromAnotherSite, sessionCookie, sessionCookieOf } from './sessions.ts';
import { SignInThrottle } from './throttle.ts';
import { type ClaimPrefix, consoleErrorHandler, registerConsoleFallback } from './refusals.ts';
import { ConsoleError, jsonObject } from './wire.ts';
import { registerHolderRoutes } from './holder-routes.ts';
import { registerOperatorRoutes } from './operator-routes.ts';
import { registerProviderRoutes } from './provider-routes.ts';
import { registerOrganisationRoutes } from './organisation-routes.ts';
import { registerInvitationRedeem } from './invitation-route.ts';
import { roleName } from './org-wire.ts';
import { API, access, type Access, actorOf, asActor, type ConsoleApiDeps, type Orgs, type RouteKit } from './kit.ts';
import type { Me, SessionAnswer, SessionEnded, SignInRequest } from './web/wire-types.ts';

export type { ConsoleApiDeps } from './kit.ts';

/** The fields of any member of a union (keyof a union has only the fields all members share). */
type FieldOfAny<U> = U extends unknown ? keyof U : never;
/** The fields of a sign-in, exactly one of which is sent. */
type SignInField = FieldOfAny<SignInRequest>;
const SIGN_IN_FIELDS = ['key', 'admin_token', 'link'] as const satisfies readonly SignInField[];

const isJson = (req: FastifyRequest) => /^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '');

export function consoleApi(deps: ConsoleApiDeps): FastifyPluginAsync<{ claimPrefix?: ClaimPrefix }> {
  const throttle = deps.throttle ?? new SignInThrottle();
  const billing = createClient(BillingService, deps.transport);
  const catalogue = createClient(CatalogueService, deps.transport);
  const orgs = createClient(OrganisationService, deps.transport);
  const log = deps.log.child({ component: 'console' });

  // An operator session holds an HMAC of its own cookie keyed by the admin token it was made
  // with: a gateway whose ADMIN_TOKEN changed (or was removed) honours none made before.
  const operatorCheck = (cookie: string): Buffer =>
    createHmac('sha256', deps.adminToken ?? '')
      .update(cookie, 'utf8')
      .digest();
  const operatorCheckHolds = (cookie: string, stored: Buffer | null): boolean =>
    deps.adminToken !== undefined &&
    stored !== null &&
    stored.length === 32 &&
    timingSafeEqual(stored, operatorCheck(cookie));

  // The facade hands its plugins a way to claim a path prefix (src/facade/app.ts): the console
  // answers everything under /console, requests no route takes included (refusals.ts).
  return async (app: FastifyInstance, opts: { claimPrefix?: ClaimPrefix }) => {
    registerConsoleFallback(app, log, opts.claimPrefix);
    app.decorateRequest('consoleSession', null);

    app.addHook('onRequest', async (req, reply) => {
      setConsoleHeaders(reply);
      reply.header('cache-control', 'no-store');
      const needs = req.routeOptions.config.consoleAccess ?? 'session';
      const changes = req.method !== 'GET' && req.method !== 'HEAD';
      if (changes) {
        if (fromAnotherSite(req)) throw new ConsoleError(403, 'csrf_failed', 'This request came from another site.');
        if (!isJson(req)) throw new ConsoleError(415, 'unsupported_media_type', 'Send the body as application/json.');
      }
      if (needs === 'sign-in') {
        const wait = throttle.refusal(req.ip);
        if (wait !== undefined) throw tooManyAttempts(wait);
        return;
      }
      const cookie = sessionCookieOf(req);
      const session = await deps.sessions.find(cookie);
      if (!session || (session.role === 'operator' && !operatorCheckHolds(cookie!, session.operatorCheck)))
        throw new ConsoleError(401, 'no_session', 'Sign in: there is no session, or it ended or expired.');
      if (!reaches(needs, session.role)) throw new ConsoleError(403, 'wrong_role', `Only ${WHO[needs]} may do this.`);
      if (changes && !csrfMatches(req, session.csrf))
        throw new ConsoleError(403, 'csrf_failed', "x-csrf-token is missing or is not this session's.");
      req.consoleSession = session;
    });

    app.setErrorHandler(consoleErrorHandler(log));

    const sessionOf = (req: FastifyRequest): ConsoleSession => {
      if (!req.consoleSession) throw new ConsoleError(401, 'no_session', 'Sign in first.');
      return req.consoleSession;
    };

    app.post(`${API}/session`, access('sign-in'), async (req, reply): Promise<SessionAnswer> => {
      const body = jsonObject<Record<SignInField, string>>(req.body);
      const given = SIGN_IN_FIELDS.filter((k) => body[k] !== undefined);
      const kind = given[0];
      const value = kind === undefined ? undefined : body[kind];
      if (given.length !== 1 || typeof value !== 'string' || value === '' || value.length > 512)
        throw new ConsoleError(400, 'invalid_request', 'Send exactly one of key, admin_token or link, as a string.');
      const address = req.ip;
      let who: Parameters<ConsoleSessions['open']>[0];
      if (kind === 'key') {
        const prefix = visiblePrefix(value);
        const wait = throttle.refusal(address, prefix);
        if (wait !== undefined) throw tooManyAttempts(wait);
        const caller = await deps.authenticate(value);
        if (!caller) {
          throttle.failed(address, prefix);
          log.warn({ address, prefix }, 'console sign-in refused: the key does not work');
          throw new ConsoleError(401, 'invalid_key', 'This key does not work: it is mistyped, unknown or revoked.');
        }
        // A member's own key signs its member in (the organisation as their role allows); a team's key, its holder (that key's own figures).
        who = caller.memberId
          ? { role: 'member', accountId: caller.accountId, memberId: caller.memberId, keyId: caller.keyId }
          : { role: 'holder', accountId: caller.accountId, keyId: caller.keyId };
      } else if (kind === 'admin_token') {
        if (!deps.adminToken)
          throw new ConsoleError(
            403,
            'operator_sign_in_disabled',
            'This gateway has no ADMIN_TOKEN, so nobody signs in as its operator here. Set ADMIN_TOKEN and restart it.',
          );
        if (!bearerMatches(`Bearer ${value}`, deps.adminToken)) {
          throttle.failed(address);
          log.warn({ address }, 'console sign-in refused: wrong admin token');
          throw new ConsoleError(401, 'invalid_admin_token', 'This is not the admin token.');
        }
        who = { role: 'operator', check: operatorCheck };
      } else {
        const link = await deps.sessions.redeemLink(value);
        if (!link) {
          throttle.failed(address);
          throw new ConsoleError(
            401,
            'invalid_link',
            'This sign-in link does not work: it was used already or has expired. Ask the bot for a new one (/console).',
          );
        }
        who = link.memberId ? { role: 'member', ...link } : { role: 'holder', ...link };
      }
      // A session this browser already had ends: one cookie, one session.
      await deps.sessions.end(sessionCookieOf(req));
      const s = await deps.sessions.open(who);
      log.info(
        { role: who.role, accountId: who.role === 'operator' ? undefined : who.accountId, address },
        'console sign-in',
      );
      reply.header('set-cookie', sessionCookie(req, s.cookie));
      return { role: who.role, csrf: s.csrf, expires_at: s.expiresAt.toISOString() };
    });

    app.post(`${API}/session/end`, access('session'), async (req, reply: FastifyReply): Promise<SessionEnded> => {
      await deps.sessions.end(sessionCookieOf(req));
      reply.header('set-cookie', clearedSessionCookie(req));
      return { ended: true };
    });

    app.get(`${API}/me`, access('session'), async (req): Promise<Me> => {
      const s = sessionOf(req);
      return {
        role: s.role,
        account_id: s.accountId,
        key_id: s.keyId,
        key_prefix: s.keyPrefix,
        group: s.group,
        csrf: s.csrf,
        expires_at: s.expiresAt.toISOString(),
        ...(s.role === 'member'
          ? await memberOf(orgs, s, asActor(actorOf(req, s)))
          : { member_id: '', member_name: '', organisation: null }),
      };
    });

    const kit: RouteKit = { billing, catalogue, orgs, deps, sessionOf };
    registerHolderRoutes(app, kit);
    registerOperatorRoutes(app, kit);
    registerProviderRoutes(app, kit);
    registerOrganisationRoutes(app, kit);
    registerInvitationRedeem(app, kit, throttle);
  };
}

/** Which sessions each access admits ('sign-in' and 'session': any). */
function reaches(needs: Access, role: ConsoleSession['role']): boolean {
  if (needs === 'sign-in' || needs === 'session') return true;
  if (needs === 'account') return role === 'holder' || role === 'member';
  return needs === role;
}

const WHO: Record<Access, string> = {
  'sign-in': 'anyone',
  session: 'a session',
  holder: "a team key's session",
  member: "a member's session",
  account: 'a key holder or member',
  operator: 'an operator session',
};

/** The member and their organisation, with their role there and what it allows (OrganisationService, as them). */
async function memberOf(
  orgs: Orgs,
  s: ConsoleSession,
  as: ReturnType<typeof asActor>,
): Promise<Pick<Me, 'member_id' | 'member_name' | 'organisation'>> {
  const [me, org] = await Promise.all([orgs.whoAmI({}, as), orgs.getOrganisation({ organisationId: s.accountId }, as)]);
  const o = org.organisation!;
  return {
    member_id: s.memberId,
    member_name: me.memberName,
    organisation: {
      id: o.id,
      name: o.name,
      role: roleName(o.myRole) || 'member',
      allowed_actions: [...o.allowedActions],
    },
  };
}

const tooManyAttempts = (seconds: number) =>
  new ConsoleError(429, 'too_many_attempts', `Too many failed sign-ins; try again in ${seconds} s.`, seconds);

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call a console API route (src/console/api.ts). */
    consoleAccess?: Access;
  }
  interface FastifyRequest {
    /** The console session the request was checked with (console API routes only). */
    consoleSession: ConsoleSession | null;
  }
}
