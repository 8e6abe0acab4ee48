// Prices of the routes not billed by text tokens alone: images (per image tier, per output
// megapixel, or by image tokens), audio (per second, or by audio tokens) and speech (per
// character). Every figure goes through costNano: exact, rounded up once. The ...Cost forms are
// the same figures before that rounding: what a charge marks up (src/billing/markup.ts).
import { ceilDiv, costNano, costRational, type PricedQuantity, type Rational } from '../money/money.ts';
import { PER_MILLION } from './pricing.ts';

export type Prices = Readonly<Record<string, string>>;

function price(prices: Prices, name: string): string {
  const p = prices[name];
  if (p === undefined) throw new Error(`the catalogue has no price ${name}`);
  return p;
}

/** The per-image tier price key, e.g. image_high_1024x1536. */
export const imageTierKey = (quality: string, size: string) => `image_${quality}_${size}`;

export function perImageNano(prices: Prices, quality: string, size: string, images: bigint): bigint {
  return costNano([{ quantity: images, priceUsd: price(prices, imageTierKey(quality, size)), perUnits: 1n }]);
}

const whole = (r: Rational): bigint => ceilDiv(r.num, r.den);

/** A megapixel is 1,000,000 pixels. */
export function megapixelCost(prices: Prices, pixels: bigint): Rational {
  return costRational([{ quantity: pixels, priceUsd: price(prices, 'per_megapixel'), perUnits: PER_MILLION }]);
}
export const megapixelNano = (prices: Prices, pixels: bigint): bigint => whole(megapixelCost(prices, pixels));

export function audioSecondsCost(prices: Prices, seconds: bigint): Rational {
  return costRational([{ quantity: seconds, priceUsd: price(prices, 'per_audio_minute'), perUnits: 60n }]);
}
export const audioSecondsNano = (prices: Prices, seconds: bigint): bigint => whole(audioSecondsCost(prices, seconds));

export function charactersCost(prices: Prices, characters: bigint): Rational {
  return costRational([{ quantity: characters, priceUsd: price(prices, 'per_mchar'), perUnits: PER_MILLION }]);
}
export const charactersNano = (prices: Prices, characters: bigint): bigint => whole(charactersCost(prices, characters));

/** Token usage of image and audio models: text and image/audio input priced apart. */
export interface MediaTokens {
  textInput: bigint;
  mediaInput: bigint;
  output: bigint;
}

type MediaTokenPrice = 'image_input_per_mtok' | 'audio_input_per_mtok';

/** gpt-image-* (`image_input_per_mtok`) and gpt-4o-*-transcribe (`audio_input_per_mtok`). */
export function mediaTokensCost(prices: Prices, mediaPrice: MediaTokenPrice, t: MediaTokens): Rational {
  const parts: PricedQuantity[] = [
    { quantity: t.textInput, priceUsd: price(prices, 'input_per_mtok'), perUnits: PER_MILLION },
    { quantity: t.mediaInput, priceUsd: price(prices, mediaPrice), perUnits: PER_MILLION },
    { quantity: t.output, priceUsd: price(prices, 'output_per_mtok'), perUnits: PER_MILLION },
  ];
  return costRational(parts);
}
export const mediaTokensNano = (prices: Prices, mediaPrice: MediaTokenPrice, t: MediaTokens): bigint =>
  whole(mediaTokensCost(prices, mediaPrice, t));

/**
 * OpenAI's image/transcription usage: input_tokens includes the text and image/audio tokens
 * of its details, named input_tokens_details on images and input_token_details on audio.
 */
export function mediaTokensFromUsage(
  u: Record<string, unknown>,
  mediaField: 'image_tokens' | 'audio_tokens',
): MediaTokens | undefined {
  const n = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : undefined);
  const input = n(u.input_tokens);
  const output = n(u.output_tokens);
  if (input === undefined || output === undefined) return undefined;
  const details = (u.input_tokens_details ?? u.input_token_details ?? {}) as Record<string, unknown>;
  const media = n(details[mediaField]) ?? 0n;
  const mediaInput = media > input ? input : media;
  return { textInput: input - mediaInput, mediaInput, output };
}
