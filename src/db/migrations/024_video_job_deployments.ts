// A video job remembers the deployment that created it upstream (`<model>/<deployment>`) and that
// deployment's provider: every later call for the job (polls, the download, a cancel, a delete)
// goes to that provider, and the job's usage row names the deployment (docs/video.md). Before the
// job exists, `deployment` is the last deployment whose create gave an HTTP answer. Jobs from before
// have neither: they run on their model's own provider, as they were started.
// (Numbered 024: 023 is the organisations' migration, on another branch.)
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE video_jobs ADD COLUMN deployment text');
  await knex.raw('ALTER TABLE video_jobs ADD COLUMN provider_id text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE video_jobs DROP COLUMN provider_id');
  await knex.raw('ALTER TABLE video_jobs DROP COLUMN deployment');
}
