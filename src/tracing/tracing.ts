// Starting and stopping traces for one process (the gateway, or `npm run worker`): the tracer
// provider with the sampler the OTEL_* settings name, the AsyncLocalStorage context manager, the
// W3C trace-context propagator, and the OTLP exporter (HTTP/protobuf or gRPC) behind the bounded
// export queue. Off unless an endpoint is configured: then nothing here is loaded into the
// request path (spans.ts answers NO_SPAN).
import fs from 'node:fs';
import path from 'node:path';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, type Resource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { SamplerSetting, TracingConfig } from '../config/tracing-config.ts';
import { BoundedExportQueue, type ExportCounts } from './export-queue.ts';
import { setTracingOn } from './spans.ts';

export interface Tracing {
  /** The queue every span ends in (Temporal's workflow spans join it too: temporal-spans.ts). */
  queue: BoundedExportQueue;
  resource: Resource;
  /** Exports what is queued and stops (bounded by the export timeout). */
  shutdown(): Promise<void>;
}

let running: Tracing | undefined;

/** The export counts for /metrics; zeros while tracing is off. */
export function exportCounts(): ExportCounts {
  return running?.queue.counts ?? { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 };
}

/** This process's tracing, if started. */
export function runningTracing(): Tracing | undefined {
  return running;
}

/** Starts tracing when the settings enable it; `component` names the process (gateway, worker) in the resource. */
export function startTracing(cfg: TracingConfig, component: string): Tracing | undefined {
  if (!cfg.enabled) return undefined;
  if (running) return running;
  const version = packageVersion();
  const resource = resourceFromAttributes({
    'service.name': cfg.serviceName,
    'service.version': version,
    'service.component': component,
  }).merge(detectResources({ detectors: [envDetector] }));
  const queue = new BoundedExportQueue(exporterFor(cfg), cfg.queue);
  const provider = new TracerProvider({ sampler: samplerOf(cfg.sampler), resource, spanProcessors: [queue] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  setTracingOn(version);
  running = {
    queue,
    resource,
    shutdown: () => provider.shutdown(),
  };
  return running;
}

/** The exporters read OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT and _COMPRESSION themselves. */
function exporterFor(cfg: TracingConfig): SpanExporter {
  return cfg.protocol === 'grpc' ? (new GrpcExporter() as unknown as SpanExporter) : new ProtobufExporter();
}

function samplerOf(s: SamplerSetting): Sampler {
  switch (s.kind) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(s.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.ratio) });
  }
}

function packageVersion(): string {
  try {
    const file = path.resolve(import.meta.dirname, '..', '..', 'package.json');
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}
