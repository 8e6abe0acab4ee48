// The MP4 duration reader and the video price: what a video job is charged rests on both.
import { describe, expect, it } from 'vitest';
import { durationMs, measureMp4, Mp4Error } from '../../../src/video/mp4.ts';
import { videoCostNano } from '../../../src/video/activities.ts';
import { makeMp4 } from '../../upstream/video-api.ts';

const source = (b: Buffer) => ({ size: b.length, read: async (p: number, n: number) => b.subarray(p, p + n) });

function box(type: string, payload: Buffer): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt32BE(8 + payload.length, 0);
  h.write(type, 4, 'latin1');
  return Buffer.concat([h, payload]);
}

/** mvhd version 1 (64-bit times and duration), the only duration in the file. */
function mvhdV1(timescale: number, duration: bigint): Buffer {
  const p = Buffer.alloc(4 + 8 + 8 + 4 + 8 + 80);
  p.writeUInt8(1, 0);
  p.writeUInt32BE(timescale, 20);
  p.writeBigUInt64BE(duration, 24);
  return box('mvhd', p);
}

describe('MP4 duration', () => {
  it('reads the video track (mdhd) with moov before or after mdat', async () => {
    for (const moovAtEnd of [false, true]) {
      const d = await measureMp4(source(makeMp4(5500, { moovAtEnd })));
      expect(d).toEqual({ units: 84480n, timescale: 15360n, from: 'mdhd' });
      expect(durationMs(d)).toBe(5500n);
    }
  });

  it('falls back to mvhd, version 1 with a 64-bit duration and a largesize box', async () => {
    const ftyp = box('ftyp', Buffer.from('isom\0\0\0\0isom', 'latin1'));
    // A 16-byte (largesize) header on mdat.
    const data = Buffer.alloc(100, 1);
    const mdat = Buffer.alloc(16);
    mdat.writeUInt32BE(1, 0);
    mdat.write('mdat', 4, 'latin1');
    mdat.writeBigUInt64BE(BigInt(16 + data.length), 8);
    const file = Buffer.concat([ftyp, mdat, data, box('moov', mvhdV1(90000, 360_001n))]);
    const d = await measureMp4(source(file));
    expect(d).toEqual({ units: 360_001n, timescale: 90000n, from: 'mvhd' });
    expect(durationMs(d)).toBe(4001n); // 4000.011 ms, rounded up
  });

  it('refuses what is not a complete MP4', async () => {
    await expect(measureMp4(source(Buffer.from('this is not a video at all')))).rejects.toBeInstanceOf(Mp4Error);
    await expect(measureMp4(source(Buffer.alloc(0)))).rejects.toBeInstanceOf(Mp4Error);
    const whole = makeMp4(4000, { moovAtEnd: true });
    await expect(measureMp4(source(whole.subarray(0, whole.length - 40)))).rejects.toBeInstanceOf(Mp4Error);
    const noDuration = Buffer.concat([
      box('ftyp', Buffer.from('isom\0\0\0\0', 'latin1')),
      box('moov', mvhdV1(1000, 0n)),
    ]);
    await expect(measureMp4(source(noDuration))).rejects.toThrow(/no duration/);
  });
});

describe('video price', () => {
  it('charges produced milliseconds at the per-second price, never more than asked', () => {
    expect(videoCostNano(8000, 8, '0.10')).toBe(800_000_000n);
    expect(videoCostNano(5500, 8, '0.10')).toBe(550_000_000n);
    expect(videoCostNano(1, 4, '0.10')).toBe(100_000n);
    expect(videoCostNano(12_345, 4, '0.10')).toBe(400_000_000n);
    expect(videoCostNano(0, 4, '0.10')).toBe(0n);
    expect(videoCostNano(3, 4, '0.000000001')).toBe(1n); // 3 ms of a nano-dollar a second: rounded up once
  });
});
