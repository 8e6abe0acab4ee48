// The floor of any Node proxy on a machine (the bench's optional `raw` and `raw-fastify`
// targets; docs/benchmark.md, Figures). `node:http` in, undici's dispatcher out
// (no Fastify, no Readable), no auth, billing, metrics or logs; the answer is streamed through.
// With --fastify, Fastify receives the request (its routing and body read) and the same
// dispatch forwards it: the difference between the two is what Fastify itself costs.
// UPSTREAM_URL=… UPSTREAM_KEY=… node bench/raw-passthrough.ts [--fastify]   (prints its URL)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { Agent } from 'undici';

const upstream = new URL(process.env.UPSTREAM_URL!);
const auth = `Bearer ${process.env.UPSTREAM_KEY}`;
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 512 });

function forward(path: string, body: Buffer, res: http.ServerResponse): void {
  agent.dispatch(
    {
      origin: upstream.origin,
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body,
    },
    {
      onRequestStart() {},
      onResponseStart(_c, status, headers) {
        res.writeHead(status, { 'content-type': String(headers['content-type'] ?? 'application/json') });
      },
      onResponseData(_c, chunk) {
        res.write(chunk);
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError(_c, err) {
        res.destroy(err);
      },
    },
  );
}

const printUrl = (server: http.Server) =>
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
let close: () => Promise<void>;
if (process.argv.includes('--fastify')) {
  const app = Fastify({ bodyLimit: 8 * 1024 * 1024 });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/*', (req, reply) => {
    reply.hijack();
    forward(req.url, req.body as Buffer, reply.raw);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  printUrl(app.server);
  close = () => app.close();
} else {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(req.url!, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), res));
  });
  server.listen(0, '127.0.0.1', () => printUrl(server));
  close = () => new Promise((r) => server.close(() => r()));
}
process.on('SIGTERM', () => {
  void close();
  void agent.close().finally(() => process.exit(0));
});
