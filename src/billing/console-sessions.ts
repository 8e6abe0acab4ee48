// The browser console's sessions and one-time sign-in links (docs/console.md#signing-in), in
// PostgreSQL so every instance honours them (migration 017). A secret is never stored: a session
// row is named by the SHA-256 of its cookie value, a link by the SHA-256 of its token, both 256
// random bits, so a copy of the table signs nobody in. A session opened with a key (a team key's
// holder, or a member who signed in with one of their own keys) lasts only while the key does:
// revoking or rotating the key elsewhere ends it (the console's own rotation moves it to the new
// key). A member's session also ends when they leave the organisation.
//
// The console (src/console/) is an edge and never holds the database: server.ts hands it this
// store, as it hands the facade the key check. Links are made through BillingService
// (CreateConsoleLink: the bot may run apart from the gateway) and redeemed here, at sign-in.
import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/db.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/**
 * A holder signed in with a key (a team's key, or the key of an account from before
 * organisations) sees that key's account; a member (signed in with their own personal key, or a
 * member's link) sees the organisation as their role allows; the operator sees everything.
 */
export type ConsoleRole = 'holder' | 'operator' | 'member';

export interface ConsoleSession {
  role: ConsoleRole;
  /**
   * The holder's or member's account (organisation), and the key the session was opened with: the
   * holder's, or the member's own key they signed in with ('' for a member's link, the operator).
   */
  accountId: string;
  keyId: string;
  /** The member signed in ('' for a holder or the operator). */
  memberId: string;
  keyPrefix: string;
  /** The account's price group ('' = the default, and for the operator). */
  group: string;
  /** What every state-changing request of the session must send in x-csrf-token. */
  csrf: string;
  /** The absolute end; idleness ends it sooner. */
  expiresAt: Date;
  /** An operator session's proof of the admin token it was made with (see `open`); null for a holder. */
  operatorCheck: Buffer | null;
}

export interface SessionLifetimes {
  /** From sign-in, whatever happens. */
  absoluteMs: number;
  /** Without a request. */
  idleMs: number;
}

/** How long a link lasts. */
export const CONSOLE_LINK_TTL_MS = 10 * 60_000;

/** A cookie value or link token: 32 random bytes, base64url. */
const SECRET_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const newSecret = () => randomBytes(32).toString('base64url');
const digest = (secret: string) => createHash('sha256').update(secret, 'utf8').digest();

/** A session's last request is written at most this often (idle expiry is that much coarser). */
const TOUCH_EVERY_S = 30;

export class ConsoleSessions {
  private readonly db: Db;
  private readonly lifetimes: SessionLifetimes;

  constructor(db: Db, lifetimes: SessionLifetimes) {
    this.db = db;
    this.lifetimes = lifetimes;
  }

  /**
   * A new session; its cookie value is returned once and stored only as a hash. An operator
   * session stores `check(cookie)` (the console's proof of the admin token, which this store
   * knows nothing of) for the console to compare on every request.
   */
  async open(
    who:
      | { role: 'operator'; check: (cookie: string) => Buffer }
      | { role: 'holder'; accountId: string; keyId: string }
      | { role: 'member'; accountId: string; memberId: string; keyId?: string },
  ): Promise<{ cookie: string; csrf: string; expiresAt: Date }> {
    const cookie = newSecret();
    const csrf = newSecret();
    const rows = rowsOf(
      await this.db.raw(
        `INSERT INTO console_sessions (id, role, account_id, key_id, member_id, csrf, expires_at, operator_check)
         VALUES (?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?), ?) RETURNING expires_at`,
        [
          digest(cookie),
          who.role,
          who.role === 'operator' ? null : who.accountId,
          who.role === 'operator' ? null : who.keyId || null,
          who.role === 'member' ? who.memberId : null,
          csrf,
          this.lifetimes.absoluteMs / 1000,
          who.role === 'operator' ? who.check(cookie) : null,
        ],
      ),
    );
    return { cookie, csrf, expiresAt: new Date(rows[0]!.expires_at as string) };
  }

  /**
   * The live session a cookie value names: not ended, not past its absolute or idle expiry, the key
   * it was opened with (if any) not revoked, for a member their membership still there (a member
   * removed is signed out on every instance at once). Undefined otherwise.
   */
  async find(cookie: string | undefined): Promise<ConsoleSession | undefined> {
    if (!cookie || !SECRET_SHAPE.test(cookie)) return undefined;
    const id = digest(cookie);
    const r = rowsOf(
      await this.db.raw(
        `SELECT s.role, s.account_id, s.key_id, s.member_id, s.csrf, s.expires_at, s.operator_check, k.prefix, a.price_group,
                s.last_seen_at < now() - make_interval(secs => ?) AS stale
         FROM console_sessions s
         LEFT JOIN api_keys k ON k.id = s.key_id
         LEFT JOIN accounts a ON a.id = s.account_id
         WHERE s.id = ? AND s.ended_at IS NULL AND s.expires_at > now()
           AND s.last_seen_at > now() - make_interval(secs => ?)
           AND (s.key_id IS NULL OR k.revoked_at IS NULL)
           AND (s.role <> 'member' OR EXISTS (SELECT 1 FROM memberships m
                                              WHERE m.account_id = s.account_id AND m.member_id = s.member_id))`,
        [TOUCH_EVERY_S, id, this.lifetimes.idleMs / 1000],
      ),
    )[0];
    if (!r) return undefined;
    if (r.stale) await this.db.raw('UPDATE console_sessions SET last_seen_at = now() WHERE id = ?', [id]);
    return {
      role: r.role as ConsoleRole,
      accountId: (r.account_id as string | null) ?? '',
      keyId: (r.key_id as string | null) ?? '',
      memberId: (r.member_id as string | null) ?? '',
      keyPrefix: (r.prefix as string | null) ?? '',
      group: (r.price_group as string | null) ?? '',
      csrf: r.csrf as string,
      expiresAt: new Date(r.expires_at as string),
      operatorCheck: (r.operator_check as Buffer | null) ?? null,
    };
  }

  /** Ends the session (sign-out); true when it was live. */
  async end(cookie: string | undefined): Promise<boolean> {
    if (!cookie || !SECRET_SHAPE.test(cookie)) return false;
    const rows = rowsOf(
      await this.db.raw(
        'UPDATE console_sessions SET ended_at = now() WHERE id = ? AND ended_at IS NULL RETURNING 1 AS ended',
        [digest(cookie)],
      ),
    );
    return rows.length > 0;
  }

  /** After the session's own key was rotated in the console: the session goes on with the new key. */
  async moveToKey(cookie: string, keyId: string): Promise<void> {
    await this.db.raw(`UPDATE console_sessions SET key_id = ? WHERE id = ? AND key_id IS NOT NULL`, [
      keyId,
      digest(cookie),
    ]);
  }

  /**
   * Redeems a link token once: the account and key, or member, it was made for, when the link is
   * unused, unexpired and its key still live (its member still in the organisation); undefined
   * otherwise (a used link stays used). A key's link names the key's member too when the key is a
   * member's (the session is then that member's, as a sign-in with the key is); '' for a team's key.
   */
  async redeemLink(token: string): Promise<{ accountId: string; keyId: string; memberId: string } | undefined> {
    if (!SECRET_SHAPE.test(token)) return undefined;
    const r = rowsOf(
      await this.db.raw(
        `WITH l AS (
           UPDATE console_links SET used_at = now()
           WHERE id = ? AND used_at IS NULL AND expires_at > now()
           RETURNING account_id, key_id, member_id
         )
         SELECT l.account_id, l.key_id, COALESCE(l.member_id, k.member_id) AS member_id
         FROM l LEFT JOIN api_keys k ON k.id = l.key_id
         WHERE (l.key_id IS NOT NULL AND k.revoked_at IS NULL)
            OR (l.member_id IS NOT NULL AND EXISTS (SELECT 1 FROM memberships m
                                                    WHERE m.account_id = l.account_id AND m.member_id = l.member_id))`,
        [digest(token)],
      ),
    )[0];
    if (!r) return undefined;
    return {
      accountId: r.account_id as string,
      keyId: (r.key_id as string | null) ?? '',
      memberId: (r.member_id as string | null) ?? '',
    };
  }

  /** Forgets sessions and links that ended or expired more than a day ago. */
  async prune(): Promise<void> {
    await this.db.raw(
      `DELETE FROM console_sessions WHERE expires_at < now() - INTERVAL '1 day' OR ended_at < now() - INTERVAL '1 day'`,
    );
    await this.db.raw(`DELETE FROM console_links WHERE expires_at < now() - INTERVAL '1 day'`);
  }
}

/** A new one-time link for a key's account (CreateConsoleLink); the token is returned once and stored only as a hash. */
export async function createConsoleLink(
  db: Db,
  key: { accountId: string; keyId: string },
): Promise<{ token: string; expiresAt: Date }> {
  const token = newSecret();
  const rows = rowsOf(
    await db.raw(
      `INSERT INTO console_links (id, account_id, key_id, expires_at) VALUES (?, ?, ?, now() + make_interval(secs => ?))
       RETURNING expires_at`,
      [digest(token), key.accountId, key.keyId, CONSOLE_LINK_TTL_MS / 1000],
    ),
  );
  return { token, expiresAt: new Date(rows[0]!.expires_at as string) };
}

/** A new one-time link for a member of an organisation (CreateMemberSignInLink); the token is returned once. */
export async function createMemberLink(
  db: Db,
  who: { accountId: string; memberId: string },
): Promise<{ token: string; expiresAt: Date }> {
  const token = newSecret();
  const rows = rowsOf(
    await db.raw(
      `INSERT INTO console_links (id, account_id, member_id, expires_at) VALUES (?, ?, ?, now() + make_interval(secs => ?))
       RETURNING expires_at`,
      [digest(token), who.accountId, who.memberId, CONSOLE_LINK_TTL_MS / 1000],
    ),
  );
  return { token, expiresAt: new Date(rows[0]!.expires_at as string) };
}
