// Operator tokens (ADMIN_TOKEN, METRICS_TOKEN) checked in constant time: both sides are hashed
// to equal-length digests first, so neither the content nor the length of the token leaks
// through how long a wrong guess takes.
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** True when an `authorization` header value is exactly `Bearer <token>`. */
export function bearerMatches(authorization: string | null | undefined, token: string): boolean {
  return timingSafeEqual(digest(authorization ?? ''), digest(`Bearer ${token}`));
}
