// Why a request ended without an answer to charge for: the status its zero settle records (the
// usage row's status and HTTP status). Failures carry it from where they happen (the upstream
// call, the reply) to the one place that settles them (Metering.run, the stream run).
import { toGatewayError } from '../errors/errors.ts';

export interface Unbilled {
  outcome: string;
  httpStatus: number;
}

const UNBILLED = Symbol('unbilled');

/** `err`, marked with the outcome its zero settle records. */
export function withOutcome<E extends object>(err: E, outcome: string, httpStatus: number): E {
  (err as { [UNBILLED]?: Unbilled })[UNBILLED] = { outcome, httpStatus };
  return err;
}

/** The outcome a failure was marked with, if it was. */
export function markedOutcome(err: unknown): Unbilled | undefined {
  return err !== null && typeof err === 'object' ? (err as { [UNBILLED]?: Unbilled })[UNBILLED] : undefined;
}

/** The outcome a failure was marked with; an unmarked one is a caller who left, or a failure inside the gateway. */
export function outcomeOf(err: unknown): Unbilled {
  const marked = markedOutcome(err);
  if (marked) return marked;
  return isAbort(err)
    ? { outcome: 'client_closed', httpStatus: 499 }
    : { outcome: 'gateway_error', httpStatus: toGatewayError(err).httpStatus };
}

/** An abort: the caller left, or a timer gave up (undici's and Node's ways of saying so). */
export function isAbort(err: unknown): boolean {
  const e = err as { name?: string; code?: string };
  return e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED' || e?.code === 'ABORT_ERR';
}
