// Error answers in each route's own wire shape: OpenAI's {"error":{message,type,param,code}} and
// Anthropic's {"type":"error","error":{type,message}}.
import type { FastifyReply } from 'fastify';
import type { BudgetRefusal, GatewayError } from '../gen/gateway/v1/errors_pb.js';
import { scrub } from '../secrets/scrub.ts';

export type WireShape = 'openai' | 'anthropic';

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export function openAIError(
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
): OpenAIErrorBody {
  return { error: { message, type, param, code } };
}

/** Anthropic's error types by status, as its SDK and docs name them. */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 409:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 504:
      return 'timeout_error';
    case 529:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}

export function anthropicError(status: number, message: string) {
  return { type: 'error', error: { type: anthropicErrorType(status), message } };
}

export function errorBody(
  shape: WireShape,
  status: number,
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
): string {
  return JSON.stringify(
    shape === 'anthropic' ? anthropicError(status, message) : openAIError(message, type, code, param),
  );
}

/** The upstream's own error body when it is already in the route's shape, else one built from the fields. */
export function errorBodyOf(ge: GatewayError, shape: WireShape, status: number): string {
  if (ge.upstreamBody.length > 0) {
    try {
      const parsed = JSON.parse(Buffer.from(ge.upstreamBody).toString('utf8')) as { type?: unknown; error?: unknown };
      const fits =
        parsed &&
        typeof parsed.error === 'object' &&
        parsed.error !== null &&
        (shape === 'openai' || parsed.type === 'error');
      if (fits) return JSON.stringify(parsed);
    } catch {
      // not JSON: fall through to our own body
    }
  }
  return errorBody(shape, status, ge.message, ge.type, ge.code || null, ge.param || null);
}

/**
 * x-should-retry for an error status. Both official SDKs (openai, @anthropic-ai/sdk) obey it
 * before their own rules, and so do Claude Code's and Codex's HTTP layers: without it the SDKs
 * retry 409 and Claude Code retries 401 for minutes. False where the same request cannot succeed
 * by being sent again (a bad request, key, balance, route or size); true for 408, 429 and 5xx
 * (except 501), which keep retry-after where the gateway knows when to come back.
 */
export function shouldRetry(status: number): boolean {
  if (status === 408 || status === 429) return true;
  return status >= 500 && status !== 501;
}

export function sendGatewayError(reply: FastifyReply, ge: GatewayError, shape: WireShape): FastifyReply {
  const status = ge.httpStatus >= 400 && ge.httpStatus <= 599 ? ge.httpStatus : 500;
  if (ge.retryAfterSeconds > 0) reply.header('retry-after', String(ge.retryAfterSeconds));
  if (ge.requestId) reply.header('x-request-id', ge.requestId).header('request-id', ge.requestId);
  if (ge.budget) budgetHeaders(reply, ge.budget);
  // Failures are never charged; say so as plainly as on a success.
  reply.header('x-gateway-cost-nano-usd', '0');
  // The last line of defence for provider text (scrubbed where it was read): nothing leaves with a credential in it.
  return reply
    .code(status)
    .type('application/json')
    .send(scrub(errorBodyOf(ge, shape, status)));
}

/** A budget refusal's facts as headers (docs/budgets.md#refusals): a client reads them without parsing the message. */
function budgetHeaders(reply: FastifyReply, b: BudgetRefusal): void {
  reply
    .header('x-gateway-budget-id', b.budgetId)
    .header('x-gateway-budget-scope', b.scope)
    .header('x-gateway-budget-remaining-nano-usd', String(b.remainingNano));
  if (b.scopeId) reply.header('x-gateway-budget-scope-id', b.scopeId);
  if (b.resetsAtUnix > 0n)
    reply.header('x-gateway-budget-reset', new Date(Number(b.resetsAtUnix) * 1000).toISOString());
}
