// The demo provider's answers and files, read back with the gateway's own readers: what it
// makes is what the gateway measures and bills. test/e2e/demo.test.ts runs it behind a gateway.
import { describe, expect, it } from 'vitest';
import { DEMO_ANSWER_PREFIX, demoAnswer } from '../../../src/demo/answer.ts';
import { mp3Silence, mp4, pcmSilence, png, wavSilence } from '../../../src/demo/files.ts';
import { countTextTokens } from '../../../src/inference/tokens.ts';
import { imageSize } from '../../../src/inference/media/image-size.ts';
import { audioLength } from '../../../src/inference/media/audio-duration.ts';
import { durationMs, measureMp4 } from '../../../src/video/mp4.ts';

describe('the demo answer', () => {
  it("repeats the prompt's words after a prefix that says no model was called, and counts its tokens", () => {
    const a = demoAnswer('  Hello,   gateway!\n', undefined);
    expect(a.text).toBe(`${DEMO_ANSWER_PREFIX} Hello, gateway!`);
    expect(a.pieces.join('')).toBe(a.text);
    expect(a.outputTokens).toBe(countTextTokens(a.text));
    expect(a.cut).toBe(false);
    expect(demoAnswer('', undefined).text).toBe(`${DEMO_ANSWER_PREFIX} (no text)`);
  });

  it('repeats 40 words at most, and a cap cuts it to at most that many tokens', () => {
    const long = Array.from({ length: 100 }, (_, i) => `w${i}`).join(' ');
    expect(demoAnswer(long, undefined).text.endsWith('w38 w39 …')).toBe(true);
    const capped = demoAnswer(long, 5);
    expect(capped.cut).toBe(true);
    expect(capped.outputTokens).toBeLessThanOrEqual(5);
    expect(capped.outputTokens).toBe(countTextTokens(capped.text));
    expect(DEMO_ANSWER_PREFIX.startsWith(capped.text)).toBe(true);
  });
});

describe('the demo files', () => {
  it('a PNG is read back at the size it was made', () => {
    expect(imageSize(png(1536, 1024))).toEqual({ format: 'png', width: 1536, height: 1024 });
    expect(png(1024, 1024).length).toBeLessThan(16 * 1024);
  });

  it('silent WAV and MP3 are measured at the length they were made; PCM is 24 kHz 16-bit', () => {
    expect(audioLength(wavSilence(1.5))).toMatchObject({
      kind: 'measured',
      format: 'wav',
      seconds: { num: 36_000n, den: 24_000n },
    });
    // 1152-sample frames: 2 s is 77 frames, 88,704 samples at 44.1 kHz.
    expect(audioLength(mp3Silence(2))).toMatchObject({
      kind: 'measured',
      format: 'mp3',
      seconds: { num: 88_704n, den: 44_100n },
    });
    expect(pcmSilence(2).length).toBe(96_000);
  });

  it("an MP4's duration, as the video billing reads it, is the seconds it was made for", async () => {
    const bytes = mp4(8);
    const d = await measureMp4({ size: bytes.length, read: async (at, n) => bytes.subarray(at, at + n) });
    expect(durationMs(d)).toBe(8_000n);
  });
});
