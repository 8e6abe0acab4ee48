// The length whisper bills, counted from the audio of real encoded files (test/fixtures/audio,
// made with ffmpeg by make.sh there), and files whose stated length was forged: each container
// the transcription route accepts, its stated field rewritten, the audio left as it was.
import { describe, expect, it } from 'vitest';
import {
  type AudioLength,
  audioLength,
  ceilSeconds,
  sizeBoundSeconds,
} from '../../../src/inference/media/audio-duration.ts';
import {
  audioFixture,
  decodedSeconds,
  forgeFlacTotal,
  forgeMp4Duration,
  forgeOggLastGranule,
  forgeWavByteRate,
  forgeWebmDuration,
  mp3,
  oggOpusPreSkip,
  png,
  wav,
} from '../../support/media-files.ts';

const exact = (r: AudioLength | undefined) =>
  r && r.kind !== 'unmeasured' ? `${r.seconds.num}/${r.seconds.den}` : undefined;
const asSeconds = (r: AudioLength) =>
  r.kind === 'unmeasured' ? Number.NaN : Number(r.seconds.num) / Number(r.seconds.den);

describe('audio length, counted from the audio as a decoder counts it', () => {
  // The packet counts are ffprobe's (`-show_packets`) for each file.
  it.each([
    ['pcm16.wav', 'pcm', '12000/8000', 'data bytes / (channels x 2) / 8 kHz'],
    ['alaw.wav', 'alaw', '12000/8000', 'one byte a sample'],
    ['mulaw.wav', 'mulaw', '12000/8000', 'one byte a sample'],
    ['float32.wav', 'float', '12000/8000', 'WAVE_FORMAT_EXTENSIBLE, IEEE float'],
    ['pcm24.wav', 'pcm', '12000/8000', 'WAVE_FORMAT_EXTENSIBLE, 24-bit PCM'],
    ['tone.mp3', 'mp3', '57600/16000', '100 frames of 576 samples (MPEG-2 layer III)'],
    ['tone.flac', 'flac', '28000/8000', '48 frames of 576 samples and one of 352'],
    ['tone.opus.ogg', 'opus', '168648/48000', '176 packets of 20 ms by their TOC bytes, less the 312-sample pre-skip'],
    ['tone.vorbis.ogg', 'vorbis', '56320/16000', '111 packets of 1024-sample blocks: 110 x 512 out'],
    ['tone.m4a', 'aac', '57344/16000', '56 AAC frames of 1024 samples'],
    ['fragmented.m4a', 'aac', '57344/16000', '56 AAC frames, all in fragments (trun)'],
    ['tone.opus.webm', 'opus', '168856/48000', '176 blocks of 20 ms, less the CodecDelay (104 samples)'],
    ['live.opus.webm', 'opus', '168856/48000', 'the same blocks, in clusters of unknown size and no Duration'],
    ['tone.vorbis.webm', 'vorbis', '56320/16000', '111 blocks: 110 x 512 out'],
  ])('%s: %s, %s s (%s)', (name, codec, seconds) => {
    const r = audioLength(audioFixture(name));
    expect(r).toMatchObject({ kind: 'measured', codec });
    expect(exact(r)).toBe(seconds);
    // Within the encoder's delay and padding of what ffmpeg decodes (its gapless trimming takes them off).
    expect(Math.abs(asSeconds(r!) - decodedSeconds(name, Buffer.alloc(0))!)).toBeLessThan(0.15);
  });

  it('generated WAV and MP3 too, rounded up to whole seconds', () => {
    const w = audioLength(wav(8000 * 61 + 4000))!;
    expect([exact(w), w.kind !== 'unmeasured' && ceilSeconds(w.seconds)]).toEqual(['492000/8000', 62n]);
    const m = audioLength(mp3(100))!;
    expect([exact(m), m.kind !== 'unmeasured' && ceilSeconds(m.seconds)]).toEqual(['115200/44100', 3n]);
  });

  it('a FLAC whose STREAMINFO leaves the total unknown (0) is counted all the same', () => {
    expect(exact(audioLength(forgeFlacTotal(audioFixture('tone.flac'), 0)))).toBe('28000/8000');
  });

  it("an MP3's Info frame count is ignored: its frames are counted", () => {
    const forged = audioFixture('tone.mp3');
    const info = forged.indexOf('Info', 0, 'latin1');
    expect(forged.readUInt32BE(info + 4) & 1).toBe(1); // the frame count is present
    forged.writeUInt32BE(3, info + 8);
    expect(exact(audioLength(forged))).toBe('57600/16000');
  });
});

describe('a stated length that disagrees with the audio is refused', () => {
  const oneSecond = (name: string): Buffer => {
    const b = audioFixture(name);
    if (name.endsWith('.flac')) return forgeFlacTotal(b, 8000);
    if (name === 'tone.opus.ogg') return forgeOggLastGranule(b, BigInt(oggOpusPreSkip(b) + 48000));
    if (name === 'tone.vorbis.ogg') return forgeOggLastGranule(b, 16000n);
    if (name.endsWith('.m4a')) return forgeMp4Duration(b, 'mvhd', 1);
    return forgeWebmDuration(b, 1000);
  };

  it.each(['pcm16.wav', 'alaw.wav', 'mulaw.wav', 'float32.wav', 'pcm24.wav'])(
    '%s with byteRate x 1000: the stated 0.0015 s is refused, the 1.5 s of samples counted',
    (name) => {
      const r = audioLength(forgeWavByteRate(audioFixture(name), 1000));
      expect(r?.kind).toBe('contradicted');
      expect(exact(r)).toBe('12000/8000');
      expect(r?.kind === 'contradicted' && asSeconds({ ...r, seconds: r.stated })).toBeCloseTo(0.0015, 6);
    },
  );

  it.each([
    ['tone.flac', 'STREAMINFO total samples'],
    ['tone.opus.ogg', 'last granule position'],
    ['tone.vorbis.ogg', 'last granule position'],
    ['tone.m4a', 'mvhd duration'],
    ['tone.opus.webm', 'Info Duration'],
    ['tone.vorbis.webm', 'Info Duration'],
  ])('%s whose %s says 1 s: refused, with the 3.5 s its audio holds', (name) => {
    const r = audioLength(oneSecond(name));
    expect(r?.kind).toBe('contradicted');
    expect(r?.kind === 'contradicted' && asSeconds({ ...r, seconds: r.stated })).toBeCloseTo(1, 3);
    expect(exact(r)).toBe(exact(audioLength(audioFixture(name))));
  });

  it("an M4A whose audio track's mdhd says 1 s, or whose mvhd says an hour, is refused too", () => {
    expect(audioLength(forgeMp4Duration(audioFixture('tone.m4a'), 'mdhd', 1))?.kind).toBe('contradicted');
    expect(audioLength(forgeMp4Duration(audioFixture('tone.m4a'), 'mvhd', 3600))?.kind).toBe('contradicted');
  });

  it('a claim within encoder padding is not a disagreement: the mvhd at 3.5 s against 3.584 s of AAC frames', () => {
    expect(audioLength(forgeMp4Duration(audioFixture('tone.m4a'), 'mvhd', 3.5))?.kind).toBe('measured');
  });
});

describe('codecs the gateway does not count', () => {
  it('an ADPCM WAV and an ALAC M4A are reported as such, whatever their headers state', () => {
    expect(audioLength(audioFixture('adpcm.wav'))).toEqual({
      kind: 'unmeasured',
      format: 'wav',
      codec: 'wav format 0x0002',
    });
    expect(audioLength(forgeWavByteRate(audioFixture('adpcm.wav'), 1000))?.kind).toBe('unmeasured');
    expect(audioLength(audioFixture('alac.m4a'))).toEqual({ kind: 'unmeasured', format: 'mp4', codec: 'mp4 "alac"' });
  });

  it('are bounded by what their bytes can hold at 2 kb/s: 25 MiB is 29 h 8 min at most', () => {
    expect(sizeBoundSeconds(6234)).toBe(25n); // adpcm.wav: 1.527 s of audio
    expect(sizeBoundSeconds(25 * 1024 * 1024)).toBe(104858n);
  });
});

describe('hostile and broken files', () => {
  it('refuses what is not audio, and cut files', () => {
    expect(audioLength(Buffer.from('not audio at all, just some text'))).toBeUndefined();
    expect(audioLength(png(4, 4))).toBeUndefined();
    expect(audioLength(mp3(100).subarray(0, 600))).toBeUndefined();
    expect(audioLength(Buffer.alloc(0))).toBeUndefined();
  });

  it('FLAC frames cannot be hidden behind a broken frame header: the frames after it are bytes no frame accounts for', () => {
    const b = audioFixture('tone.flac');
    let frame = b.indexOf(Buffer.from([0xff, 0xf8]), 8 + 34);
    for (let k = 0; k < 10; k++) frame = b.indexOf(Buffer.from([0xff, 0xf8]), frame + 2);
    b[frame + 1] = 0x00;
    expect(audioLength(b)).toBeUndefined();
  });

  it('FLAC bytes after the last frame are refused: the last frame must end the file (its CRC-16 says where)', () => {
    const b = audioFixture('tone.flac');
    expect(audioLength(Buffer.concat([b, b.subarray(b.length - 3000)]))).toBeUndefined();
  });

  it('an Ogg page that claims to run past the end cannot hide the pages after it', () => {
    const b = audioFixture('tone.opus.ogg');
    const third = b.indexOf('OggS', b.indexOf('OggS', 1, 'latin1') + 1, 'latin1');
    const liar = Buffer.alloc(27 + 255, 255);
    liar.write('OggS', 0, 'latin1');
    liar[4] = 0;
    liar[5] = 0;
    liar.writeBigInt64LE(-1n, 6);
    liar.writeUInt32LE(b.readUInt32LE(14), 14);
    liar[26] = 255; // 255 segments of 255 bytes: 65,025 bytes, more than the file holds
    expect(audioLength(Buffer.concat([b.subarray(0, third), liar, b.subarray(third)]))).toBeUndefined();
  });

  it('a WebM element that claims to run past the end cannot hide the clusters after it: they are counted, as FFmpeg resyncs on them', () => {
    const b = audioFixture('tone.opus.webm');
    const cluster = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);
    const second = b.indexOf(cluster, b.indexOf(cluster) + 4);
    const liar = Buffer.from([0xec, 0x01, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff]); // Void of 16 MiB
    expect(exact(audioLength(Buffer.concat([b.subarray(0, second), liar, b.subarray(second)])))).toBe('168856/48000');
  });

  it('Ogg pages must follow each other: bytes between them are refused, not skipped', () => {
    const b = audioFixture('tone.opus.ogg');
    const third = b.indexOf('OggS', b.indexOf('OggS', 1, 'latin1') + 1, 'latin1');
    expect(audioLength(Buffer.concat([b.subarray(0, third), Buffer.from('junk'), b.subarray(third)]))).toBeUndefined();
  });

  it('a WebM cut mid-block counts the blocks before the cut', () => {
    const b = audioFixture('live.opus.webm');
    const r = audioLength(b.subarray(0, b.length - 10));
    expect(r?.kind).toBe('measured');
    expect(asSeconds(r!)).toBeCloseTo(168856 / 48000 - 0.02, 3);
  });

  it('no fixture, cut anywhere or with bytes changed anywhere, makes a reader throw', () => {
    // A fixed sequence (a linear congruential generator), so a failure can be replayed.
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const names = [
      'pcm16.wav',
      'float32.wav',
      'adpcm.wav',
      'tone.mp3',
      'tone.flac',
      'tone.opus.ogg',
      'tone.vorbis.ogg',
      'tone.m4a',
      'fragmented.m4a',
      'alac.m4a',
      'tone.opus.webm',
      'live.opus.webm',
      'tone.vorbis.webm',
    ];
    for (const name of names) {
      const original = audioFixture(name);
      for (let k = 0; k < 60; k++) {
        const b = k < 20 ? original.subarray(0, next(original.length)) : Buffer.from(original);
        // Most changes go into the headers, where the readers look hardest.
        if (k >= 20) for (let j = 0; j < 4; j++) b[k < 45 ? next(Math.min(b.length, 800)) : next(b.length)] = next(256);
        expect(() => audioLength(b), `${name} #${k}`).not.toThrow();
      }
    }
  });
});
