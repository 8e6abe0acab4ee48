// How a failed statement tells that the database connection went away, and whether the
// statement can have applied. No dependencies: error reporting (errors/errors.ts) uses it too.

const SESSION_ENDED = new Set(['57P01', '57P02', '57P03', 'ECONNREFUSED']);

/** The server ended the session or the connection never formed: the statement did not apply. */
export function sessionEnded(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return SESSION_ENDED.has(e.code ?? '') || /not queryable/.test(e.message ?? '');
}

const SOCKET_LOST = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/**
 * The connection went away under a statement (the socket closed or was reset mid-statement,
 * or the session was ended): the work may or may not have applied.
 */
export function connectionLost(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    sessionEnded(err) ||
    SOCKET_LOST.has(e.code ?? '') ||
    /Connection terminated|terminating connection|ECONNRESET|EPIPE/.test(e.message ?? '')
  );
}
