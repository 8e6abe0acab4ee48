// The headers every console answer carries (docs/console.md#security), pages, assets and API
// alike: a Content-Security-Policy with no inline script or style, no framing, no MIME sniffing
// and no Referer (a console URL names accounts and request ids).
import type { FastifyReply } from 'fastify';

export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** Sets the console's security headers on an answer (an onRequest or onSend hook of the console's scopes calls it). */
export function setConsoleHeaders(reply: FastifyReply): void {
  reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cross-origin-opener-policy', 'same-origin');
}
