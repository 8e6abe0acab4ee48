// OrganisationService's bounds besides money (docs/budgets.md#keys-teams-and-members): the models
// a key may call, a team's or a member's requests in flight (owners and admins; this instance
// forgets the keys concerned at once, others when the notice arrives); and where the budget
// alerts go (docs/budgets.md#alerts).
import type { ServiceImpl } from '@connectrpc/connect';
import type { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { setInFlightBound, setKeyModels } from '../organisations/key-limits.ts';
import { listAlertDeliveries, setAlertWebhook } from '../budgets/alert-webhooks.ts';
import type { AccessChecks, OrganisationDeps } from './organisation-access.ts';

export function limitMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'setKeyModels' | 'setInFlightBound' | 'setAlertWebhook' | 'listAlertDeliveries'
> {
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

    async setAlertWebhook(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      const secret = await setAlertWebhook(
        deps.db,
        a.actor,
        a.accountId,
        req.url,
        deps.alertWebhooksAllowPrivate ?? false,
      );
      return { url: secret ? req.url.trim() : '', secret };
    },

    async listAlertDeliveries(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.read');
      const rows = await listAlertDeliveries(deps.db, a.accountId, req.limit);
      return {
        deliveries: rows.map((d) => ({
          id: d.id,
          budgetId: d.budgetId,
          customer: d.subject,
          thresholdPercent: d.threshold,
          windowStart: timestampFromDate(d.windowStart),
          spentNano: d.spentNano,
          amountNano: d.amountNano,
          target: d.target,
          state: d.state,
          attempts: d.attempts,
          lastStatus: d.lastStatus,
          lastError: d.lastError,
          firedAt: timestampFromDate(d.firedAt),
        })),
      };
    },
  };
}
