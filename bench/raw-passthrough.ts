// Not a bench target: the floor of any Node proxy on a machine, for comparing the
// concurrency-1 figures (docs/benchmark.md, Figures). `node:http` in, undici's dispatcher out
// (no Fastify, no Readable), no auth, billing, metrics or logs; the answer is streamed through.
// UPSTREAM_URL=… UPSTREAM_KEY=… node bench/raw-passthrough.ts   (prints its URL)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';

const upstream = new URL(process.env.UPSTREAM_URL!);
const auth = `Bearer ${process.env.UPSTREAM_KEY}`;
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 512 });
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    agent.dispatch(
      { origin: upstream.origin, path: req.url!, method: 'POST', headers: { 'content-type': 'application/json', authorization: auth }, body },
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
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => {
  server.close();
  void agent.close().finally(() => process.exit(0));
});
