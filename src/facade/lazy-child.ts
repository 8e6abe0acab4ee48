// req.log for the facade's requests: the pino child is made when something logs through it
// (errors), not for every request: a pino child per request cost every request
// (docs/benchmark.md). app.ts hands Fastify this as its childLoggerFactory.
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LogFn } from 'pino';

/**
 * A request's logger whose pino child is made on first use. A class (methods on the prototype):
 * one small object per request, no closures.
 */
export class LazyChild {
  private readonly parent: FastifyBaseLogger;
  private readonly bindings: Bindings;
  private readonly opts: ChildLoggerOptions;
  private made: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions) {
    this.parent = parent;
    this.bindings = bindings;
    this.opts = opts;
  }

  private get log(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }

  get level() {
    return this.log.level;
  }
  set level(l) {
    this.log.level = l;
  }
  fatal(...a: Parameters<LogFn>) {
    this.log.fatal(...a);
  }
  error(...a: Parameters<LogFn>) {
    this.log.error(...a);
  }
  warn(...a: Parameters<LogFn>) {
    this.log.warn(...a);
  }
  info(...a: Parameters<LogFn>) {
    this.log.info(...a);
  }
  debug(...a: Parameters<LogFn>) {
    this.log.debug(...a);
  }
  trace(...a: Parameters<LogFn>) {
    this.log.trace(...a);
  }
  silent(...a: Parameters<LogFn>) {
    this.log.silent(...a);
  }
  child(bindings: Bindings, opts?: ChildLoggerOptions) {
    return this.log.child(bindings, opts);
  }
}
