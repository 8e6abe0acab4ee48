// The duration of an MP4 (ISO BMFF) read from the file's own boxes, never from what the
// upstream claims: the video track's media header (mdia/mdhd) when there is one, else the
// movie header (mvhd), else a fragmented file's mvex/mehd. Only box headers and the moov box
// are read, so a large file costs a few small reads wherever moov sits (start or end).

/** Random access to the bytes of a stored video (a local file, or ranged reads of an object). */
export interface ByteSource {
  size: number;
  read(position: number, length: number): Promise<Uint8Array>;
}

export interface Mp4Duration {
  /** Duration in `timescale` units per second: seconds = units / timescale, exactly. */
  units: bigint;
  timescale: bigint;
  from: 'mdhd' | 'mvhd' | 'mehd';
}

export class Mp4Error extends Error {}

/** moov holds only metadata; anything bigger is not a video we want to parse. */
const MAX_MOOV_BYTES = 64 * 1024 * 1024;

interface Box {
  type: string;
  /** Offset of the payload (after the header) and its length. */
  start: number;
  length: number;
}

function u32(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(at);
}

function u64(b: Uint8Array, at: number): bigint {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(at);
}

function fourcc(b: Uint8Array, at: number): string {
  return String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
}

/** The boxes laid out one after another in `buf[from, to)`. */
function childBoxes(buf: Uint8Array, from: number, to: number): Box[] {
  const out: Box[] = [];
  let at = from;
  while (at + 8 <= to) {
    let size = u32(buf, at);
    const type = fourcc(buf, at + 4);
    let header = 8;
    if (size === 1) {
      if (at + 16 > to) throw new Mp4Error(`truncated ${type} box`);
      const large = u64(buf, at + 8);
      if (large > BigInt(Number.MAX_SAFE_INTEGER)) throw new Mp4Error(`${type} box too large`);
      size = Number(large);
      header = 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < header || at + size > to) throw new Mp4Error(`malformed ${type} box`);
    out.push({ type, start: at + header, length: size - header });
    at += size;
  }
  return out;
}

/** Full-box header (version, flags) then creation/modification times, timescale, duration. */
function timing(buf: Uint8Array, box: Box): { timescale: bigint; duration: bigint } | undefined {
  const version = buf[box.start];
  const need = version === 1 ? 32 : 20;
  if (box.length < need) throw new Mp4Error(`short ${box.type} box`);
  if (version === 1) {
    const timescale = BigInt(u32(buf, box.start + 20));
    const duration = u64(buf, box.start + 24);
    return duration === 0xffff_ffff_ffff_ffffn ? undefined : { timescale, duration };
  }
  const timescale = BigInt(u32(buf, box.start + 12));
  const duration = BigInt(u32(buf, box.start + 16));
  return duration === 0xffff_ffffn ? undefined : { timescale, duration };
}

/** Reads the top-level box headers to find moov, then parses it. */
export async function measureMp4(src: ByteSource): Promise<Mp4Duration> {
  let at = 0;
  let first = true;
  while (at + 8 <= src.size) {
    const head = await src.read(at, Math.min(16, src.size - at));
    let size = u32(head, 0);
    const type = fourcc(head, 4);
    let header = 8;
    if (first && type !== 'ftyp' && type !== 'styp')
      throw new Mp4Error(`not an MP4 file (first box is ${JSON.stringify(type)})`);
    first = false;
    if (size === 1) {
      if (head.length < 16) throw new Mp4Error('truncated box header');
      size = Number(u64(head, 8));
      header = 16;
    } else if (size === 0) {
      size = src.size - at;
    }
    if (size < header || at + size > src.size) throw new Mp4Error(`malformed ${type} box at ${at}`);
    if (type === 'moov') {
      if (size > MAX_MOOV_BYTES) throw new Mp4Error('moov box too large');
      const moov = await src.read(at, size);
      return durationFromMoov(moov, { type, start: header, length: size - header });
    }
    at += size;
  }
  throw new Mp4Error(first ? 'empty file' : 'no moov box: not a complete MP4 file');
}

function durationFromMoov(buf: Uint8Array, moov: Box): Mp4Duration {
  let movie: { timescale: bigint; duration: bigint } | undefined;
  let fragments: bigint | undefined;
  let video: { timescale: bigint; duration: bigint } | undefined;
  for (const box of childBoxes(buf, moov.start, moov.start + moov.length)) {
    if (box.type === 'mvhd') movie = timing(buf, box);
    else if (box.type === 'mvex') {
      const mehd = childBoxes(buf, box.start, box.start + box.length).find((b) => b.type === 'mehd');
      if (mehd) fragments = buf[mehd.start] === 1 ? u64(buf, mehd.start + 4) : BigInt(u32(buf, mehd.start + 4));
    } else if (box.type === 'trak') {
      const t = videoTrackTiming(buf, box);
      if (
        t &&
        t.duration > 0n &&
        t.timescale > 0n &&
        (!video || t.duration * video.timescale > video.duration * t.timescale)
      )
        video = t;
    }
  }
  if (video) return { units: video.duration, timescale: video.timescale, from: 'mdhd' };
  if (movie && movie.timescale > 0n && movie.duration > 0n)
    return { units: movie.duration, timescale: movie.timescale, from: 'mvhd' };
  if (movie && movie.timescale > 0n && fragments && fragments > 0n)
    return { units: fragments, timescale: movie.timescale, from: 'mehd' };
  throw new Mp4Error('the MP4 states no duration');
}

/** mdia/mdhd of a track whose handler (mdia/hdlr) is "vide"; undefined for other tracks. */
function videoTrackTiming(buf: Uint8Array, trak: Box): { timescale: bigint; duration: bigint } | undefined {
  const mdia = childBoxes(buf, trak.start, trak.start + trak.length).find((b) => b.type === 'mdia');
  if (!mdia) return undefined;
  const kids = childBoxes(buf, mdia.start, mdia.start + mdia.length);
  const hdlr = kids.find((b) => b.type === 'hdlr');
  const mdhd = kids.find((b) => b.type === 'mdhd');
  if (!hdlr || !mdhd || hdlr.length < 12 || fourcc(buf, hdlr.start + 8) !== 'vide') return undefined;
  return timing(buf, mdhd);
}

/** Milliseconds, rounded up: what the gateway bills (a started millisecond counts). */
export function durationMs(d: Mp4Duration): bigint {
  return (d.units * 1000n + d.timescale - 1n) / d.timescale;
}
