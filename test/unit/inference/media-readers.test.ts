// Media facts the bills rest on: image sizes read from the files themselves, and the media
// prices, each against a hand-computed figure (audio lengths: audio-duration.test.ts).
import { describe, expect, it } from 'vitest';
import { imageSize } from '../../../src/inference/media/image-size.ts';
import {
  audioSecondsNano,
  charactersNano,
  megapixelNano,
  mediaTokensFromUsage,
  mediaTokensNano,
  perImageNano,
} from '../../../src/billing/media-pricing.ts';
import { float32Base64 } from '../../../src/inference/providers/cohere.ts';
import { MODELS } from '../../../src/catalogue/shipped-book.ts';
import { png } from '../../support/media-files.ts';

const prices = (id: string) => MODELS.find((m) => m.id === id)!.prices;

describe('image size from the file', () => {
  it('reads PNG dimensions', () => {
    expect(imageSize(png(1456, 816))).toEqual({ format: 'png', width: 1456, height: 816 });
  });
  it('reads a JPEG frame header', () => {
    const sof = Buffer.from([
      0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0x03, 0x00, 0x05, 0x00, 3, 1, 0x11, 0,
    ]);
    expect(imageSize(sof)).toEqual({ format: 'jpeg', width: 1280, height: 768 });
  });
  it('refuses other bytes', () => {
    expect(imageSize(Buffer.from('GIF89a....'))).toBeUndefined();
  });
});

describe('media prices (hand-computed)', () => {
  it('whisper: $0.017 per minute, pro-rated by the second', () => {
    // 62 s x 0.017 / 60 = 0.0175666... USD -> 17,566,667 nano (rounded up once)
    expect(audioSecondsNano(prices('whisper'), 62n)).toBe(17_566_667n);
    expect(audioSecondsNano(prices('whisper'), 60n)).toBe(17_000_000n);
  });
  it('FLUX.2-pro: $0.03 per output megapixel', () => {
    expect(megapixelNano(prices('FLUX.2-pro'), 1024n * 1024n)).toBe(31_457_280n);
    expect(megapixelNano(prices('FLUX.2-pro'), 1456n * 816n)).toBe(35_642_880n);
  });
  it('per image tier', () => {
    expect(perImageNano(prices('gpt-image-1-mini'), 'low', '1024x1024', 2n)).toBe(40_000_000n);
    expect(perImageNano(prices('gpt-image-2'), 'high', '1536x1024', 1n)).toBe(250_000_000n);
  });
  it('speech: per character', () => {
    // 1,000 characters x $12 / 1M = $0.012
    expect(charactersNano(prices('gpt-4o-mini-tts'), 1000n)).toBe(12_000_000n);
    expect(charactersNano(prices('gpt-4o-mini-tts'), 7n)).toBe(84_000n);
  });
  it('image and audio tokens, each kind at its own rate', () => {
    const t = mediaTokensFromUsage(
      { input_tokens: 110, input_token_details: { text_tokens: 10, audio_tokens: 100 }, output_tokens: 50 },
      'audio_tokens',
    )!;
    expect(
      mediaTokensFromUsage(
        { input_tokens: 40, input_tokens_details: { text_tokens: 10, image_tokens: 30 }, output_tokens: 5 },
        'image_tokens',
      ),
    ).toEqual({
      textInput: 10n,
      mediaInput: 30n,
      output: 5n,
    });
    expect(t).toEqual({ textInput: 10n, mediaInput: 100n, output: 50n });
    // 10 x 2.50 + 100 x 6.00 + 50 x 10.00 per 1M = 0.001125 USD
    expect(mediaTokensNano(prices('gpt-4o-transcribe'), 'audio_input_per_mtok', t)).toBe(1_125_000n);
  });
});

describe('OpenAI base64 embeddings', () => {
  it('are little-endian float32', () => {
    const b = Buffer.from(float32Base64([0.5, -0.25]), 'base64');
    expect([b.readFloatLE(0), b.readFloatLE(4)]).toEqual([0.5, -0.25]);
  });
});
