// The stream run every streamed route shares. The upstream is read by a task of its own
// (the producer) that hands events to the caller's stream through a short queue, so a caller
// that leaves does not stop the reading: the provider bills for the whole request whether or not
// anyone reads it, so after the caller is gone the producer reads on, sending nothing, until
// the provider reports its usage, and settles at that (never above the hold). Only if the usage
// never comes (the drain time ABANDONED_STREAM_DRAIN_MS passes, the upstream goes silent past its
// body timeout, or it breaks) is the estimate charged: what was delivered, counted.
import { ConnectError } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { TokenUsage } from '../billing/pricing.ts';
import { gatewayError } from '../errors/errors.ts';
import { markedOutcome, isAbort } from '../metering/outcomes.ts';
import { readUpstreamError } from './replies.ts';
import { SseParser } from './sse.ts';
import { chargeField, zeroUsage, type ChargeInfo, type Plan } from '../metering/plan.ts';
import { type OutEvent, type StreamEvent, type StreamProcessor } from './stream-types.ts';
import { upstreamFailure, type UpstreamResponse } from './upstream.ts';

/** What a stream run needs of the rest of the gateway: the one settle of its request, and a log. */
export interface StreamRunDeps {
  settle(plan: Plan, usage: ChargeInfo['usage'], status: string, httpStatus: number): Promise<ChargeInfo>;
  log: Logger;
  /** How long a stream whose caller left is read on for its usage (ABANDONED_STREAM_DRAIN_MS). */
  abandonedDrainMs: number;
}

/** Starts the streams of every streamed route, and knows which of them are read on for a caller who left. */
export class StreamRuns {
  readonly deps: StreamRunDeps;
  /** Streams whose caller left, read on for their usage; shutdown shortens their drain. */
  readonly abandoned = new Set<StreamRun>();

  constructor(deps: StreamRunDeps) {
    this.deps = deps;
  }

  /** Runs an upstream SSE stream to the caller: nothing goes to the caller before the first event for them, and the request settles exactly once. */
  start(plan: Plan, opts: StreamOptions): AsyncGenerator<StreamEvent> {
    return new StreamRun(this, plan, opts).events();
  }

  /** Shutdown: every stream read on for a caller who left stops within `ms`. */
  cutAbandoned(ms: number): void {
    for (const run of this.abandoned) run.cutAfter(ms);
  }
}

export interface StreamOptions {
  /** Sends the request: `signal` aborts the upstream call; `callerGone` stops retries (no new request for a caller who left). */
  send: (signal: AbortSignal, callerGone: AbortSignal) => Promise<UpstreamResponse>;
  processor: StreamProcessor;
  countUsage: (delivered: string) => TokenUsage;
  brokenStreamEvent: (message: string) => { event?: string; json: string };
  /** Aborted when the caller leaves. */
  signal: AbortSignal;
}

type Item = { kind: 'event'; ev: StreamEvent } | { kind: 'throw'; err: unknown } | { kind: 'end' };

/** Events the producer may read ahead of a slow caller. */
const READ_AHEAD = 64;

/**
 * Why the upstream call is aborted once the producer is done (unread bytes are dropped, the
 * connection freed). Made once: `abort()` without a reason builds a DOMException with a stack
 * trace on every stream (docs/benchmark.md has what that cost). The default one (from
 * `cutAfter`) stays for the aborts that something still waits on.
 */
const RUN_DONE = Object.assign(new Error('the stream run is done with the upstream call'), { name: 'AbortError' });

export class StreamRun {
  private readonly runs: StreamRuns;
  private readonly plan: Plan;
  private readonly opts: StreamOptions;
  private readonly items: Item[] = [];
  private wakeConsumer: (() => void) | undefined;
  private wakeProducer: (() => void) | undefined;
  private readonly upstreamAbort = new AbortController();
  private deadline: NodeJS.Timeout | undefined;
  private finished = false;
  /** The producer is past its settle: nothing left to drain. */
  private settledOrDone = false;
  /** The caller left: read on for the usage, send nothing. */
  abandoned = false;

  constructor(runs: StreamRuns, plan: Plan, opts: StreamOptions) {
    this.runs = runs;
    this.plan = plan;
    this.opts = opts;
  }

  /** The caller's side: yields what the producer hands over, in order. */
  async *events(): AsyncGenerator<StreamEvent> {
    const onAbort = () => this.abandon();
    this.opts.signal.addEventListener('abort', onAbort, { once: true });
    void this.produce();
    try {
      for (;;) {
        const item = this.items.shift() ?? (await this.next());
        this.wakeProducer?.();
        if (item.kind === 'end') return;
        if (item.kind === 'throw') throw item.err;
        if (this.abandoned) return;
        yield item.ev;
      }
    } finally {
      this.opts.signal.removeEventListener('abort', onAbort);
      // A caller that stops reading has left, whether or not its signal says so.
      this.abandon();
    }
  }

  private next(): Promise<Item> {
    return new Promise((resolve) => {
      this.wakeConsumer = () => {
        this.wakeConsumer = undefined;
        resolve(this.items.shift()!);
      };
    });
  }

  private push(item: Item): void {
    if (this.finished) return;
    if (item.kind !== 'event') this.finished = true;
    this.items.push(item);
    this.wakeConsumer?.();
  }

  private emit(ev: StreamEvent): void {
    if (!this.abandoned) this.push({ kind: 'event', ev });
  }

  /** Waits while the caller is behind by READ_AHEAD events (backpressure to the upstream). */
  private roomForMore(): Promise<void> | undefined {
    if (this.abandoned || this.items.length < READ_AHEAD) return undefined;
    return new Promise((resolve) => {
      this.wakeProducer = () => {
        this.wakeProducer = undefined;
        resolve();
      };
    });
  }

  /** The caller left: keep reading for at most the drain time, then stop the upstream call. */
  abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    this.push({ kind: 'end' });
    this.wakeProducer?.();
    if (this.settledOrDone) return;
    this.cutAfter(this.runs.deps.abandonedDrainMs);
    this.runs.abandoned.add(this);
  }

  /** Stops reading the upstream after `ms` at the latest (shutdown shortens the drain). */
  cutAfter(ms: number): void {
    if (this.settledOrDone) return;
    clearTimeout(this.deadline);
    this.deadline = setTimeout(() => this.upstreamAbort.abort(), ms);
    this.deadline.unref();
  }

  /** Reads the upstream and settles exactly once, however the stream ends. */
  private async produce(): Promise<void> {
    const { plan, opts } = this;
    const { settle, log } = this.runs.deps;
    const p = opts.processor;
    let usage: TokenUsage | undefined;
    let charge: ChargeInfo | undefined;
    let started = false;
    let sawContent = false;
    let outcome = 'ok';
    let httpStatus = 200;
    const waiting: OutEvent[] = [];
    const out = (e: OutEvent): StreamEvent => ({
      kind: 'data',
      ...(e.event ? { event: e.event } : {}),
      json: JSON.stringify(e.data),
    });
    const stamp = (events: OutEvent[], c: ChargeInfo) => {
      const last = [...events].reverse().find((e) => e.needsCharge);
      if (last) last.data.x_gateway = chargeField(c);
    };
    const start = () => {
      if (!started) {
        started = true;
        this.emit({ kind: 'request_id', requestId: plan.requestId });
      }
    };
    // A failure reaches the caller after the settle, as the last thing: whoever sees it can
    // already see what was charged.
    let failure: { err: unknown } | undefined;
    const fail = (err: unknown) => {
      failure ??= { err };
    };

    try {
      let res: UpstreamResponse;
      try {
        res = await opts.send(this.upstreamAbort.signal, opts.signal);
      } catch (err) {
        if (isAbort(err)) {
          outcome = 'client_closed';
          httpStatus = 499;
          return;
        }
        // The upstream call's own outcome (a timeout, a deployment that kept failing), else unreachable.
        ({ outcome, httpStatus } = markedOutcome(err) ?? { outcome: 'upstream_unreachable', httpStatus: 502 });
        return fail(err instanceof ConnectError ? err : upstreamFailure(err, plan.requestId));
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        outcome = 'upstream_error';
        httpStatus = res.statusCode;
        return fail(await readUpstreamError(res, plan.requestId));
      }

      // A network read's events are handled in one pass; backpressure is checked per read.
      const body = res.body[Symbol.asyncIterator]();
      const parser = new SseParser();
      try {
        reading: for (;;) {
          await this.roomForMore();
          const read = await body.next();
          for (const ev of read.done ? parser.end() : parser.push(read.value as Uint8Array)) {
            const r = p.step(ev);
            if (r.usage) usage = r.usage;
            if (r.error) {
              outcome = 'upstream_stream_error';
              if (this.abandoned) return;
              if (!started) {
                httpStatus = 502;
                return fail(
                  gatewayError({
                    httpStatus: 502,
                    type: 'server_error',
                    code: 'upstream_stream_error',
                    message: r.error.message,
                    requestId: plan.requestId,
                  }),
                );
              }
              this.emit({ kind: 'error', ...(r.error.event ? { event: r.error.event } : {}), json: r.error.json });
              return;
            }
            if (p.deliveredText().length > 0) sawContent = true;
            if (r.finalUsage && usage && !charge) {
              charge = this.abandoned
                ? await settle(plan, { ...usage, estimated: false }, 'client_closed', 499)
                : await settle(plan, { ...usage, estimated: false }, 'ok', 200);
            }
            if (this.abandoned) {
              if (charge) return; // the usage is in: nothing more to read
              continue;
            }
            for (const e of r.out ?? []) {
              if (e.needsCharge && !charge) {
                waiting.push(e);
                continue;
              }
              if (e.needsCharge && charge) stamp([e], charge);
              start();
              this.emit(out(e));
            }
            if (charge && waiting.length) {
              stamp(waiting, charge);
              for (const e of waiting.splice(0)) this.emit(out(e));
            }
            if (r.done) break reading;
          }
          if (read.done) break;
        }
      } catch (err) {
        if (err instanceof ConnectError) throw err;
        if (isAbort(err) || this.abandoned) {
          outcome = 'client_closed';
          httpStatus = 499;
          return;
        }
        outcome = sawContent ? 'upstream_cut' : 'upstream_unreachable';
        httpStatus = 502;
        if (!started && !sawContent) return fail(upstreamFailure(err, plan.requestId));
        log.warn({ requestId: plan.requestId, err: (err as Error).message }, 'upstream stream broke');
        start();
        const broken = opts.brokenStreamEvent('The upstream provider connection broke during the stream.');
        this.emit({ kind: 'error', ...(broken.event ? { event: broken.event } : {}), json: broken.json });
        return;
      }
      if (this.abandoned) return;

      const reported = charge !== undefined || usage !== undefined;
      if (!charge) charge = await settle(plan, deliveredUsage(usage, p.deliveredText(), opts.countUsage), 'ok', 200);
      const tail = [...waiting.splice(0), ...(p.finish?.(charge, reported) ?? [])];
      stamp(tail, charge);
      start();
      for (const e of tail) this.emit(out(e));
      this.emit({ kind: 'charge', charge });
    } catch (err) {
      fail(err);
    } finally {
      this.settledOrDone = true;
      clearTimeout(this.deadline);
      this.runs.abandoned.delete(this);
      this.upstreamAbort.abort(RUN_DONE);
      if (!charge) {
        const u = deliveredUsage(usage, p.deliveredText(), opts.countUsage);
        const left = outcome === 'ok' || outcome === 'client_closed';
        await settle(plan, u, left ? 'client_closed' : outcome, left ? 499 : httpStatus).catch((err) =>
          log.error({ err, requestId: plan.requestId }, 'settle failed; the hold will expire'),
        );
      }
      this.push(failure ? { kind: 'throw', err: failure.err } : { kind: 'end' });
    }
  }
}

/**
 * What to charge when the stream ended without final usage: nothing if nothing was delivered;
 * otherwise the reported figures, with output no lower than our count of what was delivered
 * (a provider may report input at the start and output only at the end).
 */
function deliveredUsage(
  usage: TokenUsage | undefined,
  delivered: string,
  count: (d: string) => TokenUsage,
): ChargeInfo['usage'] {
  if (delivered.length === 0) return zeroUsage();
  const counted = count(delivered);
  if (!usage) return { ...counted, estimated: true };
  return {
    ...usage,
    outputTokens: usage.outputTokens > counted.outputTokens ? usage.outputTokens : counted.outputTokens,
    estimated: true,
  };
}
