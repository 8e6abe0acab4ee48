// The invitation page's one call (docs/console.md#signing-in): POST /console/api/invitation with
// the token of an invitation link (`/console/#invite=<token>`, which a browser never sends to a
// server), the new member's name and whether to make their first key. It redeems the invitation
// through OrganisationService as an invitee (someone who is nobody yet and may only redeem it),
// then signs the new member in: a member's session in the organisation they joined, with the
// first key shown this once. It takes no session, so it is checked as a sign-in is: same origin,
// JSON, and a failed try counted by the sign-in throttle (a link that does not work is answered
// alike whatever the reason).
import type { FastifyInstance } from 'fastify';
import { API, access, asActor, type RouteKit } from './kit.ts';
import { roleName } from './org-wire.ts';
import { sessionCookie, sessionCookieOf } from './sessions.ts';
import type { SignInThrottle } from './throttle.ts';
import { invalid, jsonObject } from './wire.ts';
import type { RedeemAnswer, RedeemRequest } from './web/wire-types.ts';
import { ConnectError } from '@connectrpc/connect';
import { toGatewayError } from '../errors/errors.ts';

export function registerInvitationRedeem(app: FastifyInstance, kit: RouteKit, throttle: SignInThrottle): void {
  const { orgs, deps } = kit;
  const log = deps.log.child({ component: 'console' });
  app.post(`${API}/invitation`, access('sign-in'), async (req, reply): Promise<RedeemAnswer> => {
    const body = jsonObject<RedeemRequest>(req.body);
    if (typeof body.token !== 'string' || body.token === '' || body.token.length > 200)
      throw invalid('token', 'the token of the invitation link');
    if (typeof body.name !== 'string') throw invalid('name', 'the name you go by, as text');
    if (body.create_key !== undefined && typeof body.create_key !== 'boolean')
      throw invalid('create_key', 'true or false');
    const address = req.ip;
    let r;
    try {
      r = await orgs.redeemInvitation(
        { token: body.token, name: body.name, createKey: body.create_key === true },
        asActor({ kind: 'invitee', via: 'console', from: address }),
      );
    } catch (err) {
      if (err instanceof ConnectError && toGatewayError(err).code === 'invitation_not_usable') {
        throttle.failed(address);
        log.warn({ address }, 'console invitation refused: the link does not work');
      }
      throw err;
    }
    // A session this browser already had ends: one cookie, one session.
    await deps.sessions.end(sessionCookieOf(req));
    const s = await deps.sessions.open({
      role: 'member',
      accountId: r.organisationId,
      memberId: r.memberId,
      keyId: r.keyId,
    });
    log.info({ accountId: r.organisationId, memberId: r.memberId, address }, 'console invitation redeemed');
    reply.header('set-cookie', sessionCookie(req, s.cookie));
    return {
      role: 'member',
      csrf: s.csrf,
      expires_at: s.expiresAt.toISOString(),
      organisation_id: r.organisationId,
      organisation_name: r.organisationName,
      member_id: r.memberId,
      org_role: roleName(r.role) || 'member',
      api_key: r.apiKey,
      key_id: r.keyId,
    };
  });
}
