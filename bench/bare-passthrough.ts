// The floor the benchmark compares against: a bare Fastify + undici pass-through with no
// auth, billing, metrics or logging. It forwards each POST to the upstream simulator with the
// upstream key and streams the answer back. Prints its URL on stdout.
import Fastify from 'fastify';
import { Agent, request } from 'undici';

const upstream = process.env.UPSTREAM_URL!;
const auth = `Bearer ${process.env.UPSTREAM_KEY}`;
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 512 });
const app = Fastify();
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
app.post('/*', async (req, reply) => {
  const r = await request(upstream + req.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: auth },
    body: req.body as Buffer,
    dispatcher: agent,
  });
  reply.code(r.statusCode).header('content-type', r.headers['content-type'] ?? 'application/json');
  return reply.send(r.body);
});
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as { port: number };
process.stdout.write(`http://127.0.0.1:${port}\n`);
process.on('SIGTERM', () => {
  app.close().finally(() => process.exit(0));
});
