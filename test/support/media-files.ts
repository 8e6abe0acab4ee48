// Real media bytes for tests and the simulator: PNG images of a given size, WAV and MP3 of a
// known length, the audio fixtures made with an encoder in each container the transcription
// route reads, and forgeries of them whose stated length is not their audio's.
import { readFileSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** A valid RGB PNG of width × height, one colour. */
export function png(width: number, height: number, rgb: [number, number, number] = [40, 90, 200]): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const row = Buffer.alloc(1 + width * 3);
  for (let x = 0; x < width; x++) row.set(rgb, 1 + x * 3);
  const raw = Buffer.alloc(row.length * height);
  for (let y = 0; y < height; y++) row.copy(raw, y * row.length);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** 16-bit mono PCM WAV of `samples` samples at `rate` Hz (a quiet tone). */
export function wav(samples: number, rate = 8000): Buffer {
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++)
    data.writeInt16LE(Math.round(800 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); // byte rate
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/** MPEG-1 Layer III, 128 kb/s, 44.1 kHz, mono: `frames` frames of 1152 samples each (silence), after an ID3v2 tag. */
export function mp3(frames: number): Buffer {
  const frame = Buffer.alloc(417); // floor(144 * 128000 / 44100), no padding
  frame.writeUInt32BE(0xfffb90c4, 0);
  const id3 = Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 10, ...Buffer.alloc(10)]);
  return Buffer.concat([id3, ...Array.from({ length: frames }, () => frame)]);
}

const AUDIO_DIR = new URL('../fixtures/audio/', import.meta.url);

/** Real audio files made with ffmpeg (test/fixtures/audio/make.sh): 1.5 s WAVs, 3.5 s in the other containers. */
export function audioFixture(name: string): Buffer {
  return readFileSync(new URL(name, AUDIO_DIR));
}

/** What ffmpeg decodes from each fixture: the length a provider hears and bills. */
const DECODED = JSON.parse(readFileSync(new URL('decoded.json', AUDIO_DIR), 'utf8')) as Record<
  string,
  { samples: number; rate: number }
>;

/**
 * The seconds a provider decodes from an upload: a fixture's by its name (forged headers do not
 * change what a decoder hears), a PCM WAV's by its data bytes and sample format.
 */
export function decodedSeconds(filename: string, bytes: Buffer): number | undefined {
  const fixture = DECODED[filename];
  if (fixture) return fixture.samples / fixture.rate;
  if (bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return undefined;
  const fmt = bytes.indexOf('fmt ', 12, 'latin1');
  const data = bytes.indexOf('data', 12, 'latin1');
  if (fmt < 0 || data < 0 || bytes.readUInt16LE(fmt + 8) !== 1) return undefined;
  const frameBytes = bytes.readUInt16LE(fmt + 10) * (bytes.readUInt16LE(fmt + 22) / 8);
  return Math.floor((bytes.length - data - 8) / frameBytes) / bytes.readUInt32LE(fmt + 12);
}

// Forgeries: a fixture whose stated length is rewritten and whose audio is left as it was.

/** A WAV whose fmt byteRate is multiplied by `factor`. */
export function forgeWavByteRate(wav: Buffer, factor: number): Buffer {
  const out = Buffer.from(wav);
  const fmt = out.indexOf('fmt ', 12, 'latin1');
  out.writeUInt32LE(out.readUInt32LE(fmt + 16) * factor, fmt + 16);
  return out;
}

/** A FLAC whose STREAMINFO states `samples` in all. */
export function forgeFlacTotal(flac: Buffer, samples: number): Buffer {
  const out = Buffer.from(flac);
  const info = 8; // after "fLaC" and the block header
  out[info + 13] = (out[info + 13]! & 0xf0) | Math.floor(samples / 2 ** 32);
  out.writeUInt32BE(samples >>> 0, info + 14);
  return out;
}

/** Ogg's page checksum: CRC-32, polynomial 0x04c11db7, not reflected, over the page with its checksum zeroed. */
function oggCrc(page: Buffer): number {
  let crc = 0;
  for (const byte of page) {
    crc ^= byte << 24;
    for (let k = 0; k < 8; k++) crc = crc & 0x80000000 ? (crc << 1) ^ 0x04c11db7 : crc << 1;
  }
  return crc >>> 0;
}

/** An Ogg file whose last page's granule position is `granule`, its checksum made right again. */
export function forgeOggLastGranule(ogg: Buffer, granule: bigint): Buffer {
  const out = Buffer.from(ogg);
  let last = 0;
  for (let i = 0; i < out.length; ) {
    last = i;
    const segments = out[i + 26]!;
    let body = 0;
    for (let k = 0; k < segments; k++) body += out[i + 27 + k]!;
    i += 27 + segments + body;
  }
  const page = out.subarray(last);
  page.writeBigInt64LE(granule, 6);
  page.writeUInt32LE(0, 22);
  page.writeUInt32LE(oggCrc(page), 22);
  return out;
}

/** The pre-skip of an Ogg Opus file (its OpusHead, in the first page). */
export function oggOpusPreSkip(ogg: Buffer): number {
  return ogg.readUInt16LE(ogg.indexOf('OpusHead', 0, 'latin1') + 10);
}

/** An MP4 whose mvhd (the movie) or mdhd (the audio track) states `seconds`, in its own timescale. */
export function forgeMp4Duration(mp4: Buffer, box: 'mvhd' | 'mdhd', seconds: number): Buffer {
  const out = Buffer.from(mp4);
  const at = out.indexOf(box, 0, 'latin1') + 4; // version 0: flags, two dates, timescale, duration
  out.writeUInt32BE(Math.round(seconds * out.readUInt32BE(at + 12)), at + 16);
  return out;
}

/** A WebM whose Info states a Duration of `millis` (at the default 1 ms timestamp scale). */
export function forgeWebmDuration(webm: Buffer, millis: number): Buffer {
  const out = Buffer.from(webm);
  const at = out.indexOf(Buffer.from([0x44, 0x89, 0x88])); // Duration, an 8-byte float
  out.writeDoubleBE(millis, at + 3);
  return out;
}
