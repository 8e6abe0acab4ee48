// What the inference routes work with: the metering (hold and settle), the upstream calls (with
// retry and fallback), the stream runs, and the catalogue. Made once at start (src/process/server.ts).
import type { Logger } from 'pino';
import type { Catalogue } from '../catalogue/catalogue.ts';
import type { Config } from '../config/config.ts';
import type { Metering } from '../metering/metering.ts';
import type { StreamRuns } from './streams/stream-run.ts';
import type { UpstreamCalls } from './upstream/upstream-calls.ts';
import type { Upstream } from './upstream/upstream.ts';

export interface RouteDeps {
  metering: Metering;
  calls: UpstreamCalls;
  streams: StreamRuns;
  /** The plain HTTP client, for calls that are not priced requests (a free token count, fetching a made image). */
  upstream: Upstream;
  catalogue: Catalogue;
  /** Which of the operator's provider-side objects tenants may name (src/tenancy/operator-objects.ts). */
  sharedProviderObjects: Config['sharedProviderObjects'];
  log: Logger;
}
