// The layers of src/ as dependency-cruiser rules: `npm run lint` runs
// `depcruise --config scripts/import-layers.ts src`, which fails on an import circle (type-only
// imports count: a circle of types is still two modules that know each other), an import from a
// higher layer or between two parts of one layer, a file outside the table, an orphan, an import of
// no file, the contract (src/gen) reached from below the services, and the console page importing
// more than itself and money. docs/design.md (Layers) explains each row.
import type { IConfiguration, IForbiddenRuleType } from 'dependency-cruiser';

/**
 * The layers, lowest first; each part is a folder of src/. A file may import its own part and the
 * parts of lower layers, never another part of its own layer or a part above.
 */
export const LAYERS: readonly { name: string; parts: readonly string[] }[] = [
  // Pure and imported by everything: nano-USD arithmetic and its formatting; the credential scrubber.
  { name: 'money and secrets', parts: ['money', 'secrets'] },
  // The console's browser code: it imports only itself and money (and npm packages).
  { name: 'the console page', parts: ['console/web'] },
  { name: 'contract', parts: ['gen'] },
  { name: 'configuration', parts: ['config'] },
  // OpenTelemetry spans and their export (docs/observability.md): every layer above makes spans.
  { name: 'tracing', parts: ['tracing'] },
  { name: 'infrastructure', parts: ['log', 'db'] },
  { name: 'errors', parts: ['errors'] },
  { name: 'billing', parts: ['billing'] },
  // Organisations, members, roles, teams (docs/organisations.md): on the ledger's keys and usage rows.
  { name: 'organisations', parts: ['organisations'] },
  // Budgets held like money (docs/budgets.md): windows on the clock, holds on every scope.
  { name: 'budgets', parts: ['budgets'] },
  { name: 'catalogue and tenancy', parts: ['catalogue', 'tenancy'] },
  { name: 'metering', parts: ['metering'] },
  { name: 'inference and video', parts: ['inference', 'video'] },
  { name: 'services', parts: ['services'] },
  { name: 'transport', parts: ['rpc'] },
  // demo: the built-in demo provider (`npm start -- --demo`), a server the process alone imports.
  { name: 'edges', parts: ['facade', 'bot', 'cli', 'console', 'demo'] },
  { name: 'the process', parts: ['process'] },
];

/**
 * The contract reaches the domain only through the services (they turn its messages into calls and
 * back), with two exceptions the code needs: errors/ builds the GatewayError detail, which is the
 * contract's own error type, and the domain below the services may name a message's type (erased
 * at run time) where it answers in that shape rather than copy it field by field.
 */
const CONTRACT_USERS = ['services', 'rpc', 'facade', 'bot', 'cli', 'console', 'process', 'errors'];
const CONTRACT_TYPE_USERS = [...CONTRACT_USERS, 'billing', 'catalogue', 'inference'];

const ALL_PARTS = LAYERS.flatMap((l) => l.parts);

/** A path pattern for the files of `parts`; a part's subfolder that is a part of its own is left out. */
export function partsPattern(parts: readonly string[]): string {
  const one = (part: string) => {
    const inner = ALL_PARTS.filter((p) => p.startsWith(`${part}/`)).map((p) => p.slice(part.length + 1));
    return inner.length === 0 ? `${part}/` : `${part}/(?!(?:${inner.join('|')})/)`;
  };
  return `^src/(?:${parts.map(one).join('|')})`;
}

/** One rule per part: nothing of its own layer but itself, nothing above. */
function layerRules(): IForbiddenRuleType[] {
  return LAYERS.flatMap((layer, rank) =>
    layer.parts.flatMap((part) => {
      const notBelow = LAYERS.slice(rank).flatMap((l) => l.parts.filter((p) => p !== part));
      if (notBelow.length === 0) return []; // the top: it may import everything
      const below = LAYERS.slice(0, rank).map((l) => l.name);
      return {
        name: `${part.replace('/', '-')}-imports-only-below`,
        comment: `src/${part}/ (layer "${layer.name}") imports its own files and the layers below it${below.length ? `: ${below.join(', ')}` : ' (none)'}`,
        severity: 'error',
        from: { path: partsPattern([part]) },
        to: { path: partsPattern(notBelow) },
      } satisfies IForbiddenRuleType;
    }),
  );
}

const config: IConfiguration = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'an import circle: the files on it know each other, whichever is read first',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...layerRules(),
    {
      name: 'console-page-imports-itself-and-money',
      comment: 'the console page (src/console/web/) is bundled for the browser: only itself, money and npm packages',
      severity: 'error',
      from: { path: '^src/console/web/' },
      to: { path: '^src/', pathNot: '^src/(?:console/web|money)/' },
    },
    {
      name: 'console-page-uses-no-node-built-ins',
      comment: 'the console page runs in the browser, where there is no Node',
      severity: 'error',
      from: { path: '^src/console/web/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'contract-only-through-the-services',
      comment: `src/gen/ is imported by ${CONTRACT_USERS.join(', ')} (scripts/import-layers.ts says why errors/)`,
      severity: 'error',
      // The contract's own files import each other (one .proto importing another's messages).
      from: { path: '^src/', pathNot: [partsPattern(CONTRACT_USERS), '^src/gen/'] },
      to: { path: '^src/gen/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'contract-types-only-where-listed',
      comment: `a type of src/gen/ is named by ${CONTRACT_TYPE_USERS.join(', ')} only`,
      severity: 'error',
      from: { path: '^src/', pathNot: [partsPattern(CONTRACT_TYPE_USERS), '^src/gen/'] },
      to: { path: '^src/gen/', dependencyTypes: ['type-only'] },
    },
    {
      name: 'in-the-layer-table',
      comment: 'every folder of src/ is a part of the layer table (scripts/import-layers.ts LAYERS)',
      severity: 'error',
      from: { path: '^src/', pathNot: partsPattern(ALL_PARTS) },
      to: {},
    },
    {
      name: 'to-the-layer-table',
      comment: 'every folder of src/ is a part of the layer table (scripts/import-layers.ts LAYERS)',
      severity: 'error',
      from: {},
      to: { path: '^src/', pathNot: partsPattern(ALL_PARTS) },
    },
    {
      name: 'no-orphans',
      comment: 'a file nothing imports and that imports nothing: dead, or an entry point the table should name',
      severity: 'error',
      from: { orphan: true, path: '^src/', pathNot: ['[.]d[.]ts$', '[.](?:json|css)$'] },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      comment: 'an import of no file (or of a package not installed)',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // TypeScript 7 has no JavaScript compiler API for dependency-cruiser to parse with: swc parses
    // TypeScript, and keeps `import type` (marked type-only) in the graph.
    parser: 'swc',
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/gen/.*[.]d[.]ts$' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.json'],
      // Packages' subpaths (`@bufbuild/protobuf/wkt`) as Node finds them.
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};

export default config;
