// What the settle tells a request's log line (src/log/request-lines.ts): written once, with the
// facts when the request settled, at once when it never held, after the settle when the answer
// ended first, and never waiting forever; notes nobody opened are not kept.
import { describe, expect, it } from 'vitest';
import { RequestLines, type SettledFacts } from '../../../src/log/request-lines.ts';

const FACTS: SettledFacts = {
  deployment: 'gpt-4o/openai',
  attempts: 'gpt-4o/azure=429 gpt-4o/openai=ok',
  providerCostNano: 5250n,
  chargeNano: 6563n,
};

/** The lines written, each with what it carried. */
function writer() {
  const lines: (SettledFacts | undefined)[] = [];
  return { lines, write: (f: SettledFacts | undefined) => void lines.push(f) };
}

describe('request lines', () => {
  it('a request that held and settled before its answer went: one line, with what the settle wrote', () => {
    const notes = new RequestLines();
    const w = writer();
    notes.open('req_1');
    notes.held('req_1');
    notes.settled('req_1', FACTS);
    notes.close('req_1', w.write);
    expect(w.lines).toEqual([FACTS]);
    expect(notes.size).toBe(0);
  });

  it('a request that never held (a 401, a bad body): its line at once, without money', () => {
    const notes = new RequestLines();
    const w = writer();
    notes.open('req_2');
    notes.close('req_2', w.write);
    expect(w.lines).toEqual([undefined]);
    expect(notes.size).toBe(0);
  });

  it('an answer that ended before the settle: the line waits for the settle', () => {
    const notes = new RequestLines();
    const w = writer();
    notes.open('req_3');
    notes.held('req_3');
    notes.close('req_3', w.write);
    expect(w.lines).toEqual([]);
    notes.settled('req_3', FACTS);
    expect(w.lines).toEqual([FACTS]);
    notes.settled('req_3', { ...FACTS, chargeNano: 1n });
    expect(w.lines).toEqual([FACTS]);
    expect(notes.size).toBe(0);
  });

  it('a settle that never comes: the line is written without it once the wait is over', async () => {
    const notes = new RequestLines(20);
    const w = writer();
    notes.open('req_4');
    notes.held('req_4');
    notes.close('req_4', w.write);
    await new Promise((r) => setTimeout(r, 60));
    expect(w.lines).toEqual([undefined]);
    expect(notes.size).toBe(0);
  });

  it('keeps nothing for requests it was not asked to (calls on the RPC port), and a line for a request it never opened is written as it is', () => {
    const notes = new RequestLines();
    notes.held('req_rpc');
    notes.settled('req_rpc', FACTS);
    expect(notes.size).toBe(0);
    const w = writer();
    notes.close('req_unknown', w.write);
    expect(w.lines).toEqual([undefined]);
  });
});
