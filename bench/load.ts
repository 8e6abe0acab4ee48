// The load: wrk's runs (requests per second, latency) and the probe that times a stream's events.
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { NICE, ROOT, STREAM, state } from './options.ts';
import type { Running } from './targets.ts';

export interface WrkResult {
  requests: number;
  durationS: number;
  rps: number;
  errors: number;
  p50: number;
  p75: number;
  p90: number;
  p99: number;
  max: number; // ms
  wrkCpuMs: number;
}

/** wrk, one thread, `connections` connections, for `seconds`; POSTs `body` with the target's headers. */
export async function wrk(
  t: Running,
  pathname: string,
  body: string,
  connections: number,
  seconds: number,
): Promise<WrkResult> {
  const headers = Object.entries(t.headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');
  const args = [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--timeout',
    '5s',
    '-s',
    path.join(ROOT, 'bench', 'wrk', 'post.lua'),
    t.url + pathname,
  ];
  // bash's `times` gives wrk's own CPU (the load generator must stay far below the targets').
  const child = spawn(
    NICE ? 'nice' : 'bash',
    [...(NICE ? ['-n', String(NICE), 'bash'] : []), '-c', '"$0" "$@"; rc=$?; times >&2; exit $rc', state.wrk, ...args],
    {
      env: { ...process.env, WRK_BODY: body, WRK_HEADERS: headers },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const json = out
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  if (code !== 0 || !json) throw new Error(`wrk failed (${code}): ${out} ${err}`);
  const w = JSON.parse(json) as Record<string, number>;
  const times = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(err.trim());
  const wrkCpuMs = times
    ? (Number(times[1]) * 60 + Number(times[2]) + Number(times[3]) * 60 + Number(times[4])) * 1000
    : NaN;
  const errors = w.connect! + w.read! + w.write! + w.status! + w.timeout!;
  const durationS = w.duration_us! / 1e6;
  // Non-2xx answers (wrk counts status >= 400) and socket errors are not throughput.
  return {
    requests: w.requests!,
    durationS,
    rps: Math.max(0, w.requests! - w.status!) / durationS,
    errors,
    p50: w.p50! / 1000,
    p75: w.p75! / 1000,
    p90: w.p90! / 1000,
    p99: w.p99! / 1000,
    max: w.max! / 1000,
    wrkCpuMs,
  };
}

export interface StreamSample {
  streams: number;
  errors: number;
  ttft: number[];
  gaps: number[];
}

/**
 * One connection, one stream after another, for `seconds`: time to the first content chunk and
 * the gaps between content chunks, read as they arrive. Cheap enough (tens of streams a second)
 * to run beside wrk without being what limits the run.
 */
export async function streamProbe(t: Running, seconds: number): Promise<StreamSample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(t.url + '/v1/chat/completions');
  const s: StreamSample = { streams: 0, errors: 0, ttft: [], gaps: [] };
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    await new Promise<void>((resolve) => {
      const started = performance.now();
      let last = 0;
      let buf = '';
      const req = http.request(
        u,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', ...t.headers } },
        (res) => {
          if (res.statusCode !== 200) {
            s.errors++;
            res.resume();
            res.on('end', resolve);
            return;
          }
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const now = performance.now();
            buf += chunk;
            let i: number;
            while ((i = buf.indexOf('\n\n')) !== -1) {
              const ev = buf.slice(0, i);
              buf = buf.slice(i + 2);
              const m = /"content":"((?:[^"\\]|\\.)+)"/.exec(ev); // a non-empty content delta
              if (!m) continue;
              if (last === 0) s.ttft.push(now - started);
              else s.gaps.push(now - last);
              last = now;
            }
          });
          res.on('end', () => {
            s.streams++;
            resolve();
          });
          res.on('error', () => {
            s.errors++;
            resolve();
          });
        },
      );
      req.on('error', () => {
        s.errors++;
        resolve();
      });
      req.end(STREAM);
    });
  }
  agent.destroy();
  return s;
}
