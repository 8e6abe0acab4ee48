// Providers that speak the OpenAI chat completions format: OpenAI, xAI, DeepSeek.
import type { ProviderConfig } from '../../config/config.ts';

export interface ChatProvider {
  chatUrl: string;
  headers: Record<string, string>;
  /** Field that caps output tokens when the gateway must lower or set it. */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
}

export function openAICompatible(pc: ProviderConfig): ChatProvider {
  return {
    chatUrl: `${pc.baseUrl}/chat/completions`,
    // Only what the upstream needs; nothing of the caller's request headers is passed on.
    headers: { authorization: `Bearer ${pc.apiKey ?? ''}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    // OpenAI's reasoning models refuse max_tokens; xAI and DeepSeek document max_tokens.
    maxTokensField: pc.name === 'openai' ? 'max_completion_tokens' : 'max_tokens',
  };
}
