// The span processor between the tracer and the OTLP exporter: a bounded queue exported in batches,
// one export at a time, off the request path. It is the SDK's BatchSpanProcessor's job, done here
// because that one keeps its drop count to itself and the gateway must show it (/metrics): a
// collector that is slow or gone costs spans, counted, never a request's time or memory.
import { TraceFlags } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';

export interface ExportQueueSettings {
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduleDelayMs: number;
  exportTimeoutMs: number;
}

/** What became of the spans that ended: exported, or dropped because the queue was full or their export failed. */
export interface ExportCounts {
  exported: number;
  droppedQueueFull: number;
  droppedExportFailed: number;
}

export class BoundedExportQueue implements SpanProcessor {
  readonly counts: ExportCounts = { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 };
  private readonly exporter: SpanExporter;
  private readonly settings: ExportQueueSettings;
  private queue: ReadableSpan[] = [];
  private exporting: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The last export failed: a flush stops there rather than retry a dead collector in a loop. */
  private lastFailed = false;

  constructor(exporter: SpanExporter, settings: ExportQueueSettings) {
    this.exporter = exporter;
    this.settings = settings;
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.closed || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.length >= this.settings.maxQueueSize) {
      this.counts.droppedQueueFull++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.settings.maxExportBatchSize) this.exportNow();
    else this.schedule();
  }

  /** Exports what is queued (for shutdown and tests), waiting at most the export timeout per batch. */
  async forceFlush(): Promise<void> {
    while (this.queue.length > 0 || this.exporting) {
      this.exportNow();
      await this.exporting;
      if (this.queue.length > 0 && this.lastFailed) return;
    }
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.exporter.shutdown();
  }

  private schedule(): void {
    if (this.timer || this.exporting) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.exportNow();
    }, this.settings.scheduleDelayMs);
    this.timer.unref();
  }

  private exportNow(): void {
    if (this.exporting || this.queue.length === 0) return;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.exporting = this.drain().finally(() => {
      this.exporting = undefined;
      // What arrived meanwhile waits for the next tick of the schedule (after a failure too: no tight loop).
      if (this.queue.length > 0) this.schedule();
    });
  }

  /**
   * One batch of what is queued, then more only while a whole batch is waiting: under load the
   * exports stay full-sized, and a remainder waits for the schedule. Stops at a failed export (the
   * collector is then given until the next schedule).
   */
  private async drain(): Promise<void> {
    do {
      const batch = this.queue.splice(0, this.settings.maxExportBatchSize);
      const ok = await this.exportBatch(batch);
      this.lastFailed = !ok;
      if (!ok) {
        this.counts.droppedExportFailed += batch.length;
        return;
      }
      this.counts.exported += batch.length;
    } while (this.queue.length >= this.settings.maxExportBatchSize);
  }

  private exportBatch(batch: ReadableSpan[]): Promise<boolean> {
    return new Promise((resolve) => {
      const timeout = setTimeout(() => resolve(false), this.settings.exportTimeoutMs);
      timeout.unref();
      try {
        this.exporter.export(batch, (r) => {
          clearTimeout(timeout);
          resolve(r.code === ExportResultCode.SUCCESS);
        });
      } catch {
        clearTimeout(timeout);
        resolve(false);
      }
    });
  }
}
