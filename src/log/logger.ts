// JSON logs (pino). Keys must never reach a log line: credentials headers and bodies are
// redacted by path, and anything shaped like a gateway key is masked wherever it appears.
//
// Lines go to stdout asynchronously: a line is queued and written with the ones queued while
// the previous write ran (one write for many lines under load, none on the event loop's own
// time). A synchronous write per request line was about 7% of the gateway's CPU under load, and
// a slow disk or pipe stalled every request. Queued lines are written out when the process
// exits (process.exit, a fatal error); only a SIGKILL can lose the last few.
import pino, { type Logger } from 'pino';

const KEY_PATTERN = /prx-[0-9A-Za-z]{6,}/g;

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'gateway' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]', 'body', 'req.body', 'apiKey', 'api_key'],
        censor: '[redacted]',
      },
      hooks: {
        // Last line of defence: a key inside a message or an error text is masked too.
        streamWrite: (s) => (s.includes('prx-') ? s.replace(KEY_PATTERN, (k) => `${k.slice(0, 8)}…[redacted]`) : s),
      },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
