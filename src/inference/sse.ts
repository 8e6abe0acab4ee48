// Minimal server-sent-events reader: yields each event's data (multi-line data joined by
// "\n") and its event name. Bytes are decoded as a stream so UTF-8 split across chunks survives.

export interface SseEvent {
  event: string;
  data: string;
}

export async function* readSse(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let sep: number;
    while ((sep = boundary(buf)) !== -1) {
      const raw = buf.slice(0, sep);
      buf = buf.slice(buf.startsWith('\r\n', sep) ? sep + 4 : sep + 2);
      const ev = parseEvent(raw);
      if (ev) yield ev;
    }
  }
  buf += decoder.decode();
  const last = parseEvent(buf);
  if (last) yield last;
}

function boundary(buf: string): number {
  const a = buf.indexOf('\n\n');
  const b = buf.indexOf('\r\n\r\n');
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
