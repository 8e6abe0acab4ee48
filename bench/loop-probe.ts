// Preloaded into a target by `npm run bench -- --diagnose` (node --import): event-loop delay and
// garbage collection, measured inside the process. Each SIGUSR2 writes what was seen since the
// previous one to LOOP_PROBE_FILE (JSON) and starts over, so the bench can read exactly its
// measurement window. Not part of the gateway.
import fs from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

const file = process.env.LOOP_PROBE_FILE;
if (file) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let gc = new Map<string, { count: number; ms: number; maxMs: number }>();
  const kinds: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[]) {
      const kind = kinds[e.detail?.kind ?? 0] ?? 'other';
      const g = gc.get(kind) ?? { count: 0, ms: 0, maxMs: 0 };
      g.count++;
      g.ms += e.duration;
      g.maxMs = Math.max(g.maxMs, e.duration);
      gc.set(kind, g);
    }
  }).observe({ entryTypes: ['gc'] });
  let since = performance.now();
  process.on('SIGUSR2', () => {
    const now = performance.now();
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    fs.writeFileSync(
      file,
      JSON.stringify({
        windowMs: Math.round(now - since),
        // The histogram's floor is the 10 ms sampling resolution: what is above it is delay.
        loopDelayMs: {
          p50: ms(delay.percentile(50)),
          p99: ms(delay.percentile(99)),
          max: ms(delay.max),
          mean: ms(delay.mean),
        },
        gc: Object.fromEntries(
          [...gc].map(([k, v]) => [
            k,
            { count: v.count, ms: Math.round(v.ms * 10) / 10, maxMs: Math.round(v.maxMs * 100) / 100 },
          ]),
        ),
      }),
    );
    delay.reset();
    gc = new Map();
    since = now;
  });
}
