// Error answers in the OpenAI wire shape: {"error":{"message","type","param","code"}}.
import type { FastifyReply } from 'fastify';
import type { GatewayError } from '../gen/gateway/v1/errors_pb.js';

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export function openAIError(message: string, type: string, code: string | null = null, param: string | null = null): OpenAIErrorBody {
  return { error: { message, type, param, code } };
}

/** The upstream's own error body when it is already in our shape, else one built from the fields. */
export function errorBodyOf(ge: GatewayError): string {
  if (ge.upstreamBody.length > 0) {
    try {
      const parsed = JSON.parse(Buffer.from(ge.upstreamBody).toString('utf8')) as { error?: unknown };
      if (parsed && typeof parsed.error === 'object' && parsed.error !== null) return JSON.stringify(parsed);
    } catch {
      // not JSON: fall through to our own body
    }
  }
  return JSON.stringify(openAIError(ge.message, ge.type, ge.code || null, ge.param || null));
}

export function sendGatewayError(reply: FastifyReply, ge: GatewayError): FastifyReply {
  const status = ge.httpStatus >= 400 && ge.httpStatus <= 599 ? ge.httpStatus : 500;
  if (ge.retryAfterSeconds > 0) reply.header('retry-after', String(ge.retryAfterSeconds));
  if (ge.requestId) reply.header('x-request-id', ge.requestId);
  // Failures are never charged; say so as plainly as on a success.
  reply.header('x-gateway-cost-nano-usd', '0');
  return reply.code(status).type('application/json').send(errorBodyOf(ge));
}
