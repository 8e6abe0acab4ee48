// Black Forest Labs (FLUX): an asynchronous API. POST /<model> starts a job and answers an id
// and a polling URL; polling answers a status and, when Ready, a signed URL of the image.
import { credentialHeader, withProviderHeaders, type Target } from './target.ts';

export function bfl(t: Target) {
  const base = new URL(t.provider.baseUrl);
  return {
    createUrl: `${t.provider.baseUrl}/${t.upstreamId}`,
    headers: withProviderHeaders(t, {
      ...credentialHeader(t, 'x-key'),
      'content-type': 'application/json',
      accept: 'application/json',
    }),
    /** The key goes only to the provider's own hosts (polling may be regional: api.eu.bfl.ai). */
    mayCarryKey(url: string): boolean {
      const u = new URL(url);
      return u.host === base.host || u.hostname === 'bfl.ai' || u.hostname.endsWith('.bfl.ai');
    },
  };
}

/** Polling statuses that end the job without an image. */
export const BFL_FAILED = new Set(['Error', 'Failed', 'Request Moderated', 'Content Moderated', 'Task not found']);
export const BFL_MODERATED = new Set(['Request Moderated', 'Content Moderated']);
