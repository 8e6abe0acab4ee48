// Reading what a provider answered: a unary JSON reply, and an error answer in whatever shape
// the provider wrote it, turned into the gateway's error (the facade writes it in the route's own
// shape). Reading charges nothing: a reply that cannot be used is a failure marked with its
// outcome (outcomes.ts) for the metering to settle.
import { isUtf8 } from 'node:buffer';
import type { ConnectError } from '@connectrpc/connect';
import { gatewayError } from '../../errors/errors.ts';
import { scrub } from '../../secrets/scrub.ts';
import { withOutcome } from '../../metering/outcomes.ts';
import type { Json } from '../../metering/plan.ts';
import { bomLength, upstreamFailure, type UpstreamResponse } from './upstream.ts';
import { noteAnswer } from './attempt-spans.ts';

const MAX_ERROR_BODY = 64 * 1024;

/**
 * A unary JSON reply; a broken or non-JSON body is a 502 (`upstream_bad_reply`). `bytes` is
 * `text` encoded: the reply's own bytes when they are valid UTF-8 without a BOM (no encode of a
 * reply passed on unchanged), else `text` encoded again.
 */
export async function readJson(
  res: UpstreamResponse,
  requestId: string,
): Promise<{ text: string; json: Json; bytes: Uint8Array }> {
  try {
    const buf = await res.body.bytes();
    // As undici's text(): a BOM skipped, invalid sequences replaced.
    const bom = bomLength(buf);
    const text = buf.toString('utf8', bom);
    const json = JSON.parse(text) as Json;
    if (json === null || typeof json !== 'object') throw new Error('not an object');
    noteAnswer(res.span, json);
    const bytes = bom === 0 && isUtf8(buf) ? buf : new TextEncoder().encode(text);
    return { text, json, bytes };
  } catch (err) {
    const failure = (err as { code?: string }).code?.startsWith('UND_ERR')
      ? upstreamFailure(err, requestId)
      : gatewayError({
          httpStatus: 502,
          type: 'server_error',
          code: 'upstream_bad_reply',
          message: 'The upstream provider sent a reply that is not JSON.',
          requestId,
        });
    throw withOutcome(failure, 'upstream_bad_reply', 502);
  }
}

/**
 * An upstream error answer as the gateway's error: the provider's message, type, param and code
 * kept where it has them, with a status that does not blame the caller for the gateway's
 * credentials. Marked `upstream_error` with the provider's own status.
 */
export async function readUpstreamError(res: UpstreamResponse, requestId: string): Promise<ConnectError> {
  let text = '';
  try {
    text = (await res.body.text()).slice(0, MAX_ERROR_BODY);
  } catch {
    /* body lost: the status is enough */
  }
  return withOutcome(
    upstreamErrorOf(res.statusCode, res.headers['retry-after'], text, requestId),
    'upstream_error',
    res.statusCode,
  );
}

/** The provider's error fields from whatever shape it answered in. */
export function providerErrorFields(text: string): { message?: string; type?: string; param?: string; code?: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    const plain = text.trim();
    return plain && !plain.startsWith('<') ? { message: plain.slice(0, 1_000) } : {};
  }
  const j = (parsed ?? {}) as Json;
  const e = (typeof j.error === 'object' && j.error !== null ? j.error : j) as Json;
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined);
  let message = str(e.message) ?? (typeof j.error === 'string' ? j.error : undefined) ?? str(j.message);
  if (!message && j.detail !== undefined) {
    message =
      typeof j.detail === 'string'
        ? j.detail
        : Array.isArray(j.detail)
          ? (j.detail as Json[]).map((d) => str(d?.msg) ?? JSON.stringify(d)).join('; ')
          : undefined;
  }
  return { message, type: str(e.type), param: str(e.param), code: str(e.code) };
}

/**
 * An upstream HTTP error as the gateway's error: the provider's words, the route's shape (the
 * facade writes it). The words pass the credential scrubber first (a provider may quote the
 * request's headers, whatever its status), before the text is cut anywhere.
 */
export function upstreamErrorOf(s: number, retryAfterHeader: unknown, text: string, requestId: string) {
  if (s >= 300 && s < 400) return upstreamRedirect(s, requestId);
  // 401/403 are about the gateway's own provider credentials: not the caller's fault.
  const credentials = s === 401 || s === 403;
  const status = credentials ? 502 : s;
  const f = credentials ? {} : scrubbedFields(providerErrorFields(scrub(text)));
  const retryAfter = Number(retryAfterHeader);
  const ownType =
    s === 429 ? 'rate_limit_error' : s >= 500 || status === 502 ? 'server_error' : 'invalid_request_error';
  return gatewayError({
    httpStatus: status,
    type: f.type && f.type !== 'error' ? f.type : ownType,
    code: f.code ?? (s === 429 ? 'upstream_rate_limited' : 'upstream_error'),
    ...(f.param ? { param: f.param } : {}),
    message:
      f.message ??
      (credentials
        ? "The upstream provider refused the gateway's credentials."
        : `The upstream provider answered ${s}.`),
    retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? Math.ceil(retryAfter) : s === 429 ? 1 : 0,
    requestId,
  });
}

/** Each field again after parsing: JSON escapes the scrub of the raw text did not know are decoded now. */
function scrubbedFields(f: ReturnType<typeof providerErrorFields>): ReturnType<typeof providerErrorFields> {
  const out: ReturnType<typeof providerErrorFields> = {};
  for (const k of ['message', 'type', 'param', 'code'] as const) if (f[k] !== undefined) out[k] = scrub(f[k]);
  return out;
}

/**
 * A redirect (301/302/307/308) is the provider's fault, not the caller's: the gateway follows none
 * (a redirect would carry the credential to another host), so it is a 502 in the upstream shape.
 */
export function upstreamRedirect(s: number, requestId: string) {
  return gatewayError({
    httpStatus: 502,
    type: 'server_error',
    code: 'upstream_redirect',
    message: `The upstream provider answered with a redirect (${s}), which the gateway does not follow.`,
    requestId,
  });
}

/** The `message` of an error object a provider sent, or the string it sent. */
export function errorMessage(e: unknown): string {
  if (e && typeof e === 'object' && typeof (e as Json).message === 'string') return (e as Json).message as string;
  return typeof e === 'string' ? e : '';
}
