// How many samples a codec's packet decodes to, read from the packet's first bytes as a decoder
// reads them: Opus from its TOC byte, Vorbis from its mode number and the setup header's block
// flags, AAC from its AudioSpecificConfig (a frame is 1024 samples, or 960). The containers
// (Ogg, Matroska, MP4) hand packets to these.

/** Opus: samples at 48 kHz of one frame, by the TOC's configuration number (RFC 6716, 3.1). */
function opusFrameSamples(config: number): number {
  if (config < 12) return [480, 960, 1920, 2880][config % 4]!; // SILK: 10, 20, 40, 60 ms
  if (config < 16) return [480, 960][config % 2]!; // hybrid: 10, 20 ms
  return [120, 240, 480, 960][config % 4]!; // CELT: 2.5, 5, 10, 20 ms
}

/**
 * Samples at 48 kHz that an Opus packet of `length` bytes decodes to, from its first two bytes
 * (the TOC, and the frame count of a code 3 packet); 0 for a packet a decoder rejects.
 */
export function opusPacketSamples(toc: number, second: number, length: number): number {
  if (length < 1) return 0;
  const code = toc & 3;
  const frames = code === 0 ? 1 : code < 3 ? 2 : length >= 2 ? second & 0x3f : 0;
  const samples = frames * opusFrameSamples(toc >> 3);
  // A packet holds 1 to 48 frames and at most 120 ms.
  return frames >= 1 && samples <= 5760 ? samples : 0;
}

/** OpusHead (RFC 7845, 5.1): the pre-skip, samples at 48 kHz the decoder discards at the start. */
export function opusHeadPreSkip(p: Uint8Array): number | undefined {
  if (p.length < 19 || latin1(p, 0, 8) !== 'OpusHead' || (p[8]! & 0xf0) !== 0) return undefined;
  return p[10]! | (p[11]! << 8);
}

export interface VorbisStream {
  rate: number;
  blockSizes: [number, number];
  /** Per mode: its block flag (false: short block, true: long). */
  modeLong: boolean[];
}

/** The identification header: sample rate and the two block sizes. */
export function vorbisIdHeader(p: Uint8Array): Omit<VorbisStream, 'modeLong'> | undefined {
  if (p.length < 30 || p[0] !== 1 || latin1(p, 1, 7) !== 'vorbis' || !(p[29]! & 1)) return undefined;
  const rate = (p[12]! | (p[13]! << 8) | (p[14]! << 16) | (p[15]! << 24)) >>> 0;
  const small = p[28]! & 15;
  const large = p[28]! >> 4;
  if (rate === 0 || small < 6 || large > 13 || large < small) return undefined;
  return { rate, blockSizes: [1 << small, 1 << large] };
}

/**
 * The modes' block flags from the setup header, read backwards from its end, as FFmpeg's
 * vorbis_parser does: the mode table is its last part (6 bits of count - 1, then per mode a
 * block flag, 16 zero bits of window type, 16 of transform type, 8 of mapping, then the framing
 * bit), and everything before it would need the whole codebook parse to skip. The largest count
 * whose mode entries all read as valid is taken.
 */
export function vorbisSetupModes(p: Uint8Array): boolean[] | undefined {
  if (p.length < 8 || p[0] !== 5 || latin1(p, 1, 7) !== 'vorbis') return undefined;
  const bit = (k: number) => (p[k >> 3]! >> (k & 7)) & 1;
  const bits = (k: number, n: number) => {
    let v = 0;
    for (let i = n - 1; i >= 0; i--) v = v * 2 + bit(k + i);
    return v;
  };
  // The framing bit is the last bit set; at most a few padding bytes follow it.
  let last = p.length - 1;
  while (last > 7 && p[last] === 0 && p.length - last < 8) last--;
  if (p[last] === 0) return undefined;
  const framing = last * 8 + (31 - Math.clz32(p[last]!));
  const floor = 7 * 8; // the packet type and "vorbis" are not part of the table
  let count = 0;
  for (let m = 1; m <= 64; m++) {
    const start = framing - 41 * m;
    if (start - 6 < floor) break;
    if (bits(start + 33, 8) > 63 || bits(start + 17, 16) !== 0 || bits(start + 1, 16) !== 0) break;
    if (bits(start - 6, 6) === m - 1) count = m;
  }
  if (count === 0) return undefined;
  return Array.from({ length: count }, (_, i) => bit(framing - 41 * (count - i)) === 1);
}

/**
 * Counts Vorbis output: each audio packet after the first yields a quarter of its block and a
 * quarter of the previous one. A packet's block size is its mode's; the mode number (at most 6
 * bits) follows the packet type bit in its first byte.
 */
export class VorbisCounter {
  private readonly stream: VorbisStream;
  private readonly modeMask: number;
  private previous = 0;

  constructor(stream: VorbisStream) {
    this.stream = stream;
    const modeBits = stream.modeLong.length > 1 ? 32 - Math.clz32(stream.modeLong.length - 1) : 0;
    this.modeMask = (1 << modeBits) - 1;
  }

  /** Adds a packet of `length` bytes whose first byte is `first`; returns the samples it yields. */
  add(first: number, length: number): number {
    if (length < 1 || first & 1) return 0; // empty packets and header packets decode to nothing
    const long = this.stream.modeLong[(first >> 1) & this.modeMask];
    if (long === undefined) return 0;
    const block = this.stream.blockSizes[long ? 1 : 0];
    const out = this.previous === 0 ? 0 : (this.previous + block) / 4;
    this.previous = block;
    return out;
  }
}

const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
/** Object types whose frames are 1024 (or 960) samples: AAC Main, LC, SSR, LTP. */
const AAC_FRAMED = new Set([1, 2, 3, 4]);

export interface AacConfig {
  /** The core sample rate: SBR doubles the rate and the samples per frame alike, not the length. */
  rate: number;
  frameSamples: number;
}

/** AudioSpecificConfig (ISO 14496-3, 1.6.2.1), MSB first. */
export function aacConfig(p: Uint8Array): AacConfig | undefined {
  let pos = 0;
  const read = (n: number) => {
    let v = 0;
    for (let i = 0; i < n; i++, pos++) v = v * 2 + (((p[pos >> 3] ?? 0) >> (7 - (pos & 7))) & 1);
    return v;
  };
  if (p.length < 2) return undefined;
  const objectType = () => {
    const t = read(5);
    return t === 31 ? 32 + read(6) : t;
  };
  const rateOf = () => {
    const i = read(4);
    return i === 15 ? read(24) : AAC_RATES[i];
  };
  let type = objectType();
  const rate = rateOf();
  read(4); // channel configuration
  if (type === 5 || type === 29) {
    rateOf(); // the SBR output rate
    type = objectType();
  }
  if (!rate || !AAC_FRAMED.has(type) || pos >= p.length * 8) return undefined;
  return { rate, frameSamples: read(1) ? 960 : 1024 };
}

function latin1(p: Uint8Array, from: number, to: number): string {
  return String.fromCharCode(...p.subarray(from, to));
}
