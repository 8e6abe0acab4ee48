// A create's fields, read from its JSON body (the facade turns a multipart form into the same
// object) and checked: 400 for anything missing, unknown or out of range, worded as OpenAI's
// video API words it.
import { badRequest } from '../errors/errors.ts';
import { FORM_ERROR_FIELD, VIDEO_SECONDS, VIDEO_SIZES } from './wire.ts';

/** What a create asks for, defaults applied. */
export interface VideoRequest {
  model: string;
  prompt: string;
  seconds: number;
  size: string;
}

type Json = Record<string, unknown>;

const FIELDS = ['model', 'prompt', 'seconds', 'size'];
const MAX_PROMPT_CHARS = 32_000;
/** What OpenAI's create assumes when a field is left out (POST /v1/videos); the generations route has none. */
const OPENAI_DEFAULTS: Json = { model: 'sora-2', seconds: 4, size: '720x1280' };

/** The request's fields, checked; throws the 400 that says what is wrong. */
export function readVideoRequest(body: Json, openaiDefaults: boolean): VideoRequest {
  refuseUnknownFields(body);
  const defaults: Json = openaiDefaults ? OPENAI_DEFAULTS : {};
  const field = (name: string) => (body[name] === undefined || body[name] === null ? defaults[name] : body[name]);
  for (const name of FIELDS) {
    if (field(name) === undefined)
      throw badRequest(`Missing required parameter: '${name}'.`, 'missing_required_parameter', name);
  }
  return {
    model: readModel(field('model')),
    prompt: readPrompt(field('prompt')),
    seconds: readSeconds(field('seconds')),
    size: readSize(field('size')),
  };
}

/** A form the facade could not read, a reference input, or a field the API does not have. */
function refuseUnknownFields(body: Json): void {
  if (typeof body[FORM_ERROR_FIELD] === 'string')
    throw badRequest(`The multipart body could not be read: ${body[FORM_ERROR_FIELD]}`, 'invalid_multipart');
  for (const name of Object.keys(body)) {
    if (name === 'input_reference')
      throw badRequest(
        'Reference inputs (input_reference) are not supported by this gateway.',
        'unsupported_parameter',
        name,
      );
    if (!FIELDS.includes(name))
      throw badRequest(`Unrecognized request argument supplied: ${name}`, 'unknown_parameter', name);
  }
}

function readModel(model: unknown): string {
  if (typeof model !== 'string' || model === '')
    throw badRequest("Invalid type for 'model': expected a model name.", 'invalid_type', 'model');
  return model;
}

function readPrompt(prompt: unknown): string {
  if (typeof prompt !== 'string' || prompt.trim() === '')
    throw badRequest("Invalid value for 'prompt': expected a non-empty string.", 'invalid_value', 'prompt');
  if (prompt.length > MAX_PROMPT_CHARS)
    throw badRequest(
      `Invalid value for 'prompt': longer than ${MAX_PROMPT_CHARS} characters.`,
      'invalid_value',
      'prompt',
    );
  return prompt;
}

/** A number, or its digits as a form sends them; one of the lengths the provider makes. */
function readSeconds(raw: unknown): number {
  const seconds = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(VIDEO_SECONDS as readonly number[]).includes(seconds))
    throw badRequest(
      `Invalid value for 'seconds': ${JSON.stringify(raw)}. Supported values are: ${VIDEO_SECONDS.map((s) => `'${s}'`).join(', ')}.`,
      'invalid_value',
      'seconds',
    );
  return seconds;
}

function readSize(size: unknown): string {
  if (typeof size !== 'string' || !(VIDEO_SIZES as readonly string[]).includes(size))
    throw badRequest(
      `Invalid value for 'size': ${JSON.stringify(size)}. Supported values are: ${VIDEO_SIZES.map((s) => `'${s}'`).join(', ')}.`,
      'invalid_value',
      'size',
    );
  return size;
}
