// The providers' credentials in PostgreSQL (migration 018): each one either sealed with AES-256-GCM
// under the credentials key, or the name of an environment variable that holds it. The key never
// enters the database, so a dump or a backup of it holds no usable secret; the provider's id is
// the sealing's additional data, so a sealed value copied into another provider's row does not
// open there. Nothing here returns a secret except `secrets()`, which the upstream calls use.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../db/db.ts';

export interface CredentialKey {
  /** 32 bytes. */
  key: Buffer;
  /** The key's fingerprint (the first 16 hex characters of its SHA-256): safe to show and to store. */
  id: string;
  /** Where it came from: 'CREDENTIALS_KEY' or the key file's path. */
  where: string;
}

export interface CredentialInfo {
  providerId: string;
  form: 'sealed' | 'env';
  envName?: string;
  version: bigint;
  updatedAt: Date;
  source: string;
  /** Sealed under a key other than the current one (or no key available): it cannot be used. */
  unreadable: boolean;
}

export type CredentialErrorCode = 'no_credentials_key' | 'invalid_env_name' | 'invalid_secret' | 'unseal_failed';

export class CredentialError extends Error {
  readonly code: CredentialErrorCode;
  constructor(code: CredentialErrorCode, message: string) {
    super(message);
    this.name = 'CredentialError';
    this.code = code;
  }
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_FILE = 'credentials.key';
/** Longer than any provider's key; a bound so a pasted file is refused rather than sent as a header. */
export const MAX_SECRET_CHARS = 8192;
const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
// base64 or base64url (Node decodes both); anything else Node would skip silently, so it is refused here.
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/**
 * The key that seals credentials: CREDENTIALS_KEY when set; else, on the embedded defaults, a key
 * file in the data folder, made on first use (the embedded server's data is in the same folder, so
 * this guards dumps and backups of the database, not the machine); else none, and only credentials
 * named by environment variable work.
 */
export function credentialKey(opts: {
  configured?: string;
  dataDir: string;
  embedded: boolean;
}): CredentialKey | undefined {
  if (opts.configured !== undefined) return keyOf(opts.configured, 'CREDENTIALS_KEY', 'CREDENTIALS_KEY');
  if (!opts.embedded) return undefined;
  const file = path.join(opts.dataDir, KEY_FILE);
  if (!fs.existsSync(file)) createKeyFile(file);
  return keyOf(fs.readFileSync(file, 'utf8'), `the credentials key file ${file}`, file);
}

/** Parses a base64 key; the message names `what` and never the value. */
function keyOf(text: string, what: string, where: string): CredentialKey {
  const trimmed = text.trim();
  const hint = 'it must be 32 random bytes in base64, e.g. from `openssl rand -base64 32`';
  if (!BASE64.test(trimmed)) throw new Error(`${what} is not base64: ${hint}`);
  const key = Buffer.from(trimmed, 'base64');
  if (key.length !== KEY_BYTES) throw new Error(`${what} decodes to ${key.length} bytes, not ${KEY_BYTES}: ${hint}`);
  return { key, id: createHash('sha256').update(key).digest('hex').slice(0, 16), where };
}

/**
 * Writes a new key file whole (a temp file, then linked into place): a reader never sees half a
 * key, and of two instances starting at once the second keeps the first one's key instead of
 * replacing it (a replaced key would strand whatever the first had sealed already).
 */
function createKeyFile(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, `${randomBytes(KEY_BYTES).toString('base64')}\n`, { mode: 0o600, flag: 'wx', flush: true });
  try {
    fs.linkSync(tmp, file);
  } catch (err) {
    // EEXIST: another instance was first, and its key is read. A filesystem without hard links
    // gets a plain rename, which could replace a key made in the same instant.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST' && !fs.existsSync(file)) fs.renameSync(tmp, file);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** nonce || tag || ciphertext, the provider's id authenticated with it. */
export function seal(key: CredentialKey, secret: string, providerId: string): Buffer {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(providerId, 'utf8'));
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, cipher.getAuthTag(), body]);
}

export function unseal(key: CredentialKey, sealed: Buffer, providerId: string): string {
  try {
    if (sealed.length <= NONCE_BYTES + TAG_BYTES) throw new Error('too short');
    const decipher = createDecipheriv('aes-256-gcm', key.key, sealed.subarray(0, NONCE_BYTES), {
      authTagLength: TAG_BYTES,
    });
    decipher.setAAD(Buffer.from(providerId, 'utf8'));
    decipher.setAuthTag(sealed.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    throw new CredentialError(
      'unseal_failed',
      `the credential of provider ${providerId} does not open with the credentials key ${key.id} (from ${key.where}): ` +
        'it was sealed under another key, for another provider, or altered',
    );
  }
}

/**
 * Why `secret` cannot be a provider credential, or undefined. It goes into an HTTP header, where a
 * line break or NUL would end it or split it; the answer never quotes it.
 */
function secretProblem(secret: string): string | undefined {
  if (typeof secret !== 'string' || secret.length === 0) return 'the secret is empty';
  if (secret.length > MAX_SECRET_CHARS) return `the secret is longer than ${MAX_SECRET_CHARS} characters`;
  const control = /\p{Cc}/u.exec(secret);
  if (control) {
    const code = control[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    return `the secret contains the control character U+${code} (a line break, tab or NUL cannot go into an HTTP header)`;
  }
  return undefined;
}

const COLUMNS = 'provider_id, key_id, env_name, version::text AS version, updated_at, source';

export class CredentialStore {
  private readonly db: Db;
  private readonly key: CredentialKey | undefined;
  private readonly env: Readonly<Record<string, string | undefined>>;

  /** `env`: the process's environment as its configuration read it (config.environment), for credentials that name a variable. */
  constructor(db: Db, key: CredentialKey | undefined, env: Readonly<Record<string, string | undefined>>) {
    this.db = db;
    this.key = key;
    this.env = env;
  }

  /** Seals `secret` as the provider's credential, replacing whatever it had. */
  async setSecret(providerId: string, secret: string, source: string): Promise<CredentialInfo> {
    if (!this.key)
      throw new CredentialError(
        'no_credentials_key',
        'no credentials key: set CREDENTIALS_KEY (32 random bytes in base64) to store secrets, or name an environment variable instead',
      );
    const problem = secretProblem(secret);
    if (problem) throw new CredentialError('invalid_secret', `${problem} (provider ${providerId})`);
    return this.upsert(providerId, seal(this.key, secret, providerId), this.key.id, null, source);
  }

  /** Names the environment variable that holds the provider's credential, replacing whatever it had. */
  async setEnv(providerId: string, envName: string, source: string): Promise<CredentialInfo> {
    if (!ENV_NAME.test(envName))
      throw new CredentialError(
        'invalid_env_name',
        // Not quoted: a secret pasted where its variable's name belongs would otherwise be echoed.
        'not an environment variable name: capitals, digits and _, not starting with a digit, at most 128 characters',
      );
    return this.upsert(providerId, null, null, envName, source);
  }

  private async upsert(
    providerId: string,
    sealed: Buffer | null,
    keyId: string | null,
    envName: string | null,
    source: string,
  ): Promise<CredentialInfo> {
    const rows = rowsOf(
      await this.db.raw(
        `INSERT INTO provider_credentials (provider_id, sealed, key_id, env_name, source) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (provider_id) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id,
           env_name = EXCLUDED.env_name, source = EXCLUDED.source, updated_at = now(),
           version = provider_credentials.version + 1
         RETURNING ${COLUMNS}`,
        [providerId, sealed, keyId, envName, source],
      ),
    );
    return this.infoOf(rows[0]!);
  }

  /** False when the provider had no credential. */
  async remove(providerId: string): Promise<boolean> {
    const r = await this.db.raw('DELETE FROM provider_credentials WHERE provider_id = ?', [providerId]);
    return ((r as { rowCount: number | null }).rowCount ?? 0) > 0;
  }

  /** Every credential, by provider id; never the secrets. */
  async list(): Promise<CredentialInfo[]> {
    const rows = rowsOf(
      await this.db.raw(`SELECT ${COLUMNS} FROM provider_credentials ORDER BY provider_id COLLATE "C"`),
    );
    return rows.map((r) => this.infoOf(r));
  }

  private infoOf(r: Row): CredentialInfo {
    const envName = r.env_name as string | null;
    return {
      providerId: r.provider_id as string,
      form: envName === null ? 'sealed' : 'env',
      ...(envName === null ? {} : { envName }),
      version: BigInt(r.version as string),
      updatedAt: r.updated_at as Date,
      source: r.source as string,
      unreadable: envName === null && r.key_id !== this.key?.id,
    };
  }

  /**
   * Every provider's usable secret. A credential that yields none (sealed under another key or
   * altered, its variable unset, empty or not fit for a header) is left out and reported to
   * `onProblem`, in words that never include a secret.
   */
  async secrets(onProblem?: (providerId: string, message: string) => void): Promise<Map<string, string>> {
    const rows = rowsOf(await this.db.raw('SELECT provider_id, sealed, key_id, env_name FROM provider_credentials'));
    const out = new Map<string, string>();
    for (const r of rows) {
      const providerId = r.provider_id as string;
      const found = this.secretOf(providerId, r);
      if ('secret' in found) out.set(providerId, found.secret);
      else onProblem?.(providerId, found.problem);
    }
    return out;
  }

  private secretOf(providerId: string, r: Row): { secret: string } | { problem: string } {
    const envName = r.env_name as string | null;
    if (envName !== null) {
      const value = this.env[envName];
      if (value === undefined || value === '')
        return { problem: `the environment variable ${envName} is ${value === undefined ? 'not set' : 'empty'}` };
      const problem = secretProblem(value);
      return problem ? { problem: `${envName}: ${problem}` } : { secret: value };
    }
    const keyId = r.key_id as string;
    if (!this.key) return { problem: `sealed under the credentials key ${keyId}, and no credentials key is available` };
    if (keyId !== this.key.id)
      return {
        problem: `sealed under the credentials key ${keyId}, not the current one ${this.key.id} (${this.key.where})`,
      };
    try {
      return { secret: unseal(this.key, r.sealed as Buffer, providerId) };
    } catch (err) {
      return { problem: (err as Error).message };
    }
  }

  /**
   * Changes whenever any credential row does (written, replaced or removed), so a refresher can
   * skip re-reading unchanged credentials. Environment variables are the process's own and not in it.
   */
  async versionStamp(): Promise<string> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT count(*)::text || ':' || md5(coalesce(string_agg(
           provider_id || '/' || version || '/' || extract(epoch FROM updated_at) || '/' || coalesce(key_id, '') || '/' || coalesce(env_name, ''),
           ',' ORDER BY provider_id COLLATE "C"), '')) AS stamp
         FROM provider_credentials`,
      ),
    );
    return rows[0]!.stamp as string;
  }
}
