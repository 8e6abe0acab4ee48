// The length of an audio file for audio priced per second, counted from the audio itself as a
// decoder would count it, never taken from a field the file states (see audio-length.ts).
// Formats: WAV, MP3, FLAC, Ogg (Opus, Vorbis), MP4/M4A (AAC), WebM/Matroska (Opus, Vorbis, AAC):
// the ones OpenAI's transcription API takes. Every reader is one forward pass over the bytes,
// with no recursion and no allocation beyond a few header packets.
import { flacLength } from './audio-flac.ts';
import type { AudioLength } from './audio-length.ts';
import { matroskaLength } from './audio-matroska.ts';
import { mp3Length } from './audio-mp3.ts';
import { mp4Length } from './audio-mp4.ts';
import { oggLength } from './audio-ogg.ts';
import { wavLength } from './audio-wav.ts';

export { type AudioFormat, type AudioLength, ceilSeconds, type Seconds, secondsText } from './audio-length.ts';

/**
 * The length of the audio in `b`; undefined when the bytes are not a file of a known format
 * (or are cut or broken where a decoder would lose its way).
 */
export function audioLength(b: Uint8Array): AudioLength | undefined {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length < 12) return undefined;
  const tag4 = buf.toString('latin1', 0, 4);
  if (tag4 === 'RIFF' && buf.toString('latin1', 8, 12) === 'WAVE') return wavLength(buf);
  if (tag4 === 'OggS') return oggLength(buf);
  if (buf.readUInt32BE(0) === 0x1a45dfa3) return matroskaLength(buf);
  if (buf.toString('latin1', 4, 8) === 'ftyp') return mp4Length(buf);
  const start = skipId3(buf);
  if (buf.toString('latin1', start, start + 4) === 'fLaC') return flacLength(buf, start + 4);
  return mp3Length(buf, start);
}

function skipId3(buf: Buffer): number {
  if (buf.length < 10 || buf.toString('latin1', 0, 3) !== 'ID3') return 0;
  const size = ((buf[6]! & 0x7f) << 21) | ((buf[7]! & 0x7f) << 14) | ((buf[8]! & 0x7f) << 7) | (buf[9]! & 0x7f);
  const footer = buf[5]! & 0x10 ? 10 : 0;
  return 10 + size + footer;
}

/**
 * The lowest bitrate a real encoder gives speech in a codec the gateway does not count: Speex's
 * lowest mode is 2.15 kb/s, Opus and AMR go no lower than 6 and 4.75, ADPCM 16, ALAC and FLAC
 * (lossless) far more for any recorded sound. Only synthetic digital silence in a lossless codec
 * packs tighter; what the provider then reports beyond the hold is recorded as uncovered.
 */
export const LOWEST_BITS_PER_SECOND = 2000n;

/** The most seconds a file of `bytes` bytes can hold at LOWEST_BITS_PER_SECOND. */
export function sizeBoundSeconds(bytes: number): bigint {
  return (BigInt(bytes) * 8n + LOWEST_BITS_PER_SECOND - 1n) / LOWEST_BITS_PER_SECOND;
}
