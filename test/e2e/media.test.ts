// The media routes with the official openai SDK: embeddings (OpenAI and Cohere), images
// (gpt-image and FLUX), image edits, transcriptions and speech, each billing basis checked
// against a hand-computed nano-USD figure, failures free, bad uploads refused before a hold.
import { describe, expect, it } from 'vitest';
import OpenAI, { toFile } from 'openai';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  postRaw,
  uniqueMarker,
  upstreamRequests,
  usageRow,
} from '../support/context.ts';
import {
  audioFixture,
  forgeFlacTotal,
  forgeMp4Duration,
  forgeOggLastGranule,
  forgeWavByteRate,
  forgeWebmDuration,
  mp3,
  oggOpusPreSkip,
  png,
  wav,
} from '../support/media-files.ts';
import { imageSize } from '../../src/inference/media/image-size.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';

const FIVE_USD = 5_000_000_000n;

/** Balance, invariants and the usage row of a request that should have cost `cost`. */
async function charged(accountId: string, requestId: string | null, cost: bigint) {
  expect(await usageRow(requestId!)).toMatchObject({ cost_nano: String(cost) });
  expect(await balanceOf(accountId)).toEqual({ balance: FIVE_USD - cost, held: 0n });
  await checkInvariants(accountId);
  const row = await usageRow(requestId!);
  expect(row?.cost_nano).toBe(String(cost));
  return row!;
}

async function free(accountId: string) {
  expect(await balanceOf(accountId)).toEqual({ balance: FIVE_USD, held: 0n });
  await checkInvariants(accountId);
}

describe('embeddings', () => {
  it('OpenAI model: the SDK gets float vectors (it asks for base64), billed per 1M tokens from usage', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const input = `${m} `.padEnd(40, 'x').slice(0, 40);
    const { data, response } = await openai(key.apiKey)
      .embeddings.create({ model: 'text-embedding-3-large', input })
      .withResponse();
    expect(data.data).toHaveLength(1);
    expect(data.data[0]!.embedding).toHaveLength(3072);
    expect(data.data[0]!.embedding[0]).toBe(((31 + 0) % 2048) / 2048 - 0.5);
    expect(data.model).toBe('text-embedding-3-large');
    expect(data.usage.prompt_tokens).toBe(10);
    // 10 tokens x $0.143 / 1M = 1,430 nano
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe('1430');
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 1430n);
    expect(row.input_tokens).toBe('10');
    expect(row.route).toBe('/v1/embeddings');
  });

  it('dimensions and float encoding pass through; an array of inputs', async () => {
    const key = await newKey('5');
    const r = await openai(key.apiKey).embeddings.create({
      model: 'text-embedding-3-small',
      input: ['one input text', 'two input text'],
      dimensions: 256,
      encoding_format: 'float',
    });
    expect(r.data.map((d) => d.embedding.length)).toEqual([256, 256]);
    // 2 x ceil(14/4) = 8 tokens x $0.022 / 1M = 176 nano
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 176n);
  });

  it('Cohere: translated to its Embed API and back, base64 included, billed from billed_units', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const { data, response } = await openai(key.apiKey)
      .embeddings.create({ model: 'Cohere-embed-v3-multilingual', input: [`${m} hola mundo`, 'bonjour le monde'] })
      .withResponse();
    expect(data.model).toBe('Cohere-embed-v3-multilingual');
    expect(data.data.map((d) => d.index)).toEqual([0, 1]);
    expect(data.data[1]!.embedding).toHaveLength(1024);
    expect(data.data[1]!.embedding.slice(0, 2)).toEqual([
      ((2 * 31) % 2048) / 2048 - 0.5,
      ((2 * 31 + 7) % 2048) / 2048 - 0.5,
    ]);
    const sent = (await upstreamRequests(m))[0]!;
    expect(sent.path).toBe('/cohere/v2/embed');
    expect(sent.body).toMatchObject({
      model: 'embed-multilingual-v3.0',
      texts: [`${m} hola mundo`, 'bonjour le monde'],
      input_type: 'search_document',
      embedding_types: ['float'],
    });
    // billed_units: (ceil(bytes/4) + 1) per text; at $0.10 / 1M
    const tokens = BigInt(Math.ceil(Buffer.byteLength(`${m} hola mundo`) / 4) + 1 + Math.ceil(16 / 4) + 1);
    expect(data.usage.prompt_tokens).toBe(Number(tokens));
    await charged(key.accountId, response.headers.get('x-request-id'), tokens * 100n);
  });

  it('input over the model context is refused before any upstream call, free', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const long = `${m} ` + 'lorem ipsum dolor sit amet '.repeat(2000);
    const err = await openai(key.apiKey)
      .embeddings.create({ model: 'text-embedding-3-small', input: long })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.code).toBe('context_length_exceeded');
    expect(err.message).toMatch(/8191 tokens/);
    const cohereErr = await openai(key.apiKey)
      .embeddings.create({ model: 'Cohere-embed-v3-multilingual', input: `${m} ` + 'palabra '.repeat(600) })
      .catch((e) => e);
    expect(cohereErr).toBeInstanceOf(OpenAI.BadRequestError);
    expect(cohereErr.message).toMatch(/512 tokens/);
    expect(await upstreamRequests(m)).toHaveLength(0);
    await free(key.accountId);
    expect((await accountActivity(key.accountId)).holds).toBe(0);
  });

  it.each([
    [{ model: 'text-embedding-ada-002', input: 'x', dimensions: 10 }, 'dimensions'],
    [{ model: 'text-embedding-3-small', input: 'x', dimensions: 5000 }, 'dimensions'],
    [{ model: 'text-embedding-3-small', input: 'x', encoding_format: 'int8' }, 'encoding_format'],
    [{ model: 'text-embedding-3-small', input: [] }, 'input'],
    [{ model: 'text-embedding-3-small', input: [''] }, 'input'],
    [{ model: 'text-embedding-3-small' }, 'input'],
    [{ model: 'Cohere-embed-v3-multilingual', input: [[1, 2, 3]] }, 'input'],
    [{ model: 'gpt-4o-mini', input: 'x' }, 'model'],
    [{ model: 'no-such-model', input: 'x' }, 'model'],
  ])('bad request %j -> 400 on %s, free', async (body, param) => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .embeddings.create(body as never)
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe(param);
    await free(key.accountId);
  });
});

describe('image generation', () => {
  it('gpt-image-2: billed from the returned usage, text and output tokens each at their rate', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .images.generate({
        model: 'gpt-image-2',
        prompt: 'a lighthouse [sim prompt_tokens=20]',
        size: '1024x1536',
        quality: 'high',
      })
      .withResponse();
    expect(data.data).toHaveLength(1);
    expect(imageSize(Buffer.from(data.data![0]!.b64_json!, 'base64'))).toEqual({
      format: 'png',
      width: 1024,
      height: 1536,
    });
    // 20 x $5 / 1M + 6,240 x $40 / 1M = 0.0001 + 0.2496 = $0.2497
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 249_700_000n);
    expect(row).toMatchObject({ input_tokens: '20', output_tokens: '6240', units: '1', unit: 'images' });
  });

  it('gpt-image-1-mini without usage: per image at its tier, sized from the images themselves', async () => {
    const key = await newKey('5');
    const { data, response } = await openai(key.apiKey)
      .images.generate({
        model: 'gpt-image-1-mini',
        prompt: 'two cats [sim fault=no_usage]',
        size: '1024x1024',
        quality: 'low',
        n: 2,
      })
      .withResponse();
    expect(data.data).toHaveLength(2);
    // 2 images x $0.02 (low, 1024x1024)
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 40_000_000n);
    expect(row).toMatchObject({ units: '2', unit: 'images', usage_estimated: 'true' });
  });

  it('FLUX.2-pro: its own job API, billed $0.03 per output megapixel at two sizes', async () => {
    for (const [size, cost] of [
      ['1024x1024', 31_457_280n],
      ['1456x816', 35_642_880n],
    ] as const) {
      const key = await newKey('5');
      const m = uniqueMarker();
      const { data, response } = await openai(key.apiKey)
        .images.generate({ model: 'FLUX.2-pro', prompt: `${m} a mountain [sim pending=2]`, size: size as never })
        .withResponse();
      const [w, h] = size.split('x').map(Number);
      expect(imageSize(Buffer.from(data.data![0]!.b64_json!, 'base64'))).toEqual({
        format: 'png',
        width: w,
        height: h,
      });
      expect((data as { size?: string }).size).toBe(size);
      const row = await charged(key.accountId, response.headers.get('x-request-id'), cost);
      expect(row).toMatchObject({ units: String(w! * h!), unit: 'pixels' });
      const sent = await upstreamRequests(m);
      expect(sent[0]!.path).toBe('/bfl/v1/flux-2-pro');
      expect(sent[0]!.headers['x-key']).toBe(UPSTREAM_KEY);
      expect(sent[0]!.body).toMatchObject({ width: w, height: h, output_format: 'png' });
    }
  });

  it('FLUX.2-pro: charged for the resolution it really made, not the one asked', async () => {
    const key = await newKey('5');
    const { response } = await openai(key.apiKey)
      .images.generate({ model: 'FLUX.2-pro', prompt: 'a river [sim made=1024x768]', size: '1024x1024' })
      .withResponse();
    // 1024 x 768 = 786,432 pixels x $0.03 / 1M = $0.02359296
    await charged(key.accountId, response.headers.get('x-request-id'), 23_592_960n);
  });

  it.each([
    [{ model: 'gpt-image-2', prompt: 'x', size: '512x512' }, 'size'],
    [{ model: 'gpt-image-2', prompt: 'x', quality: 'ultra' }, 'quality'],
    [{ model: 'gpt-image-2', prompt: 'x', background: 'transparent', output_format: 'jpeg' }, 'background'],
    [{ model: 'gpt-image-2', prompt: 'x', n: 11 }, 'n'],
    [{ model: 'gpt-image-2' }, 'prompt'],
    [{ model: 'FLUX.2-pro', prompt: 'x', size: '1000x1000' }, 'size'],
    [{ model: 'FLUX.2-pro', prompt: 'x', size: '4096x4096' }, 'size'],
    [{ model: 'FLUX.2-pro', prompt: 'x', n: 2 }, 'n'],
    [{ model: 'whisper', prompt: 'x' }, 'model'],
  ])('a size or option the model cannot make %j -> 400 on %s, free', async (body, param) => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .images.generate(body as never)
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe(param);
    await free(key.accountId);
  });

  it('FLUX: a moderated prompt is a 400, a failed job a 502, both free', async () => {
    const key = await newKey('5');
    const moderated = await openai(key.apiKey)
      .images.generate({ model: 'FLUX.2-pro', prompt: 'x [sim fault=moderated]' })
      .catch((e) => e);
    expect(moderated).toBeInstanceOf(OpenAI.BadRequestError);
    expect(moderated.code).toBe('moderation_blocked');
    const failed = await openai(key.apiKey)
      .images.generate({ model: 'FLUX.2-pro', prompt: 'x [sim fault=error]' })
      .catch((e) => e);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    expect(failed.status).toBe(502);
    const slow = await openai(key.apiKey)
      .images.generate({ model: 'FLUX.2-pro', prompt: 'x [sim fault=never]' })
      .catch((e) => e);
    expect(slow.status).toBe(504);
    await free(key.accountId);
  });
});

describe('image edits (multipart)', () => {
  it('gpt-image-1-mini: several images and a mask, forwarded with the same fields, billed from usage', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const images = [
      await toFile(png(64, 64), 'a.png', { type: 'image/png' }),
      await toFile(png(32, 32), 'b.png', { type: 'image/png' }),
    ];
    const { data, response } = await openai(key.apiKey)
      .images.edit({
        model: 'gpt-image-1-mini',
        image: images,
        mask: await toFile(png(64, 64), 'mask.png', { type: 'image/png' }),
        prompt: `${m} add a hat [sim prompt_tokens=30 image_tokens=300]`,
        size: '1024x1024',
        quality: 'medium',
      })
      .withResponse();
    expect(data.data).toHaveLength(1);
    const sent = (await upstreamRequests(m))[0]!;
    expect(sent.path).toBe('/v1/images/edits');
    expect(sent.body).toMatchObject({ model: 'gpt-image-1-mini', size: '1024x1024', quality: 'medium' });
    expect(
      (sent.body!.files as { field: string; filename: string }[]).map((f) => `${f.field}:${f.filename}`).sort(),
    ).toEqual(['image[]:a.png', 'image[]:b.png', 'mask:mask.png']);
    // text 30 x $2 + image 600 x $2.50 + output 1,056 x $8, per 1M = 0.00006 + 0.0015 + 0.008448 = $0.010008
    await charged(key.accountId, response.headers.get('x-request-id'), 10_008_000n);
  });

  it('only gpt-image-* models edit', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .images.edit({ model: 'FLUX.2-pro', image: await toFile(png(8, 8), 'a.png'), prompt: 'x' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(/gpt-image-\* models only/);
    await free(key.accountId);
  });

  it.each([
    [
      'no image',
      400,
      'image',
      (f: FormData) => {
        f.append('model', 'gpt-image-2');
        f.append('prompt', 'x');
      },
    ],
    [
      'image as a text field',
      400,
      'image',
      (f: FormData) => {
        f.append('model', 'gpt-image-2');
        f.append('prompt', 'x');
        f.append('image', 'not a file');
      },
    ],
    [
      'an unexpected file field',
      400,
      'file',
      (f: FormData) => {
        f.append('model', 'gpt-image-2');
        f.append('prompt', 'x');
        f.append('file', new Blob([png(8, 8)]), 'a.png');
      },
    ],
    [
      'a file that is not an image',
      400,
      'image',
      (f: FormData) => {
        f.append('model', 'gpt-image-2');
        f.append('prompt', 'x');
        f.append('image', new Blob(['hello']), 'a.png');
      },
    ],
    [
      'an empty image',
      400,
      'image',
      (f: FormData) => {
        f.append('model', 'gpt-image-2');
        f.append('prompt', 'x');
        f.append('image', new Blob([]), 'a.png');
      },
    ],
    [
      'a model given as a file',
      400,
      'model',
      (f: FormData) => {
        f.append('model', new Blob(['gpt-image-2']), 'model.txt');
        f.append('prompt', 'x');
        f.append('image', new Blob([png(8, 8)]), 'a.png');
      },
    ],
  ])('%s -> %d on %s, no hold, no ledger row', async (_name, status, param, build) => {
    const key = await newKey('5');
    const form = new FormData();
    build(form);
    const res = await fetch(`${gatewayUrl()}/v1/images/edits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: { param: string; type: string } };
    expect(body.error.param).toBe(param);
    expect(body.error.type).toBe('invalid_request_error');
    await free(key.accountId);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('an oversized upload, too many files or a huge field get 413, malformed multipart and JSON get 400, no key gets 401: none held', async () => {
    const key = await newKey('5');
    const boundary = 'x-boundary-1234';
    const head = (name: string, file?: string) =>
      `--${boundary}\r\ncontent-disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\ncontent-type: image/png` : ''}\r\n\r\n`;
    const big = Buffer.concat([
      Buffer.from(head('model') + 'gpt-image-2\r\n' + head('prompt') + 'x\r\n' + head('image', 'big.png')),
      png(8, 8),
      Buffer.alloc(1536 * 1024),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const multipartType = {
      'content-type': `multipart/form-data; boundary=${boundary}`,
      authorization: `Bearer ${key.apiKey}`,
    };
    const tooBig = await postRaw(`${gatewayUrl()}/v1/images/edits`, multipartType, big);
    expect(tooBig.status).toBe(413);
    expect(JSON.parse(tooBig.text).error.code).toBe('request_too_large');
    const broken = await postRaw(
      `${gatewayUrl()}/v1/images/edits`,
      multipartType,
      Buffer.from(head('model') + 'gpt-image-2\r\n' + head('image', 'a.png') + 'trunc'),
    );
    expect(broken.status).toBe(400);
    expect(JSON.parse(broken.text).error.code).toBe('invalid_multipart');
    const json = await postRaw(
      `${gatewayUrl()}/v1/images/edits`,
      { authorization: `Bearer ${key.apiKey}` },
      '{"model":"gpt-image-2"}',
    );
    expect(json.status).toBe(400);
    const many = new FormData();
    many.append('model', 'gpt-image-2');
    many.append('prompt', 'x');
    for (let i = 0; i < 18; i++) many.append('image[]', new Blob([png(8, 8)]), `${i}.png`);
    const tooMany = await fetch(`${gatewayUrl()}/v1/images/edits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: many,
    });
    expect(tooMany.status).toBe(413);
    const longField = new FormData();
    longField.append('model', 'gpt-image-2');
    longField.append('prompt', 'p'.repeat(200 * 1024));
    longField.append('image', new Blob([png(8, 8)]), 'a.png');
    const fieldTooBig = await fetch(`${gatewayUrl()}/v1/images/edits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: longField,
    });
    expect(fieldTooBig.status).toBe(413);
    expect(((await fieldTooBig.json()) as { error: { param: string } }).error.param).toBe('prompt');
    const noKey = await postRaw(
      `${gatewayUrl()}/v1/audio/transcriptions`,
      { 'content-type': `multipart/form-data; boundary=${boundary}` },
      big,
    );
    expect(noKey.status).toBe(401);
    await free(key.accountId);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });
});

describe('transcriptions (multipart)', () => {
  it('whisper: $0.017 per minute, pro-rated by the second of the real audio', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    // 61.5 s of 8 kHz audio -> 62 billed seconds -> $0.0175666... -> 17,566,667 nano
    const { data, response } = await openai(key.apiKey)
      .audio.transcriptions.create({
        model: 'whisper',
        file: await toFile(wav(8000 * 61 + 4000), 'talk.wav', { type: 'audio/wav' }),
        prompt: m,
        language: 'en',
      })
      .withResponse();
    expect(data.text).toBe('hello from the simulated transcriber');
    const sent = (await upstreamRequests(m))[0]!;
    expect(sent.body).toMatchObject({ model: 'whisper-1', language: 'en', prompt: m });
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 17_566_667n);
    expect(row).toMatchObject({ units: '62', unit: 'audio_seconds' });
  });

  it('whisper on MP3 and M4A, and text formats come back as text', async () => {
    const key = await newKey('5');
    // 100 frames x 1152 / 44100 = 2.61 s -> 3 s -> 850,000 nano
    const text = await openai(key.apiKey).audio.transcriptions.create({
      model: 'whisper',
      file: await toFile(mp3(100), 'a.mp3'),
      response_format: 'text',
    });
    expect(text).toBe('hello from the simulated transcriber');
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 850_000n);
    const srt = await fetch(`${gatewayUrl()}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: formOf({ model: 'whisper', response_format: 'srt' }, ['file', audioFixture('tone.m4a'), 'b.m4a']),
    });
    expect(srt.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await srt.text()).toMatch(/^1\n00:00:00,000 --> /);
    // + 56 AAC frames x 1024 / 16 kHz = 3.584 s -> 4 s -> 1,133,334 nano
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 850_000n - 1_133_334n);
    await checkInvariants(key.accountId);
  });

  it('gpt-4o-transcribe: billed by text, audio and output tokens from usage', async () => {
    const key = await newKey('5');
    const { response } = await openai(key.apiKey)
      .audio.transcriptions.create({
        model: 'gpt-4o-transcribe',
        file: await toFile(wav(8000 * 5), 'a.wav'),
        prompt: '[sim audio_tokens=100 text_tokens=10 output_tokens=50]',
      })
      .withResponse();
    // 10 x $2.50 + 100 x $6 + 50 x $10, per 1M = $0.001125
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 1_125_000n);
    expect(row).toMatchObject({ input_tokens: '110', output_tokens: '50', usage_estimated: 'false' });
  });

  it('gpt-4o-transcribe-diarize: speaker-labelled segments, a chunking strategy by default', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const r = (await openai(key.apiKey).audio.transcriptions.create({
      model: 'gpt-4o-transcribe-diarize',
      file: await toFile(wav(8000 * 40), 'meeting.wav'),
      response_format: 'diarized_json',
      prompt: m,
    } as never)) as unknown as { segments: { speaker: string; text: string }[] };
    expect(r.segments.map((s) => s.speaker)).toEqual(['A', 'B']);
    expect((await upstreamRequests(m))[0]!.body).toMatchObject({
      chunking_strategy: 'auto',
      response_format: 'diarized_json',
    });
  });

  // Real files made with ffmpeg (test/fixtures/audio/make.sh); each forgery rewrites the stated
  // length (a WAV's byteRate x 1000, as in the issue; the others' to 1 s) and leaves the audio as it was.
  // whisper: 2 s -> 566,667 nano; 4 s -> 1,133,334 nano ($0.017 / 60 a second, rounded up once).
  it.each([
    ['pcm16.wav', 'byteRate', '0.0015', (b: Buffer) => forgeWavByteRate(b, 1000), 2n, 566_667n],
    ['float32.wav', 'byteRate', '0.0015', (b: Buffer) => forgeWavByteRate(b, 1000), 2n, 566_667n],
    ['mulaw.wav', 'byteRate', '0.0015', (b: Buffer) => forgeWavByteRate(b, 1000), 2n, 566_667n],
    ['tone.flac', 'STREAMINFO total', '1.000', (b: Buffer) => forgeFlacTotal(b, 8000), 4n, 1_133_334n],
    [
      'tone.opus.ogg',
      'last granule',
      '1.000',
      (b: Buffer) => forgeOggLastGranule(b, BigInt(oggOpusPreSkip(b) + 48000)),
      4n,
      1_133_334n,
    ],
    ['tone.vorbis.ogg', 'last granule', '1.000', (b: Buffer) => forgeOggLastGranule(b, 16000n), 4n, 1_133_334n],
    ['tone.m4a', 'mvhd duration', '1.000', (b: Buffer) => forgeMp4Duration(b, 'mvhd', 1), 4n, 1_133_334n],
    ['tone.opus.webm', 'Duration', '1.000', (b: Buffer) => forgeWebmDuration(b, 1000), 4n, 1_133_334n],
    ['tone.vorbis.webm', 'Duration', '1.000', (b: Buffer) => forgeWebmDuration(b, 1000), 4n, 1_133_334n],
  ] as const)(
    'whisper refuses %s whose %s claims %s s, charging nothing, and bills the real file by its audio',
    async (name, _field, stated, forge, seconds, cost) => {
      const key = await newKey('5');
      const client = openai(key.apiKey);
      const err = await client.audio.transcriptions
        .create({ model: 'whisper', file: await toFile(forge(audioFixture(name)), name) })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err).toMatchObject({ code: 'audio_length_mismatch', param: 'file' });
      expect(err.message).toContain(`states ${stated} s of audio but its`);
      await free(key.accountId);
      expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
      const { response } = await client.audio.transcriptions
        .create({ model: 'whisper', file: await toFile(audioFixture(name), name) })
        .withResponse();
      const row = await charged(key.accountId, response.headers.get('x-request-id'), cost);
      expect(row).toMatchObject({ units: String(seconds), unit: 'audio_seconds', usage_estimated: 'false' });
    },
  );

  it("recordings that state no length (Safari's fragmented MP4, a MediaRecorder WebM) are billed by their samples", async () => {
    const key = await newKey('5');
    for (const name of ['fragmented.m4a', 'live.opus.webm']) {
      const { response } = await openai(key.apiKey)
        .audio.transcriptions.create({
          model: 'whisper',
          file: await toFile(audioFixture(name), name),
          response_format: 'text',
        })
        .withResponse();
      // 56 AAC frames of 1024 at 16 kHz = 3.584 s; 176 Opus packets of 20 ms less 104 samples = 3.518 s: 4 s each
      expect(await usageRow(response.headers.get('x-request-id')!)).toMatchObject({ cost_nano: '1133334', units: '4' });
    }
    expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - 2n * 1_133_334n);
  });

  it('whisper charges the seconds it reports when they exceed the count, up to the hold; the rest is recorded as uncovered', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    // tone.flac counts 3.5 s -> 4 s, held for 4 + 4/10 + 2 = 6 s. whisper reports 6 s: 6 x $0.017 / 60 = 1,700,000 nano.
    const { response } = await client.audio.transcriptions
      .create({
        model: 'whisper',
        file: await toFile(audioFixture('tone.flac'), 'tone.flac'),
        prompt: '[sim seconds=6]',
      })
      .withResponse();
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 1_700_000n);
    expect(row).toMatchObject({ units: '6', unit: 'audio_seconds' });
    // It reports 100 s: charged the 6 s held, the other 94 s (26,633,334 nano) recorded as uncovered.
    const over = await client.audio.transcriptions
      .create({
        model: 'whisper',
        file: await toFile(audioFixture('tone.flac'), 'tone.flac'),
        prompt: '[sim seconds=100]',
      })
      .withResponse();
    const requestId = over.response.headers.get('x-request-id')!;
    expect(await usageRow(requestId)).toMatchObject({ cost_nano: '1700000', units: '100' });
    const { rows } = await db().query('SELECT uncovered_nano::text FROM usage_records WHERE request_id = $1', [
      requestId,
    ]);
    expect(rows[0].uncovered_nano).toBe(String(28_333_334n - 1_700_000n));
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD - 2n * 1_700_000n, held: 0n });
  });

  it('audio the gateway cannot count (ADPCM WAV, ALAC M4A) is held for what its bytes can hold and billed the seconds whisper reports, never its header', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    // adpcm.wav, byteRate x 1000: its header claims 0.0015 s; 6,234 bytes at 2 kb/s hold at most 25 s.
    // whisper decodes 12,216 samples at 8 kHz = 1.527 s and reports 2 s: 566,667 nano.
    const adpcm = forgeWavByteRate(audioFixture('adpcm.wav'), 1000);
    const { data, response } = await client.audio.transcriptions
      .create({ model: 'whisper', file: await toFile(adpcm, 'adpcm.wav'), response_format: 'verbose_json' })
      .withResponse();
    expect(data.duration).toBeCloseTo(1.527, 3);
    expect(await usageRow(response.headers.get('x-request-id')!)).toMatchObject({
      cost_nano: '566667',
      units: '2',
      usage_estimated: 'false',
    });
    // alac.m4a: 28,000 samples at 8 kHz = 3.5 s, reported as 4 s.
    const alac = await client.audio.transcriptions
      .create({ model: 'whisper', file: await toFile(audioFixture('alac.m4a'), 'alac.m4a') })
      .withResponse();
    expect(await usageRow(alac.response.headers.get('x-request-id')!)).toMatchObject({
      cost_nano: '1133334',
      units: '4',
    });
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD - 566_667n - 1_133_334n, held: 0n });
    // A text reply reports no seconds, so nothing could bill it but the bound: refused before any hold.
    const err = await client.audio.transcriptions
      .create({ model: 'whisper', file: await toFile(adpcm, 'adpcm.wav'), response_format: 'text' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ code: 'invalid_file_format', param: 'file' });
    expect(err.message).toMatch(/cannot count the length of wav format 0x0002 audio/);
    expect((await accountActivity(key.accountId)).holds).toBe(2);
  });

  it('gpt-4o-transcribe refuses a forged WAV, and holds uncountable audio for its size bound, not its header', async () => {
    const key = await newKey('5');
    const client = openai(key.apiKey);
    const err = await client.audio.transcriptions
      .create({
        model: 'gpt-4o-transcribe',
        file: await toFile(forgeWavByteRate(audioFixture('pcm16.wav'), 1000), 'pcm16.wav'),
      })
      .catch((e) => e);
    expect(err).toMatchObject({ status: 400, code: 'audio_length_mismatch' });
    await free(key.accountId);
    // The ADPCM WAV's header claims 0.0015 s: held for 1 s (20,540,000 nano) the usage below would
    // be cut to that. Held for its 25-s bound (26,300,000 nano), the whole usage is charged:
    // 1,000 audio tokens x $6 + 2,000 output tokens x $10, per 1M = 26,000,000 nano.
    const { response } = await client.audio.transcriptions
      .create({
        model: 'gpt-4o-transcribe',
        file: await toFile(forgeWavByteRate(audioFixture('adpcm.wav'), 1000), 'adpcm.wav'),
        prompt: '[sim audio_tokens=1000 text_tokens=0 output_tokens=2000]',
      })
      .withResponse();
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 26_000_000n);
    expect(row).toMatchObject({ input_tokens: '1000', output_tokens: '2000', usage_estimated: 'false' });
  });

  it.each([
    [
      'audio the gateway cannot read',
      400,
      'file',
      { model: 'whisper' },
      ['file', Buffer.from('this is not audio at all'), 'a.wav'],
    ],
    ['an empty file', 400, 'file', { model: 'whisper' }, ['file', Buffer.alloc(0), 'a.wav']],
    ['no file', 400, 'file', { model: 'whisper' }, undefined],
    ['a file under another name', 400, 'audio', { model: 'whisper' }, ['audio', wav(8000), 'a.wav']],
    [
      'a format the model lacks',
      400,
      'response_format',
      { model: 'gpt-4o-transcribe', response_format: 'srt' },
      ['file', wav(8000), 'a.wav'],
    ],
    ['a chat model', 400, 'model', { model: 'gpt-4o-mini' }, ['file', wav(8000), 'a.wav']],
  ] as const)('%s -> %d on %s, free', async (_name, status, param, fields, file) => {
    const key = await newKey('5');
    const res = await fetch(`${gatewayUrl()}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: formOf(fields, file as never),
    });
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });
});

describe('speech', () => {
  it('binary audio streamed back with its content type, billed per character', async () => {
    const key = await newKey('5');
    const response = await openai(key.apiKey).audio.speech.create({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'x'.repeat(1000),
    });
    expect(response.headers.get('content-type')).toBe('audio/mpeg');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.subarray(0, 3).toString('latin1')).toBe('ID3');
    expect(bytes.length).toBe(20 + 80 * 417);
    // 1,000 characters x $12 / 1M = $0.012
    expect(response.headers.get('x-gateway-cost-nano-usd')).toBe('12000000');
    const row = await charged(key.accountId, response.headers.get('x-request-id'), 12_000_000n);
    expect(row).toMatchObject({ units: '1000', unit: 'characters' });
  });

  it('characters, not bytes or UTF-16 units: "héllo 👋" is 7', async () => {
    const key = await newKey('5');
    const response = await openai(key.apiKey).audio.speech.create({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'héllo 👋',
      response_format: 'wav',
    });
    expect(response.headers.get('content-type')).toBe('audio/wav');
    expect(
      Buffer.from(await response.arrayBuffer())
        .subarray(0, 4)
        .toString('latin1'),
    ).toBe('RIFF');
    await charged(key.accountId, response.headers.get('x-request-id'), 84_000n);
  });

  it('audio broken off by the upstream is not charged', async () => {
    const key = await newKey('5');
    const response = await openai(key.apiKey).audio.speech.create({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'cut [sim fault=reset after=2]',
    });
    await expect(response.arrayBuffer()).rejects.toThrow();
    for (let i = 0; i < 50 && !(await usageRow(response.headers.get('x-request-id')!)); i++)
      await new Promise((r) => setTimeout(r, 20));
    expect((await usageRow(response.headers.get('x-request-id')!))?.status).toBe('upstream_cut');
    await free(key.accountId);
  });

  it.each([
    [{ model: 'gpt-4o-mini-tts', voice: 'alloy' }, 'input'],
    [{ model: 'gpt-4o-mini-tts', input: 'x' }, 'voice'],
    [{ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'x'.repeat(4097) }, 'input'],
    [{ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'x', response_format: 'midi' }, 'response_format'],
    [{ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'x', speed: 9 }, 'speed'],
    [{ model: 'whisper', voice: 'alloy', input: 'x' }, 'model'],
  ])('bad request %j -> 400 on %s, free', async (body, param) => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .audio.speech.create(body as never)
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.param).toBe(param);
    await free(key.accountId);
  });
});

describe('upstream failure on each media route costs nothing', () => {
  const calls: [string, (c: OpenAI) => Promise<unknown>][] = [
    ['embeddings', (c) => c.embeddings.create({ model: 'text-embedding-3-small', input: 'x [sim fault=500]' })],
    [
      'embeddings (Cohere)',
      (c) => c.embeddings.create({ model: 'Cohere-embed-v3-multilingual', input: 'x [sim fault=500]' }),
    ],
    ['images', (c) => c.images.generate({ model: 'gpt-image-2', prompt: 'x [sim fault=500]' })],
    ['images (FLUX)', (c) => c.images.generate({ model: 'FLUX.2-pro', prompt: 'x [sim fault=500]' })],
    [
      'image edits',
      async (c) =>
        c.images.edit({ model: 'gpt-image-2', image: await toFile(png(8, 8), 'a.png'), prompt: 'x [sim fault=500]' }),
    ],
    [
      'transcriptions',
      async (c) =>
        c.audio.transcriptions.create({
          model: 'whisper',
          file: await toFile(wav(8000), 'a.wav'),
          prompt: '[sim fault=500]',
        }),
    ],
    ['speech', (c) => c.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'x [sim fault=500]' })],
  ];
  it.each(calls)('%s: 5xx after retries, balance untouched, the usage row says so', async (_name, call) => {
    const key = await newKey('5');
    const err = (await call(openai(key.apiKey)).catch((e) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(500);
    await free(key.accountId);
    const activity = await accountActivity(key.accountId);
    expect(activity).toEqual({ holds: 1, charges: 0, usage: 1 });
  });

  it('the upstream 400 (a refused prompt) reaches the caller as the upstream said it, free', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .images.generate({ model: 'gpt-image-2', prompt: 'x [sim fault=400]' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.code).toBe('moderation_blocked');
    await free(key.accountId);
  });

  it('402 when the balance cannot cover a fixed-price request, nothing held', async () => {
    const key = await newKey('0.01');
    const err = await openai(key.apiKey)
      .audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'x'.repeat(1000) })
      .catch((e) => e);
    expect(err.status).toBe(402);
    expect(await balanceOf(key.accountId)).toEqual({ balance: 10_000_000n, held: 0n });
  });
});

function formOf(fields: Record<string, string>, file?: readonly [string, Buffer, string]): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (file) f.append(file[0], new Blob([file[1]]), file[2]);
  return f;
}
