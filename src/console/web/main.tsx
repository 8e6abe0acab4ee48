// The console's page: one script, one stylesheet. At start it asks for the session (/me) and the
// data of the page in the address bar at once (no waterfall), redeems a one-time sign-in link
// from the fragment (#link=…) first when there is one, then shows the page for the session's
// role (a member's as their role's allowed actions list them), or the sign-in form when there is
// no session. An invitation link (#invite=…) shows the invitation page first.
import './locale-guard.ts';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import type { ComponentChildren } from 'preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, onSignedOut, type Read, setCsrf } from './api.ts';
import { type NavItem, Shell } from './components/shell.tsx';
import { ErrorNote, Loading, PageHeader } from './components/ui.tsx';
import { dropPrefetched, prefetch } from './data.ts';
import { Account, accountData } from './pages/account.tsx';
import { Accounts, accountsData } from './pages/accounts.tsx';
import { Audit, auditData } from './pages/audit.tsx';
import { Billing, billingData } from './pages/billing.tsx';
import { Book, bookData } from './pages/book.tsx';
import { Budgets, budgetsData } from './pages/budgets.tsx';
import { InvitePage } from './pages/invite.tsx';
import { KeyPage } from './pages/key.tsx';
import { Margin, marginData } from './pages/margin.tsx';
import { Members, membersData } from './pages/members.tsx';
import { Models, modelsData } from './pages/models.tsx';
import { OrgKeys, orgKeysData } from './pages/org-keys.tsx';
import { OrgOverview, orgOverviewData } from './pages/org-overview.tsx';
import { OrganisationPage, organisationData } from './pages/organisation.tsx';
import { Organisations, organisationsData } from './pages/organisations.tsx';
import { Overview, overviewData } from './pages/overview.tsx';
import { Providers, providersData } from './pages/providers.tsx';
import { Requests, requestsData } from './pages/requests.tsx';
import { SignIn, signInProblem } from './pages/sign-in.tsx';
import { Teams, teamsData } from './pages/teams.tsx';
import { Videos, videosData } from './pages/videos.tsx';
import { canFrom, type OrgPlace } from './org.ts';
import { BASE, currentLocation, interceptLinks, type Location, navigate, useLocation } from './router.ts';
import type { Me, Role } from './wire-types.ts';

interface Route {
  /** The sessions it is for (one address may be two roles' pages: a team key's overview and a member's). */
  roles: Role[];
  /** The nav item it belongs to. */
  nav: string;
  /** The data it shows, asked for at start beside /me (so alike for every role of the address). */
  data: (loc: Location, params: string[]) => Read<unknown>[];
  view: (ctx: ViewContext) => ComponentChildren;
}

interface ViewContext {
  loc: Location;
  params: string[];
  me: Me;
  setMe: (me: Me) => void;
}

const ACCOUNT: Role[] = ['holder', 'member'];
const MEMBER: Role[] = ['member'];
const OPERATOR: Role[] = ['operator'];

/** A member's place in their own organisation, for the organisation pages. */
const placeOf = (ctx: ViewContext): OrgPlace => ({
  scope: 'own',
  pagePath: ctx.loc.path,
  can: canFrom(ctx.me.organisation?.allowed_actions ?? []),
  memberId: ctx.me.member_id,
  myRole: ctx.me.organisation?.role ?? 'member',
});

const page = (title: string, body: ComponentChildren) => (
  <>
    <PageHeader title={title} />
    {body}
  </>
);

const ROUTES: [RegExp, Route][] = [
  [
    /^\/console$/,
    { roles: ['holder'], nav: '/console', data: overviewData, view: ({ loc }) => <Overview loc={loc} /> },
  ],
  [
    /^\/console$/,
    {
      roles: MEMBER,
      nav: '/console',
      data: orgOverviewData,
      view: (ctx) => page(ctx.me.organisation?.name ?? 'Overview', <OrgOverview place={placeOf(ctx)} loc={ctx.loc} />),
    },
  ],
  [
    /^\/console\/requests$/,
    { roles: ACCOUNT, nav: '/console/requests', data: requestsData, view: ({ loc }) => <Requests loc={loc} /> },
  ],
  [/^\/console\/billing$/, { roles: MEMBER, nav: '/console/billing', data: billingData, view: () => <Billing /> }],
  [/^\/console\/models$/, { roles: ACCOUNT, nav: '/console/models', data: modelsData, view: () => <Models /> }],
  [
    /^\/console\/key$/,
    {
      roles: ['holder'],
      nav: '/console/key',
      data: () => [],
      view: ({ me, setMe }) => (
        <KeyPage me={me} onRotated={(prefix, keyId) => setMe({ ...me, key_prefix: prefix, key_id: keyId })} />
      ),
    },
  ],
  [
    /^\/console\/members$/,
    {
      roles: MEMBER,
      nav: '/console/members',
      data: membersData,
      view: (ctx) => page('Members', <Members place={placeOf(ctx)} loc={ctx.loc} />),
    },
  ],
  [
    /^\/console\/teams$/,
    {
      roles: MEMBER,
      nav: '/console/teams',
      data: teamsData,
      view: (ctx) => page('Teams', <Teams place={placeOf(ctx)} loc={ctx.loc} />),
    },
  ],
  [
    /^\/console\/keys$/,
    {
      roles: MEMBER,
      nav: '/console/keys',
      data: orgKeysData,
      view: (ctx) =>
        page(
          'Keys',
          <OrgKeys
            place={placeOf(ctx)}
            me={ctx.me}
            onRotated={(prefix, keyId) => ctx.setMe({ ...ctx.me, key_prefix: prefix, key_id: keyId })}
          />,
        ),
    },
  ],
  [
    /^\/console\/budgets$/,
    {
      roles: MEMBER,
      nav: '/console/budgets',
      data: budgetsData,
      view: (ctx) => page('Budgets', <Budgets place={placeOf(ctx)} />),
    },
  ],
  [
    /^\/console\/audit$/,
    { roles: MEMBER, nav: '/console/audit', data: auditData, view: () => page('Audit log', <Audit scope="own" />) },
  ],
  [
    /^\/console\/admin\/accounts$/,
    { roles: OPERATOR, nav: '/console/admin/accounts', data: accountsData, view: ({ loc }) => <Accounts loc={loc} /> },
  ],
  [
    /^\/console\/admin\/accounts\/([^/]+)$/,
    {
      roles: OPERATOR,
      nav: '/console/admin/accounts',
      data: (loc, [id]) => accountData(loc, decodeURIComponent(id!)),
      view: ({ loc, params: [id] }) => <Account loc={loc} id={decodeURIComponent(id!)} />,
    },
  ],
  [
    /^\/console\/admin\/organisations$/,
    {
      roles: OPERATOR,
      nav: '/console/admin/organisations',
      data: organisationsData,
      view: ({ loc }) => <Organisations loc={loc} />,
    },
  ],
  [
    /^\/console\/admin\/organisations\/([^/]+)$/,
    {
      roles: OPERATOR,
      nav: '/console/admin/organisations',
      data: (loc, [id]) => organisationData(loc, decodeURIComponent(id!)),
      view: ({ loc, params: [id] }) => <OrganisationPage loc={loc} id={decodeURIComponent(id!)} />,
    },
  ],
  [
    /^\/console\/admin\/margin$/,
    { roles: OPERATOR, nav: '/console/admin/margin', data: marginData, view: ({ loc }) => <Margin loc={loc} /> },
  ],
  [
    /^\/console\/admin\/book$/,
    { roles: OPERATOR, nav: '/console/admin/book', data: bookData, view: ({ loc }) => <Book loc={loc} /> },
  ],
  [
    /^\/console\/admin\/providers$/,
    { roles: OPERATOR, nav: '/console/admin/providers', data: providersData, view: () => <Providers /> },
  ],
  [
    /^\/console\/admin\/videos$/,
    { roles: OPERATOR, nav: '/console/admin/videos', data: videosData, view: () => <Videos /> },
  ],
];

/** The pages of a session: a member's as their role's allowed actions list them. */
function navOf(me: Me): NavItem[] {
  if (me.role === 'operator')
    return [
      { path: '/console/admin/accounts', text: 'Accounts' },
      { path: '/console/admin/organisations', text: 'Organisations' },
      { path: '/console/admin/margin', text: 'Margin' },
      { path: '/console/admin/book', text: 'Price book' },
      { path: '/console/admin/providers', text: 'Providers' },
      { path: '/console/admin/videos', text: 'Video jobs' },
    ];
  if (me.role === 'holder')
    return [
      { path: '/console', text: 'Overview' },
      { path: '/console/requests', text: 'Requests' },
      { path: '/console/models', text: 'Models' },
      { path: '/console/key', text: 'Key' },
    ];
  const can = canFrom(me.organisation?.allowed_actions ?? []);
  const when = (action: string, item: NavItem) => (can(action) ? [item] : []);
  return [
    { path: '/console', text: 'Overview' },
    { path: '/console/requests', text: 'Requests' },
    ...when('spend.read', { path: '/console/billing', text: 'Billing' }),
    ...when('members.read', { path: '/console/members', text: 'Members' }),
    ...when('teams.read', { path: '/console/teams', text: 'Teams' }),
    { path: '/console/keys', text: 'Keys' },
    ...when('budgets.read_own', { path: '/console/budgets', text: 'Budgets' }),
    ...when('audit.read', { path: '/console/audit', text: 'Audit log' }),
    { path: '/console/models', text: 'Models' },
  ];
}

const HOME: Record<Role, string> = { holder: '/console', member: '/console', operator: '/console/admin/accounts' };

/** The route of an address for a role (any role's, at start, when the role is not known yet). */
function match(path: string, role?: Role): { route: Route; params: string[] } | undefined {
  for (const [re, route] of ROUTES) {
    const m = re.exec(path);
    if (m && (role === undefined || route.roles.includes(role))) return { route, params: m.slice(1) };
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
            const path = currentLocation().path;
            if (!match(path, me.role)) navigate(movedTo(me, path) ?? HOME[me.role], true);
          } catch (err) {
            setFatal(err);
          }
        }}
      />
    );
  }

  const me = session.me;
  const end = async () => {
    await api.signOut().catch(() => {});
    setCsrf('');
    dropPrefetched();
    setSession({ state: 'signed-out', notice: 'You are signed out.' });
  };
  const found = match(loc.path, me.role);
  return (
    <Shell me={me} nav={navOf(me)} current={found?.route.nav ?? ''} onSignOut={end}>
      {found ? found.route.view({ loc, params: found.params, me, setMe: adopt }) : <Elsewhere me={me} loc={loc} />}
    </Shell>
  );
}

/**
 * Where an address of another role's page is this session's (none: it is not): the operator has no
 * account of their own, so their pages start at the accounts; a member's key page is their keys page.
 */
function movedTo(me: Me, path: string): string | undefined {
  if (me.role === 'operator') return HOME.operator;
  if (me.role === 'member' && path === '/console/key') return '/console/keys';
  return undefined;
}

/** An address that is not this session's page: another role's (sent where it belongs, or told so), or none. */
function Elsewhere(props: { me: Me; loc: Location }) {
  const { me, loc } = props;
  const other = match(loc.path);
  if (!other) return <NotFound home={HOME[me.role]} />;
  const to = movedTo(me, loc.path);
  if (to) {
    queueMicrotask(() => navigate(to, true));
    return <Loading />;
  }
  return other.route.roles.includes('operator') ? <OperatorOnly /> : <NotAvailable />;
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
        This page is the gateway operator’s. You are signed in as a member or with an API key, which shows your own
        organisation only. <a href={BASE}>Go to your overview</a>.
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

function NotAvailable() {
  return (
    <section class="card" id="not-available">
      <h1>Not available</h1>
      <p>
        This page is for the members of an organisation. You are signed in with a team’s key, which shows that key’s own
        figures. <a href={BASE}>Go to your overview</a>.
      </p>
    </section>
  );
}

/** An invitation link (#invite=<token>): its token taken out of the address bar and history at once, kept in memory. */
function invitation(): string | undefined {
  const m = /^#invite=(inv-[A-Za-z0-9_-]+)$/.exec(window.location.hash);
  if (!m) return undefined;
  window.history.replaceState(null, '', window.location.pathname + window.location.search);
  return m[1];
}

async function start(): Promise<void> {
  interceptLinks();
  const root = document.getElementById('app')!;
  // The page's "Loading the console…" goes: Preact renders into an empty element (it would keep a
  // node it cannot reuse).
  root.replaceChildren();
  const token = invitation();
  const startConsole = () => render(<App first={startLoading()} />, root);
  if (token) {
    // The new member joins, then the console starts as them (their session is the cookie the join set).
    render(<InvitePage token={token} onDone={() => (navigate(BASE, true), startConsole())} />, root);
    return;
  }
  const linkProblem = await redeemLink();
  render(<App first={startLoading()} linkProblem={linkProblem} />, root);
}

void start();
