// The stream run every streamed route shares. The upstream is read by a task of its own
// (the producer) that hands events to the caller's stream through a short queue, so a caller
// that leaves does not stop the reading: the provider bills for the whole request whether or not
// anyone reads it, so after the caller is gone the producer reads on, sending nothing, until
// the provider reports its usage, and settles at that (never above the hold). Only if the usage
// never comes (the drain time ABANDONED_STREAM_DRAIN_MS passes, the upstream goes silent past its
// body timeout, or it breaks) is the estimate charged: what was delivered, counted.
import { ConnectError } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { TokenUsage } from '../../billing/pricing.ts';
import { gatewayError } from '../../errors/errors.ts';
import { markedOutcome, isAbort } from '../../metering/outcomes.ts';
import { readUpstreamError } from '../upstream/replies.ts';
import { scrub } from '../../secrets/scrub.ts';
import { noteAnswerText, noteStreamEvent } from '../upstream/attempt-spans.ts';
import { SseParser, type SseEvent } from './sse.ts';
import { chargeField, zeroUsage, type ChargeInfo, type Plan } from '../../metering/plan.ts';
import { type OutEvent, type StepResult, type StreamEvent, type StreamProcessor } from './stream-types.ts';
import { upstreamFailure, type UpstreamResponse } from '../upstream/upstream.ts';

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
    try {
      const res = await this.connect();
      if (res && (await this.read(res))) await this.finishRead();
    } catch (err) {
      this.fail(err);
    } finally {
      await this.settleLeftover();
    }
  }

  // What the producer knows as it goes (one stream's state, set by the steps below).
  private usage: TokenUsage | undefined;
  private charge: ChargeInfo | undefined;
  /** The request id went out: the caller's answer has begun. */
  private started = false;
  private sawContent = false;
  /** An upstream event was read (the first is read for the answer's model and id: tracing on). */
  private sawEvent = false;
  private outcome = 'ok';
  private httpStatus = 200;
  /** Events that carry the charge, held until it is known. */
  private readonly waiting: OutEvent[] = [];
  /**
   * A failure reaches the caller after the settle, as the last thing: whoever sees it can
   * already see what was charged.
   */
  private failure: { err: unknown } | undefined;

  private fail(err: unknown): void {
    this.failure ??= { err };
  }

  private end(outcome: string, httpStatus: number): void {
    this.outcome = outcome;
    this.httpStatus = httpStatus;
  }

  private start(): void {
    if (!this.started) {
      this.started = true;
      // Content is handed on only once an upstream answered: the deployment that did is known.
      const served = this.plan.servedBy;
      this.emit({ kind: 'request_id', requestId: this.plan.requestId, ...(served ? { deployment: served.key } : {}) });
    }
  }

  private send(e: OutEvent): void {
    this.emit({ kind: 'data', ...(e.event ? { event: e.event } : {}), json: e.text ?? JSON.stringify(e.data) });
  }

  /** The upstream's answer when it is a stream to read; otherwise the outcome and failure are set. */
  private async connect(): Promise<UpstreamResponse | undefined> {
    const { plan, opts } = this;
    let res: UpstreamResponse;
    try {
      res = await opts.send(this.upstreamAbort.signal, opts.signal);
    } catch (err) {
      if (isAbort(err)) {
        this.end('client_closed', 499);
        return undefined;
      }
      // The upstream call's own outcome (a timeout, a deployment that kept failing), else unreachable.
      const marked = markedOutcome(err) ?? { outcome: 'upstream_unreachable', httpStatus: 502 };
      this.end(marked.outcome, marked.httpStatus);
      this.fail(err instanceof ConnectError ? err : upstreamFailure(err, plan.requestId));
      return undefined;
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      this.end('upstream_error', res.statusCode);
      this.fail(await readUpstreamError(res, plan.requestId));
      return undefined;
    }
    return res;
  }

  /**
   * Reads the upstream's events to their end, handing on what the caller gets. True when the
   * stream ended normally and the caller is still there (the charge then goes out).
   */
  private async read(res: UpstreamResponse): Promise<boolean> {
    // A network read's events are handled in one pass; backpressure is checked per read.
    const body = res.body[Symbol.asyncIterator]();
    const parser = new SseParser();
    try {
      for (;;) {
        await this.roomForMore();
        const read = await body.next();
        for (const ev of read.done ? parser.end() : parser.push(read.value as Uint8Array)) {
          const step = await this.step(ev);
          if (step === 'stop') return false;
          if (step === 'done') return !this.abandoned;
        }
        if (read.done) return !this.abandoned;
      }
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      this.broke(err);
      return false;
    }
  }

  /** One upstream event: usage noted, the settle as soon as the usage is final, events handed on. */
  private async step(ev: SseEvent): Promise<'more' | 'done' | 'stop'> {
    const { plan } = this;
    const r = this.opts.processor.step(ev);
    if (plan.answerSpan) {
      noteStreamEvent(plan.answerSpan, ev.data, !this.sawEvent);
      this.sawEvent = true;
    }
    if (r.usage) this.usage = r.usage;
    if (r.error) return this.upstreamError(r.error);
    if (!this.sawContent && this.opts.processor.deliveredText().length > 0) {
      this.sawContent = true;
      plan.answerSpan?.addEvent('gen_ai.first_token');
    }
    if (r.finalUsage && this.usage && !this.charge) {
      noteAnswerText(plan.answerSpan, this.opts.processor.deliveredText());
      const usage = { ...this.usage, estimated: false };
      this.charge = this.abandoned
        ? await this.runs.deps.settle(plan, usage, 'client_closed', 499)
        : await this.runs.deps.settle(plan, usage, 'ok', 200);
    }
    // The caller left: read on only until the usage is in.
    if (this.abandoned) return this.charge ? 'stop' : 'more';
    this.handOn(r.out ?? []);
    return r.done ? 'done' : 'more';
  }

  /**
   * An error event of the upstream's, whoever's format: before anything went out, the request's
   * 502 with the provider's message; after, passed on. Either way its text passes the credential
   * scrubber first (a provider may quote the request's headers in it).
   */
  private upstreamError(error: NonNullable<StepResult['error']>): 'stop' {
    this.outcome = 'upstream_stream_error';
    if (this.abandoned) return 'stop';
    if (!this.started) {
      this.httpStatus = 502;
      this.fail(
        gatewayError({
          httpStatus: 502,
          type: 'server_error',
          code: 'upstream_stream_error',
          message: scrub(error.message),
          requestId: this.plan.requestId,
        }),
      );
      return 'stop';
    }
    this.emit({ kind: 'error', ...(error.event ? { event: error.event } : {}), json: scrub(error.json) });
    return 'stop';
  }

  /** Events for the caller: those that carry the charge wait for it, and the last of them carries it. */
  private handOn(events: OutEvent[]): void {
    const { charge, waiting } = this;
    for (const e of events) {
      if (e.needsCharge && !charge) {
        waiting.push(e);
        continue;
      }
      if (e.needsCharge && charge) stamp([e], charge);
      this.start();
      this.send(e);
    }
    if (charge && waiting.length) {
      stamp(waiting, charge);
      for (const e of waiting.splice(0)) this.send(e);
    }
  }

  /** The upstream's body failed mid-read: the caller left, or the provider's connection broke. */
  private broke(err: unknown): void {
    if (isAbort(err) || this.abandoned) return this.end('client_closed', 499);
    this.end(this.sawContent ? 'upstream_cut' : 'upstream_unreachable', 502);
    if (!this.started && !this.sawContent) return this.fail(upstreamFailure(err, this.plan.requestId));
    this.runs.deps.log.warn({ requestId: this.plan.requestId, err: (err as Error).message }, 'upstream stream broke');
    this.start();
    const broken = this.opts.brokenStreamEvent('The upstream provider connection broke during the stream.');
    this.emit({ kind: 'error', ...(broken.event ? { event: broken.event } : {}), json: broken.json });
  }

  /** The stream ended: settled (on what was reported, or counted), then the held events and the charge go out. */
  private async finishRead(): Promise<void> {
    const { plan, opts } = this;
    const reported = this.charge !== undefined || this.usage !== undefined;
    if (!this.charge) noteAnswerText(plan.answerSpan, opts.processor.deliveredText());
    const charge = (this.charge ??= await this.runs.deps.settle(
      plan,
      deliveredUsage(this.usage, opts.processor.deliveredText(), opts.countUsage),
      'ok',
      200,
    ));
    const tail = [...this.waiting.splice(0), ...(opts.processor.finish?.(charge, reported) ?? [])];
    stamp(tail, charge);
    this.start();
    for (const e of tail) this.send(e);
    this.emit({ kind: 'charge', charge });
  }

  /** However the run ended: the upstream call let go, and a request not yet settled settled now. */
  private async settleLeftover(): Promise<void> {
    const { plan, opts } = this;
    this.settledOrDone = true;
    clearTimeout(this.deadline);
    this.runs.abandoned.delete(this);
    this.upstreamAbort.abort(RUN_DONE);
    if (!this.charge) {
      noteAnswerText(plan.answerSpan, opts.processor.deliveredText());
      const u = deliveredUsage(this.usage, opts.processor.deliveredText(), opts.countUsage);
      const left = this.outcome === 'ok' || this.outcome === 'client_closed';
      await this.runs.deps
        .settle(plan, u, left ? 'client_closed' : this.outcome, left ? 499 : this.httpStatus)
        .catch((err) =>
          this.runs.deps.log.error({ err, requestId: plan.requestId }, 'settle failed; the hold will expire'),
        );
    }
    this.push(this.failure ? { kind: 'throw', err: this.failure.err } : { kind: 'end' });
  }
}

/** Marks the last of `events` that waits for the charge with it (`x_gateway`). */
function stamp(events: OutEvent[], c: ChargeInfo): void {
  const last = [...events].reverse().find((e) => e.needsCharge);
  if (!last) return;
  last.data.x_gateway = chargeField(c);
  delete last.text; // no longer its data's text
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
