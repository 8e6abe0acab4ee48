// The trace link of the operator's request rows (docs/console.md#the-trace-link): the address is
// TRACE_UI_URL with the trace id put in, and only a trace id is ever put in; the id a usage row
// stores is a trace id or nothing.
import { describe, expect, it } from 'vitest';
import { traceUrl } from '../../../src/console/wire.ts';
import { storedTraceId } from '../../../src/billing/ledger.ts';

const ID = '4bf92f3577b34da6a3ce929d0e0e4736';

describe('traceUrl', () => {
  it("puts the trace id where TRACE_UI_URL's {trace_id} is, every time it is there", () => {
    expect(traceUrl('http://localhost:16686/trace/{trace_id}', ID)).toBe(`http://localhost:16686/trace/${ID}`);
    expect(traceUrl('https://ui.example/t/{trace_id}?q={trace_id}&x=$&', ID)).toBe(
      `https://ui.example/t/${ID}?q=${ID}&x=$&`,
    );
  });

  it('is empty without a UI address, or for anything but 32 lowercase hex characters', () => {
    expect(traceUrl(undefined, ID)).toBe('');
    for (const bad of ['', ID.toUpperCase(), ID.slice(1), `${ID}0`, `${ID.slice(0, 31)}g`, '"><script>', `${ID}/../x`])
      expect(traceUrl('http://ui.example/{trace_id}', bad), bad).toBe('');
  });
});

describe('storedTraceId', () => {
  it('keeps a trace id and turns anything else into the empty string (NULL in the row)', () => {
    expect(storedTraceId(ID)).toBe(ID);
    for (const bad of [undefined, '', ID.toUpperCase(), ID.slice(2), `${ID} `, 'not a trace id'])
      expect(storedTraceId(bad), String(bad)).toBe('');
  });
});
