// One organisation, for the operator, who acts on it with every permission: its figures and a link
// to its account's money page, and as tabs the pages its members see: overview (spend by day,
// team, member, key, model), members and invitations, teams, keys, budgets, requests (with whom
// each was charged to) and the audit log. Each tab is the members' own page over this organisation.
import { api, query } from '../api.ts';
import { ErrorNote, Loading, PageHeader, Segmented } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { canFrom, type OrgPlace } from '../org.ts';
import { type Location, navigate } from '../router.ts';
import { Audit } from './audit.tsx';
import { Budgets } from './budgets.tsx';
import { Members, searchOf } from './members.tsx';
import { OrgKeys } from './org-keys.tsx';
import { OrgOverview } from './org-overview.tsx';
import { organisationPage } from './organisations.tsx';
import { filtersOf, RequestLog } from './requests.tsx';
import { Teams } from './teams.tsx';

const TABS = [
  { value: 'overview', text: 'Overview' },
  { value: 'members', text: 'Members' },
  { value: 'teams', text: 'Teams' },
  { value: 'keys', text: 'Keys' },
  { value: 'budgets', text: 'Budgets' },
  { value: 'requests', text: 'Requests' },
  { value: 'audit', text: 'Audit log' },
] as const;
type Tab = (typeof TABS)[number]['value'];

const tabOf = (loc: Location): Tab => {
  const t = loc.query.get('tab');
  return TABS.some((x) => x.value === t) ? (t as Tab) : 'overview';
};

/** The organisation, and the data of the tab the address names. */
export const organisationData = (loc: Location, id: string) => {
  const scope = { organisationId: id };
  const tab = tabOf(loc);
  return [
    api.organisation(scope),
    ...(tab === 'members' ? [api.members(scope, searchOf(loc))] : []),
    ...(tab === 'teams' ? [api.teams(scope, searchOf(loc))] : []),
    ...(tab === 'budgets' ? [api.budgets(scope)] : []),
    ...(tab === 'requests' ? [api.requests(scope, filtersOf(loc))] : []),
    ...(tab === 'audit' ? [api.audit(scope)] : []),
  ];
};

export function OrganisationPage(props: { loc: Location; id: string }) {
  const scope = { organisationId: props.id };
  const tab = tabOf(props.loc);
  const org = useApi(api.organisation(scope));
  const pagePath = organisationPage(props.id);
  const o = org.data;
  const place: OrgPlace | undefined = o
    ? { scope, pagePath, keep: { tab }, can: canFrom(o.allowed_actions), memberId: '', myRole: '' }
    : undefined;
  return (
    <>
      <PageHeader title={o ? o.name : 'Organisation'}>
        <a class="button" href={`/console/admin/accounts/${encodeURIComponent(props.id)}`}>
          Account and money ›
        </a>
        <a class="button" href="/console/admin/organisations">
          ‹ All organisations
        </a>
      </PageHeader>
      {org.error ? <ErrorNote error={org.error} /> : null}
      {org.loading && !o ? <Loading /> : null}
      {o && place ? (
        <>
          <p class="muted small mono" data-figure="organisation-id">
            {o.id}
          </p>
          <div class="tabs">
            <Segmented
              label="Section"
              value={tab}
              options={[...TABS]}
              onChange={(t) => navigate(`${pagePath}${query({ tab: t === 'overview' ? '' : t })}`, true)}
            />
          </div>
          {tab === 'overview' ? <OrgOverview place={place} loc={props.loc} /> : null}
          {tab === 'members' ? <Members place={place} loc={props.loc} /> : null}
          {tab === 'teams' ? <Teams place={place} loc={props.loc} /> : null}
          {tab === 'keys' ? <OrgKeys place={place} /> : null}
          {tab === 'budgets' ? <Budgets place={place} /> : null}
          {tab === 'requests' ? (
            <RequestLog scope={scope} loc={props.loc} pagePath={pagePath} keep={{ tab: 'requests' }} models={[]} />
          ) : null}
          {tab === 'audit' ? <Audit scope={scope} /> : null}
        </>
      ) : null}
    </>
  );
}
