// WAV: PCM, float, A-law and mu-law (plain or WAVE_FORMAT_EXTENSIBLE) are decoded by sample
// size and rate, so their length is the data's bytes over channels x bytes per sample over the
// rate. byteRate and blockAlign are claims: they must agree with that arithmetic exactly.
import { type AudioLength, seconds } from './audio-length.ts';

const PCM = 1;
const FLOAT = 3;
const ALAW = 6;
const MULAW = 7;
const EXTENSIBLE = 0xfffe;
/** The tail every KSDATAFORMAT_SUBTYPE GUID shares after its 2-byte format tag. */
const SUBTYPE_TAIL = Buffer.from('000000001000800000aa00389b71', 'hex');
const CODECS: Record<number, string> = { [PCM]: 'pcm', [FLOAT]: 'float', [ALAW]: 'alaw', [MULAW]: 'mulaw' };
const SAMPLE_BITS: Record<number, number[]> = { [PCM]: [8, 16, 24, 32], [FLOAT]: [32, 64], [ALAW]: [8], [MULAW]: [8] };

interface Fmt {
  tag: number;
  channels: number;
  rate: number;
  byteRate: number;
  blockAlign: number;
  bits: number;
}

function readFmt(buf: Buffer, at: number, size: number): Fmt | undefined {
  if (size < 16) return undefined;
  let tag = buf.readUInt16LE(at);
  if (tag === EXTENSIBLE) {
    if (size < 40 || !buf.subarray(at + 26, at + 40).equals(SUBTYPE_TAIL))
      return { tag, channels: 0, rate: 0, byteRate: 0, blockAlign: 0, bits: 0 };
    tag = buf.readUInt16LE(at + 24);
  }
  return {
    tag,
    channels: buf.readUInt16LE(at + 2),
    rate: buf.readUInt32LE(at + 4),
    byteRate: buf.readUInt32LE(at + 8),
    blockAlign: buf.readUInt16LE(at + 12),
    bits: buf.readUInt16LE(at + 14),
  };
}

export function wavLength(buf: Buffer): AudioLength | undefined {
  let fmt: Fmt | undefined;
  let dataBytes = 0;
  let sawData = false;
  // Chunks tile the file; every data chunk is audio (FFmpeg reads on into a later one). A chunk
  // cut off by the end of the file ends the walk: a cut data chunk counts the bytes present, and
  // a streamed one (size 0) runs to the end.
  for (let i = 12; i + 8 <= buf.length; ) {
    const id = buf.toString('latin1', i, i + 4);
    const size = buf.readUInt32LE(i + 4);
    const body = i + 8;
    const present = buf.length - body;
    if (id === 'fmt ' && !fmt) {
      if (size > present) return undefined;
      fmt = readFmt(buf, body, size);
      if (!fmt) return undefined;
    } else if (id === 'data') {
      if (!fmt) return undefined; // a decoder needs the format first
      sawData = true;
      if (size === 0 || size >= present) {
        dataBytes += present;
        break;
      }
      dataBytes += size;
    }
    if (size > present) break;
    i = body + size + (size & 1);
  }
  if (!fmt || !sawData) return undefined;
  const codec = CODECS[fmt.tag];
  if (!codec)
    return { kind: 'unmeasured', format: 'wav', codec: `wav format 0x${fmt.tag.toString(16).padStart(4, '0')}` };
  if (fmt.channels === 0 || fmt.rate === 0 || !SAMPLE_BITS[fmt.tag]!.includes(fmt.bits)) return undefined;
  const frameBytes = fmt.channels * (fmt.bits / 8);
  const counted = seconds(Math.floor(dataBytes / frameBytes), fmt.rate);
  if (fmt.blockAlign !== frameBytes || fmt.byteRate !== fmt.rate * frameBytes) {
    return {
      kind: 'contradicted',
      format: 'wav',
      codec,
      seconds: counted,
      stated: seconds(dataBytes, Math.max(1, fmt.byteRate)),
    };
  }
  return { kind: 'measured', format: 'wav', codec, seconds: counted };
}
