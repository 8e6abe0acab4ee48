// The media RPCs through @grpc/grpc-js: JSON bodies, multipart parts, and streamed speech.
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { png, wav } from '../support/media-files.ts';

const PROTO_DIR = path.resolve(import.meta.dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(['gateway/v1/billing.proto', 'gateway/v1/inference.proto'], {
  includeDirs: [PROTO_DIR],
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const pkg = grpc.loadPackageDefinition(def) as unknown as {
  gateway: { v1: Record<string, grpc.ServiceClientConstructor> };
};
const target = new URL(inject('rpcUrl')).host;
const billing = new pkg.gateway.v1.BillingService!(target, grpc.credentials.createInsecure());
const inference = new pkg.gateway.v1.InferenceService!(target, grpc.credentials.createInsecure());
afterAll(() => [billing, inference].forEach((c) => c.close()));

type Any = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
function call(client: grpc.Client, method: string, req: Any, md = new grpc.Metadata()): Promise<Any> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, Function>)[method]!.call(client, req, md, (err: Error | null, res: Any) =>
      err ? reject(err) : resolve(res),
    );
  });
}

async function keyMetadata(): Promise<grpc.Metadata> {
  const created = await call(billing, 'CreateKey', { creditsNano: '5000000000' });
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${created.apiKey}`);
  return md;
}

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const field = (name: string, value: string) => ({ name, data: Buffer.from(value) });

describe('media RPCs over gRPC', () => {
  it('CreateEmbedding and GenerateImage take the JSON body and answer with the charge', async () => {
    const md = await keyMetadata();
    const emb = await call(
      inference,
      'CreateEmbedding',
      { body: json({ model: 'text-embedding-3-small', input: 'abcdefgh', encoding_format: 'float' }) },
      md,
    );
    expect(JSON.parse(Buffer.from(emb.body).toString()).data[0].embedding).toHaveLength(1536);
    expect(emb.charge.costNano).toBe('44'); // 2 tokens x $0.022 / 1M
    const img = await call(
      inference,
      'GenerateImage',
      { body: json({ model: 'FLUX.2-pro', prompt: 'a boat', size: '512x512' }) },
      md,
    );
    expect(JSON.parse(Buffer.from(img.body).toString()).size).toBe('512x512');
    expect(img.charge).toMatchObject({ costNano: '7864320', usage: { units: '262144', unit: 'pixels' } });
  });

  it('EditImage and Transcribe take multipart parts', async () => {
    const md = await keyMetadata();
    const edit = await call(
      inference,
      'EditImage',
      {
        parts: [
          field('model', 'gpt-image-2'),
          field('prompt', 'hat'),
          { name: 'image', filename: 'a.png', contentType: 'image/png', data: png(16, 16) },
        ],
      },
      md,
    );
    expect(JSON.parse(Buffer.from(edit.body).toString()).data).toHaveLength(1);
    const text = await call(
      inference,
      'Transcribe',
      {
        parts: [
          field('model', 'whisper'),
          field('response_format', 'text'),
          { name: 'file', filename: 'a.wav', data: wav(8000 * 30) },
        ],
      },
      md,
    );
    expect(text.contentType).toBe('text/plain');
    expect(Buffer.from(text.body).toString()).toBe('hello from the simulated transcriber');
    expect(text.charge).toMatchObject({ costNano: '8500000', usage: { units: '30', unit: 'audio_seconds' } });
    const bad = await call(inference, 'Transcribe', { parts: [field('model', 'whisper')] }, md).catch((e) => e);
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('CreateSpeech streams: start, audio, charge', async () => {
    const md = await keyMetadata();
    const events: Any[] = await new Promise((resolve, reject) => {
      const out: Any[] = [];
      const s = (inference as unknown as Record<string, Function>).CreateSpeech!.call(
        inference,
        { body: json({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'hello', response_format: 'wav' }) },
        md,
      ) as grpc.ClientReadableStream<Any>;
      s.on('data', (d: Any) => out.push(d));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
    expect(events[0]).toMatchObject({ event: 'start', start: { contentType: 'audio/wav', costNano: '60000' } });
    const audio = Buffer.concat(events.filter((e) => e.event === 'audio').map((e) => Buffer.from(e.audio)));
    expect(audio.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(events.at(-1)).toMatchObject({ event: 'charge', charge: { costNano: '60000' } });
  });
});
