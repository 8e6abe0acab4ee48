// Anthropic's Messages API: x-api-key auth, a version header, optional beta flags.
import { credentialHeader, withProviderHeaders, type Endpoint, type Target } from './target.ts';

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicCall {
  messagesUrl: string;
  countTokensUrl: string;
  headers: Record<string, string>;
}

/** The caller's anthropic-version and anthropic-beta pass on; nothing else of theirs does. */
export function anthropic(t: Target, passed: { version?: string | null; beta?: string | null } = {}): AnthropicCall {
  const headers: Record<string, string> = withProviderHeaders(t, {
    ...credentialHeader(t, 'x-api-key'),
    'anthropic-version': passed.version || DEFAULT_ANTHROPIC_VERSION,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  });
  if (passed.beta) headers['anthropic-beta'] = passed.beta;
  return {
    messagesUrl: `${t.provider.baseUrl}/v1/messages`,
    countTokensUrl: `${t.provider.baseUrl}/v1/messages/count_tokens`,
    headers,
  };
}

/** A Messages API call with the caller's version and beta headers. */
export const messagesEndpoint =
  (passed: { version?: string | null; beta?: string | null } = {}): Endpoint =>
  (t) => {
    const call = anthropic(t, passed);
    return { url: call.messagesUrl, headers: call.headers };
  };
