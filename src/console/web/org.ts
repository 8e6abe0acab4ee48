// What the organisation pages share: which organisation they show (the member's own, or one the
// operator opened), what the session may do there (`allowed_actions`, OrganisationService's answer:
// the pages offer only what it lists, and the service refuses the rest), and roles in words.
import type { AccountScope, OrgScope } from './api.ts';
import type { OrgRole } from './wire-types.ts';

/** Whether the session may take an action (as allowed_actions lists it). */
export type Can = (action: string) => boolean;

export const canFrom =
  (allowed: readonly string[]): Can =>
  (action) =>
    allowed.includes(action);

export const ROLES: readonly OrgRole[] = ['owner', 'admin', 'billing', 'member'];

export const ROLE_TEXT: Record<OrgRole, string> = {
  owner: 'Owner',
  admin: 'Admin',
  billing: 'Billing',
  member: 'Member',
};

/** What each role may do, in a few words (docs/organisations.md#roles). */
export const ROLE_HINT: Record<OrgRole, string> = {
  owner: 'everything',
  admin: 'members, teams, keys',
  billing: 'spend and the ledger',
  member: 'their own keys and usage',
};

/** The request log, daily usage and ledger of an organisation scope. */
export const moneyScope = (scope: OrgScope): AccountScope => scope;

/** Where an organisation page of this scope is: the member's /console/<page>, or the operator's tab. */
export interface OrgPlace {
  scope: OrgScope;
  /** The page's own path, where its filters and search are written into the address. */
  pagePath: string;
  /** Query parameters of the page to keep when they change (the operator's tab). */
  keep?: Record<string, string>;
  can: Can;
  /** The signed-in member ('' for the operator). */
  memberId: string;
  /** Their role ('' for the operator, who may do everything). */
  myRole: OrgRole | '';
}
