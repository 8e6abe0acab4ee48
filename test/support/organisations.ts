// Organisations for tests: OrganisationService clients acting as the operator or as a member (by
// their own key, as any member's program would call it), and an organisation with one member of
// each role, each with a key, made through invitations as a real admin would.
import { inject } from 'vitest';
import { ConnectError, createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { OrganisationService, Role } from '../../src/gen/gateway/v1/organisations_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { billing, uniqueMarker } from './context.ts';

export type Orgs = Client<typeof OrganisationService>;

const bearer =
  (key: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set('authorization', `Bearer ${key}`);
    return next(req);
  };

/** OrganisationService as the operator (this machine, no admin token in the test gateway), or as the holder of `key`. */
export function orgs(key?: string, rpcUrl = inject('rpcUrl')): Orgs {
  return createClient(
    OrganisationService,
    createGrpcTransport({ baseUrl: rpcUrl, ...(key ? { interceptors: [bearer(key)] } : {}) }),
  );
}

export const ROLE_NAMES = ['owner', 'admin', 'billing', 'member'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];
export const ROLE: Record<RoleName, Role> = {
  owner: Role.OWNER,
  admin: Role.ADMIN,
  billing: Role.BILLING,
  member: Role.MEMBER,
};

export interface OrgMember {
  memberId: string;
  apiKey: string;
  keyId: string;
  client: Orgs;
}

export interface TestOrg {
  id: string;
  name: string;
  people: Record<RoleName, OrgMember>;
}

/** OrganisationService and BillingService as the operator of a gateway with ADMIN_TOKEN (a test's own gateway). */
export function operatorClients(rpcUrl: string, adminToken: string) {
  const transport = createGrpcTransport({ baseUrl: rpcUrl, interceptors: [bearer(adminToken)] });
  return { orgs: createClient(OrganisationService, transport), billing: createClient(BillingService, transport) };
}

/**
 * An organisation with `credits` on its balance and one member of each role, each with their own
 * key: the owner made by the operator, the others invited by the owner and redeemed. On the shared
 * gateway, or on a test's own (`operator`: its clients as the operator, `name`: the organisation's).
 */
export async function newOrganisation(
  credits = '10',
  rpcUrl = inject('rpcUrl'),
  opts: { operator?: ReturnType<typeof operatorClients>; name?: string } = {},
): Promise<TestOrg> {
  const operator = opts.operator?.orgs ?? orgs(undefined, rpcUrl);
  const name = opts.name ?? `Acme ${uniqueMarker()}`;
  const made = await operator.createOrganisation({ name, ownerName: 'Olive Owner', createOwnerKey: true });
  const id = made.organisation!.id;
  if (credits !== '0')
    await (opts.operator?.billing ?? billing()).topUp({
      accountId: id,
      amountNano: usdToNano(credits),
      externalId: `org-${id}`,
      cause: 'test',
    });
  const ownerKey = made.ownerApiKey;
  const owner: OrgMember = {
    memberId: made.ownerMemberId,
    apiKey: ownerKey,
    keyId: '',
    client: orgs(ownerKey, rpcUrl),
  };
  const people = { owner } as Record<RoleName, OrgMember>;
  for (const role of ['admin', 'billing', 'member'] as const) {
    const inv = await owner.client.createInvitation({ organisationId: id, role: ROLE[role] });
    const r = await operator.redeemInvitation({
      token: inv.token,
      name: `Pat ${role}`,
      createKey: true,
    });
    people[role] = { memberId: r.memberId, apiKey: r.apiKey, keyId: r.keyId, client: orgs(r.apiKey, rpcUrl) };
  }
  return { id, name, people };
}

/** The GatewayError code and HTTP status a failed call carried. */
export function refusalOf(err: unknown): { code: string; status: number; message: string } {
  const ce = ConnectError.from(err);
  const d = ce.findDetails(GatewayErrorSchema)[0];
  return { code: d?.code ?? '', status: d?.httpStatus ?? 0, message: ce.rawMessage };
}

/** The refusal of a call expected to fail; throws if it succeeded. */
export async function refused(p: Promise<unknown>): Promise<{ code: string; status: number; message: string }> {
  try {
    await p;
  } catch (err) {
    return refusalOf(err);
  }
  throw new Error('expected the call to be refused, and it succeeded');
}

/** A budget's fields as SetBudget takes them: an organisation's 1 USD a day in UTC, hard, unless `over` says otherwise. */
export const budgetSpec = (over: Record<string, unknown> = {}) => ({
  scope: 'organisation',
  scopeId: '',
  name: '',
  amountUsd: '1',
  period: 'day',
  timeZone: 'UTC',
  startDay: 0,
  rollingHours: 0,
  mode: 'hard',
  thresholds: [],
  ...over,
});
