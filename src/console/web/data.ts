// Loading a page's data without a waterfall: at start the page asks for /me and for the data of
// the page at the address bar's path at the same time (prefetch), and the page's components then
// take those answers instead of asking again. Later navigations ask when the page mounts.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { get } from './api.ts';

const prefetched = new Map<string, Promise<unknown>>();

/** Starts GET `path` now; the first useApi(path) takes the answer. */
export function prefetch(path: string): void {
  if (prefetched.has(path)) return;
  const p = get(path);
  p.catch(() => {}); // a 401 here is the sign-in page's business, reported by /me
  prefetched.set(path, p);
}

/** Forgets answers nobody took (after sign-in, so a page asks again with the new session). */
export function dropPrefetched(): void {
  prefetched.clear();
}

function take<T>(path: string): Promise<T> {
  const p = prefetched.get(path);
  if (p) {
    prefetched.delete(path);
    return p as Promise<T>;
  }
  return get<T>(path);
}

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  /** Asks again (after a change the page made). */
  reload: () => void;
}

/** GET `path` (null: nothing yet), again whenever the path changes. */
export function useApi<T>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ path: string | null; data?: T; error?: Error }>({ path: null });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (path === null) return;
    let live = true;
    (round === 0 ? take<T>(path) : get<T>(path)).then(
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
