// Who may do what, and nothing held before the caller is known: tried as an attacker would,
// against gateways started as operators start them (`npm start` defaults, or the RPC port
// opened with ADMIN_TOKEN). Every refusal here happens before the gateway reads the body, so a
// stranger costs neither memory nor CPU.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Code, ConnectError, createClient, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { InferenceService } from '../../src/gen/gateway/v1/inference_pb.js';
import { generateKey } from '../../src/billing/keys.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';
import { gatewayUrl, newKey, simulatorUrl, uniqueMarker } from '../support/context.ts';
import { png } from '../support/media-files.ts';
import { FakeTelegram, textsOf, tgUser } from '../support/fake-telegram.ts';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { networkTransport, startBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';
const MB = 1024 * 1024;

/** An address of this machine that is not loopback: what a caller elsewhere on the network reaches. */
function networkAddress(): string {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  throw new Error('this machine has no non-loopback IPv4 address to test from');
}

const noVideo = async () => ({
  VIDEO_WORKER: '0',
  TEMPORAL_CLI: '/nonexistent/temporal',
  TEMPORAL_DEV_PORT: String(await freePort()),
});
const logFile = (name: string) => path.join(inject('workDir'), `${name}-${uniqueMarker()}.log`);
const baseEnv = () => ({
  DATABASE_URL: inject('databaseUrl'),
  OPENAI_API_KEY: UPSTREAM_KEY,
  OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
  ADMIN_TOKEN: '',
  METRICS_TOKEN: '',
  LOG_LEVEL: 'info',
});

/** The gateway's own memory figures (kB): resident now, and the highest it has been. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/**
 * Sends a request's headers and the first bytes of a body that never comes: resolves with the
 * answer only if the gateway answers without the body (otherwise the test times out).
 */
function answerWithoutBody(
  url: string,
  headers: Record<string, string>,
  declaredLength: number,
  first: Buffer | string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { ...headers, 'content-length': String(declaredLength) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode!, headers: res.headers, text });
        });
      },
    );
    req.on('error', reject);
    req.write(first);
  });
}

/**
 * An RPC call over HTTP/2 whose gRPC message declares `declared` bytes, of which only the first
 * `sent` are sent: resolves with the grpc-status only if the gateway answers before the message
 * is complete.
 */
function grpcStatusWithoutMessage(
  rpcUrl: string,
  method: string,
  headers: Record<string, string>,
  declared: number,
  sent: number,
): Promise<{ status: number; message: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(rpcUrl);
    session.on('error', reject);
    const stream = session.request({
      ':method': 'POST',
      ':path': method,
      'content-type': 'application/grpc+proto',
      te: 'trailers',
      ...headers,
    });
    const done = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] === undefined) return;
      resolve({ status: Number(h['grpc-status']), message: decodeURIComponent(String(h['grpc-message'] ?? '')) });
      session.destroy();
    };
    stream.on('response', done);
    stream.on('trailers', done);
    stream.on('error', () => {}); // the server may reset the upload once it has answered
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(declared, 1);
    stream.write(prefix);
    stream.write(Buffer.alloc(sent, 0x61));
  });
}

/** A multipart body of `files` files of `fileBytes` each, generated as it is sent. */
async function* multipartBody(boundary: string, files: number, fileBytes: number): AsyncGenerator<Buffer> {
  const chunk = Buffer.alloc(MB, 0x7a);
  yield Buffer.from(
    `--${boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\ngpt-image-1-mini\r\n--${boundary}\r\ncontent-disposition: form-data; name="prompt"\r\n\r\nmake it blue\r\n`,
  );
  for (let f = 0; f < files; f++) {
    yield Buffer.from(
      `--${boundary}\r\ncontent-disposition: form-data; name="image[]"; filename="f${f}.png"\r\ncontent-type: image/png\r\n\r\n`,
    );
    for (let left = fileBytes; left > 0; left -= chunk.length)
      yield left >= chunk.length ? chunk : chunk.subarray(0, left);
    yield Buffer.from('\r\n');
  }
  yield Buffer.from(`--${boundary}--\r\n`);
}

/** Streams a multipart upload to `url`; stops sending once the gateway has answered. */
function upload(
  url: string,
  headers: Record<string, string>,
  files: number,
  fileBytes: number,
  opts: { contentLength: boolean },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const boundary = `b${uniqueMarker()}`;
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const lengthOf = () => {
      let n = Buffer.byteLength(
        `--${boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\ngpt-image-1-mini\r\n--${boundary}\r\ncontent-disposition: form-data; name="prompt"\r\n\r\nmake it blue\r\n`,
      );
      for (let f = 0; f < files; f++)
        n +=
          Buffer.byteLength(
            `--${boundary}\r\ncontent-disposition: form-data; name="image[]"; filename="f${f}.png"\r\ncontent-type: image/png\r\n\r\n`,
          ) +
          fileBytes +
          2;
      return n + Buffer.byteLength(`--${boundary}--\r\n`);
    };
    const total = lengthOf();
    let answered = false;
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: {
          ...headers,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          ...(opts.contentLength ? { 'content-length': String(total) } : {}),
        },
      },
      (res) => {
        answered = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode!, headers: res.headers, text });
        });
      },
    );
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    (async () => {
      for await (const part of multipartBody(boundary, files, fileBytes)) {
        if (answered || req.destroyed) return;
        if (!req.write(part)) await new Promise((r) => req.once('drain', r));
      }
      req.end();
    })().catch(() => {});
  });
}

const simRequestsSince = async (since: number, pathPrefix: string) =>
  ((await (await fetch(`${simulatorUrl()}/__sim/requests?since=${since}`)).json()) as { path: string }[]).filter((r) =>
    r.path.startsWith(pathPrefix),
  );

const withToken = (token: string): Interceptor[] => [
  (next) => (req) => {
    req.header.set('authorization', `Bearer ${token}`);
    return next(req);
  },
];

const codeOf = async (p: Promise<unknown>) =>
  ConnectError.from(
    await p.then(
      () => undefined,
      (e: unknown) => e,
    ),
  ).code;

describe('the RPC port is safe by default', () => {
  let gw: GatewayProcess;
  beforeAll(async () => {
    // `npm start` as a newcomer runs it: no GRPC_HOST, no ADMIN_TOKEN; only a metrics token set.
    gw = await startGatewayProcess({
      logFile: logFile('default-exposure'),
      env: {
        ...baseEnv(),
        ...(await noVideo()),
        GRPC_HOST: '',
        HOST: '0.0.0.0',
        METRICS_TOKEN: 'metrics-secret-token',
      },
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('listens on loopback: reachable from this machine, refused from the network', async () => {
    const port = Number(new URL(gw.rpcUrl).port);
    const connects = (host: string) =>
      new Promise<boolean>((resolve) => {
        const s = net.connect({ host, port }, () => {
          s.destroy();
          resolve(true);
        });
        s.on('error', () => resolve(false));
      });
    expect(await connects('127.0.0.1')).toBe(true);
    expect(await connects(networkAddress())).toBe(false);
    // Billing works from here without a token, as the CLI and `npm run bot` use it.
    const billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
    expect((await billing.createKey({ creditsNano: 1n })).apiKey).toMatch(/^prx-/);
  });

  it('says in one structured startup line what is exposed where', () => {
    const line = fs
      .readFileSync(gw.logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('"exposure"'));
    expect(line).toBeDefined();
    const { exposure, msg } = JSON.parse(line!) as { exposure: Record<string, Record<string, unknown>>; msg: string };
    expect(exposure.rpc).toMatchObject({
      host: '127.0.0.1',
      port: Number(new URL(gw.rpcUrl).port),
      reach: 'this machine',
      admin: 'loopback callers only',
      inference: 'gateway key',
    });
    expect(exposure.http).toMatchObject({
      host: '0.0.0.0',
      port: Number(new URL(gw.httpUrl).port),
      reach: 'the network',
      metrics: 'token',
    });
    expect(msg).toContain('RPC on 127.0.0.1');
  });

  it('a model whose provider is not configured is a 400 that names no setting (error bodies carry no configuration)', async () => {
    const k = await newKey('1');
    for (const [route, body] of [
      ['/v1/chat/completions', { model: 'grok-4', messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/messages', { model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/embeddings', { model: 'Cohere-embed-v3-multilingual', input: 'hi' }],
    ] as const) {
      const r = await fetch(`${gw.httpUrl}${route}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${k.apiKey}`,
          'content-type': 'application/json',
          'anthropic-version': '2023-06-01',
        },
        body: JSON.stringify(body),
      });
      const text = await r.text();
      expect(r.status, route).toBe(400);
      expect(text, route).toMatch(/not available on this gateway right now: its provider is not configured/);
      expect(text, route).not.toMatch(/API_KEY|BASE_URL|XAI|ANTHROPIC_|COHERE_/);
    }
  });

  it('GET /metrics with METRICS_TOKEN: the token is required, from anywhere', async () => {
    const url = `http://${networkAddress()}:${new URL(gw.httpUrl).port}/metrics`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: 'Bearer metrics-secret-tokeX' } })).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: 'Bearer metrics-secret-token-and-more' } })).status).toBe(401);
    const ok = await fetch(url, { headers: { authorization: 'Bearer metrics-secret-token' } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('gateway_requests_total');
  });

  it('refuses to start with a network RPC address and no ADMIN_TOKEN, saying what to set', {
    timeout: 120_000,
  }, async () => {
    const setups = [
      { GRPC_HOST: '0.0.0.0' },
      { GRPC_HOST: '::' },
      { GRPC_HOST: networkAddress() },
      { GRPC_HOST: '0.0.0.0', ADMIN_TOKEN: 'short' },
    ];
    await Promise.all(
      setups.map(async (env) => {
        const err = await startGatewayProcess({
          logFile: logFile('refused'),
          env: { ...baseEnv(), ...(await noVideo()), ...env },
        }).then(
          () => undefined,
          (e: Error) => e,
        );
        expect(err?.message, JSON.stringify(env)).toMatch(/gateway exited with 1/);
        expect(err!.message).toMatch(/ADMIN_TOKEN/);
        expect(err!.message).toMatch(/gateway refused to start/);
      }),
    );
  });

  it('npm run worker starts with GRPC_HOST public and no ADMIN_TOKEN: it serves no RPC', {
    timeout: 120_000,
  }, async () => {
    const file = logFile('worker');
    const out = fs.openSync(file, 'a');
    const child = spawn(process.execPath, ['src/process/worker-main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', out, out],
      detached: true,
      env: {
        ...process.env,
        ...baseEnv(),
        GRPC_HOST: '0.0.0.0',
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        VIDEO_TASK_QUEUE: `access-${uniqueMarker()}`,
        VIDEO_DIR: path.join(inject('workDir'), 'access-videos'),
      },
    });
    fs.closeSync(out);
    try {
      for (;;) {
        const log = fs.readFileSync(file, 'utf8');
        if (log.includes('video worker polling task queue')) break;
        if (child.exitCode !== null) throw new Error(`worker exited: ${log.slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        child.kill('SIGTERM');
      }
    }
  });
});

describe('an RPC port opened to the network with ADMIN_TOKEN', () => {
  let gw: GatewayProcess;
  let fromNetwork: string; // the RPC port's URL as a caller elsewhere on the network sees it
  const billingAt = (
    baseUrl: string,
    transport: (o: { baseUrl: string; interceptors?: Interceptor[] }) => Transport,
    token?: string,
  ) => createClient(BillingService, transport({ baseUrl, ...(token ? { interceptors: withToken(token) } : {}) }));
  const transports = {
    grpc: (o: { baseUrl: string; interceptors?: Interceptor[] }) => createGrpcTransport(o),
    'grpc-web': (o: { baseUrl: string; interceptors?: Interceptor[] }) =>
      createGrpcWebTransport({ ...o, httpVersion: '2' }),
    connect: (o: { baseUrl: string; interceptors?: Interceptor[] }) =>
      createConnectTransport({ ...o, httpVersion: '2' }),
  };

  beforeAll(async () => {
    gw = await startGatewayProcess({
      logFile: logFile('open-rpc'),
      env: {
        ...baseEnv(),
        ...(await noVideo()),
        HOST: '0.0.0.0',
        GRPC_HOST: '0.0.0.0',
        ADMIN_TOKEN,
        UPLOAD_LIMIT_BYTES: String(16 * MB),
        UPLOAD_TOTAL_LIMIT_BYTES: String(24 * MB),
      },
    });
    fromNetwork = `http://${networkAddress()}:${new URL(gw.rpcUrl).port}`;
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('Billing and Catalogue need the token from everywhere, in every protocol; with it they work', async () => {
    for (const [name, transport] of Object.entries(transports)) {
      for (const baseUrl of [gw.rpcUrl, fromNetwork]) {
        const where = `${name} ${baseUrl}`;
        expect(
          await codeOf(billingAt(baseUrl, transport).createKey({ creditsNano: 1_000_000_000_000_000n })),
          where,
        ).toBe(Code.Unauthenticated);
        expect(
          await codeOf(billingAt(baseUrl, transport, `${ADMIN_TOKEN}x`).listKeys({ owner: 'telegram:1' })),
          where,
        ).toBe(Code.Unauthenticated);
        expect(
          await codeOf(billingAt(baseUrl, transport, ADMIN_TOKEN.slice(0, -1)).listKeys({ owner: 'telegram:1' })),
          where,
        ).toBe(Code.Unauthenticated);
        expect(await codeOf(createClient(CatalogueService, transport({ baseUrl })).listModels({})), where).toBe(
          Code.Unauthenticated,
        );
        const created = await billingAt(baseUrl, transport, ADMIN_TOKEN).createKey({
          creditsNano: 5n,
          label: 'access',
        });
        expect(created.balanceNano, where).toBe(5n);
        expect(
          (
            await createClient(
              CatalogueService,
              transport({ baseUrl, interceptors: withToken(ADMIN_TOKEN) }),
            ).listModels({})
          ).models.length,
          where,
        ).toBeGreaterThan(0);
      }
    }
  });

  it("Inference takes the caller's own key (no admin token); a forged key is refused, streams too", async () => {
    const key = await newKey('1');
    for (const [name, transport] of Object.entries(transports)) {
      const asCaller = (apiKey: string) =>
        createClient(
          InferenceService,
          transport({
            baseUrl: fromNetwork,
            interceptors: [
              (next) => (req) => {
                req.header.set('authorization', `Bearer ${apiKey}`);
                return next(req);
              },
            ],
          }),
        );
      const body = new TextEncoder().encode(
        JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] }),
      );
      const r = await asCaller(key.apiKey).chatCompletion({ body });
      expect(r.charge?.costNano, name).toBeGreaterThan(0n);
      expect(await codeOf(asCaller(generateKey()).chatCompletion({ body })), name).toBe(Code.Unauthenticated);
      const stream = asCaller(generateKey()).streamChatCompletion({
        body: new TextEncoder().encode(
          JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
        ),
      });
      expect(
        await codeOf(
          (async () => {
            for await (const _ of stream) {
              /* nothing arrives */
            }
          })(),
        ),
        name,
      ).toBe(Code.Unauthenticated);
    }
  });

  it('a 600 MB message is refused from its first bytes: without the token, with a forged key, and with the token (read limit)', async () => {
    const declared = 600 * MB;
    const billingCall = '/gateway.v1.BillingService/CreateKey';
    expect(await grpcStatusWithoutMessage(gw.rpcUrl, billingCall, {}, declared, 64 * 1024)).toMatchObject({
      status: Code.Unauthenticated,
    });
    expect(
      await grpcStatusWithoutMessage(
        gw.rpcUrl,
        '/gateway.v1.InferenceService/EditImage',
        { authorization: `Bearer ${generateKey()}` },
        declared,
        64 * 1024,
      ),
    ).toMatchObject({
      status: Code.Unauthenticated,
    });
    // With the token (or a live key) the message is read, but never past the limit: one
    // request's largest body or upload.
    const tooBig = await grpcStatusWithoutMessage(
      gw.rpcUrl,
      billingCall,
      { authorization: `Bearer ${ADMIN_TOKEN}` },
      declared,
      64 * 1024,
    );
    expect(tooBig.status).toBe(Code.ResourceExhausted);
    const key = await newKey('1');
    expect(
      (
        await grpcStatusWithoutMessage(
          gw.rpcUrl,
          '/gateway.v1.InferenceService/EditImage',
          { authorization: `Bearer ${key.apiKey}` },
          declared,
          64 * 1024,
        )
      ).status,
    ).toBe(Code.ResourceExhausted);
  });

  it("forged-key uploads are refused unread: 256 MB sent, the gateway's peak memory barely moves, nothing goes upstream", async () => {
    const since = Date.now();
    const before = memoryOf(gw.child.pid!);
    const url = `${gw.httpUrl}/v1/images/edits`;
    // Two uploads of 8 files x 16 MB at once, each under the per-file limit, with keys that pass the public checksum.
    const results = await Promise.all(
      [0, 1].map(() => upload(url, { authorization: `Bearer ${generateKey()}` }, 8, 16 * MB, { contentLength: true })),
    );
    for (const r of results) {
      expect(r.status).toBe(401);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'invalid_api_key' } });
      expect(r.headers['x-gateway-cost-nano-usd']).toBe('0');
      expect(r.headers['x-request-id']).toMatch(/^req_/);
    }
    const after = memoryOf(gw.child.pid!);
    // Reading them would have taken 256 MB; refused unread, the peak grows by a few MB at most.
    expect((after.peak - before.peak) / 1024).toBeLessThan(48);
    expect(await simRequestsSince(since, '/v1/images')).toEqual([]);
  });

  it("a key holder's upload is capped per request (UPLOAD_TOTAL_LIMIT_BYTES): 413 with the cost header, declared or counted", async () => {
    const key = await newKey('1');
    const since = Date.now();
    for (const contentLength of [true, false]) {
      // Two 15 MB files: each under the 16 MB file limit, together over the 24 MB request limit.
      const r = await upload(`${gw.httpUrl}/v1/images/edits`, { authorization: `Bearer ${key.apiKey}` }, 2, 15 * MB, {
        contentLength,
      });
      expect(r.status, `content-length: ${contentLength}`).toBe(413);
      expect(JSON.parse(r.text)).toMatchObject({
        error: { code: 'request_too_large', message: expect.stringContaining(String(24 * MB)) },
      });
      expect(r.headers['x-gateway-cost-nano-usd']).toBe('0');
      expect(r.headers['x-request-id']).toMatch(/^req_/);
    }
    expect(await simRequestsSince(since, '/v1/images')).toEqual([]);
    // Under the cap it goes through.
    const form = new FormData();
    form.append('model', 'gpt-image-1-mini');
    form.append('prompt', 'blue');
    form.append('image', new Blob([png(64, 64)], { type: 'image/png' }), 'a.png');
    const ok = await fetch(`${gw.httpUrl}/v1/images/edits`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}` },
      body: form,
    });
    expect(ok.status).toBe(200);
  });

  it('GET /metrics without METRICS_TOKEN answers this machine only', async () => {
    expect((await fetch(`${gw.httpUrl}/metrics`)).status).toBe(200);
    const remote = await fetch(`http://${networkAddress()}:${new URL(gw.httpUrl).port}/metrics`);
    expect(remote.status).toBe(403);
    expect(await remote.text()).toContain('METRICS_TOKEN');
  });

  it('the operator CLI works with ADMIN_TOKEN, and fails clearly without it', { timeout: 120_000 }, async () => {
    const cli = (env: Record<string, string>, ...args: string[]) =>
      promisify(execFile)(process.execPath, ['src/cli/main.ts', ...args], {
        cwd: ROOT,
        env: { ...process.env, GATEWAY_RPC_URL: fromNetwork, ADMIN_TOKEN: '', ...env },
      });
    const { stdout } = await cli({ ADMIN_TOKEN }, 'keys', 'create', '--credits', '0.25');
    const created = stdout.trim();
    expect(created).toMatch(/^prx-/);
    expect((await cli({ ADMIN_TOKEN }, 'keys', 'balance', created, '--json')).stdout).toContain(
      '"balance_nano":"250000000"',
    );
    const refused = await cli({}, 'keys', 'balance', created).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(refused?.code).toBe(1);
    expect(refused!.stderr).toMatch(/requires ADMIN_TOKEN/);
  });

  it('npm run bot (the bot alone) works over the network with ADMIN_TOKEN, and is refused without it', {
    timeout: 60_000,
  }, async () => {
    const user = tgUser(700_000 + Math.floor(Math.random() * 1_000_000), 'Olga');
    for (const token of [ADMIN_TOKEN, undefined]) {
      const fake = await FakeTelegram.start();
      const config = loadBotConfig({
        TELEGRAM_BOT_TOKEN: '123:ACCESS',
        TELEGRAM_API_ROOT: fake.url,
        PUBLIC_BASE_URL: gw.httpUrl,
      })!;
      const bot = await startBot({
        config,
        transport: networkTransport(fromNetwork, token),
        log: createLogger('silent'),
      });
      try {
        const text = textsOf(await fake.deliver(fake.text(user, '/newkey')));
        if (token) expect(text).toMatch(/<code>prx-[0-9A-Za-z]+<\/code>/);
        else expect(text).toContain('something went wrong');
      } finally {
        await bot.stop();
        await fake.close();
      }
    }
  });

  it('says in its startup line that the RPC port is open to the network, with a token', () => {
    const line = fs
      .readFileSync(gw.logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('"exposure"'))!;
    expect(JSON.parse(line).exposure).toMatchObject({
      http: { host: '0.0.0.0', reach: 'the network', metrics: 'loopback callers only' },
      rpc: { host: '0.0.0.0', reach: 'the network', admin: 'token', inference: 'gateway key' },
    });
  });
});

describe('HTTP routes answer a stranger before reading the body', () => {
  const routes: [string, 'openai' | 'anthropic', string][] = [
    ['/v1/chat/completions', 'openai', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"'],
    ['/v1/messages', 'anthropic', '{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"'],
    ['/v1/messages/count_tokens', 'anthropic', '{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"'],
    ['/v1/responses', 'openai', '{"model":"gpt-4o-mini","input":"'],
    // A huge input would go through the tokenizer before any key check if the body were read.
    ['/v1/embeddings', 'openai', '{"model":"text-embedding-3-small","input":"'],
    ['/v1/images/generations', 'openai', '{"model":"gpt-image-1-mini","prompt":"'],
    ['/v1/audio/speech', 'openai', '{"model":"gpt-4o-mini-tts","voice":"alloy","input":"'],
    ['/v1/videos', 'openai', '{"model":"sora-2","seconds":"4","size":"1280x720","prompt":"'],
    ['/v1/videos/generations', 'openai', '{"model":"sora-2","seconds":4,"size":"1280x720","prompt":"'],
  ];
  it.each(routes)(
    '%s: 401 in its own shape, with cost 0 and a request id, while the body is still on its way',
    async (route, shape, start) => {
      for (const headers of [
        { authorization: `Bearer ${generateKey()}` },
        { 'x-api-key': generateKey() },
        {},
      ] as Record<string, string>[]) {
        const r = await answerWithoutBody(
          `${gatewayUrl()}${route}`,
          { 'content-type': 'application/json', ...headers },
          200 * 1024,
          start + 'x'.repeat(4096),
        );
        expect(r.status).toBe(401);
        expect(r.headers['x-gateway-cost-nano-usd']).toBe('0');
        expect(r.headers['x-request-id']).toMatch(/^req_/);
        const body = JSON.parse(r.text);
        if (shape === 'anthropic')
          expect(body).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
        else expect(body).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error' } });
      }
    },
  );

  it('unknown routes and public routes that take no body answer 404 before reading one', async () => {
    for (const route of ['/v1/nothing-here', '/anything', '/v1/models', '/healthz', '/metrics']) {
      const r = await answerWithoutBody(
        `${gatewayUrl()}${route}`,
        { 'content-type': 'application/json' },
        200 * 1024,
        '{"pad":"' + 'x'.repeat(4096),
      );
      expect(r.status, route).toBe(404);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'unknown_route' } });
    }
  });

  it('multipart routes too: a forged key gets 401 before any part is read', async () => {
    for (const route of ['/v1/images/edits', '/v1/audio/transcriptions']) {
      const r = await answerWithoutBody(
        `${gatewayUrl()}${route}`,
        { 'content-type': 'multipart/form-data; boundary=xyz', authorization: `Bearer ${generateKey()}` },
        20 * MB,
        '--xyz\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF',
      );
      expect(r.status, route).toBe(401);
      expect(r.headers['x-gateway-cost-nano-usd']).toBe('0');
    }
  });
});

describe('refusals say what they cost (nothing) and which request they were', () => {
  it('413 over the JSON body limit, on OpenAI and Anthropic routes', async () => {
    const key = await newKey('1');
    for (const route of ['/v1/chat/completions', '/v1/messages', '/v1/embeddings']) {
      const r = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const u = new URL(`${gatewayUrl()}${route}`);
        const req = http.request(
          {
            host: u.hostname,
            port: u.port,
            path: u.pathname,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              authorization: `Bearer ${key.apiKey}`,
              'content-length': String(400 * 1024),
            },
          },
          (res) => {
            res.resume();
            resolve(res);
            req.destroy();
          },
        );
        req.on('error', reject);
        req.write('{"model":"x","input":"');
      });
      expect(r.statusCode, route).toBe(413);
      expect(r.headers['x-gateway-cost-nano-usd'], route).toBe('0');
      expect(r.headers['x-request-id'], route).toMatch(/^req_/);
    }
  });

  it('multipart refusals: not multipart (400), a malformed form (400), a file over the limit (413)', async () => {
    const key = await newKey('1');
    const auth = { authorization: `Bearer ${key.apiKey}` };
    const notMultipart = await fetch(`${gatewayUrl()}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{}',
    });
    const malformed = await fetch(`${gatewayUrl()}/v1/images/edits`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'multipart/form-data; boundary=q' },
      body: '--q\r\ncontent-disposition: form-data; name="model"\r\n\r\ngpt',
    });
    const form = new FormData();
    form.append('model', 'whisper');
    form.append('file', new Blob([Buffer.alloc(2 * MB)]), 'big.wav');
    const tooBig = await fetch(`${gatewayUrl()}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: auth,
      body: form,
    });
    for (const [r, status] of [
      [notMultipart, 400],
      [malformed, 400],
      [tooBig, 413],
    ] as const) {
      expect(r.status).toBe(status);
      expect(r.headers.get('x-gateway-cost-nano-usd')).toBe('0');
      expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    }
  });

  it('answers with no charge of their own carry 0 too: count_tokens, a video that is not there', async () => {
    const key = await newKey('1');
    const count = await fetch(`${gatewayUrl()}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'x-api-key': key.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(count.status).toBe(200);
    expect(count.headers.get('x-gateway-cost-nano-usd')).toBe('0');
    const missing = await fetch(`${gatewayUrl()}/v1/videos/video_nope/content?variant=thumbnail`, {
      headers: { authorization: `Bearer ${key.apiKey}` },
    });
    expect(missing.status).toBe(400);
    expect(missing.headers.get('x-gateway-cost-nano-usd')).toBe('0');
    expect(missing.headers.get('x-request-id')).toMatch(/^req_/);
  });
});
