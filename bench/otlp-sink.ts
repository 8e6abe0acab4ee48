// The OTLP collector of the trace targets (bench/run.ts: gateway-trace-100, gateway-trace-1), in a
// process of its own so its CPU is not the gateway's: POST /v1/traces is read to its end and
// answered 200 with an empty application/x-protobuf body (an empty ExportTraceServiceResponse: all
// accepted). Nothing is decoded or kept; it counts requests and bytes, which GET /counts returns
// as JSON. A real collector's cost is its own, not the gateway's: this one is as cheap as a sink
// can be. Prints its URL on stdout.
import http from 'node:http';

let posts = 0;
let bytes = 0;
let refused = 0;

const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/v1/traces') {
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      posts++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' });
      res.end();
    });
    return;
  }
  if (req.method === 'GET' && req.url === '/counts') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ posts, bytes, refused }));
    return;
  }
  refused++;
  req.resume();
  res.writeHead(404, { 'content-length': '0' });
  res.end();
});
// The exporter keeps its connection open between batches (5 s apart when idle).
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
