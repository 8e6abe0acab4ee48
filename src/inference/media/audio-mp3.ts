// MP3 (MPEG audio layers I-III): no header states a length the gateway trusts (a Xing or VBRI
// frame count is ignored); the frames are walked one after another and their samples summed.
import { type AudioLength, seconds } from './audio-length.ts';

const MP3_BITRATES: Record<string, number[]> = {
  '1-1': [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  '1-2': [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  '1-3': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  '2-1': [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  '2-2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  '2-3': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const MP3_RATES: Record<number, number[]> = {
  1: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  25: [11025, 12000, 8000],
};

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

/** MP3 frames from `start` (after any ID3v2 tag) to the end of the file. */
export function mp3Length(buf: Buffer, start: number): AudioLength | undefined {
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
  let samples = 0;
  let frames = 0;
  for (let f: Mp3Frame | undefined = first; f && f.rate === rate && i + f.length <= buf.length; f = mp3Frame(buf, i)) {
    samples += f.samples;
    frames++;
    i += f.length;
  }
  // A real file is frames to the end, give or take an ID3v1 tag or a cut last frame.
  if (frames < 2 || buf.length - i > 128 + first.length) return undefined;
  return { kind: 'measured', format: 'mp3', codec: 'mp3', seconds: seconds(samples, rate) };
}
