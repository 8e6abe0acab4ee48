// The console's side of a session (docs/console.md#security): the cookie that names it, and the
// checks every request makes of where it came from. The sessions themselves live in PostgreSQL
// (src/billing/console-sessions.ts), handed to the console by server.ts.
//
// - The cookie is `gw_console`, HttpOnly (no script reads it), SameSite=Strict (no other site's
//   page sends it), Path=/console, and Secure when the request came over TLS: directly, or
//   through a proxy that says so in X-Forwarded-Proto. Believing that header unchecked is safe
//   here: a client that claims TLS falsely only gets a cookie its own browser will not send back
//   over plain HTTP. It has no Max-Age: it ends with the browser, and the server ends it sooner.
// - A state-changing request must come from the console's own origin (Origin, when sent, names
//   the host the request was sent to; Sec-Fetch-Site, when sent, is not cross-site or same-site)
//   and carry the session's CSRF token in x-csrf-token.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'gw_console';
const COOKIE_PATH = '/console';

/** The session cookie's value in the request, or undefined. */
export function sessionCookieOf(req: FastifyRequest): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** True when the request reached the gateway over TLS, or through a proxy that says it did. */
export function overTls(req: FastifyRequest): boolean {
  if (req.protocol === 'https') return true;
  const forwarded = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim().toLowerCase();
  return first === 'https';
}

const attributes = (req: FastifyRequest) =>
  `Path=${COOKIE_PATH}; HttpOnly; SameSite=Strict${overTls(req) ? '; Secure' : ''}`;

/** Set-Cookie for a new session. */
export const sessionCookie = (req: FastifyRequest, value: string): string =>
  `${SESSION_COOKIE}=${value}; ${attributes(req)}`;

/** Set-Cookie that removes the session cookie from the browser. */
export const clearedSessionCookie = (req: FastifyRequest): string =>
  `${SESSION_COOKIE}=; ${attributes(req)}; Max-Age=0`;

const single = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/**
 * True when the request says it comes from another site: Sec-Fetch-Site cross-site or
 * same-site (a sibling host; SameSite=Strict still sends the cookie there), or an Origin whose
 * host is not the one the request was sent to (the Host header, or X-Forwarded-Host from a
 * proxy: a page on another site cannot set either on a request).
 */
export function fromAnotherSite(req: FastifyRequest): boolean {
  const site = single(req.headers['sec-fetch-site']);
  if (site === 'cross-site' || site === 'same-site') return true;
  const origin = single(req.headers.origin);
  if (origin === undefined) return false;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return true; // "null" (a sandboxed or file page) and anything unreadable
  }
  const forwardedHost = single(req.headers['x-forwarded-host'])?.split(',')[0]?.trim();
  return host !== req.headers.host && host !== forwardedHost;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** The request's x-csrf-token equals the session's, compared in constant time. */
export function csrfMatches(req: FastifyRequest, csrf: string): boolean {
  const sent = single(req.headers['x-csrf-token']);
  return sent !== undefined && timingSafeEqual(digest(sent), digest(csrf));
}
