// Reading single environment variables, for the loaders of each process (config.ts for the
// gateway and the video worker, bot-config.ts for `npm run bot`, cli-config.ts for the CLI):
// the settings they share are parsed, and refused, the same way everywhere.

/** Unset, empty and blank are all "not set"; a value is trimmed. */
export function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/** pino's levels: LOG_LEVEL is passed to it as is. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** LOG_LEVEL, shared by the gateway, `npm run bot` and `npm run worker`; default info. */
export function logLevel(v: string | undefined): string {
  const level = nonEmpty(v) ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level))
    throw new Error(`LOG_LEVEL must be fatal, error, warn, info, debug, trace or silent, got ${JSON.stringify(level)}`);
  return level;
}

/** LOG_FORMAT, shared by the gateway, `npm run bot` and `npm run worker`. */
export function logFormat(v: string | undefined): 'auto' | 'json' | 'pretty' {
  const format = (nonEmpty(v) ?? 'auto').toLowerCase();
  if (format !== 'auto' && format !== 'json' && format !== 'pretty')
    throw new Error(`LOG_FORMAT must be json, pretty or auto, got ${JSON.stringify(v)}`);
  return format;
}
