// What the stand-alone runs (`npm run faults`, `npm run trace-walk`) share: a clock for their
// lines, the checks they record as they go, and the verdict their exit code and last line give.
export const started = Date.now();
export const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const log = (line: string) => console.log(`[${elapsed().padStart(7)}] ${line}`);

/** Each check as it is made, printed (`indent` before it) and kept for the verdict. */
export class Checks {
  readonly list: { name: string; ok: boolean; detail: string }[] = [];
  private readonly indent: string;

  constructor(indent = '') {
    this.indent = indent;
  }

  readonly check = (name: string, ok: boolean, detail = '') => {
    this.list.push({ name, ok, detail });
    console.log(`${this.indent}${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? `: ${detail}` : ''}`);
  };

  get failed() {
    return this.list.filter((c) => !c.ok);
  }

  /** The run's exit code: one that went well fails still when a check failed, or none was made. */
  exitCode(code: number): number {
    return code === 0 && (this.failed.length > 0 || this.list.length === 0) ? 1 : code;
  }

  /** "N of M checks passed", the failed ones by `name`, how the run stopped and how long it took. */
  summary(exitCode: number, name: (c: { name: string }) => string, separator: string): string {
    const failed = this.failed;
    return (
      `${this.list.length - failed.length} of ${this.list.length} checks passed` +
      (failed.length ? ` (failed: ${failed.map(name).join(separator)})` : '') +
      `${exitCode === 130 ? '; stopped by a signal' : exitCode === 2 ? '; stopped at the time limit' : ''}; ${elapsed()} in all; every process stopped`
    );
  }
}
