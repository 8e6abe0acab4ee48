// The demo's audio: transcriptions (a multipart upload) answer a sentence saying how long the
// audio was, counted with the gateway's own audio reader, in the format asked, with the usage the
// model reports (whisper: seconds; the gpt-4o transcribers: tokens); speech answers silence as
// long as the text would take to say, as WAV, raw PCM or MP3 (the formats it can make).
import type http from 'node:http';
import { audioLength, ceilSeconds } from '../inference/media/audio-duration.ts';
import { countTextTokens } from '../inference/tokens.ts';
import { mp3Silence, pcmSilence, wavSilence } from './files.ts';
import { formOf, openAIError, sendBytes, sendJson, type DemoRequest, type Json } from './wire.ts';

/** Audio tokens per second the demo's transcribers bill (the gateway holds twice as many). */
const AUDIO_TOKENS_PER_SECOND = 10;

function transcriptOf(seconds: number, language: string | undefined): string {
  return `Demo transcription (no model listened): ${seconds} s of audio${language ? ` in ${language}` : ''}.`;
}

function answerText(res: http.ServerResponse, format: string, text: string, seconds: number): boolean {
  const stamp = (s: number, sep: string) => `00:00:${String(Math.min(s, 59)).padStart(2, '0')}${sep}000`;
  const body =
    format === 'text'
      ? text
      : format === 'srt'
        ? `1\n${stamp(0, ',')} --> ${stamp(seconds, ',')}\n${text}\n`
        : format === 'vtt'
          ? `WEBVTT\n\n${stamp(0, '.')} --> ${stamp(seconds, '.')}\n${text}\n`
          : undefined;
  if (body === undefined) return false;
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
  return true;
}

export async function transcriptions(req: DemoRequest, res: http.ServerResponse): Promise<void> {
  const form = await formOf(req);
  const file = form?.get('file');
  if (!form || !file || typeof file === 'string')
    return openAIError(res, 400, "Missing required parameter: 'file'.", 'file');
  const length = audioLength(new Uint8Array(await file.arrayBuffer()));
  const seconds = length && length.kind !== 'unmeasured' ? Number(ceilSeconds(length.seconds)) : 1;
  const model = String(form.get('model') ?? '');
  const format = String(form.get('response_format') ?? 'json');
  const language = typeof form.get('language') === 'string' ? String(form.get('language')) : undefined;
  const text = transcriptOf(seconds, language);
  if (answerText(res, format, text, seconds)) return;
  const prompt = countTextTokens(String(form.get('prompt') ?? ''));
  const output = countTextTokens(text);
  const usage: Json =
    model === 'whisper-1'
      ? { type: 'duration', seconds }
      : {
          type: 'tokens',
          input_tokens: seconds * AUDIO_TOKENS_PER_SECOND + prompt,
          input_token_details: { text_tokens: prompt, audio_tokens: seconds * AUDIO_TOKENS_PER_SECOND },
          output_tokens: output,
          total_tokens: seconds * AUDIO_TOKENS_PER_SECOND + prompt + output,
        };
  const segment = { id: 0, start: 0, end: seconds, text };
  const extra: Json =
    format === 'verbose_json'
      ? { task: 'transcribe', language: language ?? 'english', duration: seconds, segments: [segment] }
      : format === 'diarized_json'
        ? {
            task: 'transcribe',
            duration: seconds,
            segments: [{ type: 'transcript.text.segment', id: 'seg_001', speaker: 'A', start: 0, end: seconds, text }],
          }
        : {};
  sendJson(res, 200, { text, ...extra, usage });
}

const SPEECH: Record<string, { type: string; make: (seconds: number) => Buffer }> = {
  wav: { type: 'audio/wav', make: wavSilence },
  pcm: { type: 'audio/pcm', make: pcmSilence },
  mp3: { type: 'audio/mpeg', make: mp3Silence },
};

export function speech(req: DemoRequest, res: http.ServerResponse): void {
  const input = req.json?.input;
  if (typeof input !== 'string' || input === '')
    return openAIError(res, 400, "Missing required parameter: 'input'.", 'input');
  const format = String(req.json?.response_format ?? 'mp3');
  const out = SPEECH[format];
  if (!out)
    return openAIError(
      res,
      400,
      `The gateway's demo provider makes speech as mp3, wav or pcm only, not ${format}.`,
      'response_format',
    );
  // About as long as the words take to say (0.4 s each), between 1 and 10 s.
  const seconds = Math.min(10, Math.max(1, input.split(/\s+/).length * 0.4));
  sendBytes(res, out.type, out.make(seconds));
}
