// What the audio readers return, and the rule every one of them applies: the length is what a
// decoder would output, counted from the audio (samples, frames, packets); a length the file
// merely states (a header field, a granule, a Duration) is only checked against it.

export type AudioFormat = 'wav' | 'mp3' | 'flac' | 'ogg' | 'mp4' | 'webm';

/** Seconds as an exact fraction: num / den. */
export interface Seconds {
  num: bigint;
  den: bigint;
}

export type AudioLength =
  /** Counted from the audio. */
  | { kind: 'measured'; format: AudioFormat; codec: string; seconds: Seconds }
  /** A codec whose frames the gateway does not count (ALAC, ADPCM, …): its length is not known. */
  | { kind: 'unmeasured'; format: AudioFormat; codec: string }
  /** The file states a length its audio does not hold: cut, padded or forged. */
  | { kind: 'contradicted'; format: AudioFormat; codec: string; seconds: Seconds; stated: Seconds };

export const seconds = (num: bigint | number, den: bigint | number): Seconds => ({
  num: BigInt(num),
  den: BigInt(den),
});

/** A file with several audio tracks is billed for its longest: `length` unless `longest` already is longer. */
export function longer(longest: AudioLength | undefined, length: AudioLength & { kind: 'measured' }): AudioLength {
  if (longest?.kind !== 'measured') return length;
  return length.seconds.num * longest.seconds.den > longest.seconds.num * length.seconds.den ? length : longest;
}

/** Whole seconds, rounded up: the unit "pro-rated by the second" bills. */
export function ceilSeconds(s: Seconds): bigint {
  return (s.num + s.den - 1n) / s.den;
}

/** For messages: to the millisecond, or two significant digits below a tenth of a second. */
export function secondsText(s: Seconds): string {
  const v = Number(s.num) / Number(s.den);
  return v >= 0.1 || v === 0 ? v.toFixed(3) : v.toPrecision(2);
}

/**
 * Stated and counted lengths may differ by an encoder's priming and padding (AAC's 1024 to 2112
 * samples, an Opus or Vorbis packet trimmed at the end) and no more: half a second, or 1% of a
 * long file. Beyond that the file is refused; within it the counted length is billed anyway.
 */
function disagrees(counted: Seconds, stated: Seconds): boolean {
  const a = counted.num * stated.den;
  const b = stated.num * counted.den;
  const diff = a > b ? a - b : b - a;
  const halfSecond = 50n * counted.den * stated.den;
  const onePercent = counted.num * stated.den;
  return diff * 100n > (halfSecond > onePercent ? halfSecond : onePercent);
}

/** The counted length, unless one of the lengths the file states disagrees with it. */
export function checkedLength(
  format: AudioFormat,
  codec: string,
  counted: Seconds,
  ...stated: (Seconds | undefined)[]
): AudioLength {
  for (const s of stated) {
    if (s && disagrees(counted, s)) return { kind: 'contradicted', format, codec, seconds: counted, stated: s };
  }
  return { kind: 'measured', format, codec, seconds: counted };
}
