// JSON logs (pino). Keys must never reach a log line: credentials headers and bodies are
// redacted by path, and anything shaped like a gateway key is masked wherever it appears.
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
    destination,
  );
}
