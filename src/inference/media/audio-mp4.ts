// MP4/M4A (ISO BMFF): a decoder decodes the samples the sample table lists (stsz, plus each
// fragment's trun), and an AAC sample is one frame of 1024 samples (960 with the short-frame
// flag) at the core rate of its AudioSpecificConfig, whatever the time-to-sample table says.
// The track's mdhd duration and the movie's mvhd (and mehd) durations are claims checked against
// that count. Other codecs (ALAC, AC-3, …) are not counted.
import { type AudioLength, type Seconds, checkedLength, longer, seconds } from './audio-length.ts';
import { type AacConfig, aacConfig } from './audio-codecs.ts';

interface Box {
  type: string;
  /** Where the box's content starts and ends. */
  start: number;
  end: number;
}

/** More boxes kept from one parent than a real file has (an hour of fragments 20 ms apart is 180,000 moofs). */
const MAX_BOXES = 1 << 18;

/**
 * The boxes in [from, to) (only those of the `kept` types, when given); undefined when one runs
 * past its parent. At the top level the last box may be cut off by the end of the file.
 */
function children(buf: Buffer, from: number, to: number, topLevel = false, kept?: string[]): Box[] | undefined {
  const out: Box[] = [];
  const keptCodes = kept?.map((t) => Buffer.from(t, 'latin1').readUInt32BE(0));
  for (let i = from; i < to; ) {
    if (out.length >= MAX_BOXES) return undefined;
    if (i + 8 > to) return topLevel ? out : undefined;
    let size = buf.readUInt32BE(i);
    let header = 8;
    if (size === 1) {
      if (i + 16 > to) return undefined;
      const large = buf.readBigUInt64BE(i + 8);
      size = large > BigInt(to - i) ? to - i + 1 : Number(large);
      header = 16;
    } else if (size === 0) size = to - i;
    if (size < header) return undefined;
    if (i + size > to) {
      if (!topLevel) return undefined;
      size = to - i;
    }
    if (!keptCodes || keptCodes.includes(buf.readUInt32BE(i + 4)))
      out.push({ type: buf.toString('latin1', i + 4, i + 8), start: i + header, end: i + size });
    i += size;
  }
  return out;
}

const find = (boxes: Box[] | undefined, type: string) => boxes?.find((b) => b.type === type);

function inside(buf: Buffer, box: Box | undefined, ...path: string[]): Box | undefined {
  let b = box;
  for (const type of path) b = b && find(children(buf, b.start, b.end), type);
  return b;
}

/** mvhd and mdhd: a duration in their own timescale, version 0 (32-bit) or 1 (64-bit). */
function headerDuration(buf: Buffer, b: Box | undefined): Seconds | undefined {
  const v1 = b !== undefined && buf[b.start] === 1;
  if (!b || b.end - b.start < (v1 ? 32 : 20)) return undefined;
  return statedDuration(
    v1 ? buf.readBigUInt64BE(b.start + 24) : BigInt(buf.readUInt32BE(b.start + 16)),
    buf.readUInt32BE(b.start + (v1 ? 20 : 12)),
    v1,
  );
}

/** mehd: the whole fragmented movie's duration, in the mvhd's timescale. */
function fragmentedDuration(buf: Buffer, mehd: Box | undefined, mvhd: Box | undefined): Seconds | undefined {
  if (!mehd || !mvhd || mehd.end - mehd.start < 8 || mvhd.end - mvhd.start < 24) return undefined;
  const v1 = buf[mehd.start] === 1;
  if (v1 && mehd.end - mehd.start < 12) return undefined;
  return statedDuration(
    v1 ? buf.readBigUInt64BE(mehd.start + 4) : BigInt(buf.readUInt32BE(mehd.start + 4)),
    buf.readUInt32BE(mvhd.start + (buf[mvhd.start] === 1 ? 20 : 12)),
    v1,
  );
}

/** No claim at all: a zero timescale, a zero duration (a fragmented file's headers) or all ones (unknown). */
function statedDuration(duration: bigint, timescale: number, v1: boolean): Seconds | undefined {
  if (timescale === 0 || duration === 0n || duration === (v1 ? 0xffffffffffffffffn : 0xffffffffn)) return undefined;
  return seconds(duration, timescale);
}

/** The MPEG-4 descriptors of an esds box: the DecoderConfigDescriptor's object type and its DecoderSpecificInfo. */
function esdsDecoderConfig(buf: Buffer, b: Box): { objectType: number; specific?: Buffer } | undefined {
  let i = b.start + 4;
  const descriptor = () => {
    if (i + 2 > b.end) return undefined;
    const tag = buf[i++]!;
    let length = 0;
    for (let k = 0; k < 4; k++) {
      const c = buf[i++];
      if (c === undefined) return undefined;
      length = length * 128 + (c & 0x7f);
      if (!(c & 0x80)) break;
    }
    return i + length <= b.end ? { tag, length } : undefined;
  };
  const es = descriptor();
  if (es?.tag !== 3) return undefined;
  const flags = buf[i + 2]!;
  i += 3;
  if (flags & 0x80) i += 2;
  if (flags & 0x40) i += 1 + (buf[i] ?? 0);
  if (flags & 0x20) i += 2;
  const config = descriptor();
  if (config?.tag !== 4 || config.length < 13) return undefined;
  const objectType = buf[i]!;
  const end = i + config.length;
  i += 13;
  const specific = i < end ? descriptor() : undefined;
  return { objectType, specific: specific?.tag === 5 ? buf.subarray(i, i + specific.length) : undefined };
}

interface AudioTrack {
  id: number;
  codec: string;
  aac?: AacConfig;
  frames: number;
  stated?: Seconds;
}

/** An audio track's codec from its first sample description. */
function trackCodec(buf: Buffer, stsd: Box): { codec: string; aac?: AacConfig } | undefined {
  if (stsd.end - stsd.start < 8 + 36) return undefined;
  const entry = children(buf, stsd.start + 8, stsd.end)?.[0];
  if (!entry) return undefined;
  if (entry.type !== 'mp4a') return { codec: `mp4 ${JSON.stringify(entry.type)}` };
  if (entry.end - entry.start < 28) return undefined;
  // The AudioSampleEntry: QuickTime versions 1 and 2 make it longer; a rate in 16.16 fixed point.
  const version = buf.readUInt16BE(entry.start + 8);
  const extra = version === 1 ? 16 : version === 2 ? 36 : 0;
  if (entry.end - entry.start < 28 + extra) return undefined;
  const kids = children(buf, entry.start + 28 + extra, entry.end);
  const esds = find(kids, 'esds') ?? inside(buf, find(kids, 'wave'), 'esds');
  const config = esds && esdsDecoderConfig(buf, esds);
  if (!config) return undefined;
  const objectType = config.objectType;
  const codec = `mp4a object type 0x${objectType.toString(16)}`;
  if (objectType === 0x40) {
    const aac = config.specific && aacConfig(config.specific);
    return aac ? { codec: 'aac', aac } : { codec };
  }
  // MPEG-2 AAC (Main, LC, SSR) carries no AudioSpecificConfig: frames of 1024 at the entry's rate.
  const rate = version === 2 ? Math.round(buf.readDoubleBE(entry.start + 32)) : buf.readUInt16BE(entry.start + 24);
  if (objectType >= 0x66 && objectType <= 0x68 && rate > 0) return { codec: 'aac', aac: { rate, frameSamples: 1024 } };
  return { codec };
}

export function mp4Length(buf: Buffer): AudioLength | undefined {
  const top = children(buf, 0, buf.length, true, ['moov', 'moof']);
  const moov = find(top, 'moov');
  const moovKids = moov && children(buf, moov.start, moov.end);
  if (!moov || !moovKids) return undefined;
  const traks = moovKids.filter((b) => b.type === 'trak');
  if (traks.length > 64) return undefined;
  const tracks: AudioTrack[] = [];
  for (const trak of traks) {
    const kids = children(buf, trak.start, trak.end);
    const tkhd = find(kids, 'tkhd');
    const mdia = find(kids, 'mdia');
    const mdiaKids = mdia && children(buf, mdia.start, mdia.end);
    const hdlr = find(mdiaKids, 'hdlr');
    if (!tkhd || !mdiaKids || !hdlr || hdlr.end - hdlr.start < 12) return undefined;
    if (buf.toString('latin1', hdlr.start + 8, hdlr.start + 12) !== 'soun') continue;
    const stbl = inside(buf, find(mdiaKids, 'minf'), 'stbl');
    const stblKids = stbl && children(buf, stbl.start, stbl.end);
    const stsd = find(stblKids, 'stsd');
    const stsz = find(stblKids, 'stsz') ?? find(stblKids, 'stz2');
    if (!stsd || !stsz || stsz.end - stsz.start < 12 || tkhd.end - tkhd.start < 24) return undefined;
    const codec = trackCodec(buf, stsd);
    if (!codec) return undefined;
    tracks.push({
      id: buf.readUInt32BE(tkhd.start + (buf[tkhd.start] === 1 ? 20 : 12)),
      ...codec,
      frames: buf.readUInt32BE(stsz.start + 8),
      stated: headerDuration(buf, find(mdiaKids, 'mdhd')),
    });
  }
  if (tracks.length === 0) return undefined;
  // Fragments (a recorder's fragmented MP4) add the samples of each trun to their track.
  for (const moof of top!.filter((b) => b.type === 'moof')) {
    for (const traf of children(buf, moof.start, moof.end)?.filter((b) => b.type === 'traf') ?? []) {
      const kids = children(buf, traf.start, traf.end);
      const tfhd = find(kids, 'tfhd');
      if (!kids || !tfhd || tfhd.end - tfhd.start < 8) return undefined;
      const track = tracks.find((t) => t.id === buf.readUInt32BE(tfhd.start + 4));
      for (const trun of kids.filter((b) => b.type === 'trun')) {
        if (trun.end - trun.start < 8) return undefined;
        if (track) track.frames += buf.readUInt32BE(trun.start + 4);
      }
    }
  }
  const uncounted = tracks.find((t) => !t.aac);
  if (uncounted) return { kind: 'unmeasured', format: 'mp4', codec: uncounted.codec };
  // The movie's duration is the longest track's: it speaks for the audio only when that is the only track.
  const mvhd = find(moovKids, 'mvhd');
  const movie =
    traks.length === 1
      ? (headerDuration(buf, mvhd) ?? fragmentedDuration(buf, inside(buf, find(moovKids, 'mvex'), 'mehd'), mvhd))
      : undefined;
  let longest: AudioLength | undefined;
  for (const t of tracks) {
    const length = checkedLength('mp4', t.codec, seconds(t.frames * t.aac!.frameSamples, t.aac!.rate), t.stated, movie);
    if (length.kind !== 'measured') return length;
    longest = longer(longest, length);
  }
  return longest;
}
