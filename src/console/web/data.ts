// Loading a page's data without a waterfall: at start the page asks for /me and for the data of
// the page at the address bar's path at the same time (prefetch), and the page's components then
// take those answers instead of asking again. Later navigations ask when the page mounts. A paged
// list keeps its stack of cursors here too (usePaged), so every list pages the same way.
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { Read } from './api.ts';
import type { Page } from './wire-types.ts';

const prefetched = new Map<string, Promise<unknown>>();

/** Sends the GET now; the first useApi of the same path takes the answer. */
export function prefetch(read: Read<unknown>): void {
  if (prefetched.has(read.path)) return;
  const p = read.load();
  p.catch(() => {}); // a 401 here is the sign-in page's business, reported by /me
  prefetched.set(read.path, p);
}

/** Forgets answers nobody took (after sign-in, so a page asks again with the new session). */
export function dropPrefetched(): void {
  prefetched.clear();
}

function take<T>(read: Read<T>): Promise<T> {
  const p = prefetched.get(read.path);
  if (p) {
    prefetched.delete(read.path);
    return p as Promise<T>;
  }
  return read.load();
}

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  /** Asks again (after a change the page made). */
  reload: () => void;
}

/** The answer of `read` (null: nothing yet), asked again whenever its path changes. */
export function useApi<T>(read: Read<T> | null): Loaded<T> {
  const path = read?.path ?? null;
  const [state, setState] = useState<{ path: string | null; data?: T; error?: Error }>({ path: null });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (read === null || path === null) return;
    let live = true;
    (round === 0 ? take(read) : read.load()).then(
      (data) => live && setState({ path, data }),
      (error: Error) => live && setState({ path, error }),
    );
    return () => {
      live = false;
    };
  }, [path, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  const current = state.path === path;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loading: path !== null && (!current || (state.data === undefined && state.error === undefined)),
    reload,
  };
}

export interface Live<T> extends Loaded<T> {
  /** When the answer shown arrived (the browser's clock). */
  at: Date | undefined;
}

/**
 * useApi, asked again every `everyMs` while the browser shows the page (not in a hidden tab). The
 * answer shown stays until the next one arrives, so nothing flickers; a failed round shows its
 * error until a later one succeeds.
 */
export function useLive<T>(read: Read<T>, everyMs: number): Live<T> {
  const loaded = useApi(read);
  const [at, setAt] = useState<Date>();
  useEffect(() => {
    if (loaded.data !== undefined) setAt(new Date());
  }, [loaded.data]);
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') loaded.reload();
    }, everyMs);
    return () => clearInterval(timer);
  }, [everyMs, loaded.reload]);
  return { ...loaded, at };
}

/** What the Pager shows and changes: the cursors of the pages seen (the first page's is ''), and the next one's. */
export interface PagerState {
  cursors: string[];
  /** The cursor of the page after the last one ('' or unset: none). */
  next: string | undefined;
  onChange: (cursors: string[]) => void;
}

export interface Paged<T> extends Loaded<Page<T>> {
  /** For <Pager {...list.pager} />. */
  pager: PagerState;
  /** Back to the first page. */
  restart: () => void;
}

/**
 * A list in keyset pages: `pageAt(cursor)` is the read of one page. The stack of cursors belongs
 * to the list's first page (its path: the list and its filters), so new filters start at page 1.
 */
export function usePaged<T>(pageAt: (cursor: string) => Read<Page<T>>): Paged<T> {
  const scope = pageAt('').path;
  const [paging, setPaging] = useState<{ scope: string | undefined; cursors: string[] }>({ scope, cursors: [''] });
  const cursors = paging.scope === scope ? paging.cursors : [''];
  const page = useApi(pageAt(cursors[cursors.length - 1] ?? ''));
  return {
    ...page,
    pager: { cursors, next: page.data?.next_cursor, onChange: (next) => setPaging({ scope, cursors: next }) },
    restart: () => setPaging({ scope: undefined, cursors: [''] }),
  };
}
