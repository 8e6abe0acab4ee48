// WebM/Matroska: the blocks of each audio track are counted as a decoder decodes them (each
// laced frame of a block: Opus by its TOC byte, Vorbis by its block size, AAC 1024 samples),
// and Info's Duration is a claim checked against that count. A live recording (a browser's
// MediaRecorder) states no Duration and sizes nothing: its blocks are all there is.
import { type AudioLength, checkedLength, longer, type Seconds, seconds } from './audio-length.ts';
import {
  aacConfig,
  opusHeadPreSkip,
  opusPacketSamples,
  VorbisCounter,
  vorbisIdHeader,
  vorbisSetupModes,
} from './audio-codecs.ts';

// Element ids, as written (with their length marker bits).
const ID = {
  segment: 0x18538067,
  info: 0x1549a966,
  timestampScale: 0x2ad7b1,
  duration: 0x4489,
  tracks: 0x1654ae6b,
  trackEntry: 0xae,
  trackNumber: 0xd7,
  trackType: 0x83,
  codecId: 0x86,
  codecPrivate: 0x63a2,
  codecDelay: 0x56aa,
  audio: 0xe1,
  samplingFrequency: 0xb5,
  cluster: 0x1f43b675,
  blockGroup: 0xa0,
  block: 0xa1,
  simpleBlock: 0xa3,
};
/** Masters walked into rather than over, so the walk is flat and needs no recursion. */
const ENTERED = new Set([ID.segment, ID.info, ID.tracks, ID.trackEntry, ID.audio, ID.cluster, ID.blockGroup]);
const AUDIO_TRACK = 2;
const MAX_TRACKS = 64;
const CLUSTER_BYTES = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);

interface Vint {
  value: number;
  length: number;
  unknown: boolean;
}

function vint(buf: Buffer, i: number, keepMarker: boolean, maxLength = 8): Vint | undefined {
  const first = buf[i];
  if (first === undefined || first === 0) return undefined;
  const length = Math.clz32(first) - 23;
  if (length > maxLength || i + length > buf.length) return undefined;
  let value = keepMarker ? first : first & (0xff >> length);
  let allOnes = value === 0xff >> length;
  for (let k = 1; k < length; k++) {
    value = value * 256 + buf[i + k]!;
    if (buf[i + k] !== 0xff) allOnes = false;
  }
  return { value, length, unknown: !keepMarker && allOnes };
}

type FrameCounter = (first: number, second: number, length: number) => number;

interface Track {
  number: number;
  type: number;
  codecId: string;
  codecPrivate?: Buffer;
  codecDelayNs: number;
  rate: number;
  /** How its frames are counted (from a frame's first two bytes and its length), decided at its first block; null for a codec the gateway does not count. */
  count?: FrameCounter | null;
  rateUsed: number;
  preSkip: number;
  samples: number;
}

/** Xiph lacing of CodecPrivate: the three Vorbis headers. */
function xiphPackets(p: Buffer): Buffer[] | undefined {
  if (p.length < 1) return undefined;
  const count = p[0]! + 1;
  let i = 1;
  const sizes: number[] = [];
  for (let k = 0; k < count - 1; k++) {
    let size = 0;
    for (let c = 255; c === 255; ) {
      c = p[i++] ?? -1;
      if (c < 0) return undefined;
      size += c;
    }
    sizes.push(size);
  }
  const out: Buffer[] = [];
  for (const size of sizes) {
    out.push(p.subarray(i, i + size));
    i += size;
  }
  if (i > p.length) return undefined;
  out.push(p.subarray(i));
  return out;
}

/** How to count a track's frames, or undefined for a codec the gateway does not count. */
function counter(t: Track): FrameCounter | undefined {
  if (t.codecId === 'A_OPUS') {
    const headPreSkip = t.codecPrivate && opusHeadPreSkip(t.codecPrivate);
    t.rateUsed = 48000;
    t.preSkip = t.codecDelayNs > 0 ? Math.round((t.codecDelayNs * 48000) / 1e9) : (headPreSkip ?? 0);
    return opusPacketSamples;
  }
  if (t.codecId === 'A_VORBIS') {
    const [id, , setup] = (t.codecPrivate && xiphPackets(t.codecPrivate)) ?? [];
    const header = id && vorbisIdHeader(id);
    const modeLong = setup && vorbisSetupModes(setup);
    if (!header || !modeLong) return undefined;
    const vorbis = new VorbisCounter({ ...header, modeLong });
    t.rateUsed = header.rate;
    return (first, _second, length) => vorbis.add(first, length);
  }
  if (t.codecId.startsWith('A_AAC')) {
    const aac =
      (t.codecPrivate && aacConfig(t.codecPrivate)) ?? (t.rate > 0 ? { rate: t.rate, frameSamples: 1024 } : undefined);
    if (!aac) return undefined;
    t.rateUsed = aac.rate;
    return () => aac.frameSamples;
  }
  return undefined;
}

/** The frames of a laced block's payload (after its track, timecode and flags). */
function lacedFrames(buf: Buffer, at: number, end: number, lacing: number): [number, number][] | undefined {
  if (at >= end) return undefined;
  const count = buf[at]! + 1;
  let i = at + 1;
  const sizes: number[] = [];
  if (lacing === 1) {
    for (let k = 0; k < count - 1; k++) {
      let size = 0;
      for (let c = 255; c === 255; ) {
        if (i >= end) return undefined;
        c = buf[i++]!;
        size += c;
      }
      sizes.push(size);
    }
  } else if (lacing === 3) {
    let size = 0;
    for (let k = 0; k < count - 1; k++) {
      const v = vint(buf, i, false);
      if (!v || i + v.length > end) return undefined;
      // The first size is unsigned, the others signed differences from the one before.
      size = k === 0 ? v.value : size + v.value - (2 ** (7 * v.length - 1) - 1);
      if (size < 0) return undefined;
      sizes.push(size);
      i += v.length;
    }
  }
  const rest = end - i - sizes.reduce((a, b) => a + b, 0);
  if (lacing === 2) {
    if ((end - i) % count !== 0) return undefined;
    return Array.from({ length: count }, (_, k) => [i + (k * (end - i)) / count, (end - i) / count]);
  }
  if (rest < 0) return undefined;
  sizes.push(rest);
  const out: [number, number][] = [];
  for (const size of sizes) {
    out.push([i, size]);
    i += size;
  }
  return out;
}

export function matroskaLength(buf: Buffer): AudioLength | undefined {
  const tracks: Track[] = [];
  const byNumber = new Map<number, Track>();
  let scale = 1_000_000; // ns per tick
  let stated: number | undefined;
  let segmentSeen = false;
  const countOf = (t: Track) => (t.count === undefined ? (t.count = counter(t) ?? null) : t.count);
  const countBlock = (at: number, end: number) => {
    const number = vint(buf, at, false);
    if (!number || at + number.length + 3 > end) return;
    const track = byNumber.get(number.value);
    const count = track?.type === AUDIO_TRACK ? countOf(track) : null;
    if (!track || !count) return;
    const lacing = (buf[at + number.length + 2]! >> 1) & 3;
    const payload = at + number.length + 3;
    if (lacing === 0) track.samples += count(buf[payload] ?? 0, buf[payload + 1] ?? 0, end - payload);
    else
      for (const [from, size] of lacedFrames(buf, payload, end, lacing) ?? [])
        track.samples += count(buf[from] ?? 0, buf[from + 1] ?? 0, size);
  };
  // A broken element (a bad id, a size past the end of the file) is skipped the way FFmpeg's
  // demuxer resyncs: at the next Cluster id. Every step moves forward, so the walk is linear.
  const resync = (from: number) => {
    const next = buf.indexOf(CLUSTER_BYTES, from + 1);
    return next < 0 ? buf.length : next;
  };
  for (let i = 0; i < buf.length; ) {
    const id = vint(buf, i, true, 4);
    const size = id && vint(buf, i + id.length, false);
    if (!id || !size) {
      i = resync(i);
      continue;
    }
    const data = i + id.length + size.length;
    if (id.value === ID.segment) segmentSeen = true;
    if (ENTERED.has(id.value)) {
      if (id.value === ID.trackEntry) {
        if (tracks.length >= MAX_TRACKS) return undefined;
        tracks.push({ number: 0, type: 0, codecId: '', codecDelayNs: 0, rate: 0, rateUsed: 0, preSkip: 0, samples: 0 });
      }
      i = data;
      continue;
    }
    const end = data + size.value;
    if (size.unknown || end > buf.length) {
      i = resync(i);
      continue;
    }
    if (id.value === ID.simpleBlock || id.value === ID.block) {
      countBlock(data, end);
      i = end;
      continue;
    }
    const track = tracks.at(-1);
    const uint = () => (size.value >= 1 && size.value <= 6 ? buf.readUIntBE(data, size.value) : 0);
    const float = () =>
      size.value === 4 ? buf.readFloatBE(data) : size.value === 8 ? buf.readDoubleBE(data) : undefined;
    switch (id.value) {
      case ID.timestampScale:
        scale = uint() || scale;
        break;
      case ID.duration:
        stated = float();
        break;
      case ID.trackNumber:
        if (track) {
          track.number = uint();
          if (!byNumber.has(track.number)) byNumber.set(track.number, track);
        }
        break;
      case ID.trackType:
        if (track) track.type = uint();
        break;
      case ID.codecId:
        if (track) track.codecId = buf.toString('latin1', data, end).replace(/\0+$/, '');
        break;
      case ID.codecPrivate:
        if (track) track.codecPrivate = buf.subarray(data, end);
        break;
      case ID.codecDelay:
        if (track) track.codecDelayNs = uint();
        break;
      case ID.samplingFrequency:
        if (track) track.rate = float() ?? 0;
        break;
    }
    i = end;
  }
  const audio = tracks.filter((t) => t.type === AUDIO_TRACK);
  if (!segmentSeen || audio.length === 0) return undefined;
  const notCounted = audio.find((t) => countOf(t) === null);
  if (notCounted) return { kind: 'unmeasured', format: 'webm', codec: notCounted.codecId || 'unknown' };
  // Duration is the segment's, the longest track's: it speaks for the audio only when that is the only track.
  const micros = stated === undefined ? Number.NaN : Math.round((stated * scale) / 1000);
  const statedSeconds: Seconds | undefined =
    Number.isFinite(micros) && micros > 0 && tracks.length === 1 ? seconds(BigInt(micros), 1_000_000) : undefined;
  let longest: AudioLength | undefined;
  for (const t of audio) {
    const length = checkedLength(
      'webm',
      t.codecId.toLowerCase().slice(2),
      seconds(Math.max(0, t.samples - t.preSkip), t.rateUsed),
      statedSeconds,
    );
    if (length.kind !== 'measured') return length;
    longest = longer(longest, length);
  }
  return longest;
}
