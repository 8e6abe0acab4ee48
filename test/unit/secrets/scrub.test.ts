// The credential scrubber (src/secrets/scrub.ts): the values this process holds, in every form a
// provider may quote them; gateway keys and header-shaped credentials by shape; ordinary text left
// alone, and returned as the same string without the work (the pre-check).
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  mayHoldSecret,
  MIN_SECRET_CHARS,
  REDACTED,
  RETIRED_KEPT,
  scrub,
  setSecrets,
} from '../../../src/secrets/scrub.ts';
import { generateKey } from '../../../src/billing/keys.ts';

/** A provider key with characters percent-encoding and JSON escape: / + =. */
const KEY = 'sk-proj-Ab/Cd+Ef=Gh_12-xYz/9Q';
const AZURE = '0123456789abcdef0123456789abcdef';
const json = (s: string) => JSON.stringify(s).slice(1, -1);
/** Every character as \uXXXX, as some JSON writers escape. */
const uEscaped = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
/** Every byte as %XX (upper case), as some URL encoders write. */
const percentAll = (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');

afterEach(() => {
  setSecrets('test', []);
  setSecrets('other', []);
});

describe('the values this process holds', () => {
  it('removes a provider key wherever it appears, keeping the message around it', () => {
    setSecrets('test', [KEY]);
    expect(scrub(`Invalid request (we saw ${KEY} in your headers), see the docs`)).toBe(
      `Invalid request (we saw ${REDACTED} in your headers), see the docs`,
    );
    expect(scrub(`${KEY}${KEY}`)).toBe(`${REDACTED}${REDACTED}`);
  });

  it('removes it percent-encoded, in either case of hex digits, and with every byte encoded', () => {
    setSecrets('test', [KEY]);
    const lower = encodeURIComponent(KEY).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
    for (const form of [encodeURIComponent(KEY), lower, percentAll(KEY)]) {
      expect(form).not.toBe(KEY);
      expect(scrub(`headers=${form}&next=1`)).toBe(`headers=${REDACTED}&next=1`);
    }
  });

  it('removes it JSON-escaped (\\/, \\uXXXX for any character), and the JSON around it stays valid', () => {
    setSecrets('test', [KEY]);
    for (const form of [KEY.replaceAll('/', '\\/'), uEscaped(KEY), `${uEscaped('sk-')}${KEY.slice(3)}`]) {
      const text = `{"error":{"message":"key ${form} refused"}}`;
      const out = scrub(text);
      expect(out).toBe(`{"error":{"message":"key ${REDACTED} refused"}}`);
      expect(JSON.parse(out)).toEqual({ error: { message: `key ${REDACTED} refused` } });
    }
  });

  it('removes a value with quotes and backslashes as JSON writes it', () => {
    const odd = 'pa"ss\\word-12345';
    setSecrets('test', [odd]);
    expect(scrub(JSON.stringify({ m: `got ${odd}` }))).toBe(JSON.stringify({ m: `got ${REDACTED}` }));
  });

  it('keeps each source apart: a source that changes leaves the others scrubbed', () => {
    setSecrets('test', [KEY]);
    setSecrets('other', [AZURE]);
    setSecrets('other', []);
    expect(scrub(`${KEY} ${AZURE}`)).toBe(`${REDACTED} ${REDACTED}`); // AZURE: recently replaced
  });

  it('keeps a replaced value scrubbed for the last RETIRED_KEPT replacements, then lets it go', () => {
    setSecrets('test', ['old-provider-key-1']);
    setSecrets('test', ['new-provider-key-2']);
    expect(scrub('old-provider-key-1 new-provider-key-2')).toBe(`${REDACTED} ${REDACTED}`);
    for (let i = 0; i < RETIRED_KEPT; i++) setSecrets('test', [`rotated-key-${i}-xxxxxx`]);
    expect(scrub('old-provider-key-1')).toBe('old-provider-key-1');
    expect(scrub(`rotated-key-${RETIRED_KEPT - 2}-xxxxxx`)).toBe(REDACTED);
  });

  it('does not match values too short to tell from words', () => {
    setSecrets('test', ['secret', 'x'.repeat(MIN_SECRET_CHARS - 1)]);
    expect(scrub('a secret word')).toBe('a secret word');
  });
});

describe('credentials by their shape', () => {
  it('removes every gateway key, registered or not', () => {
    const key = generateKey();
    expect(scrub(`quoted ${key}.`)).toBe(`quoted ${REDACTED}.`);
  });

  it('removes what follows an authorization-like header name, in the ways headers are quoted back', () => {
    const token = randomBytes(24).toString('base64');
    const cases: [string, string][] = [
      [`authorization=Bearer ${token}`, `authorization=Bearer ${REDACTED}`],
      [`Authorization: Bearer ${token}\r\nHost: x`, `Authorization: Bearer ${REDACTED}\r\nHost: x`],
      [`proxy-authorization: Basic dXNlcjpwYXNz`, `proxy-authorization: Basic ${REDACTED}`],
      [`{"api-key": "${AZURE}"}`, `{"api-key": "${REDACTED}"}`],
      [`{'x-api-key': 'sk-ant-api03-${token}'}`, `{'x-api-key': '${REDACTED}'}`],
      [`x-key=${AZURE}; x-goog-api-key=AIza${AZURE}`, `x-key=${REDACTED}; x-goog-api-key=${REDACTED}`],
      [`api_key=${AZURE}&model=gpt`, `api_key=${REDACTED}&model=gpt`],
      [`\\"authorization\\":\\"Bearer ${json(token)}\\"`, `\\"authorization\\":\\"Bearer ${REDACTED}\\"`],
      [`authorization%3A%20Bearer%20${encodeURIComponent(token)}`, `authorization%3A%20Bearer%20${REDACTED}`],
      [`X-API-KEY:${AZURE}`, `X-API-KEY:${REDACTED}`],
      // base64 may begin with '+', which a form-encoded dump also uses for a space: none of it stays
      [`authorization=Bearer +${token}`, `authorization=Bearer ${REDACTED}`],
      [`authorization=Bearer+${token}`, `authorization=Bearer+${REDACTED}`],
      [`authorization=Bearer++${token}`, `authorization=Bearer+${REDACTED}`],
      [`api_key=+${AZURE}&model=gpt`, `api_key=${REDACTED}&model=gpt`],
      [`a bare Bearer +${token}`, `a bare Bearer ${REDACTED}`],
    ];
    for (const [text, want] of cases) expect(scrub(text), text).toBe(want);
  });

  it('removes a bare bearer token', () => {
    expect(scrub('sent with Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc123 today')).toBe(`sent with Bearer ${REDACTED} today`);
  });
});

describe('ordinary text', () => {
  const ordinary = [
    'The server had an error while processing your request. Sorry about that!',
    "Invalid value for 'temperature': must be between 0 and 2.",
    'Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 500, Used 500.',
    'This model requires the Bearer authentication scheme.',
    'Missing authorization header; the x-api-key header is required.',
    'x-api-key: missing',
    'prx-abc is too short to be a key',
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
  ];

  it('comes back unchanged', () => {
    setSecrets('test', [KEY, AZURE]);
    for (const text of ordinary) expect(scrub(text)).toBe(text);
  });

  it('is recognised by the pre-check without the full search, and returned as the same string', () => {
    setSecrets('test', [KEY, AZURE]);
    const line =
      '{"level":30,"requestId":"req_abc","method":"POST","url":"/v1/chat/completions","status":200,"msg":"request"}';
    expect(mayHoldSecret(line)).toBe(false);
    expect(scrub(line)).toBe(line);
    for (const text of ordinary.slice(0, 3)) expect(mayHoldSecret(text), text).toBe(false);
    // What it does not let through: a value, an escape, a shape word.
    for (const text of [`x ${KEY}`, 'a%2Fb', 'a\\/b', 'Bearer x', 'prx-']) expect(mayHoldSecret(text), text).toBe(true);
  });
});
