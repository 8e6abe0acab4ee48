// Plain JavaScript on purpose: an old Node stops at the first .ts file with an error that says
// nothing about versions, so this runs first. `node scripts/node-check.mjs` checks the running
// Node and exits non-zero with one line when it is too old; `node scripts/node-check.mjs
// <entry.ts> [args…]` checks, then runs the entry in this same process (as if started as
// `node <entry.ts> [args…]`), so signals reach it directly.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Keep in step with `engines` in package.json and the README. */
export const MINIMUM_NODE = '22.19.0';

/** [major, minor, patch] of "v22.19.0" or "22.19.0"; undefined when it is not a version. */
export function parseVersion(v) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(String(v).trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

export function atLeast(version, minimum) {
  const a = parseVersion(version);
  const b = parseVersion(minimum);
  if (!a || !b) return false;
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/** The line to print when `version` is too old; undefined when it will do. */
export function nodeVersionProblem(version, minimum = MINIMUM_NODE) {
  if (atLeast(version, minimum)) return undefined;
  const shown = String(version).startsWith('v') ? version : `v${version}`;
  return `metered-ai-gateway needs Node >= ${minimum}, this is ${shown}; install Node 22 LTS or newer from https://nodejs.org`;
}

const invoked =
  process.argv[1] &&
  path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? new URL(import.meta.url).pathname);
if (invoked) {
  const problem = nodeVersionProblem(process.version);
  if (problem) {
    console.error(problem);
    process.exit(1);
  }
  const entry = process.argv[2];
  if (entry) {
    // The entry sees the argv it would have had if started directly.
    process.argv.splice(1, 2, path.resolve(entry));
    await import(pathToFileURL(path.resolve(entry)).href);
  }
}
