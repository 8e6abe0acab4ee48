// The demo provider's media, made here rather than shipped: small files that are what they say
// they are, so the gateway measures and bills them as it does a provider's (an image's size, an
// MP4's duration) and a caller's player opens them. A PNG of one flat colour at any size, silent
// WAV, PCM and MP3 audio, and an MP4 whose movie header gives the duration.
import zlib from 'node:zlib';

const CRC_INPUT = (type: string, data: Buffer) => Buffer.concat([Buffer.from(type, 'latin1'), data]);

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(CRC_INPUT(type, data)));
  return Buffer.concat([head, Buffer.from(type, 'latin1'), data, crc]);
}

/** A `width` × `height` PNG in the gateway's colours (8-bit RGB, one flat colour: a few KB at 1024 × 1024). */
export function png(width: number, height: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // bit depth 8, colour type RGB, deflate, no filter, no interlace
  const row = Buffer.alloc(1 + width * 3);
  for (let x = 0; x < width; x++) row.set([0x2f, 0x6f, 0xa8], 1 + x * 3);
  const pixels = zlib.deflateSync(Buffer.concat(Array.from({ length: height }, () => row)));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', pixels),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Speech's sample rate (OpenAI's pcm format: 24 kHz, 16-bit little-endian, mono). */
export const SPEECH_SAMPLE_RATE = 24_000;

/** `seconds` of silence as raw 24 kHz 16-bit mono PCM. */
export function pcmSilence(seconds: number): Buffer {
  return Buffer.alloc(Math.round(seconds * SPEECH_SAMPLE_RATE) * 2);
}

/** `seconds` of silence as a WAV file (PCM in a RIFF container). */
export function wavSilence(seconds: number): Buffer {
  const data = pcmSilence(seconds);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16); // fmt chunk size
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(SPEECH_SAMPLE_RATE, 24);
  h.writeUInt32LE(SPEECH_SAMPLE_RATE * 2, 28); // bytes per second
  h.writeUInt16LE(2, 32); // block align
  h.writeUInt16LE(16, 34); // bits per sample
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/**
 * `seconds` of silence as MP3: MPEG-1 Layer III frames at 128 kbit/s, 44.1 kHz, mono, each 417
 * bytes and 1152 samples; all-zero side information and main data decode to silence.
 */
export function mp3Silence(seconds: number): Buffer {
  const frame = Buffer.alloc(417);
  frame.set([0xff, 0xfb, 0x90, 0xc0]);
  const frames = Math.max(1, Math.ceil((seconds * 44_100) / 1152));
  return Buffer.concat(Array.from({ length: frames }, () => frame));
}

function box(type: string, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
}

/** An MP4 (ISO BMFF) whose movie header says `seconds`: the duration the gateway bills a video by. */
export function mp4(seconds: number): Buffer {
  const ftyp = box(
    'ftyp',
    Buffer.from('isom', 'latin1'),
    Buffer.from([0, 0, 2, 0]),
    Buffer.from('isomiso2mp41', 'latin1'),
  );
  const mvhd = Buffer.alloc(100); // version 0: times, timescale, duration, rate, volume, matrix, next track
  mvhd.writeUInt32BE(1000, 12); // timescale: ms
  mvhd.writeUInt32BE(Math.round(seconds * 1000), 16);
  mvhd.writeUInt32BE(0x0001_0000, 20); // rate 1.0
  mvhd.writeUInt16BE(0x0100, 24); // volume 1.0
  for (const [at, v] of [
    [36, 0x0001_0000],
    [52, 0x0001_0000],
    [68, 0x4000_0000],
  ] as const)
    mvhd.writeUInt32BE(v, at); // the identity matrix
  mvhd.writeUInt32BE(1, 96); // next track id
  return Buffer.concat([ftyp, box('moov', box('mvhd', mvhd)), box('mdat')]);
}
