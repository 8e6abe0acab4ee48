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

/**
 * How the provider bills an input image (chat `image_url`, Responses `input_image`, Claude
 * `image` blocks) in input tokens: the hold takes it for every image part
 * (src/inference/media/image-tokens.ts, docs/billing.md#images). From the providers' vision
 * guides; where their figures and what callers measure differ, the larger.
 */
export type VisionBilling =
  /** OpenAI's 512-px tiles: the image fitted in 2048×2048, its short side down to 768, then `baseTokens` + `tileTokens` per tile; detail `low` is `baseTokens` alone. */
  | { kind: 'tiles'; baseTokens: number; tileTokens: number }
  /**
   * OpenAI's 32-px patches times `multiplier` (a decimal, rounded up): at detail `high` the image
   * fitted in `high`; `original` (detail `original`, and what `auto` may mean) keeps more of it.
   * Detail `low` is not documented to lower it, so it does not.
   */
  | { kind: 'patches'; multiplier: string; high: PatchBudget; original?: PatchBudget }
  /** Claude: the image fitted in `maxEdge` px and `maxPatches` 28-px patches; the larger of w·h/750 and its patch count. */
  | { kind: 'claude'; maxEdge: number; maxPatches: number }
  /** The provider documents no rule: an image may fill the context window, so the request holds at least that. */
  | { kind: 'window' }
  /** The model reads no images (its provider refuses them): an image part counts by its bytes, as any other part. */
  | { kind: 'none' };

/** The most patches an image keeps, after fitting its long side in `maxEdge` px. */
export interface PatchBudget {
  patches: number;
  maxEdge: number;
}

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
  /** How an input image is billed; every chat model says (the catalogue refuses to start otherwise). */
  vision?: VisionBilling;
}

const chat = (
  id: string,
  provider: ProviderName,
  contextWindow: number,
  maxOutputTokens: number,
  prices: Record<string, string>,
  extra: Partial<CatalogueEntry> = {},
): CatalogueEntry => ({
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

// Input images, per family (docs/billing.md#images). OpenAI's tile models (gpt-4o, gpt-4.1):
const GPT_4O_TILES: VisionBilling = { kind: 'tiles', baseTokens: 85, tileTokens: 170 };
// gpt-4o-mini bills an image at 33⅓ times gpt-4o's tokens (the dollars of gpt-4o's image at its launch price).
const GPT_4O_MINI_TILES: VisionBilling = { kind: 'tiles', baseTokens: 2_833, tileTokens: 5_667 };
// OpenAI's patch models. The GPT-5.6 family reads an image at its own size (`original`) unless
// asked for `high`, and refuses one over 30,000 patches (gpt-5.6-sol/luna/terra get the family's
// rule: there are no per-model figures); callers measure 1.2 tokens a patch on it, as on gpt-5.5
// and gpt-5.3-codex (gpt-5.5 keeps at most 10,000 patches within 6,000 px at `original`). The
// small gpt-5.4 models keep 1,536 patches at 1.62 and 2.46 tokens each (OpenAI's table; callers
// measure less on some, the hold keeps the table's).
const GPT_5_6_PATCHES: VisionBilling = {
  kind: 'patches',
  multiplier: '1.2',
  high: { patches: 2_500, maxEdge: 2_048 },
  original: { patches: 30_000, maxEdge: 65_535 },
};
const GPT_5_5_PATCHES: VisionBilling = {
  kind: 'patches',
  multiplier: '1.2',
  high: { patches: 2_500, maxEdge: 2_048 },
  original: { patches: 10_000, maxEdge: 6_000 },
};
const smallPatches = (multiplier: string): VisionBilling => ({
  kind: 'patches',
  multiplier,
  high: { patches: 1_536, maxEdge: 2_048 },
});
// Claude: 1,568 px and 1,568 patches up to the 4.6 models; from Opus 4.7 on, 2,576 px and 4,784
// (claude-opus-4-8 and claude-fable-5, which has no published figures of its own: the family's
// newest rule, the dearer one).
const CLAUDE_IMAGES: VisionBilling = { kind: 'claude', maxEdge: 1_568, maxPatches: 1_568 };
const CLAUDE_HIGH_RES_IMAGES: VisionBilling = { kind: 'claude', maxEdge: 2_576, maxPatches: 4_784 };
// xAI publishes no image token rule (and accepts images up to 20 MiB): an image may fill the window.
const XAI_IMAGES: VisionBilling = { kind: 'window' };
// DeepSeek's chat models read text only.
const NO_IMAGES: VisionBilling = { kind: 'none' };

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
    { ...passthrough, vision: GPT_5_6_PATCHES },
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
    { ...passthrough, vision: GPT_5_6_PATCHES },
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
    { ...passthrough, vision: GPT_5_6_PATCHES },
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
    { ...passthrough, vision: GPT_5_5_PATCHES },
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
    { ...passthrough, vision: smallPatches('1.62') },
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
    { ...passthrough, vision: smallPatches('2.46') },
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
    { ...passthrough, vision: GPT_4O_TILES },
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
    { ...passthrough, vision: smallPatches('1.2') },
  ),
  // OpenAI, chat completions only.
  chat(
    'gpt-4o-mini',
    'openai',
    128_000,
    16_384,
    {
      input_per_mtok: '0.15',
      cached_input_per_mtok: '0.075',
      output_per_mtok: '0.60',
      priority_input_per_mtok: '0.25',
      priority_cached_input_per_mtok: '0.125',
      priority_output_per_mtok: '1.00',
    },
    { vision: GPT_4O_MINI_TILES },
  ),
  chat(
    'gpt-4o',
    'openai',
    128_000,
    16_384,
    {
      input_per_mtok: '2.50',
      cached_input_per_mtok: '1.25',
      output_per_mtok: '10.00',
      priority_input_per_mtok: '4.25',
      priority_cached_input_per_mtok: '2.125',
      priority_output_per_mtok: '17.00',
    },
    { vision: GPT_4O_TILES },
  ),

  // Anthropic (Claude family): /v1/messages natively. Cache writes cost 1.25x the input price for
  // 5 minutes, 2x for an hour; web search $10 per 1,000 searches. Sonnet 4.6 bills a request
  // past 200k input tokens at its long-context prices.
  chat(
    'claude-opus-4-8',
    'anthropic',
    1_000_000,
    64_000,
    {
      input_per_mtok: '5.00',
      cached_input_per_mtok: '0.50',
      cache_write_per_mtok: '6.25',
      cache_write_1h_per_mtok: '10.00',
      output_per_mtok: '25.00',
      web_search_per_call: '0.01',
    },
    { vision: CLAUDE_HIGH_RES_IMAGES },
  ),
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
    { longContextAboveTokens: 200_000, vision: CLAUDE_IMAGES },
  ),
  chat(
    'claude-haiku-4-5',
    'anthropic',
    200_000,
    64_000,
    {
      input_per_mtok: '1.00',
      cached_input_per_mtok: '0.10',
      cache_write_per_mtok: '1.25',
      cache_write_1h_per_mtok: '2.00',
      output_per_mtok: '5.00',
      web_search_per_call: '0.01',
    },
    { vision: CLAUDE_IMAGES },
  ),
  chat(
    'claude-fable-5',
    'anthropic',
    1_000_000,
    64_000,
    {
      input_per_mtok: '4.00',
      cached_input_per_mtok: '0.40',
      cache_write_per_mtok: '5.00',
      cache_write_1h_per_mtok: '8.00',
      output_per_mtok: '20.00',
      web_search_per_call: '0.01',
    },
    { vision: CLAUDE_HIGH_RES_IMAGES },
  ),

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
    { longContextAboveTokens: 127_999, reasoningBeyondCap: true, vision: XAI_IMAGES },
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
    { longContextAboveTokens: 127_999, reasoningBeyondCap: true, vision: XAI_IMAGES },
  ),
  chat(
    'deepseek-chat',
    'deepseek',
    128_000,
    8_192,
    { input_per_mtok: '0.28', cached_input_per_mtok: '0.028', output_per_mtok: '0.42' },
    { vision: NO_IMAGES },
  ),
  chat(
    'deepseek-reasoner',
    'deepseek',
    128_000,
    64_000,
    { input_per_mtok: '0.28', cached_input_per_mtok: '0.028', output_per_mtok: '0.42' },
    { vision: NO_IMAGES },
  ),

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
  {
    id: 'FLUX.2-pro',
    kind: 'image',
    provider: 'bfl',
    upstreamId: 'flux-2-pro',
    enabled: true,
    contextWindow: 0,
    maxOutputTokens: 0,
    prices: { per_megapixel: '0.03' },
  },

  // Audio.
  {
    id: 'whisper',
    kind: 'transcription',
    provider: 'openai',
    upstreamId: 'whisper-1',
    enabled: true,
    contextWindow: 0,
    maxOutputTokens: 0,
    prices: { per_audio_minute: '0.017' },
  },
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
  {
    id: 'gpt-4o-mini-tts',
    kind: 'speech',
    provider: 'openai',
    upstreamId: 'gpt-4o-mini-tts',
    enabled: true,
    contextWindow: 2_000,
    maxOutputTokens: 0,
    prices: { per_mchar: '12.00' },
  },

  // Video: per second of video actually produced (spec).
  {
    id: 'sora-2',
    kind: 'video',
    provider: 'openai',
    upstreamId: 'sora-2',
    enabled: true,
    contextWindow: 0,
    maxOutputTokens: 0,
    prices: { per_second: '0.10' },
  },
];
