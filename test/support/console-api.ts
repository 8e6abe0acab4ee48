// A client of the console's JSON API (/console/api, docs/console.md#api) over real HTTP, as the
// page uses it: the session cookie kept from sign-in, the CSRF token sent on every POST, the
// page's own Origin. Optionally from another loopback address (the throttle counts per address).
import { createHash } from 'node:crypto';
import { Agent, fetch as undiciFetch, type Response } from 'undici';

export interface ConsoleAnswer<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export class ConsoleClient {
  readonly baseUrl: string;
  cookie = '';
  csrf = '';
  private readonly dispatcher: Agent | undefined;

  /** `localAddress`: the client's source address, e.g. '127.0.0.7' (Linux routes all of 127/8 to loopback). */
  constructor(baseUrl: string, opts: { localAddress?: string } = {}) {
    this.baseUrl = baseUrl;
    this.dispatcher = opts.localAddress ? new Agent({ localAddress: opts.localAddress }) : undefined;
  }

  get origin(): string {
    return new URL(this.baseUrl).origin;
  }

  async request<T = Record<string, unknown>>(
    method: string,
    path: string,
    opts: { body?: unknown; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<ConsoleAnswer<T>> {
    const headers: Record<string, string> = { ...(this.cookie ? { cookie: this.cookie } : {}) };
    if (method !== 'GET') {
      headers['content-type'] = 'application/json';
      headers.origin = this.origin;
      if (this.csrf) headers['x-csrf-token'] = this.csrf;
    }
    Object.assign(headers, opts.headers ?? {});
    for (const [k, v] of Object.entries(headers)) if (v === '') delete headers[k];
    const res: Response = await undiciFetch(`${this.baseUrl}/console/api${path}`, {
      method,
      headers,
      body: opts.raw ?? (opts.body === undefined ? (method === 'GET' ? undefined : '{}') : JSON.stringify(opts.body)),
      ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
    });
    const text = await res.text();
    let body: unknown = text;
    if ((res.headers.get('content-type') ?? '').startsWith('application/json')) body = JSON.parse(text);
    return { status: res.status, headers: res.headers as unknown as Headers, body: body as T, text };
  }

  get<T = Record<string, unknown>>(path: string, headers?: Record<string, string>): Promise<ConsoleAnswer<T>> {
    return this.request<T>('GET', path, { ...(headers ? { headers } : {}) });
  }

  post<T = Record<string, unknown>>(
    path: string,
    body: unknown = {},
    headers?: Record<string, string>,
  ): Promise<ConsoleAnswer<T>> {
    return this.request<T>('POST', path, { body, ...(headers ? { headers } : {}) });
  }

  /** Signs in and keeps the session cookie and CSRF token; the answer as it came. */
  async signIn(credential: { key: string } | { admin_token: string } | { link: string }): Promise<ConsoleAnswer> {
    const r = await this.request('POST', '/session', { body: credential });
    if (r.status === 200) {
      const set = r.headers.get('set-cookie') ?? '';
      this.cookie = set.split(';')[0]!;
      this.csrf = String(r.body.csrf);
    }
    return r;
  }

  /** Signs in and fails the test unless it worked. */
  async signedIn(credential: Parameters<ConsoleClient['signIn']>[0]): Promise<this> {
    const r = await this.signIn(credential);
    if (r.status !== 200) throw new Error(`console sign-in failed: ${r.status} ${r.text}`);
    return this;
  }

  async close(): Promise<void> {
    await this.dispatcher?.close();
  }
}

/** The session id the database keeps for a cookie: the SHA-256 of its value. */
export function sessionIdOf(cookie: string): Buffer {
  return createHash('sha256').update(cookie.split('=')[1]!, 'utf8').digest();
}
