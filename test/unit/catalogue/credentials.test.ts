// The providers' credential store (src/catalogue/credentials.ts) on a PostgreSQL server of its own:
// secrets sealed with AES-256-GCM under a key the database never sees, bound to their provider,
// and never read back out anywhere but secrets().
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migrate, openDb, type Db } from '../../../src/db/db.ts';
import {
  CredentialError,
  CredentialStore,
  credentialKey,
  seal,
  unseal,
  type CredentialKey,
} from '../../../src/catalogue/credentials.ts';
import { createDatabase, startPostgres, type TestPostgres } from '../../support/postgres.ts';

let server: TestPostgres;
let db: Db;
beforeAll(async () => {
  server = await startPostgres();
  await createDatabase(server.url(), 'credentials');
  db = await openDb({ databaseUrl: server.url('credentials'), poolMax: 2 });
  await migrate(db);
});
afterAll(async () => {
  await db?.destroy();
  await server?.stop();
});
beforeEach(async () => {
  await db.raw('DELETE FROM provider_credentials');
});

const run = promisify(execFile);
const newKey = (): CredentialKey =>
  credentialKey({ configured: randomBytes(32).toString('base64'), dataDir: '/nonexistent', embedded: false })!;
const newSecret = () => `sk-test-${randomBytes(16).toString('hex')}`;
/** What a caught error or a rejected promise was; fails when there was none. */
async function errorOf(work: () => unknown): Promise<Error> {
  try {
    await work();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected an error');
}
const json = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));

describe('seal and unseal', () => {
  it('round trip: nonce || tag || ciphertext, a fresh nonce each time', () => {
    const key = newKey();
    const secret = newSecret();
    const a = seal(key, secret, 'openai');
    const b = seal(key, secret, 'openai');
    expect(a.length).toBe(12 + 16 + Buffer.byteLength(secret));
    expect(a.equals(b)).toBe(false);
    expect(unseal(key, a, 'openai')).toBe(secret);
    expect(unseal(key, b, 'openai')).toBe(secret);
    expect(unseal(key, seal(key, 'ключ-✓', 'p'), 'p')).toBe('ключ-✓');
  });

  it('another key does not open it, and the error names the provider, not the secret', async () => {
    const secret = newSecret();
    const sealed = seal(newKey(), secret, 'openai');
    const err = await errorOf(() => unseal(newKey(), sealed, 'openai'));
    expect(err).toBeInstanceOf(CredentialError);
    expect((err as CredentialError).code).toBe('unseal_failed');
    expect(err.message).toContain('openai');
    expect(err.message).not.toContain(secret);
  });

  it("a value sealed for one provider does not open as another's", () => {
    const key = newKey();
    const sealed = seal(key, newSecret(), 'openai');
    expect(() => unseal(key, sealed, 'anthropic')).toThrow(/provider anthropic/);
  });

  it('any altered byte (nonce, tag or ciphertext), or a cut value, fails', () => {
    const key = newKey();
    const sealed = seal(key, newSecret(), 'openai');
    for (const at of [0, 11, 12, 27, 28, sealed.length - 1]) {
      const altered = Buffer.from(sealed);
      altered[at]! ^= 0x01;
      expect(() => unseal(key, altered, 'openai'), `byte ${at}`).toThrow(CredentialError);
    }
    expect(() => unseal(key, sealed.subarray(0, 28), 'openai')).toThrow(CredentialError);
    expect(() => unseal(key, sealed.subarray(0, sealed.length - 1), 'openai')).toThrow(CredentialError);
  });
});

describe('credentialKey', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'credentials-key-'));
    return () => fs.rmSync(dir, { recursive: true, force: true });
  });

  it('CREDENTIALS_KEY: base64 or base64url of 32 bytes, its fingerprint the start of its SHA-256', () => {
    const bytes = randomBytes(32);
    const a = credentialKey({ configured: bytes.toString('base64'), dataDir: dir, embedded: true })!;
    const b = credentialKey({ configured: `${bytes.toString('base64url')}\n`, dataDir: dir, embedded: false })!;
    expect(a.key.equals(bytes)).toBe(true);
    expect(b.key.equals(bytes)).toBe(true);
    expect(a.id).toMatch(/^[0-9a-f]{16}$/);
    expect(b.id).toBe(a.id);
    expect(a.where).toBe('CREDENTIALS_KEY');
    // Configured, no key file is made even on the embedded defaults.
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a bad CREDENTIALS_KEY is refused, naming the setting and what is wrong, never the value', async () => {
    const cases: [string, RegExp][] = [
      [randomBytes(16).toString('base64'), /16 bytes, not 32/],
      [randomBytes(33).toString('base64'), /33 bytes, not 32/],
      [`${randomBytes(24).toString('hex')}!*`, /not base64/],
      ['correct horse battery staple correct horse', /not base64/],
    ];
    for (const [value, why] of cases) {
      const err = await errorOf(() => credentialKey({ configured: value, dataDir: dir, embedded: true }));
      expect(err.message).toContain('CREDENTIALS_KEY');
      expect(err.message).toMatch(why);
      expect(err.message).not.toContain(value);
    }
  });

  it('on the embedded defaults: a key file made once, mode 0600, and the same key read back after', () => {
    const dataDir = path.join(dir, 'not', 'yet');
    const first = credentialKey({ dataDir, embedded: true })!;
    const file = path.join(dataDir, 'credentials.key');
    expect(first.where).toBe(file);
    expect(first.key.length).toBe(32);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64').equals(first.key)).toBe(true);
    const second = credentialKey({ dataDir, embedded: true })!;
    expect(second.key.equals(first.key)).toBe(true);
    expect(second.id).toBe(first.id);
    // No temp file left beside it.
    expect(fs.readdirSync(dataDir)).toEqual(['credentials.key']);
  });

  it('instances starting at once on a new data folder all end up with one and the same key', async () => {
    const module = path.resolve('src/catalogue/credentials.ts');
    const script = `import { credentialKey } from ${JSON.stringify(module)};
      process.stdout.write(credentialKey({ dataDir: ${JSON.stringify(dir)}, embedded: true }).id);`;
    const ids = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
        return stdout;
      }),
    );
    expect(ids[0]).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(ids)).toEqual(new Set([ids[0]]));
    expect(credentialKey({ dataDir: dir, embedded: true })!.id).toBe(ids[0]);
    expect(fs.readdirSync(dir)).toEqual(['credentials.key']);
  });

  it('a key file already there is used, and a damaged one is refused without quoting it', async () => {
    const bytes = randomBytes(32);
    fs.writeFileSync(path.join(dir, 'credentials.key'), `${bytes.toString('base64')}\n`, { mode: 0o600 });
    expect(credentialKey({ dataDir: dir, embedded: true })!.key.equals(bytes)).toBe(true);
    const cut = bytes.toString('base64').slice(0, 20);
    fs.writeFileSync(path.join(dir, 'credentials.key'), cut);
    const err = await errorOf(() => credentialKey({ dataDir: dir, embedded: true }));
    expect(err.message).toContain(path.join(dir, 'credentials.key'));
    expect(err.message).not.toContain(cut);
  });

  it('neither configured nor embedded: no key, and no file made', () => {
    expect(credentialKey({ dataDir: dir, embedded: false })).toBeUndefined();
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe('CredentialStore', () => {
  it('the table holds no trace of the secret: not in the bytes, not in the row as text', async () => {
    const key = newKey();
    const secret = newSecret();
    await new CredentialStore(db, key, {}).setSecret('openai', secret, 'test');
    const row = (await db.raw("SELECT sealed, key_id FROM provider_credentials WHERE provider_id = 'openai'")).rows[0];
    const sealed = row.sealed as Buffer;
    expect(Buffer.isBuffer(sealed)).toBe(true);
    expect(sealed.includes(Buffer.from(secret))).toBe(false);
    expect(sealed.includes(Buffer.from(secret.slice(8)))).toBe(false);
    expect(row.key_id).toBe(key.id);
    // What a dump would show: the whole row as text, and the bytes in each of PostgreSQL's renderings.
    const text = (
      await db.raw(
        `SELECT c::text AS whole, encode(sealed, 'escape') AS esc, encode(sealed, 'base64') AS b64
         FROM provider_credentials c`,
      )
    ).rows[0];
    for (const t of [text.whole, text.esc, text.b64] as string[]) {
      expect(t).not.toContain(secret);
      expect(t).not.toContain(secret.slice(8));
      expect(t).not.toContain(Buffer.from(secret).toString('hex'));
      expect(t).not.toContain(key.key.toString('hex'));
    }
  });

  it('a secret set, then replaced: the version goes up by one each time and secrets() has the latest', async () => {
    const key = newKey();
    const store = new CredentialStore(db, key, {});
    const first = await store.setSecret('openai', newSecret(), 'cli');
    expect(first).toMatchObject({
      providerId: 'openai',
      form: 'sealed',
      version: 1n,
      source: 'cli',
      unreadable: false,
    });
    expect(first.envName).toBeUndefined();
    expect(first.updatedAt).toBeInstanceOf(Date);
    const latest = newSecret();
    const second = await store.setSecret('openai', latest, 'console');
    expect(second).toMatchObject({ version: 2n, source: 'console' });
    expect(second.updatedAt.getTime()).toBeGreaterThanOrEqual(first.updatedAt.getTime());
    expect((await store.setEnv('openai', 'OPENAI_API_KEY', 'cli')).version).toBe(3n);
    expect((await store.setSecret('openai', latest, 'cli')).version).toBe(4n);
    expect(await store.secrets()).toEqual(new Map([['openai', latest]]));
  });

  it("an environment variable's name: secrets() reads it from the environment, leaving out unset and empty ones", async () => {
    const env = { OPENAI_KEY: 'sk-from-env', EMPTY_KEY: '' } as NodeJS.ProcessEnv;
    const store = new CredentialStore(db, undefined, env);
    const info = await store.setEnv('openai', 'OPENAI_KEY', 'test');
    expect(info).toMatchObject({ form: 'env', envName: 'OPENAI_KEY', version: 1n, unreadable: false });
    await store.setEnv('xai', 'EMPTY_KEY', 'test');
    await store.setEnv('cohere', 'UNSET_KEY', 'test');
    const problems: [string, string][] = [];
    expect(await store.secrets((p, m) => problems.push([p, m]))).toEqual(new Map([['openai', 'sk-from-env']]));
    expect(problems.sort()).toEqual([
      ['cohere', expect.stringContaining('UNSET_KEY')],
      ['xai', expect.stringMatching(/EMPTY_KEY is empty/)],
    ]);
    // Read at each call, not when the name was stored.
    env.UNSET_KEY = 'sk-later';
    expect((await store.secrets()).get('cohere')).toBe('sk-later');
    // A value that could not go into a header is left out too, and not quoted.
    env.OPENAI_KEY = 'sk-from-env\n';
    problems.length = 0;
    expect((await store.secrets((p, m) => problems.push([p, m]))).has('openai')).toBe(false);
    const openaiProblems = problems.filter(([p]) => p === 'openai').map(([, m]) => m);
    expect(openaiProblems).toEqual([expect.stringMatching(/OPENAI_KEY.*U\+000A/)]);
    expect(openaiProblems[0]).not.toContain('sk-from-env');
  });

  it('a name that is not an environment variable name is refused without quoting it', async () => {
    const store = new CredentialStore(db, newKey(), {});
    for (const name of ['', 'lower', '1ABC', 'A-B', 'A B', `A${'B'.repeat(128)}`, 'sk-proj-abc123']) {
      const err = await errorOf(() => store.setEnv('openai', name, 'test'));
      expect(err).toBeInstanceOf(CredentialError);
      expect((err as CredentialError).code).toBe('invalid_env_name');
      if (name.length > 3) expect(err.message).not.toContain(name);
    }
    expect((await store.setEnv('openai', `_A${'9'.repeat(126)}`, 'test')).form).toBe('env');
  });

  it('remove: true when there was one, then false; gone from list() and secrets()', async () => {
    const store = new CredentialStore(db, newKey(), {});
    await store.setSecret('openai', newSecret(), 'test');
    await store.setSecret('xai', newSecret(), 'test');
    expect(await store.remove('openai')).toBe(true);
    expect(await store.remove('openai')).toBe(false);
    expect(await store.remove('never')).toBe(false);
    expect((await store.list()).map((c) => c.providerId)).toEqual(['xai']);
    expect([...(await store.secrets()).keys()]).toEqual(['xai']);
    // Set again, it starts over at version 1.
    expect((await store.setSecret('openai', newSecret(), 'test')).version).toBe(1n);
  });

  it('list(): sorted by provider, the form of each, and never a secret', async () => {
    const store = new CredentialStore(db, newKey(), { X_KEY: 'sk-env-value-1234' });
    const secrets = [newSecret(), newSecret()];
    await store.setSecret('openai', secrets[0]!, 'test');
    await store.setEnv('xai', 'X_KEY', 'test');
    await store.setSecret('anthropic', secrets[1]!, 'test');
    const list = await store.list();
    expect(list.map((c) => [c.providerId, c.form])).toEqual([
      ['anthropic', 'sealed'],
      ['openai', 'sealed'],
      ['xai', 'env'],
    ]);
    const text = json(list);
    for (const s of [...secrets, 'sk-env-value-1234']) expect(text).not.toContain(s);
    expect(text).not.toMatch(/sealed"\s*:\s*\{|"key"/);
  });

  it('no credentials key: setSecret is refused with no_credentials_key, environment names still work', async () => {
    const store = new CredentialStore(db, undefined, { A_KEY: 'sk-a' });
    const secret = newSecret();
    const err = await errorOf(() => store.setSecret('openai', secret, 'test'));
    expect(err).toBeInstanceOf(CredentialError);
    expect((err as CredentialError).code).toBe('no_credentials_key');
    expect(err.message).toContain('CREDENTIALS_KEY');
    expect(err.message).not.toContain(secret);
    expect((await db.raw('SELECT count(*)::int AS n FROM provider_credentials')).rows[0].n).toBe(0);
    await store.setEnv('openai', 'A_KEY', 'test');
    expect(await store.secrets()).toEqual(new Map([['openai', 'sk-a']]));
  });

  it('secrets that could break a header, empty or too long are refused without being echoed', async () => {
    const store = new CredentialStore(db, newKey(), {});
    const body = newSecret();
    const bad = [
      '',
      `${body}\n`,
      `${body}\r\nX-Injected: 1`,
      `${body}\0`,
      `\t${body}`,
      `${body}\u007f`,
      `${body}\u0085`,
      `${body}${'x'.repeat(8193 - body.length)}`,
    ];
    for (const secret of bad) {
      const err = await errorOf(() => store.setSecret('openai', secret, 'test'));
      expect(err).toBeInstanceOf(CredentialError);
      expect((err as CredentialError).code).toBe('invalid_secret');
      expect(err.message).not.toContain(body);
    }
    expect(await store.list()).toEqual([]);
    const longest = `${body}${'x'.repeat(8192 - body.length)}`;
    await store.setSecret('openai', longest, 'test');
    expect((await store.secrets()).get('openai')).toBe(longest);
  });

  it('a row sealed under an old key: unreadable in list(), left out of secrets() and reported', async () => {
    const oldKey = newKey();
    const secret = newSecret();
    await new CredentialStore(db, oldKey, {}).setSecret('openai', secret, 'test');
    const current = newKey();
    const store = new CredentialStore(db, current, { B_KEY: 'sk-b' });
    await store.setSecret('anthropic', newSecret(), 'test');
    await store.setEnv('xai', 'B_KEY', 'test');
    expect((await store.list()).map((c) => [c.providerId, c.unreadable])).toEqual([
      ['anthropic', false],
      ['openai', true],
      ['xai', false],
    ]);
    const problems: [string, string][] = [];
    const found = await store.secrets((p, m) => problems.push([p, m]));
    expect([...found.keys()].sort()).toEqual(['anthropic', 'xai']);
    expect(problems).toEqual([['openai', expect.stringContaining(oldKey.id)]]);
    expect(problems[0]![1]).not.toContain(secret);
    // With no key at all, every sealed row is unreadable.
    const keyless = new CredentialStore(db, undefined, { B_KEY: 'sk-b' });
    expect((await keyless.list()).filter((c) => c.unreadable).map((c) => c.providerId)).toEqual([
      'anthropic',
      'openai',
    ]);
    expect([...(await keyless.secrets()).keys()]).toEqual(['xai']);
  });

  it("a sealed value copied into another provider's row, or altered in place, is left out and reported", async () => {
    const key = newKey();
    const store = new CredentialStore(db, key, {});
    const secret = newSecret();
    await store.setSecret('openai', secret, 'test');
    await store.setSecret('xai', newSecret(), 'test');
    await db.raw(
      "UPDATE provider_credentials SET sealed = (SELECT sealed FROM provider_credentials WHERE provider_id = 'openai') WHERE provider_id = 'xai'",
    );
    await store.setSecret('cohere', newSecret(), 'test');
    await db.raw(
      "UPDATE provider_credentials SET sealed = set_byte(sealed, 29, get_byte(sealed, 29) # 1) WHERE provider_id = 'cohere'",
    );
    const problems: [string, string][] = [];
    expect(await store.secrets((p, m) => problems.push([p, m]))).toEqual(new Map([['openai', secret]]));
    expect(problems.map(([p]) => p).sort()).toEqual(['cohere', 'xai']);
    for (const [p, m] of problems) {
      expect(m).toContain(`provider ${p}`);
      expect(m).not.toContain(secret);
    }
  });

  it('versionStamp(): the same while nothing changes, different after each write, replace and remove', async () => {
    const store = new CredentialStore(db, newKey(), {});
    const seen = new Set<string>();
    const stamp = async () => {
      const s = await store.versionStamp();
      expect(await store.versionStamp()).toBe(s);
      expect(seen.has(s)).toBe(false);
      seen.add(s);
    };
    await stamp();
    await store.setSecret('openai', newSecret(), 'test');
    await stamp();
    await store.setSecret('openai', newSecret(), 'test');
    await stamp();
    await store.setEnv('xai', 'X_KEY', 'test');
    await stamp();
    await store.setEnv('xai', 'Y_KEY', 'test');
    await stamp();
    await store.remove('openai');
    await stamp();
    // Removed and written again: back to version 1, and still a new stamp.
    await store.setSecret('openai', newSecret(), 'test');
    await stamp();
  });
});
