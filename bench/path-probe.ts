// Where a request's time goes inside a process, at concurrency 1: preloaded with
// `node --import ./bench/path-probe.ts` into a gateway or the bare pass-through, it notes per
// request when Node's HTTP server had it, when the upstream call was made and answered (undici's
// diagnostics channels), when the first byte of the answer was handed to Node (the first write,
// or end for an unstreamed answer), and how busy the event loop was between the previous
// answer's end and this request. Each SIGUSR2 writes the medians of the requests seen since the
// previous one to PATH_PROBE_FILE and starts over. Not part of the gateway; meant for one
// request at a time (a load generator at c=1), where "the request in flight" is unambiguous.
import dc from 'node:diagnostics_channel';
import fs from 'node:fs';
import http from 'node:http';

interface Times {
  start: number;
  /** Event-loop busy time between the previous answer's end and this request's start. */
  busyBefore?: number;
  create?: number;
  headers?: number;
  first?: number;
  stream: boolean;
}

const file = process.env.PATH_PROBE_FILE;
if (file) {
  const done: Times[] = [];
  let current: Times | undefined;
  let atLastEnd: ReturnType<typeof performance.eventLoopUtilization> | undefined;
  const byResponse = new WeakMap<http.ServerResponse, Times>();
  dc.subscribe('http.server.request.start', (m) => {
    current = {
      start: performance.now(),
      stream: false,
      busyBefore: atLastEnd ? performance.eventLoopUtilization(atLastEnd).active : undefined,
    };
    byResponse.set((m as { response: http.ServerResponse }).response, current);
  });
  dc.subscribe('undici:request:create', () => {
    if (current && current.create === undefined) current.create = performance.now();
  });
  dc.subscribe('undici:request:headers', () => {
    if (current && current.headers === undefined) current.headers = performance.now();
  });
  const proto = http.ServerResponse.prototype as unknown as Record<
    'write' | 'end',
    (this: http.ServerResponse, ...a: unknown[]) => unknown
  >;
  for (const method of ['write', 'end'] as const) {
    const original = proto[method];
    proto[method] = function (this: http.ServerResponse, ...a: unknown[]) {
      const t = byResponse.get(this);
      if (t && method === 'end') atLastEnd = performance.eventLoopUtilization();
      if (t && t.first === undefined) {
        t.first = performance.now();
        t.stream = method === 'write';
        done.push(t);
      }
      return original.apply(this, a);
    };
  }
  const median = (xs: number[]) => {
    const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
    return s.length ? Math.round(s[Math.floor(s.length / 2)]! * 1000) / 1000 : null;
  };
  process.on('SIGUSR2', () => {
    const out: Record<string, unknown> = {};
    for (const stream of [true, false]) {
      const r = done.filter((t) => t.stream === stream);
      out[stream ? 'streamed' : 'unstreamed'] = {
        requests: r.length,
        toUpstreamCallMs: median(r.map((t) => (t.create ?? Number.NaN) - t.start)),
        upstreamCallToHeadersMs: median(r.map((t) => (t.headers ?? Number.NaN) - (t.create ?? Number.NaN))),
        headersToFirstByteMs: median(r.map((t) => t.first! - (t.headers ?? Number.NaN))),
        toFirstByteMs: median(r.map((t) => t.first! - t.start)),
        // The previous request's work after its answer ended (logs, settling, clean-up) and the
        // parsing of this one: at concurrency 1, what runs before this request is even seen.
        busyBeforeStartMs: median(r.map((t) => t.busyBefore ?? Number.NaN)),
      };
    }
    fs.writeFileSync(file, JSON.stringify(out));
    done.length = 0;
  });
}
