// Real media bytes for tests and the simulator: PNG images of a given size and audio files of
// a known duration in each container the transcription route reads.
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
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
}

/** 16-bit mono PCM WAV of `samples` samples at `rate` Hz (a quiet tone). */
export function wav(samples: number, rate = 8000): Buffer {
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(800 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
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

/** A FLAC stream header stating `samples` samples at `rate` Hz. */
export function flac(samples: number, rate = 16000): Buffer {
  const info = Buffer.alloc(34);
  info.writeUInt16BE(4096, 0);
  info.writeUInt16BE(4096, 2);
  // sample rate (20 bits), channels-1 (3 bits) = 0, bits-1 (5 bits) = 15, total samples (36 bits)
  info[10] = (rate >> 12) & 0xff;
  info[11] = (rate >> 4) & 0xff;
  info[12] = ((rate & 0x0f) << 4) | (0 << 1) | (15 >> 4);
  info[13] = ((15 & 0x0f) << 4) | Number((BigInt(samples) >> 32n) & 0x0fn);
  info.writeUInt32BE(samples >>> 0, 14);
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), Buffer.from([0x80, 0, 0, 34]), info]);
}

function oggPage(granule: bigint, seq: number, packet: Buffer, flags: number): Buffer {
  const segments: number[] = [];
  let left = packet.length;
  while (left >= 255) {
    segments.push(255);
    left -= 255;
  }
  segments.push(left);
  const h = Buffer.alloc(27);
  h.write('OggS', 0, 'latin1');
  h[5] = flags;
  h.writeBigInt64LE(granule, 6);
  h.writeUInt32LE(0x5eed, 14);
  h.writeUInt32LE(seq, 18);
  h[26] = segments.length;
  return Buffer.concat([h, Buffer.from(segments), packet]);
}

/** Ogg Opus whose last granule position means `seconds` of audio after a 312-sample pre-skip. */
export function oggOpus(seconds: number): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48000, 12);
  const tags = Buffer.concat([Buffer.from('OpusTags', 'latin1'), Buffer.alloc(8)]);
  return Buffer.concat([oggPage(0n, 0, head, 2), oggPage(0n, 1, tags, 0), oggPage(312n + BigInt(seconds * 48000), 2, Buffer.alloc(100), 4)]);
}

function box(type: string, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const h = Buffer.alloc(8);
  h.writeUInt32BE(8 + body.length, 0);
  h.write(type, 4, 'latin1');
  return Buffer.concat([h, body]);
}

/** An M4A (MP4) file whose movie header states `millis` ms. */
export function m4a(millis: number): Buffer {
  const mvhd = Buffer.alloc(100);
  mvhd.writeUInt32BE(1000, 12); // timescale
  mvhd.writeUInt32BE(millis, 16); // duration
  return Buffer.concat([box('ftyp', Buffer.from('M4A \0\0\0\0isomM4A ', 'latin1')), box('moov', box('mvhd', mvhd)), box('mdat', Buffer.alloc(64))]);
}

function ebml(id: number, data: Buffer): Buffer {
  const idBytes = Buffer.from(id.toString(16).padStart(id > 0xffffff ? 8 : id > 0xffff ? 6 : id > 0xff ? 4 : 2, '0'), 'hex');
  const size = Buffer.alloc(8);
  size.writeBigUInt64BE(BigInt(data.length) | (1n << 56n)); // 8-byte size vint
  return Buffer.concat([idBytes, size, data]);
}

/** WebM with audio of `millis` ms: with a stated Duration, or (live recording) only block timestamps. */
export function webm(millis: number, statedDuration = true): Buffer {
  const f64 = Buffer.alloc(8);
  f64.writeDoubleBE(millis);
  const scale = Buffer.from([0x0f, 0x42, 0x40]); // 1,000,000 ns per tick
  const info = ebml(0x1549a966, Buffer.concat([ebml(0x2ad7b1, scale), ...(statedDuration ? [ebml(0x4489, f64)] : [])]));
  const block = (rel: number) => {
    const b = Buffer.alloc(4 + 10);
    b[0] = 0x81;
    b.writeInt16BE(rel, 1);
    b[3] = 0x80;
    return ebml(0xa3, b);
  };
  const cluster = (time: number, rels: number[]) => ebml(0x1f43b675, Buffer.concat([ebml(0xe7, Buffer.from([(time >> 8) & 0xff, time & 0xff])), ...rels.map(block)]));
  const header = ebml(0x1a45dfa3, ebml(0x4282, Buffer.from('webm', 'latin1')));
  // Segment of unknown size, as live muxers write it.
  const segment = Buffer.concat([Buffer.from([0x18, 0x53, 0x80, 0x67, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), info, cluster(0, [0, 20, 40]), cluster(millis - 500, [0, 480, 500])]);
  return Buffer.concat([header, segment]);
}
