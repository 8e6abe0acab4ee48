// The video API's error answers as the activities' failures (src/video/upstream.ts), against a
// local HTTP server standing for the provider: its words are kept without the credential it
// quoted (the failure's message reaches the caller, the job's row and Temporal's history), and a
// redirect is the provider's fault (a 502 to the caller), not a refusal of the caller's request.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import { VideoUpstream, statusOf, type VideoTarget } from '../../../src/video/upstream.ts';
import { setSecrets } from '../../../src/secrets/scrub.ts';
import { describeFailure } from '../../../workflows/video-errors.ts';
import { FAILURE } from '../../../workflows/video-types.ts';
import { failureHttpStatus } from '../../../src/video/wire.ts';

const KEY = 'sk-video-Ab/Cd+Ef=0123456789';
let server: http.Server;
let answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = () => {};
let provider: VideoTarget;
const upstream = new VideoUpstream({ connectTimeoutMs: 2_000 });
const job = { jobId: 'video_t1', model: 'sora-2', prompt: 'a cat', seconds: 4, size: '720x1280' };

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  provider = { baseUrl: `http://127.0.0.1:${port}/v1`, headers: { authorization: `Bearer ${KEY}` } };
  // As the worker does at start (secretSettings: OPENAI_API_KEY among them).
  setSecrets('instance', [KEY]);
});

afterAll(async () => {
  setSecrets('instance', []);
  await upstream.close();
  await new Promise((r) => server.close(r));
});

const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err as ApplicationFailure,
  );

describe('the video API quoting the request headers', () => {
  it("keeps the provider's words of a refusal without the key it quoted, however it quoted it", async () => {
    answer = (req, res) => {
      const message = `Invalid size; your request had authorization=${req.headers.authorization} and key ${KEY} (${encodeURIComponent(KEY)})`;
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message } }));
    };
    const err = await failureOf(upstream.create(provider, job));
    expect(err.type).toBe(FAILURE.rejected);
    expect(err.message).toContain('Invalid size; your request had authorization=Bearer [redacted]');
    expect(err.message).not.toContain(KEY);
    expect(err.message).not.toContain(encodeURIComponent(KEY));
    expect(describeFailure(err).message).not.toContain(KEY);
  });

  it('keeps the words of a failed job without the key it quoted', () => {
    const s = statusOf({ status: 'failed', error: { code: 'internal', message: `failed for key ${KEY}` } });
    expect(s.error).toEqual({ code: 'upstream_failed', message: 'failed for key [redacted]' });
  });
});

describe('a redirect from the video API', () => {
  for (const status of [301, 302, 307, 308])
    it(`(${status}) is the provider's fault: a final failure the caller gets as a 502`, async () => {
      answer = (_req, res) => res.writeHead(status, { location: 'http://127.0.0.1:9/elsewhere' }).end('moved');
      const err = await failureOf(upstream.create(provider, job));
      expect(err.type).toBe(FAILURE.unavailable);
      expect(err.nonRetryable).toBe(true);
      expect(err.message).toContain(`redirect (${status})`);
      expect(failureHttpStatus(describeFailure(err).code)).toBe(502);
    });
});
