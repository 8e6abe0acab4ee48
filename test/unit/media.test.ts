// Media facts the bills rest on: audio durations and image sizes read from the files
// themselves, and the media prices, each against a hand-computed figure.
import { describe, expect, it } from 'vitest';
import { audioDuration, ceilSeconds } from '../../src/inference/media/audio-duration.ts';
import { imageSize } from '../../src/inference/media/image-size.ts';
import { audioSecondsNano, charactersNano, megapixelNano, mediaTokensFromUsage, mediaTokensNano, perImageNano } from '../../src/billing/media-pricing.ts';
import { float32Base64 } from '../../src/inference/providers/cohere.ts';
import { MODELS } from '../../src/catalogue/models.ts';
import { flac, m4a, mp3, oggOpus, png, wav, webm } from '../support/media-files.ts';

const prices = (id: string) => MODELS.find((m) => m.id === id)!.prices;
const seconds = (b: Buffer) => {
  const d = audioDuration(b)!;
  return { format: d.format, exact: `${d.num}/${d.den}`, ceil: ceilSeconds(d) };
};

describe('audio duration from the file', () => {
  it('WAV: data bytes over byte rate', () => {
    expect(seconds(wav(8000 * 61 + 4000))).toEqual({ format: 'wav', exact: '984000/16000', ceil: 62n });
  });
  it('MP3: frames x 1152 samples over the sample rate, the ID3 tag skipped', () => {
    expect(seconds(mp3(100))).toEqual({ format: 'mp3', exact: '115200/44100', ceil: 3n });
  });
  it('FLAC: STREAMINFO total samples over the rate', () => {
    expect(seconds(flac(16000 * 90 + 1))).toEqual({ format: 'flac', exact: '1440001/16000', ceil: 91n });
  });
  it('Ogg Opus: last granule minus pre-skip, at 48 kHz', () => {
    expect(seconds(oggOpus(12))).toEqual({ format: 'ogg', exact: '576000/48000', ceil: 12n });
  });
  it('M4A: mvhd duration over its timescale', () => {
    expect(seconds(m4a(5250))).toEqual({ format: 'mp4', exact: '5250/1000', ceil: 6n });
  });
  it('WebM: the stated Duration, or the last block timestamp of a live recording', () => {
    expect(seconds(webm(7250))).toEqual({ format: 'webm', exact: '7250000/1000000', ceil: 8n });
    expect(seconds(webm(7250, false))).toEqual({ format: 'webm', exact: '7250000/1000000', ceil: 8n });
  });
  it('refuses what is not audio, and truncated files', () => {
    expect(audioDuration(Buffer.from('not audio at all, just some text'))).toBeUndefined();
    expect(audioDuration(png(4, 4))).toBeUndefined();
    expect(audioDuration(mp3(100).subarray(0, 600))).toBeUndefined();
    expect(audioDuration(Buffer.alloc(0))).toBeUndefined();
  });
});

describe('image size from the file', () => {
  it('reads PNG dimensions', () => {
    expect(imageSize(png(1456, 816))).toEqual({ format: 'png', width: 1456, height: 816 });
  });
  it('reads a JPEG frame header', () => {
    const sof = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0x03, 0x00, 0x05, 0x00, 3, 1, 0x11, 0]);
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
    const t = mediaTokensFromUsage({ input_tokens: 110, input_token_details: { text_tokens: 10, audio_tokens: 100 }, output_tokens: 50 }, 'audio_tokens')!;
    expect(mediaTokensFromUsage({ input_tokens: 40, input_tokens_details: { text_tokens: 10, image_tokens: 30 }, output_tokens: 5 }, 'image_tokens')).toEqual({
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
