// Ogg: pages are walked end to end and split into packets; each logical stream's audio is
// counted packet by packet (Opus by its TOC byte, Vorbis by its block sizes), and its last
// granule position is the claim checked against that count. Chained streams (files joined end
// to end) are decoded one after another, so their lengths add up.
import { type AudioLength, checkedLength, type Seconds, seconds } from './audio-length.ts';
import { opusHeadPreSkip, opusPacketSamples, VorbisCounter, vorbisIdHeader, vorbisSetupModes } from './audio-codecs.ts';

/** Identification and Vorbis setup headers are kept whole (a setup header is a few KB); other packets only their first bytes. */
const MAX_HEADER_PACKET = 1 << 20;
const PACKET_START = 8;
const MAX_STREAMS = 64;

interface Stream {
  kind: 'opus' | 'vorbis' | 'other' | 'ignored';
  packets: number;
  /** The packet being read, when it spans pages. */
  pending: Buffer[];
  pendingBytes: number;
  samples: number;
  rate: number;
  preSkip: number;
  vorbisHeader?: ReturnType<typeof vorbisIdHeader>;
  vorbis?: VorbisCounter;
  lastGranule: bigint;
  codec: string;
}

/** Streams that carry no audio a transcriber would hear: Ogg Skeleton, Theora video. */
const IGNORED = ['fishead\0', '\x80theora'];

function onPacket(s: Stream, p: Buffer): boolean {
  const n = s.packets++;
  if (n === 0) {
    if (p.subarray(0, 8).toString('latin1') === 'OpusHead') {
      const preSkip = opusHeadPreSkip(p);
      if (preSkip === undefined) return false;
      Object.assign(s, { kind: 'opus', rate: 48000, preSkip, codec: 'opus' });
    } else if (p.subarray(0, 7).toString('latin1') === '\x01vorbis') {
      s.vorbisHeader = vorbisIdHeader(p);
      if (!s.vorbisHeader) return false;
      Object.assign(s, { kind: 'vorbis', rate: s.vorbisHeader.rate, codec: 'vorbis' });
    } else if (IGNORED.some((m) => p.subarray(0, m.length).toString('latin1') === m)) s.kind = 'ignored';
    else
      s.codec = `ogg ${JSON.stringify(
        p
          .subarray(0, 8)
          .toString('latin1')
          .replace(/[^\x20-\x7e]/g, ''),
      )}`;
    return true;
  }
  if (s.kind === 'opus') {
    if (n === 1) return p.subarray(0, 8).toString('latin1') === 'OpusTags';
    s.samples += opusPacketSamples(p[0] ?? 0, p[1] ?? 0, p.length);
  } else if (s.kind === 'vorbis') {
    if (n === 1) return p[0] === 3;
    if (n === 2) {
      const modeLong = vorbisSetupModes(p);
      if (!modeLong || !s.vorbisHeader) return false;
      s.vorbis = new VorbisCounter({ ...s.vorbisHeader, modeLong });
    } else s.samples += s.vorbis!.add(p[0] ?? 0, p.length);
  }
  return true;
}

/** An audio packet read in place (the common case: it starts and ends in one page). */
function onAudioPacket(s: Stream, buf: Buffer, at: number, length: number): void {
  s.packets++;
  if (s.kind === 'opus') s.samples += opusPacketSamples(buf[at] ?? 0, buf[at + 1] ?? 0, length);
  else if (s.vorbis) s.samples += s.vorbis.add(buf[at] ?? 0, length);
}

export function oggLength(buf: Buffer): AudioLength | undefined {
  const streams = new Map<number, Stream>();
  let i = 0;
  while (i < buf.length) {
    // Pages follow each other exactly; a page cut off by the end of the file ends the walk.
    if (i + 27 > buf.length) break;
    if (buf.toString('latin1', i, i + 4) !== 'OggS' || buf[i + 4] !== 0) return undefined;
    const flags = buf[i + 5]!;
    const granule = buf.readBigInt64LE(i + 6);
    const serial = buf.readUInt32LE(i + 14);
    const segments = buf[i + 26]!;
    const table = i + 27;
    if (table + segments > buf.length) break;
    let body = 0;
    for (let k = 0; k < segments; k++) body += buf[table + k]!;
    const data = table + segments;
    if (data + body > buf.length) break;
    let s = streams.get(serial);
    if (!s) {
      if (!(flags & 2) || streams.size >= MAX_STREAMS) return undefined; // a stream starts with a beginning-of-stream page
      s = {
        kind: 'other',
        packets: 0,
        pending: [],
        pendingBytes: 0,
        samples: 0,
        rate: 0,
        preSkip: 0,
        lastGranule: -1n,
        codec: 'ogg',
      };
      streams.set(serial, s);
    } else if (flags & 2) return undefined;
    // A continued page goes on with the packet the last page left unfinished, and only then.
    const continued = (flags & 1) !== 0;
    if (continued !== s.pendingBytes > 0) return undefined;
    let at = data;
    let run = 0;
    for (let k = 0; k < segments; k++) {
      const lace = buf[table + k]!;
      run += lace;
      if (lace === 255) continue;
      if (s.pending.length === 0 && s.packets >= 3) onAudioPacket(s, buf, at, run);
      else {
        const piece = buf.subarray(at, at + run);
        const packet = s.pending.length > 0 ? Buffer.concat([...s.pending, piece]) : piece;
        s.pending = [];
        s.pendingBytes = 0;
        if (!onPacket(s, packet)) return undefined;
      }
      at += run;
      run = 0;
    }
    if (run > 0) {
      // The packet goes on in the next page: keep its start (all of it for the headers read whole).
      const whole = s.packets === 0 || (s.kind === 'vorbis' && s.packets === 2);
      const keep = whole ? run : Math.max(0, Math.min(run, PACKET_START - s.pendingBytes));
      if (whole && s.pendingBytes + run > MAX_HEADER_PACKET) return undefined;
      s.pending.push(buf.subarray(at, at + keep));
      s.pendingBytes += run;
    }
    if (granule !== -1n) s.lastGranule = granule;
    i = data + body;
  }
  // Bytes after the last whole page: at most one cut-off page, with no page inside it that a
  // decoder resyncing on "OggS" would find and play.
  if (buf.length - i > 27 + 255 + 255 * 255 || buf.indexOf('OggS', i + 1, 'latin1') >= 0) return undefined;

  const audio = [...streams.values()].filter((s) => s.kind !== 'ignored');
  if (audio.length === 0) return undefined;
  const other = audio.find((s) => s.kind === 'other');
  if (other) return { kind: 'unmeasured', format: 'ogg', codec: other.codec };
  let counted: Seconds = seconds(0, 1);
  let stated: Seconds = seconds(0, 1);
  for (const s of audio) {
    if (s.packets < (s.kind === 'vorbis' ? 3 : 2)) return undefined;
    const audioSamples = Math.max(0, s.samples - s.preSkip);
    counted = add(counted, seconds(audioSamples, s.rate));
    const granule = s.lastGranule > BigInt(s.preSkip) ? s.lastGranule - BigInt(s.preSkip) : 0n;
    stated = add(stated, seconds(granule, s.rate));
  }
  return checkedLength('ogg', audio.map((s) => s.codec).join('+'), counted, stated);
}

function add(a: Seconds, b: Seconds): Seconds {
  return { num: a.num * b.den + b.num * a.den, den: a.den * b.den };
}
