// What a stream hands on: the events the facade writes, and the processor that reads one upstream
// streaming format and writes the caller's (stream-run.ts drives it).
import type { TokenUsage } from '../../billing/pricing.ts';
import type { ChargeInfo, Json } from '../../metering/plan.ts';
import { oneLine, type SseEvent } from './sse.ts';

/** What the facade writes, in order. `event` is the SSE event name where the format has one. */
export type StreamEvent =
  | { kind: 'request_id'; requestId: string; deployment?: string }
  | { kind: 'data'; event?: string; json: string }
  | { kind: 'error'; event?: string; json: string }
  | { kind: 'charge'; charge: ChargeInfo };

/** An event for the caller; `needsCharge` events wait for the settle and the last one carries it. */
export interface OutEvent {
  event?: string;
  data: Json;
  /** `data` as JSON text already (the upstream's own, changed in place): written as is. Dropped when `data` changes. */
  text?: string;
  needsCharge?: boolean;
}

export interface StepResult {
  out?: OutEvent[];
  /** Usage reported so far (providers may report it in pieces). */
  usage?: TokenUsage;
  /** The usage is final: settle now, before the events that carry the charge go out. */
  finalUsage?: boolean;
  /** The upstream reported an error inside the stream. */
  error?: { event?: string; json: string; message: string };
  /** The upstream said it is done. */
  done?: boolean;
}

/** Reads one upstream streaming format and writes the caller's. */
export interface StreamProcessor {
  step(ev: SseEvent): StepResult;
  /** Text delivered so far, to count tokens when the upstream reports no usage. */
  deliveredText(): string;
  /** Events to send once the charge is known (e.g. a usage chunk the upstream never sent). */
  finish?(charge: ChargeInfo, usageReported: boolean): OutEvent[];
}

/** An event passed on unchanged: written as the upstream's own text where that is one line. */
export function asIs(event: string | undefined, data: Json, ev: SseEvent): OutEvent {
  const text = oneLine(ev.data);
  return { ...(event ? { event } : {}), data, ...(text !== undefined ? { text } : {}) };
}
