// The five service implementations the gateway serves: what the network router (server.ts) and
// the in-process transport (direct-transport.ts) are both made from. Types only, so neither
// transport needs the other.
import type { ServiceImpl } from '@connectrpc/connect';
import type { BillingService } from '../gen/gateway/v1/billing_pb.js';
import type { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import type { VideoService } from '../gen/gateway/v1/video_pb.js';
import type { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';

export interface Services {
  billing: ServiceImpl<typeof BillingService>;
  catalogue: ServiceImpl<typeof CatalogueService>;
  inference: ServiceImpl<typeof InferenceService>;
  video: ServiceImpl<typeof VideoService>;
  organisations: ServiceImpl<typeof OrganisationService>;
}
