// How the bot calls the services: the causes it writes on the ledger, key references scoped to
// their owner, and which failures are worth another try.
import { Code, ConnectError } from '@connectrpc/connect';

/** Causes written on the ledger rows the bot brings about. */
export const CAUSES = {
  newKey: 'telegram-bot:newkey',
  payment: 'telegram-bot:payment',
  refund: 'telegram-bot:refund',
} as const;

/**
 * A Stars payment's cause names its payer (`telegram-bot:payment:telegram:<user id>`): a refund
 * by an organisation's member finds there whom Telegram gives the Stars back to.
 */
export const paymentCause = (payer: string): string => `${CAUSES.payment}:${payer}`;

/** The Telegram user id a payment's cause names; undefined for a top-up paid before payers were named, or not with Stars. */
export function payerOf(cause: string): number | undefined {
  const m = /^telegram-bot:payment:telegram:(\d{1,15})$/.exec(cause);
  return m ? Number(m[1]) : undefined;
}

/** A refund asked for by an organisation's member names them (the operator's and Telegram's are `telegram-bot:refund`). */
export const memberRefundCause = (by: string): string => `${CAUSES.refund}:${by}`;

/** A key named to the service together with its owner: the service refuses another owner's key. */
export const keyRef = (keyId: string, owner: string) => ({ ref: { case: 'keyId' as const, value: keyId }, owner });

export const isNotFound = (err: unknown): boolean => err instanceof ConnectError && err.code === Code.NotFound;

const REFUSALS = new Set([
  Code.NotFound,
  Code.PermissionDenied,
  Code.InvalidArgument,
  Code.FailedPrecondition,
  Code.AlreadyExists,
]);

/** The service refused the call (not yours, not allowed, bad input, a rule): its message is for the user. */
export const isRefusal = (err: unknown): err is ConnectError => err instanceof ConnectError && REFUSALS.has(err.code);

const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Internal, Code.Unknown, Code.Aborted]);

/** A call that failed on the way, not one the service refused: asking again may succeed. */
export const isTransient = (err: unknown): err is ConnectError =>
  err instanceof ConnectError && TRANSIENT.has(err.code);

/** Retries a billing call that failed on the way (not one the service refused): a paid update must not be lost to a blip. */
export async function withRetries<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= attempts || !isTransient(err)) throw err;
      await new Promise((r) => setTimeout(r, 250 * 2 ** i));
    }
  }
}
