// Instance-wide faults for failover and cooldown tests. One simulator instance stands for one
// deployment, and a test makes the whole deployment misbehave, where a `[sim …]` directive
// steers a single request:
//   POST /__sim/mode {"status":429,"retryAfter":"2","count":3}  the next 3 provider requests get a 429
//   POST /__sim/mode {"status":503}                              every provider request gets a 503
//   POST /__sim/mode {"delayMs":300}                             every answer, served or not, 300 ms late
//   POST /__sim/mode {"down":true}                               each request's connection is cut unanswered
//   POST /__sim/mode {"status":400,"echoHeaders":{…}}            the status, its error quoting the request's headers (echo-headers.ts)
//   POST /__sim/mode {"echoHeaders":{"stream":"after"}}         a stream whose error event quotes them
//   DELETE /__sim/mode                                           serving again
//   GET /__sim/mode                                              { mode, counts }
// Provider requests are those under /v1/, /cohere/, /bfl/ and an Azure instance's /openai/;
// /__sim/ is never faulted, so a test can always clear the mode. `count` limits the status or
// `down` fault; the delay lasts until the mode is cleared. A faulted request is still recorded
// (the gateway did try this deployment). Each wire gets its own error shape: OpenAI's, Anthropic's
// on /v1/messages, Azure's 429 on /openai/, Cohere's and BFL's own.
import type http from 'node:http';
import { anthropicError } from './anthropic-api.ts';
import { echoProblem, echoStatus, echoStream, type EchoedRequest, type EchoHeaders } from './echo-headers.ts';

export interface SimMode {
  /** Answer this status instead of serving. */
  status?: number;
  /** The `retry-after` header of a status answer. */
  retryAfter?: string;
  /** Delay every answer (served, faulted or cut) by this many ms. */
  delayMs?: number;
  /** Fault only the next `count` requests; all of them when absent. */
  count?: number;
  /** Destroy each request's socket without answering (a dead deployment). */
  down?: boolean;
  /** The status answer (or, with `stream`, a 200 stream) quotes the request's headers, credentials included. */
  echoHeaders?: EchoHeaders;
}

export interface SimCounts {
  /** Provider requests received since the last clear. */
  received: number;
  /** Of those, answered with a 2xx status (counted when the status goes out). */
  answered2xx: number;
  /** Of those, answered or cut by the mode rather than served. */
  faulted: number;
  /** Provider requests being answered now, and the most at once since the last clear. */
  inFlight: number;
  maxInFlight: number;
}

export type Wire = 'openai' | 'anthropic' | 'azure' | 'cohere' | 'bfl';

export function wireOf(path: string): Wire {
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/openai/')) return 'azure';
  if (path.startsWith('/cohere/')) return 'cohere';
  if (path.startsWith('/bfl/')) return 'bfl';
  return 'openai';
}

// Unref'd: a pending delay never keeps the test run alive.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/** A mode from its JSON (the body of POST /__sim/mode), or why it is not one. */
export function parseMode(raw: Buffer): SimMode | string {
  let m: unknown;
  try {
    m = JSON.parse(raw.toString('utf8'));
  } catch {
    return 'the mode must be a JSON object';
  }
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return 'the mode must be a JSON object';
  const { status, retryAfter, delayMs, count, down, echoHeaders } = m as Record<string, unknown>;
  const echo = echoHeaders === undefined ? undefined : echoProblem(echoHeaders);
  if (echo) return echo;
  if (status !== undefined && !(Number.isInteger(status) && (status as number) >= 100 && (status as number) <= 599))
    return 'status must be an HTTP status code';
  if (retryAfter !== undefined && typeof retryAfter !== 'string') return 'retryAfter must be a string';
  if (delayMs !== undefined && !(typeof delayMs === 'number' && delayMs >= 0)) return 'delayMs must be a number >= 0';
  if (count !== undefined && !(Number.isInteger(count) && (count as number) >= 0))
    return 'count must be an integer >= 0';
  if (down !== undefined && typeof down !== 'boolean') return 'down must be a boolean';
  return m as SimMode;
}

export interface DeploymentFaults {
  setMode(mode: SimMode): void;
  clearMode(): void;
  mode(): SimMode;
  counts(): SimCounts;
  /** Clears the mode and zeroes the counters. */
  reset(): void;
  /** Applies the mode to one provider request: true when the mode answered (or cut) it. */
  apply(res: http.ServerResponse, wire: Wire, req: EchoedRequest): Promise<boolean>;
}

export function deploymentFaults(): DeploymentFaults {
  let mode: SimMode = {};
  let left = Infinity;
  let counts: SimCounts = { received: 0, answered2xx: 0, faulted: 0, inFlight: 0, maxInFlight: 0 };
  const setMode = (m: SimMode) => {
    mode = { ...m };
    left = m.count ?? Infinity;
  };
  return {
    setMode,
    clearMode: () => setMode({}),
    mode: () => ({ ...mode }),
    counts: () => ({ ...counts }),
    reset: () => {
      setMode({});
      counts = { received: 0, answered2xx: 0, faulted: 0, inFlight: 0, maxInFlight: 0 };
    },
    async apply(res, wire, req) {
      counts.received++;
      // Until the answer is finished or its connection is gone, whichever comes first.
      const mine = counts;
      mine.inFlight++;
      mine.maxInFlight = Math.max(mine.maxInFlight, mine.inFlight);
      let done = false;
      const end = () => {
        if (!done) mine.inFlight--;
        done = true;
      };
      res.once('finish', end);
      res.once('close', end);
      onStatus(res, (status) => {
        if (status >= 200 && status < 300) counts.answered2xx++;
      });
      if (mode.delayMs) await sleep(mode.delayMs);
      // Read after the delay: a mode set or cleared meanwhile is the one this request meets.
      const echo = mode.echoHeaders;
      const faulting = (mode.down || mode.status !== undefined || echo?.stream !== undefined) && left > 0;
      if (!faulting) return false;
      left--;
      counts.faulted++;
      if (mode.down) res.socket?.destroy();
      else if (echo?.stream) echoStream(res, wire, req, echo);
      else if (echo) echoStatus(res, mode.status!, statusHeaders(mode.status!, mode.retryAfter), wire, req, echo);
      else faultAnswer(res, mode.status!, mode.retryAfter, wire);
      return true;
    },
  };
}

/** Calls `cb` with the status as the head goes out, however the handler writes it (an implicit head too). */
function onStatus(res: http.ServerResponse, cb: (status: number) => void): void {
  const writeHead = res.writeHead as (...args: unknown[]) => http.ServerResponse;
  res.writeHead = ((...args: unknown[]) => {
    cb(Number(args[0]));
    return writeHead.apply(res, args);
  }) as typeof res.writeHead;
}

/** A status answer's headers: its retry-after, and a redirect's location (another host, as a moved API would say). */
function statusHeaders(status: number, retryAfter: string | undefined): Record<string, string> {
  return {
    ...(retryAfter !== undefined ? { 'retry-after': retryAfter } : {}),
    ...(status >= 300 && status < 400 ? { location: 'http://127.0.0.1:9/moved/v1' } : {}),
  };
}

function faultAnswer(res: http.ServerResponse, status: number, retryAfter: string | undefined, wire: Wire): void {
  const headers = statusHeaders(status, retryAfter);
  if (wire === 'anthropic') {
    const [type, message] = ANTHROPIC_ERRORS[status] ?? [
      status >= 500 ? 'api_error' : 'invalid_request_error',
      status >= 500 ? 'Internal server error' : `Simulated status ${status}`,
    ];
    return anthropicError(res, status, type, message, headers);
  }
  let body: unknown;
  if (wire === 'cohere') body = { message: status === 429 ? 'too many requests' : `simulated status ${status}` };
  else if (wire === 'bfl') body = { detail: status === 429 ? 'Rate limit exceeded' : `simulated status ${status}` };
  else if (wire === 'azure' && status === 429)
    // Azure answers its own rate-limit shape; other statuses pass OpenAI's through.
    body = {
      error: {
        code: '429',
        message: `Requests to the deployment have exceeded call rate limit of your current pricing tier. Please retry after ${retryAfter ?? 1} seconds.`,
      },
    };
  else body = { error: openAIErrorFor(status) };
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

const ANTHROPIC_ERRORS: Record<number, [string, string]> = {
  401: ['authentication_error', 'invalid x-api-key'],
  429: ['rate_limit_error', 'Number of requests has exceeded your rate limit.'],
  529: ['overloaded_error', 'Overloaded'],
};

function openAIErrorFor(status: number): Record<string, unknown> {
  if (status === 429)
    return { message: 'Rate limit reached for requests.', type: 'requests', param: null, code: 'rate_limit_exceeded' };
  if (status >= 500)
    return {
      message: 'The server had an error while processing your request.',
      type: 'server_error',
      param: null,
      code: null,
    };
  if (status === 401)
    return {
      message: 'Incorrect API key provided.',
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_api_key',
    };
  return { message: `Simulated status ${status}.`, type: 'invalid_request_error', param: null, code: null };
}
