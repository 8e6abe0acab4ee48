// The real duration of an audio file, read from the file itself, for audio priced per second.
// Formats: WAV, MP3, FLAC, Ogg (Opus, Vorbis), MP4/M4A, WebM/Matroska: the ones OpenAI's
// transcription API takes. Durations are exact fractions of a second (num/den) wherever the
// container states them as integers; WebM states a float, read to the microsecond.

export type AudioFormat = 'wav' | 'mp3' | 'flac' | 'ogg' | 'mp4' | 'webm';

export interface AudioDuration {
  format: AudioFormat;
  /** Seconds = num / den. */
  num: bigint;
  den: bigint;
}

/** The duration, or undefined when the bytes are not a complete file of a known format. */
export function audioDuration(b: Uint8Array): AudioDuration | undefined {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length < 12) return undefined;
  const tag4 = buf.toString('latin1', 0, 4);
  if (tag4 === 'RIFF' && buf.toString('latin1', 8, 12) === 'WAVE') return wav(buf);
  if (tag4 === 'OggS') return ogg(buf);
  if (buf.readUInt32BE(0) === 0x1a45dfa3) return webm(buf);
  if (buf.toString('latin1', 4, 8) === 'ftyp') return mp4(buf);
  const start = skipId3(buf);
  if (buf.toString('latin1', start, start + 4) === 'fLaC') return flac(buf, start + 4);
  return mp3(buf, start);
}

/** Whole seconds, rounded up: the unit "pro-rated by the second" bills. */
export function ceilSeconds(d: AudioDuration): bigint {
  return (d.num + d.den - 1n) / d.den;
}

function wav(buf: Buffer): AudioDuration | undefined {
  let byteRate = 0;
  for (let i = 12; i + 8 <= buf.length; ) {
    const id = buf.toString('latin1', i, i + 4);
    const size = buf.readUInt32LE(i + 4);
    if (id === 'fmt ' && i + 20 <= buf.length) byteRate = buf.readUInt32LE(i + 16);
    if (id === 'data') {
      if (byteRate === 0) return undefined;
      // Streamed WAVs may state 0 or 0xFFFFFFFF: trust the bytes present.
      const present = buf.length - (i + 8);
      const data = size === 0 || size > present ? present : size;
      return { format: 'wav', num: BigInt(data), den: BigInt(byteRate) };
    }
    i += 8 + size + (size & 1);
  }
  return undefined;
}

function skipId3(buf: Buffer): number {
  if (buf.length < 10 || buf.toString('latin1', 0, 3) !== 'ID3') return 0;
  const size = ((buf[6]! & 0x7f) << 21) | ((buf[7]! & 0x7f) << 14) | ((buf[8]! & 0x7f) << 7) | (buf[9]! & 0x7f);
  const footer = buf[5]! & 0x10 ? 10 : 0;
  return 10 + size + footer;
}

const MP3_BITRATES: Record<string, number[]> = {
  '1-1': [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  '1-2': [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  '1-3': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  '2-1': [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  '2-2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  '2-3': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const MP3_RATES: Record<number, number[]> = { 1: [44100, 48000, 32000], 2: [22050, 24000, 16000], 25: [11025, 12000, 8000] };

interface Mp3Frame {
  length: number;
  samples: number;
  rate: number;
  sideInfoEnd: number;
}

function mp3Frame(buf: Buffer, i: number): Mp3Frame | undefined {
  if (i + 4 > buf.length || buf[i] !== 0xff || (buf[i + 1]! & 0xe0) !== 0xe0) return undefined;
  const h = buf.readUInt32BE(i);
  const versionBits = (h >>> 19) & 3;
  const layerBits = (h >>> 17) & 3;
  const brIndex = (h >>> 12) & 15;
  const srIndex = (h >>> 10) & 3;
  const pad = (h >>> 9) & 1;
  if (versionBits === 1 || layerBits === 0 || brIndex === 0 || brIndex === 15 || srIndex === 3) return undefined;
  const version = versionBits === 3 ? 1 : versionBits === 2 ? 2 : 25;
  const layer = 4 - layerBits;
  const kbps = MP3_BITRATES[`${version === 1 ? 1 : 2}-${layer}`]![brIndex]!;
  const rate = MP3_RATES[version]![srIndex]!;
  const bps = kbps * 1000;
  let length: number;
  let samples: number;
  if (layer === 1) {
    length = (Math.floor((12 * bps) / rate) + pad) * 4;
    samples = 384;
  } else if (layer === 2 || version === 1) {
    length = Math.floor((144 * bps) / rate) + pad;
    samples = 1152;
  } else {
    length = Math.floor((72 * bps) / rate) + pad;
    samples = 576;
  }
  const mono = ((h >>> 6) & 3) === 3;
  const sideInfo = version === 1 ? (mono ? 17 : 32) : mono ? 9 : 17;
  return { length, samples, rate, sideInfoEnd: i + 4 + sideInfo };
}

function mp3(buf: Buffer, start: number): AudioDuration | undefined {
  // Frames must follow each other exactly; a Xing/Info/VBRI header frame carries no audio.
  let i = start;
  let first = mp3Frame(buf, i);
  if (!first) return undefined;
  const tag = buf.toString('latin1', first.sideInfoEnd, first.sideInfoEnd + 4);
  if (tag === 'Xing' || tag === 'Info' || buf.toString('latin1', i + 36, i + 40) === 'VBRI') {
    i += first.length;
    first = mp3Frame(buf, i);
    if (!first) return undefined;
  }
  const rate = first.rate;
  let samples = 0n;
  let frames = 0;
  for (let f: Mp3Frame | undefined = first; f && f.rate === rate && i + f.length <= buf.length; f = mp3Frame(buf, i)) {
    samples += BigInt(f.samples);
    frames++;
    i += f.length;
  }
  // A real file is frames to the end, give or take an ID3v1 tag or a cut last frame.
  if (frames < 2 || buf.length - i > 128 + first.length) return undefined;
  return { format: 'mp3', num: samples, den: BigInt(rate) };
}

function flac(buf: Buffer, i: number): AudioDuration | undefined {
  // The first metadata block is STREAMINFO (type 0, 34 bytes).
  if (i + 4 + 34 > buf.length || (buf[i]! & 0x7f) !== 0) return undefined;
  const d = i + 4;
  const rate = (buf[d + 10]! << 12) | (buf[d + 11]! << 4) | (buf[d + 12]! >> 4);
  const total = (BigInt(buf[d + 13]! & 0x0f) << 32n) | BigInt(buf.readUInt32BE(d + 14));
  if (rate === 0 || total === 0n) return undefined;
  return { format: 'flac', num: total, den: BigInt(rate) };
}

function ogg(buf: Buffer): AudioDuration | undefined {
  let rate = 0n;
  let preSkip = 0n;
  let serial = -1;
  let last = -1n;
  for (let i = 0; i + 27 <= buf.length && buf.toString('latin1', i, i + 4) === 'OggS'; ) {
    const segments = buf[i + 26]!;
    if (i + 27 + segments > buf.length) break;
    let body = 0;
    for (let s = 0; s < segments; s++) body += buf[i + 27 + s]!;
    const data = i + 27 + segments;
    if (serial === -1) {
      serial = buf.readUInt32LE(i + 14);
      if (buf.toString('latin1', data, data + 8) === 'OpusHead') {
        rate = 48000n;
        preSkip = BigInt(buf.readUInt16LE(data + 10));
      } else if (buf.toString('latin1', data + 1, data + 7) === 'vorbis' && buf[data] === 1) rate = BigInt(buf.readUInt32LE(data + 12));
      else return undefined;
    }
    const granule = buf.readBigInt64LE(i + 6);
    if (buf.readUInt32LE(i + 14) === serial && granule >= 0n && data + body <= buf.length) last = granule;
    i = data + body;
  }
  if (rate === 0n || last <= preSkip) return undefined;
  return { format: 'ogg', num: last - preSkip, den: rate };
}

/** MP4/M4A (ISO BMFF): moov/mvhd holds the duration in its own timescale. */
export function mp4(buf: Buffer): AudioDuration | undefined {
  const box = (from: number, to: number, type: string): [number, number] | undefined => {
    for (let i = from; i + 8 <= to; ) {
      let size = buf.readUInt32BE(i);
      let header = 8;
      if (size === 1 && i + 16 <= to) {
        size = Number(buf.readBigUInt64BE(i + 8));
        header = 16;
      } else if (size === 0) size = to - i;
      if (size < header) return undefined;
      if (buf.toString('latin1', i + 4, i + 8) === type) return [i + header, Math.min(i + size, to)];
      i += size;
    }
    return undefined;
  };
  const moov = box(0, buf.length, 'moov');
  const mvhd = moov && box(moov[0], moov[1], 'mvhd');
  if (!mvhd) return undefined;
  const [d, end] = mvhd;
  const v1 = buf[d] === 1;
  if (d + (v1 ? 32 : 20) > end) return undefined;
  const timescale = BigInt(buf.readUInt32BE(d + (v1 ? 20 : 12)));
  const duration = v1 ? buf.readBigUInt64BE(d + 24) : BigInt(buf.readUInt32BE(d + 16));
  if (timescale === 0n || duration === 0n) return undefined;
  return { format: 'mp4', num: duration, den: timescale };
}

// Matroska element ids (with their length marker bits, as written).
const EBML = { segment: 0x18538067, info: 0x1549a966, timecodeScale: 0x2ad7b1, duration: 0x4489, cluster: 0x1f43b675, timecode: 0xe7, blockGroup: 0xa0, block: 0xa1, simpleBlock: 0xa3 };
const MASTERS = new Set([EBML.segment, EBML.info, EBML.cluster, EBML.blockGroup]);

function vint(buf: Buffer, i: number, keepMarker: boolean): { value: number; length: number; unknown: boolean } | undefined {
  const first = buf[i];
  if (first === undefined || first === 0) return undefined;
  const length = Math.clz32(first) - 23;
  if (length > 8 || i + length > buf.length) return undefined;
  let value = keepMarker ? first : first & (0xff >> length);
  let allOnes = value === 0xff >> length;
  for (let k = 1; k < length; k++) {
    value = value * 256 + buf[i + k]!;
    if (buf[i + k] !== 0xff) allOnes = false;
  }
  return { value, length, unknown: !keepMarker && allOnes };
}

/**
 * WebM: Info's Duration when the muxer wrote one; otherwise (live recordings such as a
 * browser's MediaRecorder) the latest block timestamp. Master elements are entered, not
 * skipped, so elements of unknown size need no special case.
 */
function webm(buf: Buffer): AudioDuration | undefined {
  let scale = 1_000_000; // ns per tick
  let stated: number | undefined;
  let clusterTime = 0;
  let latest = 0;
  let segmentSeen = false;
  for (let i = 0; i < buf.length; ) {
    const id = vint(buf, i, true);
    if (!id) break;
    const size = vint(buf, i + id.length, false);
    if (!size) break;
    const data = i + id.length + size.length;
    if (id.value === EBML.segment) segmentSeen = true;
    if (MASTERS.has(id.value)) {
      i = data;
      continue;
    }
    if (size.unknown || data + size.value > buf.length) break;
    if (id.value === EBML.timecodeScale) scale = buf.readUIntBE(data, Math.min(size.value, 6));
    else if (id.value === EBML.duration) stated = size.value === 4 ? buf.readFloatBE(data) : buf.readDoubleBE(data);
    else if (id.value === EBML.timecode) clusterTime = buf.readUIntBE(data, Math.min(size.value, 6));
    else if (id.value === EBML.simpleBlock || id.value === EBML.block) {
      const track = vint(buf, data, false);
      if (track) latest = Math.max(latest, clusterTime + buf.readInt16BE(data + track.length));
    }
    i = data + size.value;
  }
  const ticks = stated ?? latest;
  if (!segmentSeen || !(ticks > 0)) return undefined;
  // The stated duration is a float: take it to the microsecond (1 tick = `scale` ns).
  const micros = BigInt(Math.ceil((ticks * scale) / 1000));
  return { format: 'webm', num: micros, den: 1_000_000n };
}
