// POST /v1/audio/transcriptions (multipart) and /v1/audio/speech (binary audio back).
// whisper is billed per second of the audio's real length, counted from the audio itself (or
// the seconds the provider reports, when more); the gpt-4o-*-transcribe models by tokens from
// the usage they report, held for the counted length; speech per character.
import type { Caller } from '../../billing/caller.ts';
import { badRequest, gatewayError } from '../../errors/errors.ts';
import {
  audioSecondsCost,
  audioSecondsNano,
  charactersCost,
  mediaTokensCost,
  mediaTokensFromUsage,
  mediaTokensNano,
  type MediaTokens,
} from '../../billing/media-pricing.ts';
import type { FormPart } from '../../gen/gateway/v1/inference_pb.js';
import { SPEECH, TRANSCRIPTIONS } from '../providers/openai-compatible.ts';
import { countTextTokens } from '../tokens.ts';
import { zeroUsage, type ChargeInfo, type Json } from '../../metering/plan.ts';
import { isAbort, withOutcome } from '../../metering/outcomes.ts';
import { readUpstreamError } from '../upstream/replies.ts';
import { parseBody } from '../request-body.ts';
import type { RouteDeps } from '../deps.ts';
import { audioLength, ceilSeconds, secondsText, sizeBoundSeconds } from '../media/audio-duration.ts';
import { Form, mediaPlan, modelOfKind, upstreamFormOf } from '../media/common.ts';

export const TRANSCRIPTIONS_ROUTE = '/v1/audio/transcriptions';
export const SPEECH_ROUTE = '/v1/audio/speech';

const TEXT_FIELDS = ['model', 'language', 'prompt', 'response_format', 'temperature', 'stream', 'chunking_strategy'];
const RESPONSE_FORMATS: Record<string, string[]> = {
  whisper: ['json', 'text', 'srt', 'verbose_json', 'vtt'],
  'gpt-4o-transcribe-diarize': ['json', 'text', 'diarized_json'],
};
const TOKEN_MODEL_FORMATS = ['json', 'text'];
/** Audio tokens per second of audio: held at twice the rate the models use, estimated at it. */
const AUDIO_TOKENS_PER_SECOND = 10n;
const PROMPT_OVERHEAD_TOKENS = 64n;
/** The formats whose reply carries the provider's usage (seconds or tokens) to bill by. */
const USAGE_FORMATS = ['json', 'verbose_json', 'diarized_json'];

const SPEECH_FORMATS: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};
const MAX_SPEECH_CHARS = 4096;

export type SpeechOut =
  | { kind: 'start'; requestId: string; contentType: string; costNano: bigint }
  | { kind: 'audio'; data: Uint8Array }
  | { kind: 'charge'; charge: ChargeInfo };

/** POST /v1/audio/transcriptions and /v1/audio/speech. */

export class AudioRoute {
  private readonly deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.deps = deps;
  }

  async transcribe(
    caller: Caller,
    parts: readonly FormPart[],
    requestId: string,
  ): Promise<{ body: Uint8Array; contentType: string; charge: ChargeInfo }> {
    const startedAt = performance.now();
    const { metering, calls } = this.deps;
    const form = new Form(parts);
    const repeated = form.repeatedField();
    if (repeated) throw repeated;
    for (const name of TEXT_FIELDS) {
      if (form.files(name).length > 0)
        throw badRequest(`'${name}' must be a text field, not a file.`, 'invalid_value', name);
    }
    const model = modelOfKind(this.deps.catalogue, form.field('model'), 'transcription', TRANSCRIPTIONS_ROUTE);
    const unexpected = form.parts.find((p) => p.filename !== '' && p.name !== 'file');
    if (unexpected)
      throw badRequest(
        `Unexpected file field '${unexpected.name}': send the audio as 'file'.`,
        'invalid_value',
        unexpected.name,
      );
    const files = form.files('file');
    if (files.length === 0)
      throw badRequest(
        form.has('file') ? "'file' must be a file, not a text field." : "Missing required parameter: 'file'.",
        form.has('file') ? 'invalid_value' : 'missing_required_parameter',
        'file',
      );
    if (files.length > 1) throw badRequest("Send one audio 'file' per request.", 'invalid_value', 'file');
    const file = files[0]!;
    if (file.data.length === 0)
      throw badRequest(`The audio file '${file.filename}' is empty.`, 'invalid_value', 'file');
    const length = audioLength(file.data);
    if (!length) {
      throw badRequest(
        `The file '${file.filename}' is not audio this gateway can read. Supported formats: flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav, webm.`,
        'invalid_file_format',
        'file',
      );
    }
    if (length.kind === 'contradicted') {
      throw badRequest(
        `The file '${file.filename}' states ${secondsText(length.stated)} s of audio but its ${length.codec} audio holds ${secondsText(length.seconds)} s: it was cut, padded or altered. Send the file as the encoder wrote it.`,
        'audio_length_mismatch',
        'file',
      );
    }
    const format = form.field('response_format') ?? 'json';
    const formats = RESPONSE_FORMATS[model.id] ?? TOKEN_MODEL_FORMATS;
    if (!formats.includes(format))
      throw badRequest(
        `response_format '${format}' is not supported by ${model.id}. Supported: ${formats.join(', ')}.`,
        'unsupported_value',
        'response_format',
      );
    if (form.field('stream') === 'true')
      throw badRequest(
        'Streamed transcription is not supported by this gateway; omit "stream".',
        'unsupported_parameter',
        'stream',
      );
    // Audio whose length the gateway cannot count is billed by what the provider reports, which
    // only the JSON formats carry: a text reply would leave nothing but the size bound to charge.
    if (length.kind === 'unmeasured' && !USAGE_FORMATS.includes(format)) {
      throw badRequest(
        `The gateway cannot count the length of ${length.codec} audio, and response_format '${format}' reports none to bill by. Ask for response_format 'json' or 'verbose_json', or send PCM WAV, MP3, FLAC, Opus, Vorbis or AAC audio.`,
        'invalid_file_format',
        'file',
      );
    }

    // Counted seconds; where they cannot be counted, the most a file of this size can hold.
    const counted = length.kind === 'measured' ? ceilSeconds(length.seconds) : undefined;
    const bound = sizeBoundSeconds(file.data.length);
    const seconds = counted ?? bound;
    const plan = mediaPlan(requestId, TRANSCRIPTIONS_ROUTE, caller, model, { model: model.id }, startedAt);
    const perSecond = model.prices.per_audio_minute !== undefined;
    const promptTokens = BigInt(Buffer.byteLength(form.field('prompt') ?? '')) + PROMPT_OVERHEAD_TOKENS;
    // whisper's hold leaves room for the provider to count a little more than the gateway did
    // (its rounding, its decoder's padding): a tenth and two seconds.
    const hold = perSecond
      ? audioSecondsNano(model.prices, counted === undefined ? bound : counted + counted / 10n + 2n)
      : mediaTokensNano(model.prices, 'audio_input_per_mtok', {
          textInput: promptTokens,
          mediaInput: seconds * AUDIO_TOKENS_PER_SECOND * 2n,
          output: BigInt(model.maxOutputTokens) + seconds * 12n,
        });
    await metering.holdExact(plan, hold);

    const upstreamForm = upstreamFormOf(parts, model.upstreamId);
    // The diarizing model needs a chunking strategy for audio over 30 s; 'auto' unless the caller chose.
    if (model.id === 'gpt-4o-transcribe-diarize' && !form.has('chunking_strategy'))
      upstreamForm.append('chunking_strategy', 'auto');
    return metering.run(plan, async () => {
      const res = await calls.post(plan, TRANSCRIPTIONS, upstreamForm);
      if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
      const contentType = String(res.headers['content-type'] ?? 'application/json')
        .split(';')[0]!
        .trim();
      let text: string;
      try {
        text = await res.body.text();
      } catch (err) {
        throw withOutcome(err as Error, 'upstream_unreachable', 502);
      }
      let json: Json | undefined;
      if (contentType === 'application/json') {
        try {
          json = JSON.parse(text) as Json;
        } catch {
          json = undefined;
        }
      }

      let charge: ChargeInfo;
      const reportedSeconds = secondsInUsage(json);
      if (perSecond) {
        // What the provider billed, when it says so and it is more; never less than the count. The
        // metering charges at most the hold and records any excess as uncovered.
        const billed =
          counted === undefined
            ? (reportedSeconds ?? bound)
            : reportedSeconds !== undefined && reportedSeconds > counted
              ? reportedSeconds
              : counted;
        const usage = {
          ...zeroUsage(),
          units: billed,
          unit: 'audio_seconds',
          estimated: counted === undefined && reportedSeconds === undefined,
        };
        charge = await metering.settle(plan, usage, 'ok', 200, (p) => audioSecondsCost(p, billed));
      } else {
        const reported =
          json?.usage && typeof json.usage === 'object' && (json.usage as Json).type !== 'duration'
            ? mediaTokensFromUsage(json.usage as Json, 'audio_tokens')
            : undefined;
        // Text formats carry no usage: audio tokens at the models' rate, output counted.
        const heard = counted ?? reportedSeconds ?? bound;
        const tokens: MediaTokens = reported ?? {
          textInput: promptTokens - PROMPT_OVERHEAD_TOKENS,
          mediaInput: heard * AUDIO_TOKENS_PER_SECOND,
          output: BigInt(countTextTokens(typeof json?.text === 'string' ? json.text : text)),
        };
        const usage = {
          ...zeroUsage(),
          inputTokens: tokens.textInput + tokens.mediaInput,
          outputTokens: tokens.output,
          estimated: !reported,
          units: heard,
          unit: 'audio_seconds',
        };
        charge = await metering.settle(plan, usage, 'ok', 200, (p) =>
          mediaTokensCost(p, 'audio_input_per_mtok', tokens),
        );
      }
      return {
        body: new TextEncoder().encode(text),
        contentType: contentType === 'application/json' ? '' : contentType,
        charge,
      };
    });
  }

  /**
   * Speech: the audio is relayed as it arrives. The price is per character, known up front;
   * it is charged once the audio is complete (or the caller left mid-way: the provider made
   * it all), and not at all when the upstream fails or breaks off.
   */
  async *speech(caller: Caller, raw: Uint8Array, requestId: string, signal: AbortSignal): AsyncGenerator<SpeechOut> {
    const startedAt = performance.now();
    const { metering, calls, log } = this.deps;
    const body = parseBody(raw);
    const model = modelOfKind(this.deps.catalogue, body.model, 'speech', SPEECH_ROUTE);
    if (typeof body.input !== 'string' || body.input.length === 0)
      throw badRequest("Missing required parameter: 'input'.", 'missing_required_parameter', 'input');
    const characters = BigInt([...body.input].length);
    if (characters > BigInt(MAX_SPEECH_CHARS))
      throw badRequest(`'input' is longer than ${MAX_SPEECH_CHARS} characters.`, 'invalid_value', 'input');
    const voice = body.voice as unknown;
    if (
      !(typeof voice === 'string' && voice !== '') &&
      !(voice && typeof voice === 'object' && typeof (voice as Json).id === 'string')
    ) {
      throw badRequest("Missing required parameter: 'voice'.", 'missing_required_parameter', 'voice');
    }
    const format = body.response_format == null ? 'mp3' : String(body.response_format);
    if (!(format in SPEECH_FORMATS))
      throw badRequest(
        `'response_format' must be one of ${Object.keys(SPEECH_FORMATS).join(', ')}.`,
        'invalid_value',
        'response_format',
      );
    if (body.speed != null && !(typeof body.speed === 'number' && body.speed >= 0.25 && body.speed <= 4))
      throw badRequest("'speed' must be a number from 0.25 to 4.", 'invalid_value', 'speed');
    if (body.stream_format != null && body.stream_format !== 'audio')
      throw badRequest(
        "Only stream_format 'audio' is supported by this gateway.",
        'unsupported_value',
        'stream_format',
      );

    const plan = mediaPlan(requestId, SPEECH_ROUTE, caller, model, body, startedAt);
    // At the model's prices for the charge, at the serving deployment's for the operator's cost.
    const costAt = (prices: Readonly<Record<string, string>>) => charactersCost(prices, characters);
    const cost = costAt(model.prices);
    // What is held is what is charged (the customer's price): the start of the reply says it.
    const charged = await metering.holdExact(plan, cost);
    const upstreamBody =
      body.model === model.upstreamId ? Buffer.from(raw) : JSON.stringify({ ...body, model: model.upstreamId });
    const upstreamAbort = new AbortController();
    const usage = { ...zeroUsage(), units: characters, unit: 'characters' };
    let answered = false;
    // The caller left. Once the provider answered it makes the whole audio, so that is charged,
    // here and now: this generator may wait at a yield nobody resumes, so its finally cannot be
    // the only place that settles. Before the answer, the upstream call is stopped and nothing is.
    const onAbort = () => {
      upstreamAbort.abort();
      if (answered)
        metering
          .settle(plan, usage, 'client_closed', 499, costAt)
          .catch((err) => log.error({ err, requestId }, 'settle failed; the hold will expire'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      let res;
      try {
        res = await calls.post(plan, SPEECH, upstreamBody, upstreamAbort.signal);
        if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
      } catch (err) {
        await metering.release(plan, err);
        throw err;
      }
      answered = true;
      const contentType = String(res.headers['content-type'] ?? SPEECH_FORMATS[format])
        .split(';')[0]!
        .trim();
      yield { kind: 'start', requestId, contentType, costNano: charged };
      try {
        for await (const chunk of res.body) yield { kind: 'audio', data: chunk as Buffer };
      } catch (err) {
        if (isAbort(err) || signal.aborted) return; // settled in full below
        await metering.settle(plan, zeroUsage(), 'upstream_cut', 502);
        throw gatewayError({
          httpStatus: 502,
          type: 'server_error',
          code: 'upstream_cut',
          message: 'The upstream provider broke off the audio.',
          requestId,
        });
      }
      yield { kind: 'charge', charge: await metering.settle(plan, usage, 'ok', 200, costAt) };
    } finally {
      signal.removeEventListener('abort', onAbort);
      upstreamAbort.abort();
      // However this ended, the request settles here unless it already did (settle is once per
      // request, in both billing modes). Still open means the caller left (see onAbort).
      await metering
        .settle(plan, answered ? usage : zeroUsage(), 'client_closed', 499, answered ? costAt : 0n)
        .catch((err) => log.error({ err, requestId }, 'settle failed; the hold will expire'));
    }
  }
}

/** OpenAI's `usage: {type: "duration", seconds}` (whisper's JSON replies), in whole seconds rounded up. */
function secondsInUsage(json: Json | undefined): bigint | undefined {
  const usage = json?.usage as Json | undefined;
  const s = usage && typeof usage === 'object' && usage.type === 'duration' ? usage.seconds : undefined;
  return typeof s === 'number' && Number.isFinite(s) && s >= 0 && s < 1e9 ? BigInt(Math.ceil(s)) : undefined;
}
