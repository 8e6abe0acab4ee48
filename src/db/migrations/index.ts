// Migrations are imported modules, not files knex discovers on disk, so they run the same
// under Node's type stripping, vitest and any bundler.
import type { Knex } from 'knex';
import * as m001 from './001_ledger.ts';
import * as m002 from './002_rate_limits.ts';
import * as m003 from './003_owners_and_causes.ts';
import * as m004 from './004_video_jobs.ts';
import * as m005 from './005_usage_units.ts';
import * as m006 from './006_last_hold.ts';
import * as m007 from './007_key_notify.ts';
import * as m008 from './008_rate_grants.ts';
import * as m009 from './009_video_keys_and_deletion.ts';
import * as m010 from './010_requested_model.ts';
import * as m011 from './011_rotation_keeps_limits.ts';
import * as m012 from './012_response_owners.ts';
import * as m013 from './013_lease_reclaim.ts';
import * as m014 from './014_price_versions.ts';
import * as m015 from './015_catalogue_book.ts';
import * as m016 from './016_bot_group.ts';
import * as m017 from './017_console.ts';
import * as m018 from './018_providers.ts';
import * as m019 from './019_deployment_windows.ts';
import * as m020 from './020_trace_ids.ts';
import * as m021 from './021_in_flight_bounds.ts';
import * as m022 from './022_deployment_shares.ts';
import * as m023 from './023_organisations.ts';
import * as m024 from './024_video_job_deployments.ts';
import * as m025 from './025_budgets.ts';
import * as m026 from './026_usage_attempts.ts';
import * as m027 from './027_key_limits_and_alerts.ts';
import * as m028 from './028_append_rows_without_foreign_keys.ts';

const migrations: Record<string, { up(k: Knex): Promise<void>; down(k: Knex): Promise<void> }> = {
  '001_ledger': m001,
  '002_rate_limits': m002,
  '003_owners_and_causes': m003,
  '004_video_jobs': m004,
  '005_usage_units': m005,
  '006_last_hold': m006,
  '007_key_notify': m007,
  '008_rate_grants': m008,
  '009_video_keys_and_deletion': m009,
  '010_requested_model': m010,
  '011_rotation_keeps_limits': m011,
  '012_response_owners': m012,
  '013_lease_reclaim': m013,
  '014_price_versions': m014,
  '015_catalogue_book': m015,
  '016_bot_group': m016,
  '017_console': m017,
  '018_providers': m018,
  '019_deployment_windows': m019,
  '020_trace_ids': m020,
  '021_in_flight_bounds': m021,
  '022_deployment_shares': m022,
  '023_organisations': m023,
  '024_video_job_deployments': m024,
  '025_budgets': m025,
  '026_usage_attempts': m026,
  '027_key_limits_and_alerts': m027,
  '028_append_rows_without_foreign_keys': m028,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name]!,
};
