// Every RPC through @grpc/grpc-js, as an internal service written in any language would call it.
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { uniqueMarker } from '../support/context.ts';

const PROTO_DIR = path.resolve(import.meta.dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(
  ['gateway/v1/billing.proto', 'gateway/v1/catalogue.proto', 'gateway/v1/inference.proto'],
  {
    includeDirs: [PROTO_DIR],
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  },
);
const pkg = grpc.loadPackageDefinition(def) as unknown as {
  gateway: { v1: Record<string, grpc.ServiceClientConstructor> };
};
const target = new URL(inject('rpcUrl')).host;
const creds = grpc.credentials.createInsecure();
const billing = new pkg.gateway.v1.BillingService!(target, creds);
const catalogue = new pkg.gateway.v1.CatalogueService!(target, creds);
const inference = new pkg.gateway.v1.InferenceService!(target, creds);
afterAll(() => [billing, catalogue, inference].forEach((c) => c.close()));

type Any = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
function call(client: grpc.Client, method: string, req: Any, md?: grpc.Metadata): Promise<Any> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, Function>)[method]!.call(
      client,
      req,
      md ?? new grpc.Metadata(),
      (err: Error | null, res: Any) => (err ? reject(err) : resolve(res)),
    );
  });
}

describe('gRPC (grpc-js) on the RPC port', () => {
  it('BillingService: create, top up, balance, rotate, revoke, list usage', async () => {
    const created = await call(billing, 'CreateKey', { creditsNano: '3000000000', label: 'grpc' });
    expect(created.apiKey).toMatch(/^prx-/);
    expect(created.balanceNano).toBe('3000000000');
    const ref = { apiKey: created.apiKey };

    const top = await call(billing, 'TopUp', {
      key: ref,
      amountNano: '500',
      externalId: uniqueMarker('ext'),
      cause: 'grpc-test',
    });
    expect(top).toMatchObject({ applied: true, balanceNano: '3000000500' });

    const bal = await call(billing, 'GetBalance', { key: ref });
    expect(bal).toMatchObject({
      balanceNano: '3000000500',
      heldNano: '0',
      availableNano: '3000000500',
      accountId: created.accountId,
    });

    // A billed request, so ListUsage has something to list.
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${created.apiKey}`);
    const body = Buffer.from(
      JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'grpc [sim tokens=4]' }] }),
    );
    const res = await call(inference, 'ChatCompletion', { body }, md);
    expect(JSON.parse(Buffer.from(res.body).toString()).choices[0].message.content).toBe('w1 w2 w3 w4');
    expect(BigInt(res.charge.costNano)).toBeGreaterThan(0n);

    const usage = await call(billing, 'ListUsage', { key: { keyId: created.keyId }, limit: 10 });
    expect(usage.records).toHaveLength(1);
    expect(usage.records[0]).toMatchObject({
      requestId: res.charge.requestId,
      model: 'gpt-4o-mini',
      costNano: res.charge.costNano,
      status: 'ok',
    });

    const rotated = await call(billing, 'RotateKey', { key: ref });
    expect(rotated.revokedKeyId).toBe(created.keyId);
    const stale = await call(billing, 'RotateKey', { key: ref }).catch((e) => e);
    expect(stale.code).toBe(grpc.status.NOT_FOUND);

    const revoked = await call(billing, 'RevokeKey', { key: { keyId: rotated.keyId } });
    expect(revoked.revoked).toBe(true);
  });

  it('CatalogueService: list and get', async () => {
    const list = await call(catalogue, 'ListModels', { kind: 'MODEL_KIND_EMBEDDING' });
    expect(list.models.map((m: Any) => m.id).sort()).toEqual([
      'Cohere-embed-v3-multilingual',
      'text-embedding-3-large',
      'text-embedding-3-small',
      'text-embedding-ada-002',
    ]);
    const one = await call(catalogue, 'GetModel', { id: 'whisper' });
    expect(one.model).toMatchObject({
      id: 'whisper',
      kind: 'MODEL_KIND_TRANSCRIPTION',
      prices: { per_audio_minute: '0.017' },
    });
    const missing = await call(catalogue, 'GetModel', { id: 'nope' }).catch((e) => e);
    expect(missing.code).toBe(grpc.status.NOT_FOUND);
  });

  it('InferenceService: a streamed completion, and a 401 as UNAUTHENTICATED', async () => {
    const created = await call(billing, 'CreateKey', { creditsNano: '1000000000' });
    const md = new grpc.Metadata();
    md.set('x-api-key', created.apiKey);
    const body = Buffer.from(
      JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'grpc stream [sim tokens=3]' }],
      }),
    );
    const events: Any[] = await new Promise((resolve, reject) => {
      const out: Any[] = [];
      const s = (inference as unknown as Record<string, Function>).StreamChatCompletion!.call(
        inference,
        { body },
        md,
      ) as grpc.ClientReadableStream<Any>;
      s.on('data', (d: Any) => out.push(d));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
    expect(events[0]!.event).toBe('requestId');
    const text = events
      .filter((e) => e.event === 'data')
      .map((e) => JSON.parse(Buffer.from(e.data.data).toString()).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe('w1 w2 w3');
    expect(events.at(-1)!.event).toBe('charge');
    expect(BigInt(events.at(-1)!.charge.costNano)).toBeGreaterThan(0n);

    const err = await call(inference, 'ChatCompletion', { body }, new grpc.Metadata()).catch((e) => e);
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
  });
});
