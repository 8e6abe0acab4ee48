// The in-process transport the facade uses: it calls the service implementations directly,
// with the same handler context, headers, abort signal and errors a network call would give
// them, but without encoding each message to protobuf bytes and decoding it again (the Connect
// router transport runs the whole protocol in memory, a large share of each request's CPU:
// docs/benchmark.md). Services cannot tell the difference; the network port still serves them
// over Connect, gRPC and gRPC-Web from the same implementations.
import {
  create,
  isMessage,
  type DescMessage,
  type DescMethod,
  type DescService,
  type MessageInitShape,
} from '@bufbuild/protobuf';
import {
  ConnectError,
  createContextValues,
  createHandlerContext,
  type ContextValues,
  type HandlerContext,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from '@connectrpc/connect';
import type { Logger } from 'pino';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { VideoService } from '../gen/gateway/v1/video_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import type { Services } from './services.ts';
import { unexpectedFailure } from '../errors/errors.ts';
import { OneMessage } from './server-stream.ts';
import { endRpcSpan, startRpcSpan } from './rpc-spans.ts';
import { iterateIn, runIn, TRACE_CONTEXT, tracingOn } from '../tracing/spans.ts';

type Impl = (req: unknown, ctx: HandlerContext) => unknown;

export function directTransport(s: Services, log?: Logger): Transport {
  const impls = new Map<DescMethod, Impl>();
  const add = (service: DescService, impl: object) => {
    for (const m of service.methods) {
      const fn = (impl as Record<string, Impl | undefined>)[m.localName];
      if (fn) impls.set(m, fn.bind(impl));
    }
  };
  add(BillingService, s.billing);
  add(CatalogueService, s.catalogue);
  add(InferenceService, s.inference);
  add(VideoService, s.video);
  add(OrganisationService, s.organisations);

  const implOf = (method: DescMethod): Impl => {
    const fn = impls.get(method);
    if (!fn)
      throw new ConnectError(`${method.parent.typeName}/${method.name} is not implemented`, 12 /* Unimplemented */);
    return fn;
  };
  const contextFor = (
    method: DescMethod,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    values: ContextValues | undefined,
  ) =>
    createHandlerContext({
      service: method.parent,
      method,
      protocolName: 'in-process',
      requestMethod: 'POST',
      url: `/${method.parent.typeName}/${method.name}`,
      timeoutMs,
      requestSignal: signal,
      requestHeader: header,
      contextValues: values,
    });
  // A unary call without a deadline needs no linked abort controllers: a lighter context than
  // createHandlerContext builds.
  const unaryContext = (
    method: DescMethod,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    values: ContextValues | undefined,
  ): HandlerContext =>
    timeoutMs !== undefined
      ? contextFor(method, signal, timeoutMs, header, values)
      : new UnaryContext(method, signal ?? NEVER_ABORTED, header, values ?? createContextValues());
  const message = <T extends DescMessage>(desc: T, m: unknown) =>
    isMessage(m, desc) ? m : create(desc, m as MessageInitShape<T>);
  // What a network handler does with a failure: a ConnectError passes as is; anything else is
  // an internal error, whose cause is logged here where it is still known.
  const failure = (method: DescMethod, input: unknown, err: unknown): ConnectError => {
    if (err instanceof ConnectError) return err;
    const requestId = (input as { requestId?: string }).requestId;
    log?.error({ err, rpc: `${method.parent.typeName}/${method.name}`, requestId }, 'RPC failed inside the gateway');
    return unexpectedFailure(err);
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const ctx = unaryContext(method, signal, timeoutMs, header, contextValues);
      const req = message(method.input, input);
      // The call's span, under the edge's (TRACE_CONTEXT), while tracing is on.
      const traced = tracingOn() ? startRpcSpan(method, 'in-process', contextValues?.get(TRACE_CONTEXT)) : undefined;
      try {
        const out = await runIn(traced?.ctx, () => implOf(method)(req, ctx));
        if (traced) endRpcSpan(traced.span);
        return {
          stream: false,
          service: method.parent,
          method,
          header: ctx.responseHeader,
          trailer: ctx.responseTrailer,
          message: message(method.output, out),
        } as UnaryResponse<typeof method.input, typeof method.output>;
      } catch (err) {
        const f = failure(method, req, err);
        if (traced) endRpcSpan(traced.span, f);
        throw f;
      }
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      if (method.methodKind !== 'server_streaming')
        throw new ConnectError('only server-streaming methods run in process', 12);
      let first: unknown;
      if (input instanceof OneMessage) first = input.message;
      else {
        for await (const m of input) {
          first = m;
          break;
        }
      }
      const ctx =
        timeoutMs !== undefined
          ? contextFor(method, signal, timeoutMs, header, contextValues)
          : new StreamContext(method, signal, header, contextValues ?? createContextValues());
      const req = message(method.input, first ?? {});
      const traced = tracingOn() ? startRpcSpan(method, 'in-process', contextValues?.get(TRACE_CONTEXT)) : undefined;
      let outputs: AsyncIterable<unknown>;
      try {
        // A generator runs in the context of whoever steps it: each step is given the call's.
        outputs = iterateIn(
          traced?.ctx,
          runIn(traced?.ctx, () => implOf(method)(req, ctx) as AsyncIterable<unknown>),
        );
      } catch (err) {
        ctx.abort();
        const f = failure(method, req, err);
        if (traced) endRpcSpan(traced.span, f);
        throw f;
      }
      // A caller that goes away aborts its signal, but Connect's client gives it no way to close
      // the stream (its iterator has no return()): the handler, suspended where it yielded its
      // last message, would never resume, so it would never reach its `finally` (where a stream
      // is settled). So the signal closes the handler's iterator here, as the network server does
      // when a stream is cancelled. An async generator queues the close after a step in progress.
      const it = outputs[Symbol.asyncIterator]();
      const close = () => {
        void Promise.resolve(it.return?.()).catch(() => {});
      };
      ctx.signal.addEventListener('abort', close, { once: true });
      async function* forward() {
        let ended = false;
        let failed: ConnectError | undefined;
        try {
          for (let r = await it.next(); !r.done; r = await it.next()) yield message(method.output, r.value);
          ended = true;
        } catch (err) {
          ended = true;
          failed = failure(method, req, err);
          throw failed;
        } finally {
          if (traced) endRpcSpan(traced.span, failed);
          ctx.signal.removeEventListener('abort', close);
          // As over the network: a caller that stops reading cancels the handler.
          if (!ended) {
            ctx.abort();
            close();
          }
        }
      }
      return {
        stream: true,
        service: method.parent,
        method,
        header: ctx.responseHeader,
        trailer: ctx.responseTrailer,
        message: forward(),
      } as StreamResponse<typeof method.input, typeof method.output>;
    },
  };
}

const NEVER_ABORTED = new AbortController().signal;

/** What both in-process contexts share: no deadline, the caller's headers as they are, response headers made when asked for. */
abstract class InProcessContext implements HandlerContext {
  readonly service: DescService;
  readonly method: DescMethod;
  readonly requestMethod = 'POST';
  readonly protocolName = 'in-process';
  readonly url: string;
  readonly requestHeader: Headers;
  readonly values: ContextValues;
  abstract readonly signal: AbortSignal;
  private header?: Headers;
  private trailer?: Headers;

  constructor(method: DescMethod, header: ConstructorParameters<typeof Headers>[0], values: ContextValues) {
    this.service = method.parent;
    this.method = method;
    this.url = `/${method.parent.typeName}/${method.name}`;
    this.requestHeader = header instanceof Headers ? header : new Headers(header);
    this.values = values;
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  get responseHeader(): Headers {
    return (this.header ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.trailer ??= new Headers());
  }
}

class UnaryContext extends InProcessContext {
  readonly signal: AbortSignal;

  constructor(
    method: DescMethod,
    signal: AbortSignal,
    header: ConstructorParameters<typeof Headers>[0],
    values: ContextValues,
  ) {
    super(method, header, values);
    this.signal = signal;
  }
}

/**
 * A stream's context without a deadline: its own abort controller, which the caller's signal
 * aborts. createHandlerContext would copy the headers into a new Headers, make a deadline and
 * link three signals, on every stream.
 */
class StreamContext extends InProcessContext {
  private readonly controller = new AbortController();
  private readonly callerSignal: AbortSignal | undefined;
  private readonly onCallerAbort: (() => void) | undefined;

  constructor(
    method: DescMethod,
    callerSignal: AbortSignal | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    values: ContextValues,
  ) {
    super(method, header, values);
    if (callerSignal?.aborted) this.controller.abort(callerSignal.reason);
    else if (callerSignal) {
      this.callerSignal = callerSignal;
      this.onCallerAbort = () => this.abort(callerSignal.reason);
      callerSignal.addEventListener('abort', this.onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason?: unknown): void {
    if (this.onCallerAbort) this.callerSignal!.removeEventListener('abort', this.onCallerAbort);
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }
}
