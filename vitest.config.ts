import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Forks, not threads: Temporal's native module (video jobs) crashes in worker threads.
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          // Real PostgreSQL, simulator and gateway, started once for the whole run.
          globalSetup: ['./test/support/global-setup.ts'],
        },
      },
    ],
  },
});
