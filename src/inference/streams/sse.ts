// Minimal server-sent-events reader: each event's data (multi-line data joined by "\n") and its
// event name. Bytes are decoded as a stream so UTF-8 split across chunks survives.

export interface SseEvent {
  event: string;
  data: string;
}

/**
 * An event's data as the one line it can be written again as, unchanged (OutEvent.text); undefined
 * when it came on several lines (joined by "\n"), which the caller writes again from its JSON.
 */
export function oneLine(data: string): string | undefined {
  return data.includes('\n') || data.includes('\r') ? undefined : data;
}

/**
 * Push parser: `push` takes the bytes as they arrive and returns the events they complete, all
 * at once (the stream run handles a network read's events in one step, not one promise per event).
 */
export class SseParser {
  private readonly decoder = new TextDecoder();
  private buf = '';

  push(chunk: Uint8Array | string): SseEvent[] {
    this.buf += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    const out: SseEvent[] = [];
    let from = 0;
    for (;;) {
      const sep = boundary(this.buf, from);
      if (sep === -1) break;
      const ev = parseEvent(this.buf.slice(from, sep));
      if (ev) out.push(ev);
      from = this.buf.startsWith('\r\n', sep) ? sep + 4 : sep + 2;
    }
    if (from > 0) this.buf = this.buf.slice(from);
    return out;
  }

  /** The body ended: the last event, if it had no blank line after it. */
  end(): SseEvent[] {
    const last = parseEvent(this.buf + this.decoder.decode());
    this.buf = '';
    return last ? [last] : [];
  }
}

function boundary(buf: string, from: number): number {
  const a = buf.indexOf('\n\n', from);
  const b = buf.indexOf('\r\n\r\n', from);
  if (a === -1) return b;
  if (b === -1) return a;
  return Math.min(a, b);
}

function parseEvent(raw: string): SseEvent | undefined {
  let event = 'message';
  let data: string[] | undefined;
  for (const line of raw.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') (data ??= []).push(value);
    else if (field === 'event') event = value;
  }
  return data ? { event, data: data.join('\n') } : undefined;
}
