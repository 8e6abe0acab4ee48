// Logs (pino): JSON lines, or human lines for a person at a terminal (src/log/pretty.ts).
// Keys must never reach a log line, in either format: credentials headers and bodies are
// redacted by path, anything shaped like a gateway key is masked wherever it appears, and every
// line passes the credential scrubber (provider credentials and the instance's secrets). The
// human lines are made from the JSON after both steps, so they inherit them.
//
// JSON lines go to stdout in batches, written by a thread of their own (src/log/stdout-lines.ts):
// none is lost or reordered when the process exits, and a stdout that stops taking lines holds
// neither requests nor memory.
import pino, { type Logger } from 'pino';
import { prettyDestination } from './pretty.ts';
import { logIds } from '../tracing/spans.ts';
import { scrub } from '../secrets/scrub.ts';
import { StdoutLines } from './stdout-lines.ts';

const KEY_PATTERN = /prx-[0-9A-Za-z]{6,}/g;

export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT `auto` means human lines when stdout is a terminal, JSON otherwise. */
export function resolveLogFormat(setting: 'auto' | LogFormat, stdoutIsTty: boolean): LogFormat {
  return setting === 'auto' ? (stdoutIsTty ? 'pretty' : 'json') : setting;
}

/** `traceIds`: every line written inside a traced request carries its trace_id and span_id (tracing on). */
export function createLogger(
  level: string,
  destination?: pino.DestinationStream,
  format: 'auto' | LogFormat = 'json',
  traceIds = false,
): Logger {
  const out = destination ?? process.stdout;
  const pretty = resolveLogFormat(format, destination ? false : process.stdout.isTTY === true) === 'pretty';
  return pino(
    {
      level,
      base: { service: 'gateway' },
      ...(traceIds ? { mixin: () => logIds() ?? {} } : {}),
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers["x-api-key"]',
          'headers.authorization',
          'headers["x-api-key"]',
          'body',
          'req.body',
          'apiKey',
          'api_key',
        ],
        censor: '[redacted]',
      },
      hooks: {
        // Last line of defence: a key inside a message or an error text is masked too, and any
        // credential this process holds or shaped like one (src/secrets/scrub.ts: a few string
        // searches on a line without any).
        streamWrite: cleanLine,
      },
    },
    pretty
      ? prettyDestination(out, {
          // Colours only on a real terminal, and never when NO_COLOR is set (no-color.org).
          color: !destination && process.stdout.isTTY === true && !process.env.NO_COLOR,
          stacks: level === 'debug' || level === 'trace',
        })
      : (destination ?? new StdoutLines()),
  );
}

/** A log line's last pass: gateway keys masked, credentials scrubbed (every line, pino's and the request line's). */
export function cleanLine(s: string): string {
  return scrub(s.includes('prx-') ? s.replace(KEY_PATTERN, (k) => `${k.slice(0, 8)}…[redacted]`) : s);
}
