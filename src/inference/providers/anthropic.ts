// Anthropic's Messages API: x-api-key auth, a version header, optional beta flags.
import type { ProviderConfig } from '../../config/config.ts';

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicCall {
  messagesUrl: string;
  countTokensUrl: string;
  headers: Record<string, string>;
}

/** The caller's anthropic-version and anthropic-beta pass on; nothing else of theirs does. */
export function anthropic(
  pc: ProviderConfig,
  passed: { version?: string | null; beta?: string | null } = {},
): AnthropicCall {
  const headers: Record<string, string> = {
    'x-api-key': pc.apiKey ?? '',
    'anthropic-version': passed.version || DEFAULT_ANTHROPIC_VERSION,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  if (passed.beta) headers['anthropic-beta'] = passed.beta;
  return {
    messagesUrl: `${pc.baseUrl}/v1/messages`,
    countTokensUrl: `${pc.baseUrl}/v1/messages/count_tokens`,
    headers,
  };
}
