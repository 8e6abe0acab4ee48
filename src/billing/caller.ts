// The caller of a keyed request, authenticated once at the edge (the facade's onRequest hook, or
// the RPC port before it reads a message) and carried through the call as a context value:
// nothing after the edge reads the raw key again.
import { createContextKey, type HandlerContext } from '@connectrpc/connect';
import { badRequest, unauthorized } from '../errors/errors.ts';

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
  /**
   * The end customer one request names (the x-gateway-customer header; docs/budgets.md#end-customers),
   * set on that request's copy of the caller only: the key's own caller never has one.
   */
  customer?: string;
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

/** The header a request names its end customer in (over HTTP and as gRPC metadata). */
export const CUSTOMER_HEADER = 'x-gateway-customer';
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
/** An end customer's id is at most this many characters. */
export const MAX_CUSTOMER_LENGTH = 128;

/**
 * An end customer's id as a request gives it (the header, or the body's user field), checked:
 * undefined for none, a 400 naming `param` for one that cannot key a budget window.
 */
export function customerId(value: unknown, param: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const text = typeof value === 'string' ? value.trim() : undefined;
  if (text === undefined || text === '' || [...text].length > MAX_CUSTOMER_LENGTH || CONTROL_CHARACTER.test(text))
    throw badRequest(
      `${param} names an end customer: 1 to ${MAX_CUSTOMER_LENGTH} characters, no control characters`,
      'invalid_customer',
      param,
    );
  return text;
}

/** The call's caller, with the end customer its request names in the CUSTOMER_HEADER (one copy per such request). */
export function requestCallerOf(ctx: HandlerContext): Caller {
  const caller = callerOf(ctx);
  const customer = customerId(ctx.requestHeader.get(CUSTOMER_HEADER) ?? undefined, CUSTOMER_HEADER);
  return customer === undefined ? caller : { ...caller, customer };
}
