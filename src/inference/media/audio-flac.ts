// FLAC: the frames are found as a decoder finds them (a sync code, a header that passes its
// CRC-8, frame or sample numbers that follow on, a frame that passes its CRC-16), and their
// block sizes summed. STREAMINFO's total is a claim checked against that sum. Each frame must
// end where the next begins (its CRC-16 says so), and the last at the end of the file, so no
// frame can be hidden between them.
import { type AudioLength, checkedLength, seconds } from './audio-length.ts';

const FRAME_RATES = [0, 88200, 176400, 192000, 8000, 16000, 22050, 24000, 32000, 44100, 48000, 96000];
const FRAME_BITS = [0, 8, 12, 0, 16, 20, 24, 32];

interface StreamInfo {
  rate: number;
  channels: number;
  bits: number;
  total: number;
}

interface FrameHeader {
  variable: boolean;
  /** Frame number (fixed block size) or first sample number (variable). */
  number: number;
  blockSize: number;
  rate: number;
  channels: number;
  bits: number;
  length: number;
}

/** CRC-8, polynomial x^8 + x^2 + x + 1, by table: a candidate header costs a few steps. */
const CRC8 = Array.from({ length: 256 }, (_, n) => {
  let crc = n;
  for (let k = 0; k < 8; k++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  return crc;
});

function crc8(buf: Buffer, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = CRC8[crc ^ buf[i]!]!;
  return crc;
}

/** CRC-16, polynomial x^16 + x^15 + x^2 + 1: a frame's last two bytes, over everything before them. */
const CRC16 = Array.from({ length: 256 }, (_, n) => {
  let crc = n << 8;
  for (let k = 0; k < 8; k++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  return crc;
});

function frameHeader(buf: Buffer, p: number, info: StreamInfo): FrameHeader | undefined {
  if (p + 6 > buf.length || buf[p] !== 0xff || (buf[p + 1]! & 0xfe) !== 0xf8) return undefined;
  const variable = (buf[p + 1]! & 1) === 1;
  const blockCode = buf[p + 2]! >> 4;
  const rateCode = buf[p + 2]! & 15;
  const channelCode = buf[p + 3]! >> 4;
  const bitsCode = (buf[p + 3]! >> 1) & 7;
  if (blockCode === 0 || rateCode === 15 || channelCode > 10 || bitsCode === 3 || buf[p + 3]! & 1) return undefined;
  // The frame/sample number, coded like UTF-8 (up to 6 bytes for frames, 7 for samples).
  let q = p + 4;
  const lead = buf[q++]!;
  const extra = lead < 0x80 ? 0 : lead >= 0xfe ? (lead === 0xfe ? 6 : -1) : Math.clz32(~(lead << 24)) - 1;
  if (extra < 0 || (extra === 0 && lead >= 0x80) || extra > (variable ? 6 : 5) || q + extra + 3 > buf.length)
    return undefined;
  let number = extra === 0 ? lead : lead & (0x3f >> extra);
  for (let k = 0; k < extra; k++) {
    const c = buf[q++]!;
    if ((c & 0xc0) !== 0x80) return undefined;
    number = number * 64 + (c & 0x3f);
  }
  let blockSize: number;
  if (blockCode === 1) blockSize = 192;
  else if (blockCode <= 5) blockSize = 576 << (blockCode - 2);
  else if (blockCode === 6) blockSize = buf[q++]! + 1;
  else if (blockCode === 7) {
    blockSize = buf.readUInt16BE(q) + 1;
    q += 2;
  } else blockSize = 256 << (blockCode - 8);
  let rate: number;
  if (rateCode === 0) rate = info.rate;
  else if (rateCode <= 11) rate = FRAME_RATES[rateCode]!;
  else if (rateCode === 12) rate = buf[q++]! * 1000;
  else {
    if (q + 2 > buf.length) return undefined;
    rate = buf.readUInt16BE(q) * (rateCode === 14 ? 10 : 1);
    q += 2;
  }
  if (q >= buf.length || rate === 0 || crc8(buf, p, q) !== buf[q]) return undefined;
  return {
    variable,
    number,
    blockSize,
    rate,
    channels: channelCode < 8 ? channelCode + 1 : 2,
    bits: bitsCode === 0 ? info.bits : FRAME_BITS[bitsCode]!,
    length: q + 1 - p,
  };
}

/** The most bytes a frame can take: every channel stored verbatim (a side channel has one more bit). */
const largestFrame = (h: FrameHeader) =>
  h.length + Math.ceil((h.blockSize * h.channels * (h.bits + 1)) / 8) + h.channels * 6 + 2;

/** A FLAC stream whose "fLaC" marker ends at `at`. */
export function flacLength(buf: Buffer, at: number): AudioLength | undefined {
  let info: StreamInfo | undefined;
  let i = at;
  for (let last = false; !last; ) {
    if (i + 4 > buf.length) return undefined;
    last = (buf[i]! & 0x80) !== 0;
    const type = buf[i]! & 0x7f;
    const size = buf.readUIntBE(i + 1, 3);
    const d = i + 4;
    if (d + size > buf.length) return undefined;
    if (!info) {
      if (type !== 0 || size < 34) return undefined; // STREAMINFO comes first
      info = {
        rate: (buf[d + 10]! << 12) | (buf[d + 11]! << 4) | (buf[d + 12]! >> 4),
        channels: ((buf[d + 12]! >> 1) & 7) + 1,
        bits: (((buf[d + 12]! & 1) << 4) | (buf[d + 13]! >> 4)) + 1,
        total: (buf[d + 13]! & 0x0f) * 2 ** 32 + buf.readUInt32BE(d + 14),
      };
    }
    i = d + size;
  }
  if (!info) return undefined;

  let frame = frameHeader(buf, i, info);
  if (!frame) return undefined;
  const first = frame;
  let samples = 0;
  // The CRC-16 of the current frame's bytes [i, crcEnd), extended as the search moves on: each
  // byte enters it once, so the walk stays linear.
  let crc = 0;
  let crcEnd = i;
  const crcTo = (end: number) => {
    for (; crcEnd < end; crcEnd++) crc = ((crc << 8) & 0xffff) ^ CRC16[(crc >> 8) ^ buf[crcEnd]!]!;
    return crc;
  };
  for (;;) {
    samples += frame.blockSize;
    const expected = frame.number + (frame.variable ? frame.blockSize : 1);
    const to = Math.min(i + largestFrame(frame), buf.length - 6);
    let next: FrameHeader | undefined;
    let at2 = i + frame.length + frame.channels + 2;
    for (; at2 <= to; at2++) {
      if (buf[at2] !== 0xff || (buf[at2 + 1]! & 0xfe) !== 0xf8) continue;
      const h = frameHeader(buf, at2, info);
      const follows =
        h &&
        h.variable === first.variable &&
        h.number === expected &&
        h.rate === first.rate &&
        h.channels === first.channels &&
        h.bits === first.bits;
      if (follows && crcTo(at2 - 2) === buf.readUInt16BE(at2 - 2)) {
        next = h;
        break;
      }
    }
    if (!next) break;
    i = at2;
    frame = next;
    crc = 0;
    crcEnd = i;
  }
  // The last frame ends the file, or an ID3v1 tag after it does.
  const endsAt = (end: number) =>
    end - 2 >= crcEnd && end - i <= largestFrame(frame) && crcTo(end - 2) === buf.readUInt16BE(end - 2);
  const tagged = buf.toString('latin1', buf.length - 128, buf.length - 125) === 'TAG';
  if (!((tagged && endsAt(buf.length - 128)) || endsAt(buf.length))) return undefined;
  const stated = info.total > 0 && info.rate > 0 ? seconds(info.total, info.rate) : undefined;
  return checkedLength('flac', 'flac', seconds(samples, first.rate), stated);
}
