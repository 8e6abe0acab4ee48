// The names of budgets' scopes as people know them (a team's and a member's names, a key's name
// and prefix), read as they are now, so the console, the CLI and the bot say "Backend" rather than
// a team's id. Read in one statement for a whole list; ids of another organisation name nothing.
import type { Db } from '../db/db.ts';
import type { Budget } from './budget.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** Each team, member and key id of `budgets` with its name; an organisation or customer budget has none. */
export async function scopeNames(
  db: Pick<Db, 'raw'>,
  accountId: string,
  budgets: readonly Pick<Budget, 'scope' | 'scopeId'>[],
): Promise<Map<string, string>> {
  const ids = (scope: Budget['scope']) => [...new Set(budgets.filter((b) => b.scope === scope).map((b) => b.scopeId))];
  const [teams, members, keys] = [ids('team'), ids('member'), ids('key')];
  if (teams.length + members.length + keys.length === 0) return new Map();
  // A removed member keeps their name here: their budget still names them.
  const rows = rowsOf(
    await db.raw(
      `SELECT id, name FROM teams WHERE account_id = ? AND id = ANY(CAST(? AS text[]))
       UNION ALL SELECT id, name FROM members WHERE id = ANY(CAST(? AS text[]))
       UNION ALL SELECT id, CASE WHEN name = '' THEN prefix || '…' ELSE name || ' (' || prefix || '…)' END
         FROM api_keys WHERE account_id = ? AND id = ANY(CAST(? AS text[]))`,
      [accountId, teams, members, accountId, keys],
    ),
  );
  return new Map(rows.map((r) => [r.id as string, r.name as string]));
}
