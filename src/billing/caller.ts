// The caller of a keyed request, authenticated once at the edge (the facade's onRequest hook, or
// the RPC port before it reads a message) and carried through the call as a context value:
// nothing after the edge reads the raw key again.
import { createContextKey, type HandlerContext } from '@connectrpc/connect';
import { unauthorized } from '../errors/errors.ts';

export interface Caller {
  /** The key's peppered hash: what holds, leases and rate windows know the key by. */
  keyHash: Buffer;
  keyId: string;
  accountId: string;
  /** The key's visible prefix (prx-…), as listings show it: never the key. */
  prefix: string;
  /** The account's price group ("" = the default): which markups it pays (docs/billing.md#markups). */
  group: string;
  /** Whose key it is (docs/organisations.md): a member's, or a team's; '' for the other. */
  memberId: string;
  teamId: string;
}

export const CALLER = createContextKey<Caller | undefined>(undefined, {
  description: 'the authenticated caller of a keyed call',
});

/** The call's caller; 401 for a call that reached a keyed service without one (never from the edges). */
export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(CALLER);
  if (!caller) throw unauthorized();
  return caller;
}
