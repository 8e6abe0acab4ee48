// Page paths are real paths (/console/requests, /console/admin/accounts/<id>): the server answers
// each with the same index.html and this routes by location. Links are plain <a href> elements;
// a click on one that stays in the console is turned into a history push, so the page does not
// reload, and the back button works.
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';

export interface Location {
  path: string;
  query: URLSearchParams;
}

const listeners = new Set<() => void>();

export function currentLocation(): Location {
  const path = window.location.pathname.replace(/\/+$/, '') || BASE;
  return { path, query: new URLSearchParams(window.location.search) };
}

/** Goes to a console path (with its query), adding a history entry unless `replace`. */
export function navigate(to: string, replace = false): void {
  if (to === window.location.pathname + window.location.search) return;
  if (replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  window.scrollTo(0, 0);
  for (const l of listeners) l();
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(currentLocation);
  useEffect(() => {
    const update = () => setLoc(currentLocation());
    listeners.add(update);
    window.addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', update);
    };
  }, []);
  return loc;
}

/** Turns clicks on same-origin console links into navigations (modified clicks open tabs as usual). */
export function interceptLinks(): void {
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element | null)?.closest('a');
    if (!a || a.target || a.hasAttribute('download')) return;
    const url = new URL(a.href, window.location.href);
    if (url.origin !== window.location.origin || !(url.pathname === BASE || url.pathname.startsWith(`${BASE}/`)))
      return;
    if (url.pathname.startsWith(`${BASE}/api/`)) return;
    e.preventDefault();
    navigate(url.pathname + url.search);
  });
}
