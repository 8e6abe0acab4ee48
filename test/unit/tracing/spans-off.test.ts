// Tracing off (no endpoint set): every call answers the one NO_SPAN, runs its function as it is,
// and reads no header: the request path pays a flag test and nothing else.
import { describe, expect, it } from 'vitest';
import {
  activeSpan,
  callerParent,
  iterateIn,
  logIds,
  NO_SPAN,
  runIn,
  SpanKind,
  startSpan,
  tracingOn,
} from '../../../src/tracing/spans.ts';

describe('spans while tracing is off', () => {
  it('are all the same span, which records nothing', () => {
    expect(tracingOn()).toBe(false);
    const span = startSpan('x', SpanKind.SERVER, { a: 1 });
    expect(span).toBe(NO_SPAN);
    expect(span.isRecording()).toBe(false);
    expect(activeSpan()).toBe(NO_SPAN);
    expect(logIds()).toBeUndefined();
  });

  it('run what they wrap as it is', async () => {
    expect(runIn(undefined, () => 42)).toBe(42);
    const source = (async function* () {
      yield 1;
    })();
    expect(iterateIn(undefined, source)).toBe(source);
    const parent = callerParent({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, 'continue');
    expect(parent.links).toBeUndefined();
  });
});
