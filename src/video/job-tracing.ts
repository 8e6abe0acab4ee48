// A video job's trace: Temporal's OpenTelemetry interceptors carry the trace of the request that
// created the job into its workflow and each activity (the client puts it in the workflow's
// headers, the workflow in each activity's). Workflow code runs in Temporal's sandbox, where its
// spans are made by the interceptors' own (older) OpenTelemetry SDK and handed out through a
// sink; they are reshaped here into what the gateway's export queue takes. Nothing of this is
// loaded into a worker or client while tracing is off.
import { createRequire } from 'node:module';
import type { SpanContext } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { WorkerOptions } from '@temporalio/worker';
import { tracingOn } from '../tracing/spans.ts';
import { runningTracing } from '../tracing/tracing.ts';

/** The workflow-side interceptors' module, bundled into the workflow code while tracing is on. */
export function workflowTracingModules(): string[] {
  if (!tracingOn()) return [];
  return [createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')];
}

/** The client's interceptor: starting a job's workflow puts the caller's trace into its headers. */
export function clientTracing(): { workflow: OpenTelemetryWorkflowClientInterceptor[] } | undefined {
  return tracingOn() ? { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } : undefined;
}

/** The worker's activity interceptors and the sink its workflows' spans leave the sandbox through. */
export function workerTracing(): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const tracing = runningTracing();
  if (!tracing) return {};
  const queue = tracing.queue;
  const processor = {
    onStart() {},
    onEnd: (span: SandboxSpan) => queue.onEnd(fromSandbox(span)),
    forceFlush: () => queue.forceFlush(),
    shutdown: async () => {},
  };
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    // (The interceptors' package types its processor with its own SDK's; the shape is what matters.)
    sinks: { exporter: makeWorkflowExporter(processor as never, tracing.resource as never) },
  };
}

/** A span as the sandbox's SDK hands it over: its parent by id, its scope by the older name. */
type SandboxSpan = Omit<ReadableSpan, 'parentSpanContext' | 'instrumentationScope'> & {
  parentSpanId?: string;
  instrumentationLibrary: ReadableSpan['instrumentationScope'];
};

function fromSandbox(span: SandboxSpan): ReadableSpan {
  const own = span.spanContext();
  const parentSpanContext: SpanContext | undefined = span.parentSpanId
    ? { traceId: own.traceId, spanId: span.parentSpanId, traceFlags: own.traceFlags, isRemote: false }
    : undefined;
  return { ...span, spanContext: () => own, parentSpanContext, instrumentationScope: span.instrumentationLibrary };
}
