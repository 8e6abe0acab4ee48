// Providers that speak the OpenAI chat completions format: OpenAI, xAI, DeepSeek.
import type { ProviderConfig } from '../../config/config.ts';

export interface ChatProvider {
  chatUrl: string;
  headers: Record<string, string>;
  /** Field that caps output tokens when the gateway must lower or set it. */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
  /** Honours max_tokens only, not max_completion_tokens (DeepSeek): a cap goes to it as max_tokens. */
  readsMaxTokensOnly: boolean;
  /** Another endpoint of the same API, e.g. url('/embeddings'). */
  url(path: string): string;
  /** Authorization only, for multipart bodies (the form sets its own content type). */
  authHeaders: Record<string, string>;
}

export function openAICompatible(pc: ProviderConfig): ChatProvider {
  return {
    chatUrl: `${pc.baseUrl}/chat/completions`,
    // Only what the upstream needs; nothing of the caller's request headers is passed on.
    headers: {
      authorization: `Bearer ${pc.apiKey ?? ''}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    // OpenAI's reasoning models refuse max_tokens; xAI and DeepSeek document max_tokens.
    maxTokensField: pc.name === 'openai' ? 'max_completion_tokens' : 'max_tokens',
    readsMaxTokensOnly: pc.name === 'deepseek',
    url: (path) => `${pc.baseUrl}${path}`,
    authHeaders: { authorization: `Bearer ${pc.apiKey ?? ''}` },
  };
}
