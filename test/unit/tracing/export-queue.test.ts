// The export queue between the tracer and the OTLP exporter: bounded (spans past it dropped and
// counted, never held), one export at a time, a failed export counted and not retried in a tight
// loop, unsampled spans never queued. The exporter here is a stand-in that answers as told (the
// end-to-end tests export to a real OTLP receiver); the spans are the SDK's own.
import { afterEach, describe, expect, it } from 'vitest';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { BoundedExportQueue, type ExportQueueSettings } from '../../../src/tracing/export-queue.ts';

/** An exporter that answers each export as `answer` says: now, later, or never. */
class StandInExporter implements SpanExporter {
  calls: ReadableSpan[][] = [];
  /** Spans of the exports answered as failed so far (one may be in flight, not yet answered). */
  failedSpans = 0;
  answer: 'ok' | 'fail' | 'hang' = 'ok';
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.calls.push(spans);
    if (this.answer === 'hang') return;
    const code = this.answer === 'ok' ? ExportResultCode.SUCCESS : ExportResultCode.FAILED;
    setTimeout(() => {
      if (code === ExportResultCode.FAILED) this.failedSpans += spans.length;
      done({ code });
    }, 1);
  }
  async shutdown(): Promise<void> {}
}

const providers: TracerProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.shutdown().catch(() => {})));
});

function setup(settings: Partial<ExportQueueSettings>, sampler: Sampler = new AlwaysOnSampler()) {
  const exporter = new StandInExporter();
  const queue = new BoundedExportQueue(exporter, {
    maxQueueSize: 10,
    maxExportBatchSize: 10,
    scheduleDelayMs: 20,
    exportTimeoutMs: 200,
    ...settings,
  });
  const provider = new TracerProvider({ sampler, spanProcessors: [queue] });
  providers.push(provider);
  const tracer = provider.getTracer('test');
  const spans = (n: number) => {
    for (let i = 0; i < n; i++) tracer.startSpan(`s${i}`).end();
  };
  return { exporter, queue, spans };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the bounded export queue', () => {
  it('exports in batches, and counts what it exported', async () => {
    const { exporter, queue, spans } = setup({ maxQueueSize: 100, maxExportBatchSize: 4 });
    spans(10);
    await queue.forceFlush();
    expect(exporter.calls.map((c) => c.length)).toEqual([4, 4, 2]);
    expect(queue.counts).toEqual({ exported: 10, droppedQueueFull: 0, droppedExportFailed: 0 });
  });

  it('a collector that never answers: one export in flight, the queue full, the rest dropped and counted', async () => {
    const { exporter, queue, spans } = setup({ maxQueueSize: 10, maxExportBatchSize: 10, exportTimeoutMs: 100 });
    exporter.answer = 'hang';
    spans(50);
    // 10 went out (and hang), 10 wait, 30 had no room.
    expect(exporter.calls).toHaveLength(1);
    expect(queue.counts.droppedQueueFull).toBe(30);
    await sleep(150);
    // The hung export timed out: its spans are counted as failed, and the export slot is free again.
    expect(queue.counts.droppedExportFailed).toBeGreaterThanOrEqual(10);
    expect(queue.counts.exported).toBe(0);
  });

  it('a collector that refuses every export: counted, and tried again on the schedule, not in a loop', async () => {
    const { exporter, queue, spans } = setup({ maxQueueSize: 1000, maxExportBatchSize: 5, scheduleDelayMs: 50 });
    exporter.answer = 'fail';
    spans(100);
    await sleep(260);
    // One failed batch per schedule tick (about five in 260 ms), never the whole queue at once.
    expect(exporter.calls.length).toBeGreaterThanOrEqual(2);
    expect(exporter.calls.length).toBeLessThanOrEqual(8);
    // Every failed export's spans are counted (the last call may still be in flight: not yet).
    expect(queue.counts.droppedExportFailed).toBe(exporter.failedSpans);
    expect(exporter.failedSpans).toBeGreaterThanOrEqual((exporter.calls.length - 1) * 5);
    exporter.answer = 'ok';
    await sleep(120);
    await queue.forceFlush();
    expect(queue.counts.exported + queue.counts.droppedExportFailed).toBe(100);
  });

  it('an unsampled span is never queued', async () => {
    const { exporter, queue, spans } = setup({}, new AlwaysOffSampler());
    spans(20);
    await queue.forceFlush();
    expect(exporter.calls).toHaveLength(0);
    expect(queue.counts).toEqual({ exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 });
  });

  it('under load the exports stay whole batches: a remainder waits for the schedule, not the last export', async () => {
    const { exporter, queue, spans } = setup({ maxQueueSize: 1000, maxExportBatchSize: 50, scheduleDelayMs: 100 });
    spans(50); // a whole batch: exported at once
    spans(7); // arrives while it is out
    await sleep(20);
    expect(exporter.calls.map((c) => c.length)).toEqual([50]);
    await sleep(150);
    expect(exporter.calls.map((c) => c.length)).toEqual([50, 7]);
    expect(queue.counts.exported).toBe(57);
  });

  it('ending a span costs no export of its own: spans below a batch wait for the schedule', async () => {
    const { exporter, spans } = setup({ maxQueueSize: 100, maxExportBatchSize: 50, scheduleDelayMs: 30 });
    spans(3);
    expect(exporter.calls).toHaveLength(0);
    await sleep(80);
    expect(exporter.calls.map((c) => c.length)).toEqual([3]);
  });
});
