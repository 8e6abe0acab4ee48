// Prints one plain closing line, "N passed, N failed, N skipped", that any CI can read.
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const names: string[] = [];
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') {
          failed++;
          names.push(`${m.moduleId.split('/test/').pop()} > ${t.fullName}`);
        } else skipped++;
      }
      if (m.state() === 'failed' && [...m.children.allTests()].length === 0) {
        failed++;
        names.push(m.moduleId);
      }
    }
    for (const n of names) process.stdout.write(`\nfailed: ${n}`);
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
