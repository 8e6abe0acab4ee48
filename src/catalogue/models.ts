// The catalogue: every model the gateway knows, in one declarative list. Prices are decimal
// USD strings; the key names the unit. Prices the spec fixes are marked "spec"; the others are
// realistic list prices for the provider's tier and can be edited here.
//
// Chat prices: input/cached_input/output per 1M tokens; cache_write (5-minute) and
// cache_write_1h where the provider charges writes; a variant prefix for the prices a request
// can be billed at instead: `priority_` and `flex_` (OpenAI service tiers), `long_` (the whole
// request past longContextAboveTokens input tokens). Server tool fees are per call
// (web_search_per_call). A request that could be billed at anything not priced here is refused
// (docs/billing.md), so these keys are the whole list of what the gateway can bill.
import type { ProviderName } from '../config/config.ts';

export type ModelKindName = 'chat' | 'embedding' | 'image' | 'transcription' | 'speech' | 'video';

export interface CatalogueEntry {
  id: string;
  kind: ModelKindName;
  provider: ProviderName;
  upstreamId: string;
  enabled: boolean;
  /** Served natively on /v1/responses (others are rewritten to chat completions). */
  responsesPassthrough?: boolean;
  /** The most input the provider lets one pass over the context read: the hold for input the gateway cannot see. */
  contextWindow: number;
  /** Ceiling for output tokens when the request names none. */
  maxOutputTokens: number;
  prices: Record<string, string>;
  /** Past this many input tokens the whole request is billed at the `long_` prices. */
  longContextAboveTokens?: number;
  /** The provider's output cap does not bound its reasoning tokens (xAI): the hold adds maxOutputTokens of them. */
  reasoningBeyondCap?: boolean;
}

const chat = (id: string, provider: ProviderName, contextWindow: number, maxOutputTokens: number, prices: Record<string, string>, extra: Partial<CatalogueEntry> = {}): CatalogueEntry => ({
  id,
  kind: 'chat',
  provider,
  upstreamId: id,
  enabled: true,
  contextWindow,
  maxOutputTokens,
  prices,
  ...extra,
});

const passthrough = { responsesPassthrough: true };

export const MODELS: readonly CatalogueEntry[] = [
  // OpenAI, served natively on /v1/responses as well. Priority costs twice the list price, flex half.
  chat(
    'gpt-5.6-sol',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '2.50',
      cached_input_per_mtok: '0.25',
      output_per_mtok: '20.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '5.00',
      priority_cached_input_per_mtok: '0.50',
      priority_output_per_mtok: '40.00',
      flex_input_per_mtok: '1.25',
      flex_cached_input_per_mtok: '0.125',
      flex_output_per_mtok: '10.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.6-luna',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '0.50',
      cached_input_per_mtok: '0.05',
      output_per_mtok: '4.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '1.00',
      priority_cached_input_per_mtok: '0.10',
      priority_output_per_mtok: '8.00',
      flex_input_per_mtok: '0.25',
      flex_cached_input_per_mtok: '0.025',
      flex_output_per_mtok: '2.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.6-terra',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '1.00',
      cached_input_per_mtok: '0.10',
      output_per_mtok: '8.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '2.00',
      priority_cached_input_per_mtok: '0.20',
      priority_output_per_mtok: '16.00',
      flex_input_per_mtok: '0.50',
      flex_cached_input_per_mtok: '0.05',
      flex_output_per_mtok: '4.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.5',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '1.25',
      cached_input_per_mtok: '0.125',
      output_per_mtok: '10.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '2.50',
      priority_cached_input_per_mtok: '0.25',
      priority_output_per_mtok: '20.00',
      flex_input_per_mtok: '0.625',
      flex_cached_input_per_mtok: '0.0625',
      flex_output_per_mtok: '5.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.4-mini',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '0.25',
      cached_input_per_mtok: '0.025',
      output_per_mtok: '2.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '0.45',
      priority_cached_input_per_mtok: '0.045',
      priority_output_per_mtok: '3.60',
      flex_input_per_mtok: '0.125',
      flex_cached_input_per_mtok: '0.0125',
      flex_output_per_mtok: '1.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.4-nano',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '0.05',
      cached_input_per_mtok: '0.005',
      output_per_mtok: '0.40',
      web_search_per_call: '0.01',
      flex_input_per_mtok: '0.025',
      flex_cached_input_per_mtok: '0.0025',
      flex_output_per_mtok: '0.20',
    },
    passthrough,
  ),
  chat(
    'gpt-4.1',
    'openai',
    1_047_576,
    32_768,
    {
      input_per_mtok: '2.00',
      cached_input_per_mtok: '0.50',
      output_per_mtok: '8.00',
      web_search_per_call: '0.025',
      priority_input_per_mtok: '3.50',
      priority_cached_input_per_mtok: '0.875',
      priority_output_per_mtok: '14.00',
    },
    passthrough,
  ),
  chat(
    'gpt-5.3-codex',
    'openai',
    400_000,
    128_000,
    {
      input_per_mtok: '1.25',
      cached_input_per_mtok: '0.125',
      output_per_mtok: '10.00',
      web_search_per_call: '0.01',
      priority_input_per_mtok: '2.50',
      priority_cached_input_per_mtok: '0.25',
      priority_output_per_mtok: '20.00',
    },
    passthrough,
  ),
  // OpenAI, chat completions only.
  chat('gpt-4o-mini', 'openai', 128_000, 16_384, {
    input_per_mtok: '0.15',
    cached_input_per_mtok: '0.075',
    output_per_mtok: '0.60',
    priority_input_per_mtok: '0.25',
    priority_cached_input_per_mtok: '0.125',
    priority_output_per_mtok: '1.00',
  }),
  chat('gpt-4o', 'openai', 128_000, 16_384, {
    input_per_mtok: '2.50',
    cached_input_per_mtok: '1.25',
    output_per_mtok: '10.00',
    priority_input_per_mtok: '4.25',
    priority_cached_input_per_mtok: '2.125',
    priority_output_per_mtok: '17.00',
  }),

  // Anthropic (Claude family): /v1/messages natively. Cache writes cost 1.25x the input price for
  // 5 minutes, 2x for an hour; web search $10 per 1,000 searches. Sonnet 4.6 bills a request
  // past 200k input tokens at its long-context prices.
  chat('claude-opus-4-8', 'anthropic', 1_000_000, 64_000, {
    input_per_mtok: '5.00',
    cached_input_per_mtok: '0.50',
    cache_write_per_mtok: '6.25',
    cache_write_1h_per_mtok: '10.00',
    output_per_mtok: '25.00',
    web_search_per_call: '0.01',
  }),
  chat(
    'claude-sonnet-4-6',
    'anthropic',
    1_000_000,
    64_000,
    {
      input_per_mtok: '3.00',
      cached_input_per_mtok: '0.30',
      cache_write_per_mtok: '3.75',
      cache_write_1h_per_mtok: '6.00',
      output_per_mtok: '15.00',
      web_search_per_call: '0.01',
      long_input_per_mtok: '6.00',
      long_cached_input_per_mtok: '0.60',
      long_cache_write_per_mtok: '7.50',
      long_cache_write_1h_per_mtok: '12.00',
      long_output_per_mtok: '22.50',
    },
    { longContextAboveTokens: 200_000 },
  ),
  chat('claude-haiku-4-5', 'anthropic', 200_000, 64_000, {
    input_per_mtok: '1.00',
    cached_input_per_mtok: '0.10',
    cache_write_per_mtok: '1.25',
    cache_write_1h_per_mtok: '2.00',
    output_per_mtok: '5.00',
    web_search_per_call: '0.01',
  }),
  chat('claude-fable-5', 'anthropic', 1_000_000, 64_000, {
    input_per_mtok: '4.00',
    cached_input_per_mtok: '0.40',
    cache_write_per_mtok: '5.00',
    cache_write_1h_per_mtok: '8.00',
    output_per_mtok: '20.00',
    web_search_per_call: '0.01',
  }),

  // xAI and DeepSeek speak the OpenAI chat format. xAI bills a prompt from 128k tokens at its
  // long-context prices, and reasoning tokens beside the completion tokens.
  chat(
    'grok-4',
    'xai',
    256_000,
    64_000,
    {
      input_per_mtok: '3.00',
      cached_input_per_mtok: '0.75',
      output_per_mtok: '15.00',
      long_input_per_mtok: '6.00',
      long_cached_input_per_mtok: '1.50',
      long_output_per_mtok: '30.00',
    },
    { longContextAboveTokens: 127_999, reasoningBeyondCap: true },
  ),
  chat(
    'grok-4-fast',
    'xai',
    2_000_000,
    30_000,
    {
      input_per_mtok: '0.20',
      cached_input_per_mtok: '0.05',
      output_per_mtok: '0.50',
      long_input_per_mtok: '0.40',
      long_cached_input_per_mtok: '0.10',
      long_output_per_mtok: '1.00',
    },
    { longContextAboveTokens: 127_999, reasoningBeyondCap: true },
  ),
  chat('deepseek-chat', 'deepseek', 128_000, 8_192, { input_per_mtok: '0.28', cached_input_per_mtok: '0.028', output_per_mtok: '0.42' }),
  chat('deepseek-reasoner', 'deepseek', 128_000, 64_000, { input_per_mtok: '0.28', cached_input_per_mtok: '0.028', output_per_mtok: '0.42' }),

  // Embeddings, per 1M input tokens (spec).
  {
    id: 'text-embedding-3-large',
    kind: 'embedding',
    provider: 'openai',
    upstreamId: 'text-embedding-3-large',
    enabled: true,
    contextWindow: 8191,
    maxOutputTokens: 0,
    prices: { input_per_mtok: '0.143' },
  },
  {
    id: 'text-embedding-3-small',
    kind: 'embedding',
    provider: 'openai',
    upstreamId: 'text-embedding-3-small',
    enabled: true,
    contextWindow: 8191,
    maxOutputTokens: 0,
    prices: { input_per_mtok: '0.022' },
  },
  {
    id: 'text-embedding-ada-002',
    kind: 'embedding',
    provider: 'openai',
    upstreamId: 'text-embedding-ada-002',
    enabled: true,
    contextWindow: 8191,
    maxOutputTokens: 0,
    prices: { input_per_mtok: '0.11' },
  },
  {
    id: 'Cohere-embed-v3-multilingual',
    kind: 'embedding',
    provider: 'cohere',
    upstreamId: 'embed-multilingual-v3.0',
    enabled: true,
    contextWindow: 512,
    maxOutputTokens: 0,
    prices: { input_per_mtok: '0.10' },
  },

  // Images: per output image by quality and size (spec floors: gpt-image-2 from $0.06,
  // gpt-image-1-mini from $0.02), token-billed where the upstream reports usage; FLUX per megapixel.
  {
    id: 'gpt-image-2',
    kind: 'image',
    provider: 'openai',
    upstreamId: 'gpt-image-2',
    enabled: true,
    contextWindow: 0,
    maxOutputTokens: 0,
    prices: {
      input_per_mtok: '5.00',
      image_input_per_mtok: '10.00',
      output_per_mtok: '40.00',
      image_low_1024x1024: '0.06',
      image_low_1024x1536: '0.07',
      image_low_1536x1024: '0.07',
      image_medium_1024x1024: '0.09',
      image_medium_1024x1536: '0.12',
      image_medium_1536x1024: '0.12',
      image_high_1024x1024: '0.19',
      image_high_1024x1536: '0.25',
      image_high_1536x1024: '0.25',
    },
  },
  {
    id: 'gpt-image-1-mini',
    kind: 'image',
    provider: 'openai',
    upstreamId: 'gpt-image-1-mini',
    enabled: true,
    contextWindow: 0,
    maxOutputTokens: 0,
    prices: {
      input_per_mtok: '2.00',
      image_input_per_mtok: '2.50',
      output_per_mtok: '8.00',
      image_low_1024x1024: '0.02',
      image_low_1024x1536: '0.025',
      image_low_1536x1024: '0.025',
      image_medium_1024x1024: '0.03',
      image_medium_1024x1536: '0.04',
      image_medium_1536x1024: '0.04',
      image_high_1024x1024: '0.05',
      image_high_1024x1536: '0.065',
      image_high_1536x1024: '0.065',
    },
  },
  { id: 'FLUX.2-pro', kind: 'image', provider: 'bfl', upstreamId: 'flux-2-pro', enabled: true, contextWindow: 0, maxOutputTokens: 0, prices: { per_megapixel: '0.03' } },

  // Audio.
  { id: 'whisper', kind: 'transcription', provider: 'openai', upstreamId: 'whisper-1', enabled: true, contextWindow: 0, maxOutputTokens: 0, prices: { per_audio_minute: '0.017' } },
  {
    id: 'gpt-4o-transcribe',
    kind: 'transcription',
    provider: 'openai',
    upstreamId: 'gpt-4o-transcribe',
    enabled: true,
    contextWindow: 16_000,
    maxOutputTokens: 2_000,
    prices: { input_per_mtok: '2.50', audio_input_per_mtok: '6.00', output_per_mtok: '10.00' },
  },
  {
    id: 'gpt-4o-transcribe-diarize',
    kind: 'transcription',
    provider: 'openai',
    upstreamId: 'gpt-4o-transcribe-diarize',
    enabled: true,
    contextWindow: 16_000,
    maxOutputTokens: 2_000,
    prices: { input_per_mtok: '2.50', audio_input_per_mtok: '6.00', output_per_mtok: '10.00' },
  },
  {
    id: 'gpt-4o-mini-transcribe',
    kind: 'transcription',
    provider: 'openai',
    upstreamId: 'gpt-4o-mini-transcribe',
    enabled: true,
    contextWindow: 16_000,
    maxOutputTokens: 2_000,
    prices: { input_per_mtok: '1.25', audio_input_per_mtok: '3.00', output_per_mtok: '5.00' },
  },
  { id: 'gpt-4o-mini-tts', kind: 'speech', provider: 'openai', upstreamId: 'gpt-4o-mini-tts', enabled: true, contextWindow: 2_000, maxOutputTokens: 0, prices: { per_mchar: '12.00' } },

  // Video: per second of video actually produced (spec).
  { id: 'sora-2', kind: 'video', provider: 'openai', upstreamId: 'sora-2', enabled: true, contextWindow: 0, maxOutputTokens: 0, prices: { per_second: '0.10' } },
];
