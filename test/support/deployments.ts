// Helpers for the tests of providers and deployments (deployments, deployment-limits,
// coding-agents-deployments): a database of the file's own, credentials named by variables,
// bounded-concurrency request runs and polling with a deadline.
import { inject } from 'vitest';
import type { Db } from '../../src/db/db.ts';
import { CredentialStore } from '../../src/catalogue/credentials.ts';
import { createDatabase } from './postgres.ts';

/**
 * A database named `name` on the test server, for a file whose book has providers of its own
 * (on the shared database they would show in every other file's gateways): its URL, and create()
 * to make it before a gateway starts on it.
 */
export function ownDatabase(name: string): { url: string; create: () => Promise<void> } {
  const admin = inject('adminDatabaseUrl');
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return { url: url.toString(), create: () => createDatabase(admin, name) };
}

/** Each provider's credential named as a variable of the gateway's, in one transaction: a refresh reads all or none. */
export async function nameCredentials(db: Db, variables: Record<string, string>, source: string): Promise<void> {
  await db.transaction(async (trx) => {
    const store = new CredentialStore(trx as unknown as Db, undefined, {});
    for (const [provider, variable] of Object.entries(variables)) await store.setEnv(provider, variable, source);
  });
}

/** Runs `fn(0..n-1)` with at most `concurrency` in flight; the results in index order. */
export async function inPool<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      out[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, worker));
  return out;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every `everyMs` until it returns a value other than undefined; throws naming `what` past `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
