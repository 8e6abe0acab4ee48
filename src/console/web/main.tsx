// The console's page: one script, one stylesheet. At start it asks for the session (/me) and the
// data of the page in the address bar at once (no waterfall), redeems a one-time sign-in link
// from the fragment (#link=…) first when there is one, then shows the page for the session's
// role, or the sign-in form when there is no session.
import './locale-guard.ts';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import type { ComponentChildren } from 'preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, onSignedOut, type Read, setCsrf } from './api.ts';
import { type NavItem, Shell } from './components/shell.tsx';
import { ErrorNote, Loading } from './components/ui.tsx';
import { dropPrefetched, prefetch } from './data.ts';
import { Account, accountData } from './pages/account.tsx';
import { Accounts, accountsData } from './pages/accounts.tsx';
import { Billing, billingData } from './pages/billing.tsx';
import { Book, bookData } from './pages/book.tsx';
import { KeyPage } from './pages/key.tsx';
import { Margin, marginData } from './pages/margin.tsx';
import { Models, modelsData } from './pages/models.tsx';
import { Overview, overviewData } from './pages/overview.tsx';
import { Providers, providersData } from './pages/providers.tsx';
import { Requests, requestsData } from './pages/requests.tsx';
import { SignIn, signInProblem } from './pages/sign-in.tsx';
import { Videos, videosData } from './pages/videos.tsx';
import { BASE, currentLocation, interceptLinks, type Location, navigate, useLocation } from './router.ts';
import type { Me, Role } from './wire-types.ts';

interface Route {
  role: Role;
  /** The nav item it belongs to. */
  nav: string;
  /** The data it shows, asked for at start beside /me. */
  data: (loc: Location, params: string[]) => Read<unknown>[];
  view: (ctx: { loc: Location; params: string[]; me: Me; setMe: (me: Me) => void }) => ComponentChildren;
}

const ROUTES: [RegExp, Route][] = [
  [/^\/console$/, { role: 'holder', nav: '/console', data: overviewData, view: ({ loc }) => <Overview loc={loc} /> }],
  [
    /^\/console\/requests$/,
    { role: 'holder', nav: '/console/requests', data: requestsData, view: ({ loc }) => <Requests loc={loc} /> },
  ],
  [/^\/console\/billing$/, { role: 'holder', nav: '/console/billing', data: billingData, view: () => <Billing /> }],
  [/^\/console\/models$/, { role: 'holder', nav: '/console/models', data: modelsData, view: () => <Models /> }],
  [
    /^\/console\/key$/,
    {
      role: 'holder',
      nav: '/console/key',
      data: () => [],
      view: ({ me, setMe }) => <KeyPage me={me} onRotated={(prefix) => setMe({ ...me, key_prefix: prefix })} />,
    },
  ],
  [
    /^\/console\/admin\/accounts$/,
    {
      role: 'operator',
      nav: '/console/admin/accounts',
      data: accountsData,
      view: ({ loc }) => <Accounts loc={loc} />,
    },
  ],
  [
    /^\/console\/admin\/accounts\/([^/]+)$/,
    {
      role: 'operator',
      nav: '/console/admin/accounts',
      data: (loc, [id]) => accountData(loc, decodeURIComponent(id!)),
      view: ({ loc, params: [id] }) => <Account loc={loc} id={decodeURIComponent(id!)} />,
    },
  ],
  [
    /^\/console\/admin\/margin$/,
    { role: 'operator', nav: '/console/admin/margin', data: marginData, view: ({ loc }) => <Margin loc={loc} /> },
  ],
  [
    /^\/console\/admin\/book$/,
    { role: 'operator', nav: '/console/admin/book', data: bookData, view: ({ loc }) => <Book loc={loc} /> },
  ],
  [
    /^\/console\/admin\/providers$/,
    { role: 'operator', nav: '/console/admin/providers', data: providersData, view: () => <Providers /> },
  ],
  [
    /^\/console\/admin\/videos$/,
    { role: 'operator', nav: '/console/admin/videos', data: videosData, view: () => <Videos /> },
  ],
];

const HOLDER_NAV: NavItem[] = [
  { path: '/console', text: 'Overview' },
  { path: '/console/requests', text: 'Requests' },
  { path: '/console/billing', text: 'Billing' },
  { path: '/console/models', text: 'Models' },
  { path: '/console/key', text: 'Key' },
];

const NAV: Record<Role, NavItem[]> = {
  holder: HOLDER_NAV,
  member: HOLDER_NAV,
  operator: [
    { path: '/console/admin/accounts', text: 'Accounts' },
    { path: '/console/admin/margin', text: 'Margin' },
    { path: '/console/admin/book', text: 'Price book' },
    { path: '/console/admin/providers', text: 'Providers' },
    { path: '/console/admin/videos', text: 'Video jobs' },
  ],
};

const HOME: Record<Role, string> = { holder: '/console', member: '/console', operator: '/console/admin/accounts' };

function match(path: string): { route: Route; params: string[] } | undefined {
  for (const [re, route] of ROUTES) {
    const m = re.exec(path);
    if (m) return { route, params: m.slice(1) };
  }
  return undefined;
}

/** /me and the page's data, asked for together. */
function startLoading(): Promise<Me> {
  const loc = currentLocation();
  const found = match(loc.path);
  const me = api.me().load();
  // Handled from the start: App takes the answer in an effect, which may run after a quick 401
  // (without a handler by then, the browser reports an unhandled rejection).
  me.catch(() => {});
  if (found) for (const read of found.route.data(loc, found.params)) prefetch(read);
  return me;
}

type Session = { state: 'loading' } | { state: 'signed-out'; notice?: string } | { state: 'in'; me: Me };

function App(props: { first: Promise<Me>; linkProblem?: string }) {
  const [session, setSession] = useState<Session>({ state: 'loading' });
  const [fatal, setFatal] = useState<unknown>();
  const loc = useLocation();

  const adopt = (me: Me) => {
    setCsrf(me.csrf);
    setSession({ state: 'in', me });
  };
  useEffect(() => {
    props.first.then(adopt, (err) => {
      if (err instanceof ApiError && err.status === 401) setSession({ state: 'signed-out', notice: props.linkProblem });
      else setFatal(err);
    });
    return onSignedOut(() => {
      setCsrf('');
      dropPrefetched();
      setSession({ state: 'signed-out', notice: 'Your session has ended. Sign in again.' });
    });
  }, []);

  if (fatal) {
    return (
      <main class="signin">
        <div class="signin-card">
          <ErrorNote error={fatal} />
          <button type="button" class="button" onClick={() => window.location.reload()}>
            Try again
          </button>
        </div>
      </main>
    );
  }
  if (session.state === 'loading') return <Loading />;
  if (session.state === 'signed-out') {
    return (
      <SignIn
        notice={session.notice}
        onSignedIn={async (s) => {
          setCsrf(s.csrf);
          dropPrefetched();
          try {
            const me = await api.me().load();
            adopt(me);
            const here = match(currentLocation().path);
            if (!here || here.route.role !== me.role) navigate(HOME[me.role], true);
          } catch (err) {
            setFatal(err);
          }
        }}
      />
    );
  }

  const me = session.me;
  const found = match(loc.path);
  const end = async () => {
    await api.signOut().catch(() => {});
    setCsrf('');
    dropPrefetched();
    setSession({ state: 'signed-out', notice: 'You are signed out.' });
  };
  let body: ComponentChildren;
  if (!found) body = <NotFound home={HOME[me.role]} />;
  else if (found.route.role !== me.role) {
    if (me.role === 'operator') {
      // The operator has no account of their own: their pages start at the accounts.
      queueMicrotask(() => navigate(HOME.operator, true));
      body = <Loading />;
    } else body = <OperatorOnly />;
  } else body = found.route.view({ loc, params: found.params, me, setMe: adopt });
  return (
    <Shell me={me} nav={NAV[me.role]} current={found?.route.nav ?? ''} onSignOut={end}>
      {body}
    </Shell>
  );
}

function NotFound(props: { home: string }) {
  return (
    <section class="card">
      <h1>Page not found</h1>
      <p>
        There is no such page in the console. <a href={props.home}>Go to the start page</a>.
      </p>
    </section>
  );
}

function OperatorOnly() {
  return (
    <section class="card" id="operator-only">
      <h1>Not available</h1>
      <p>
        This page is the gateway operator’s. You are signed in with an API key, which shows your own account only.{' '}
        <a href={BASE}>Go to your overview</a>.
      </p>
    </section>
  );
}

/** A one-time link (#link=<token>, from the bot's /console): redeemed, then removed from the address bar and history. */
async function redeemLink(): Promise<string | undefined> {
  const m = /^#link=([A-Za-z0-9_-]+)$/.exec(window.location.hash);
  if (!window.location.hash) return undefined;
  window.history.replaceState(null, '', window.location.pathname + window.location.search);
  if (!m) return undefined;
  try {
    await api.signIn({ link: m[1]! });
    return undefined;
  } catch (err) {
    return signInProblem(err, 'link');
  }
}

async function start(): Promise<void> {
  interceptLinks();
  const linkProblem = await redeemLink();
  render(<App first={startLoading()} linkProblem={linkProblem} />, document.getElementById('app')!);
}

void start();
