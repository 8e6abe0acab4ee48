// The layer rules of `npm run lint` (scripts/import-layers.ts, run by dependency-cruiser), on small
// trees of their own: what each rule refuses, named by the rule.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { afterEach, describe, expect, it } from 'vitest';
import config from '../../../scripts/import-layers.ts';

const trees: string[] = [];
afterEach(() => {
  for (const dir of trees.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A tree of files (path -> content) in a temporary folder. */
function tree(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'import-layers-'));
  trees.push(root);
  for (const [file, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), content);
  }
  return root;
}

/** Each violation as `rule: from -> to` (`from` alone for a rule on a file). */
async function violations(root: string): Promise<string[]> {
  const { output } = await cruise(['src'], { ...config.options, ruleSet: config, validate: true, baseDir: root });
  const result = output as ICruiseResult;
  return result.summary.violations
    .map((v) => (v.from === v.to ? `${v.rule.name}: ${v.from}` : `${v.rule.name}: ${v.from} -> ${v.to}`))
    .sort();
}

// One file per layer, each importing the one below (a chain, so none is an orphan).
const clean = {
  'src/money/money.ts': 'export const ONE = 1n;\n',
  'src/console/web/main.tsx':
    "import { ONE } from '../../money/money.ts';\nexport const page = () => <p>{String(ONE)}</p>;\n",
  'src/config/config.ts': "import { ONE } from '../money/money.ts';\nexport const config = { one: ONE };\n",
  'src/billing/ledger.ts': "import { config } from '../config/config.ts';\nexport const ledger = config;\n",
  'src/catalogue/book.ts': "import type { ledger } from '../billing/ledger.js';\nexport type Book = typeof ledger;\n",
  'src/tenancy/owners.ts': "import { ledger } from '../billing/ledger.ts';\nexport const owners = ledger;\n",
  'src/gen/billing_pb.ts': 'export const BillingService = {};\nexport type Key = { id: string };\n',
  'src/services/billing.ts':
    "import { BillingService } from '../gen/billing_pb.js';\nimport type { Book } from '../catalogue/book.ts';\nimport { owners } from '../tenancy/owners.ts';\nexport const service = { BillingService, owners } as { book?: Book };\n",
  'src/process/main.ts': "import { service } from '../services/billing.ts';\nconsole.log(service);\n",
};

describe('the layer rules', () => {
  it('pass a tree whose imports only go down the layers', async () => {
    expect(await violations(tree(clean))).toEqual([]);
  });

  it('refuse an import from a higher layer and one between two parts of the same layer, naming the part', async () => {
    const root = tree({
      ...clean,
      'src/config/config.ts':
        "import { ONE } from '../money/money.ts';\nimport type { Book } from '../catalogue/book.ts';\nexport const config = { one: ONE } as { book?: Book };\n",
      'src/tenancy/owners.ts':
        "import { ledger } from '../billing/ledger.ts';\nimport type { Book } from '../catalogue/book.ts';\nexport const owners = ledger as { book?: Book };\n",
    });
    const found = await violations(root);
    expect(found).toContain('config-imports-only-below: src/config/config.ts -> src/catalogue/book.ts');
    expect(found).toContain('tenancy-imports-only-below: src/tenancy/owners.ts -> src/catalogue/book.ts');
    // The upward import closes a circle too (config -> book -> ledger -> config), reported as such.
    expect(found.filter((v) => v.startsWith('no-circular:'))).not.toEqual([]);
  });

  it('refuse an import circle inside one folder, type-only imports included', async () => {
    const root = tree({
      ...clean,
      'src/billing/ledger.ts':
        "import { config } from '../config/config.ts';\nimport type { Key } from './keys.ts';\nexport const ledger = config as { key?: Key };\n",
      'src/billing/keys.ts': "import type { ledger } from './ledger.ts';\nexport type Key = typeof ledger;\n",
    });
    expect(await violations(root)).toEqual(['no-circular: src/billing/keys.ts -> src/billing/ledger.ts']);
  });

  it('keep money and the secrets apart: the bottom layer imports nothing of src/', async () => {
    const root = tree({
      ...clean,
      'src/secrets/seal.ts': "import { ONE } from '../money/money.ts';\nexport const seal = ONE;\n",
      'src/config/config.ts':
        "import { ONE } from '../money/money.ts';\nimport { seal } from '../secrets/seal.ts';\nexport const config = { one: ONE, seal };\n",
    });
    expect(await violations(root)).toEqual(['secrets-imports-only-below: src/secrets/seal.ts -> src/money/money.ts']);
  });

  it('keep the console page to itself and money, and off Node', async () => {
    const root = tree({
      ...clean,
      'src/console/web/main.tsx':
        "import fs from 'node:fs';\nimport { ONE } from '../../money/money.ts';\nimport { config } from '../../config/config.ts';\nexport const page = () => <p>{String(ONE)}{String(config)}{String(fs)}</p>;\n",
    });
    expect(await violations(root)).toEqual([
      'console-page-imports-itself-and-money: src/console/web/main.tsx -> src/config/config.ts',
      'console-page-uses-no-node-built-ins: src/console/web/main.tsx -> fs',
      'console-web-imports-only-below: src/console/web/main.tsx -> src/config/config.ts',
    ]);
  });

  it('let the contract in from below the services only as types, and only where listed', async () => {
    const root = tree({
      ...clean,
      'src/billing/ledger.ts':
        "import { config } from '../config/config.ts';\nimport { BillingService } from '../gen/billing_pb.js';\nexport const ledger = { config, BillingService };\n",
      'src/metering/plan.ts':
        "import type { Key } from '../gen/billing_pb.ts';\nimport { ledger } from '../billing/ledger.ts';\nexport const plan = ledger as { key?: Key };\n",
      'src/catalogue/book.ts':
        "import type { ledger } from '../billing/ledger.js';\nimport type { Key } from '../gen/billing_pb.ts';\nimport type { plan } from '../metering/plan.ts';\nexport type Book = typeof ledger | Key | typeof plan;\n",
    });
    const found = await violations(root);
    expect(found).toContain('contract-only-through-the-services: src/billing/ledger.ts -> src/gen/billing_pb.ts');
    expect(found).toContain('contract-types-only-where-listed: src/metering/plan.ts -> src/gen/billing_pb.ts');
    expect(found.filter((v) => v.includes('src/catalogue/book.ts -> src/gen/'))).toEqual([]);
  });

  it('refuse a folder outside the layer table, an orphan and an import of no file', async () => {
    const root = tree({
      ...clean,
      'src/extra/e.ts': "import { ONE } from '../money/money.ts';\nexport const e = ONE;\n",
      'src/process/main.ts':
        "import { service } from '../services/billing.ts';\nimport { e } from '../extra/e.ts';\nimport { gone } from './gone.ts';\nconsole.log(service, e, gone);\n",
      'src/billing/dead.ts': 'export const dead = 1;\n',
    });
    expect(await violations(root)).toEqual([
      'in-the-layer-table: src/extra/e.ts -> src/money/money.ts',
      'no-orphans: src/billing/dead.ts',
      'not-to-unresolvable: src/process/main.ts -> ./gone.ts',
      'to-the-layer-table: src/process/main.ts -> src/extra/e.ts',
    ]);
  });
});
