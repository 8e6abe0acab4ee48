// docs/organisations.md's roles table says what the code's does (PERMISSIONS): one table, in code
// and in the docs, never two that differ.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ACTIONS, PERMISSIONS, ROLES } from '../../../src/organisations/roles.ts';

describe('the roles table', () => {
  it('in docs/organisations.md is the one in src/organisations/roles.ts, row for row', () => {
    const doc = fs.readFileSync(new URL('../../../docs/organisations.md', import.meta.url), 'utf8');
    const rows = doc
      .split('\n')
      .filter((l) => /^\| `[a-z_.]+` \|/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    const documented = Object.fromEntries(
      rows.map(([action, ...cells]) => [action!.replaceAll('`', ''), ROLES.filter((_, i) => cells[i] === 'yes')]),
    );
    const inCode = Object.fromEntries(ACTIONS.map((a) => [a, [...PERMISSIONS[a]]]));
    expect(documented).toEqual(inCode);
  });
});
