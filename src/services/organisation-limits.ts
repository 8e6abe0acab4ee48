// OrganisationService's bounds besides money (docs/budgets.md#keys-teams-and-members): the models
// a key may call, a team's or a member's requests in flight. Owners and admins; this instance
// forgets the keys concerned at once, others when the notice arrives.
import type { ServiceImpl } from '@connectrpc/connect';
import type { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { setInFlightBound, setKeyModels } from '../organisations/key-limits.ts';
import type { AccessChecks, OrganisationDeps } from './organisation-access.ts';

export function limitMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<ServiceImpl<typeof OrganisationService>, 'setKeyModels' | 'setInFlightBound'> {
  return {
    async setKeyModels(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'keys.manage');
      const models = await setKeyModels(deps.db, a.actor, a.accountId, req.keyId, req.models);
      c.keyChanged(req.keyId);
      return { models };
    },

    async setInFlightBound(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      const keys = await setInFlightBound(deps.db, a.actor, a.accountId, req.scope, req.scopeId, req.maxInFlight);
      for (const k of keys) c.keyChanged(k);
      return { maxInFlight: req.maxInFlight };
    },
  };
}
