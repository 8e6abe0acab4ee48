// The one line per request (docs/operations.md#log-formats), written straight to the logger's
// destination as one string: it holds no headers and no body, so pino's object serialiser and
// its redaction (a pass over eight paths) are work it does not need, on every request
// (docs/benchmark.md). It is the line `log.info(fields, 'request')` writes: level, time, the
// logger's bindings, the fields in order, the message; its texts pass the same last step (keys
// masked, credentials scrubbed). A logger not made as createLogger makes one (another time or
// level format) gets log.info.
import pino, { type Logger } from 'pino';
import { cleanLine } from './logger.ts';

/** A request line's fields, in the order they are written; undefined ones are left out. */
export interface RequestLine {
  requestId: string;
  method: string;
  url: string;
  status: number;
  ms: number;
  trace_id?: string | undefined;
  span_id?: string | undefined;
  deployment?: string | undefined;
  attempts?: string | undefined;
  providerCostNano?: string | undefined;
  chargeNano?: string | undefined;
}

type Internals = {
  [pino.symbols.streamSym]?: { write(line: string): unknown };
  [pino.symbols.chindingsSym]?: string;
  [pino.symbols.timeSym]?: () => string;
  [pino.symbols.formattersSym]?: { level?: unknown; log?: unknown };
  [pino.symbols.messageKeySym]?: string;
};

/** Writes `line` at info through `log` (nothing when info is off). */
export function writeRequestLine(log: Logger, line: RequestLine): void {
  if (!log.isLevelEnabled('info')) return;
  const l = log as unknown as Internals;
  const stream = l[pino.symbols.streamSym];
  const bindings = l[pino.symbols.chindingsSym];
  if (!stream || bindings === undefined || !plainFormat(l)) {
    log.info(line, 'request');
    return;
  }
  let s = `{"level":${log.levels.values.info}${l[pino.symbols.timeSym]!()}${bindings}`;
  s += `,"requestId":${JSON.stringify(line.requestId)},"method":${JSON.stringify(line.method)}`;
  s += `,"url":${text(line.url)},"status":${line.status},"ms":${line.ms}`;
  if (line.trace_id !== undefined) s += `,"trace_id":${JSON.stringify(line.trace_id)}`;
  if (line.span_id !== undefined) s += `,"span_id":${JSON.stringify(line.span_id)}`;
  if (line.deployment !== undefined) s += `,"deployment":${text(line.deployment)}`;
  if (line.attempts !== undefined) s += `,"attempts":${text(line.attempts)}`;
  if (line.providerCostNano !== undefined) s += `,"providerCostNano":${JSON.stringify(line.providerCostNano)}`;
  if (line.chargeNano !== undefined) s += `,"chargeNano":${JSON.stringify(line.chargeNano)}`;
  stream.write(`${s},"msg":"request"}\n`);
}

/**
 * A field whose text is not the gateway's own making (a path no route has, the book's deployment
 * names) passes the last step; the others (ids, the method Node checked, numbers) cannot hold a
 * key or a credential, and the whole line is not searched again for them.
 */
const text = (v: string) => cleanLine(JSON.stringify(v));

/** pino's own time, level and message formats, as createLogger leaves them. */
const plainFormat = (l: Internals) =>
  l[pino.symbols.timeSym] === pino.stdTimeFunctions.epochTime &&
  l[pino.symbols.messageKeySym] === 'msg' &&
  isDefaultFormatters(l[pino.symbols.formattersSym]);

const defaults = pino({ enabled: false }) as unknown as Internals;
const isDefaultFormatters = (f: Internals[typeof pino.symbols.formattersSym]) =>
  f?.level === defaults[pino.symbols.formattersSym]?.level && f?.log === defaults[pino.symbols.formattersSym]?.log;
