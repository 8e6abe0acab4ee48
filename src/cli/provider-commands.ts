// `npm run cli -- providers <command>` and `deployments <command>` (docs/providers.md): the book's
// providers, their credentials, each model's deployments with their health on the instance that
// answers, a deployment's traffic and the end of its cooldown. A secret is never a command-line
// argument (ps and shell history show those): `--from-env VAR` sends the value of this process's
// variable VAR, `--stdin` reads it from standard input, `--env-name NAME` stores only the name of
// the gateway's own variable. Nothing here prints a secret: the gateway never answers with one.
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type {
  CatalogueService,
  Deployment,
  ModelDeployments,
  Provider,
  ProviderCredential,
} from '../gen/gateway/v1/catalogue_pb.js';
import { BOOK_LIMITS, bookProblems, parseBookDocument } from '../catalogue/book-document.ts';
import { readAtMost, warn, warningsJson } from './catalogue-commands.ts';
import { isoSecond } from './usage-table.ts';
import { textTable, type Column } from './table.ts';

/** The command-line options these commands read. */
export interface ProviderOptions {
  file?: string | undefined;
  reason?: string | undefined;
  model?: string | undefined;
  id?: string | undefined;
  dialect?: string | undefined;
  'base-url'?: string | undefined;
  'api-version'?: string | undefined;
  'timeout-ms'?: string | undefined;
  header?: string[] | undefined;
  /** `none`: the provider needs no credential. */
  auth?: string | undefined;
  'from-env'?: string | undefined;
  stdin?: boolean | undefined;
  'env-name'?: string | undefined;
}

/** What main.ts gives the commands (as for the catalogue commands). */
export interface ProviderCli {
  catalogue: Client<typeof CatalogueService>;
  options: ProviderOptions;
  /** Prints `human`, or `json` under --json. */
  out(human: string, json: unknown): void;
  /** A wrong command line: one line, exit 2. */
  usageError(msg: string): never;
  /** Lines on stderr, then `code`. */
  fail(msg: string, code?: number): never;
  /** A variable of the CLI's environment (cli-config.ts). */
  variable(name: string): string | undefined;
}

const SOURCE = 'operator-cli';
/** More than any secret the gateway accepts (8192 characters); a larger stdin is refused unsent. */
const STDIN_SECRET_BYTES = 64 * 1024;

type Run = (cli: ProviderCli, args: string[]) => Promise<void>;

const PROVIDERS: Record<string, Run> = {
  list: listProviders,
  add: addProvider,
  remove: removeProvider,
  'set-credential': setCredential,
  'remove-credential': removeCredential,
  test: testProvider,
};
const DEPLOYMENTS: Record<string, Run> = {
  list: listDeployments,
  state: setDeploymentState,
  'end-cooldown': endCooldown,
};

/** The commands of each group, in the order help and errors list them. */
export const PROVIDER_COMMANDS = Object.keys(PROVIDERS);
export const DEPLOYMENT_COMMANDS = Object.keys(DEPLOYMENTS);

export async function runProviders(
  cli: ProviderCli,
  group: 'providers' | 'deployments',
  cmd: string | undefined,
  args: string[],
): Promise<void> {
  const table = group === 'providers' ? PROVIDERS : DEPLOYMENTS;
  const names = Object.keys(table);
  if (!cmd) cli.usageError(`${group} needs a command (${names.join(', ')})`);
  const run = Object.hasOwn(table, cmd) ? table[cmd] : undefined;
  if (!run)
    cli.usageError(`unknown command "${group} ${cmd}" (the commands are ${group} ${names.join(`, ${group} `)})`);
  await run(cli, args);
}

/** The one provider id a command takes; anything after it is refused, unquoted (it may be a pasted secret). */
function providerArg(cli: ProviderCli, cmd: string, args: string[]): string {
  const id = args[0] ?? cli.usageError(`providers ${cmd} needs a provider id`);
  if (args.length > 1)
    cli.usageError(
      `providers ${cmd} takes one provider id and nothing after it${cmd === 'set-credential' ? ' (a secret is never taken on the command line: use --stdin or --from-env VAR)' : ''}`,
    );
  return id;
}

const meta = (cli: ProviderCli) => ({ reason: cli.options.reason ?? '', source: SOURCE });

async function listProviders(cli: ProviderCli, args: string[]): Promise<void> {
  if (args.length > 0) cli.usageError('providers list takes no arguments');
  const { providers } = await cli.catalogue.listProviders({});
  cli.out(providersTable(providers), providers.map(providerJson));
}

/** `-f provider.json` (a book document's provider entry), or the entry the flags describe. */
function providerText(cli: ProviderCli): { text: string; from: string } {
  const o = cli.options;
  const flags = o.id ?? o.dialect ?? o['base-url'] ?? o['api-version'] ?? o['timeout-ms'] ?? o.header ?? o.auth;
  if (o.file !== undefined) {
    if (flags !== undefined)
      cli.usageError('providers add takes -f <file> or --id/--dialect/--base-url flags, not both');
    let bytes: Buffer;
    try {
      bytes = readAtMost(o.file === '-' ? 0 : o.file, BOOK_LIMITS.documentBytes + 1);
    } catch (e) {
      return cli.usageError(`cannot read ${o.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    return { text: bytes.toString('utf8'), from: o.file === '-' ? 'stdin' : o.file };
  }
  if (o.id === undefined || o.dialect === undefined || o['base-url'] === undefined)
    cli.usageError('providers add needs -f <provider.json>, or --id, --dialect and --base-url');
  const timeout = o['timeout-ms'];
  if (timeout !== undefined && !/^\d+$/.test(timeout)) cli.usageError('--timeout-ms must be a whole number of ms');
  const headers: Record<string, string> = {};
  for (const h of o.header ?? []) {
    const m = /^([^:]+):\s*(.*)$/.exec(h);
    if (!m) cli.usageError('--header takes "Name: value"');
    headers[m[1]!.trim()] = m[2]!;
  }
  const entry = {
    id: o.id,
    dialect: o.dialect,
    baseUrl: o['base-url'],
    ...(o['api-version'] !== undefined ? { apiVersion: o['api-version'] } : {}),
    ...(o.header ? { headers } : {}),
    ...(timeout !== undefined ? { timeoutMs: Number(timeout) } : {}),
    ...(o.auth !== undefined ? { auth: o.auth } : {}),
  };
  return { text: JSON.stringify(entry), from: 'the flags' };
}

async function addProvider(cli: ProviderCli, args: string[]): Promise<void> {
  if (args.length > 0) cli.usageError('providers add takes no arguments (-f <file>, or --id, --dialect, --base-url)');
  const { text, from } = providerText(cli);
  if (Buffer.byteLength(text) > BOOK_LIMITS.documentBytes)
    cli.fail(`error: ${from}: more than ${BOOK_LIMITS.documentBytes} bytes`, 1);
  // Checked here first by the gateway's own rules: a bad entry is one line per problem, never sent.
  const parsed = parseBookDocument(`{"providers":[${text}],"models":[],"aliases":{},"markups":[]}`);
  const problems = 'problems' in parsed ? parsed.problems : bookProblems(parsed.doc);
  if (problems.length > 0) cli.fail(problems.map((p) => `error: ${from}: ${p.field}: ${p.message}`).join('\n'), 1);
  const r = await cli.catalogue.upsertProvider({ providerJson: text, ...meta(cli) });
  const p = r.provider!;
  const verb = r.changes.length === 0 ? 'unchanged:' : r.created ? 'added' : 'updated';
  cli.out(
    [
      `${verb} provider ${p.id} (${p.dialect} at ${p.baseUrl}; credential: ${credentialCell(p.credential)})`,
      ...r.changes.map((c) => `  ${c.kind} ${c.subject} ${c.detail}`),
    ].join('\n'),
    {
      created: r.created,
      provider: providerJson(p),
      changes: r.changes.map((c) => ({ kind: c.kind, subject: c.subject, detail: c.detail })),
      warnings: warningsJson(r.warnings),
    },
  );
  warn(r.warnings);
}

async function removeProvider(cli: ProviderCli, args: string[]): Promise<void> {
  const id = providerArg(cli, 'remove', args);
  const r = await cli.catalogue.removeProvider({ providerId: id, ...meta(cli) });
  cli.out(
    r.removed ? `removed provider ${id}${r.credentialRemoved ? ' and its credential' : ''}` : `no provider ${id}`,
    { provider_id: id, removed: r.removed, credential_removed: r.credentialRemoved },
  );
}

/** The credential the options give: exactly one of --from-env, --stdin and --env-name. */
function credentialOf(cli: ProviderCli): { case: 'secret' | 'envName'; value: string } {
  const o = cli.options;
  const given = [o['from-env'] !== undefined, o.stdin === true, o['env-name'] !== undefined].filter(Boolean).length;
  if (given !== 1)
    cli.usageError(
      "providers set-credential needs one of --from-env VAR (the secret in this shell's variable VAR), --stdin (the secret on standard input) or --env-name NAME (the gateway's own variable NAME holds it)",
    );
  if (o['env-name'] !== undefined) return { case: 'envName', value: o['env-name'] };
  if (o['from-env'] !== undefined) {
    // The variable's name is not repeated: a secret typed where its name belongs would be echoed.
    const value = cli.variable(o['from-env']);
    if (!value) cli.usageError('the variable --from-env names is not set, or empty, in this shell');
    return { case: 'secret', value };
  }
  let bytes: Buffer;
  try {
    bytes = readAtMost(0, STDIN_SECRET_BYTES + 1);
  } catch (e) {
    return cli.usageError(`cannot read stdin: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (bytes.length > STDIN_SECRET_BYTES)
    cli.fail(`error: stdin: more than ${STDIN_SECRET_BYTES} bytes: not a secret`, 1);
  // `echo "$KEY" |` and a file end in a line break, which is not part of the key.
  const value = bytes.toString('utf8').replace(/[\r\n]+$/, '');
  if (value === '') cli.usageError('stdin is empty: nothing to set');
  return { case: 'secret', value };
}

async function setCredential(cli: ProviderCli, args: string[]): Promise<void> {
  const id = providerArg(cli, 'set-credential', args);
  const credential = credentialOf(cli);
  const r = await cli.catalogue.setProviderCredential({ providerId: id, credential, source: SOURCE });
  cli.out(`provider ${id}: ${credentialLine(r.credential)}`, { provider_id: id, ...credentialJson(r.credential) });
}

async function removeCredential(cli: ProviderCli, args: string[]): Promise<void> {
  const id = providerArg(cli, 'remove-credential', args);
  const r = await cli.catalogue.removeProviderCredential({ providerId: id });
  cli.out(
    `${r.removed ? `removed the stored credential of ${id}` : `${id} had no stored credential`}; now: ${credentialLine(r.credential)}`,
    { provider_id: id, removed: r.removed, ...credentialJson(r.credential) },
  );
}

async function testProvider(cli: ProviderCli, args: string[]): Promise<void> {
  const id = providerArg(cli, 'test', args);
  const r = await cli.catalogue.testProvider({ providerId: id });
  const took = r.httpStatus > 0 || r.latencyMs > 0n ? ` in ${r.latencyMs} ms` : '';
  cli.out(`${r.ok ? 'ok' : 'failed'}: ${r.message}${took} (GET ${r.url})`, {
    provider_id: id,
    ok: r.ok,
    http_status: r.httpStatus,
    latency_ms: r.latencyMs,
    message: r.message,
    url: r.url,
  });
  // A script can tell: exit 1 when the provider did not accept the call.
  if (!r.ok) process.exitCode = 1;
}

async function listDeployments(cli: ProviderCli, args: string[]): Promise<void> {
  if (args.length > 0) cli.usageError('deployments list takes no arguments (--model <id> for one model)');
  const { models } = await cli.catalogue.listDeployments({ modelId: cli.options.model ?? '' });
  cli.out(deploymentsTable(models), {
    models: models.map((m) => ({
      model_id: m.modelId,
      strategy: m.strategy,
      enabled: m.enabled,
      available: m.available,
      deployments: m.deployments.map(deploymentJson),
    })),
  });
}

/** `<model>/<deployment>`, as `deployments list` names it (a model id may hold '/': the last one splits). */
function deploymentArg(cli: ProviderCli, cmd: string, arg: string | undefined): { model: string; id: string } {
  const at = arg?.lastIndexOf('/') ?? -1;
  if (!arg || at <= 0 || at === arg.length - 1)
    cli.usageError(`deployments ${cmd} needs a deployment as <model>/<deployment> (deployments list names them)`);
  return { model: arg.slice(0, at), id: arg.slice(at + 1) };
}

const TRAFFIC = ['enabled', 'draining', 'disabled'] as const;

/**
 * `deployments state <model>/<deployment> enabled|draining|disabled`: its traffic, as the console's
 * Providers page sets it: the book in force with that one edit, applied by ApplyBook on the
 * version it was read at (refused, nothing written, when the book changed in between), in the
 * book's history with --reason.
 */
async function setDeploymentState(cli: ProviderCli, args: string[]): Promise<void> {
  const { model, id } = deploymentArg(cli, 'state', args[0]);
  const state = args[1] as (typeof TRAFFIC)[number] | undefined;
  if (args.length !== 2 || !state || !TRAFFIC.includes(state))
    cli.usageError(`deployments state takes <model>/<deployment> and one of ${TRAFFIC.join(', ')}`);
  const book = await cli.catalogue.exportBook({});
  const doc = JSON.parse(book.document) as {
    models?: { id: string; deployments?: { id: string; state?: string }[] }[];
  };
  const d = doc.models?.find((m) => m.id === model)?.deployments?.find((x) => x.id === id);
  if (!d) cli.fail(`error: no deployment ${model}/${id} in the book (deployments list names them)`, 1);
  if (state === 'enabled') delete d.state;
  else d.state = state;
  const r = await cli.catalogue.applyBook({
    document: JSON.stringify(doc),
    basedOn: book.version,
    reason: cli.options.reason ?? `cli: deployment ${model}/${id} ${state}`,
    source: SOURCE,
  });
  const lines = r.changes.map((c) => `${c.kind} ${c.subject} ${c.detail}`);
  cli.out(lines.length > 0 ? lines.join('\n') : `no changes: ${model}/${id} is ${state} already`, {
    deployment: `${model}/${id}`,
    state,
    applied: r.applied,
    changes: r.changes.map((c) => ({ kind: c.kind, subject: c.subject, detail: c.detail })),
    warnings: warningsJson(r.warnings),
  });
  warn(r.warnings);
}

/** `deployments end-cooldown <model>/<deployment>`: ends its cooldown on every instance, as the console's button does. */
async function endCooldown(cli: ProviderCli, args: string[]): Promise<void> {
  if (args.length !== 1) cli.usageError('deployments end-cooldown takes one <model>/<deployment>');
  const { model, id } = deploymentArg(cli, 'end-cooldown', args[0]);
  const r = await cli.catalogue.endDeploymentCooldown({ modelId: model, deploymentId: id, source: SOURCE });
  cli.out(
    r.wasCooling
      ? `ended the cooldown of ${model}/${id}: it takes traffic again on every instance`
      : `${model}/${id} was not cooling on the instance that answered; any cooldown elsewhere is ended too`,
    {
      deployment: `${model}/${id}`,
      was_cooling: r.wasCooling,
      ...(r.deployment ? { state: deploymentJson(r.deployment) } : {}),
    },
  );
}

const when = (t: Timestamp | undefined) => (t ? isoSecond(timestampDate(t)) : '');

/** `sealed v2`, `env OPENAI_KEY v1`, `setting`, `none`, `not needed`, and what keeps it from use here. */
function credentialCell(c: ProviderCredential | undefined): string {
  if (!c) return 'none';
  if (c.form === 'not_needed') return 'not needed';
  const stored = c.form === 'sealed' || c.form === 'env';
  const text = [c.form, c.form === 'env' ? c.envName : '', stored ? `v${c.version}` : ''].filter(Boolean).join(' ');
  if (c.unreadable) return `${text} (unreadable)`;
  return c.usable || c.form === 'none' ? text : `${text} (not usable here)`;
}

/** The credential for a person, with its problem spelled out. */
function credentialLine(c: ProviderCredential | undefined): string {
  if (!c || c.form === 'none') return 'no credential';
  if (c.form === 'not_needed') return 'needs no credential ("auth": "none"): called without one';
  const what =
    c.form === 'sealed'
      ? `sealed credential, version ${c.version}`
      : c.form === 'env'
        ? `credential from the gateway's variable ${c.envName}, version ${c.version}`
        : 'the credential of a <NAME>_API_KEY setting';
  const state = c.usable ? 'usable here' : `not usable here${c.problem ? `: ${c.problem}` : ''}`;
  return `${what} (${state})`;
}

function credentialJson(c: ProviderCredential | undefined) {
  return {
    form: c?.form ?? 'none',
    env_name: c?.envName ?? '',
    version: c?.version ?? 0n,
    updated_at: when(c?.updatedAt),
    source: c?.source ?? '',
    unreadable: c?.unreadable ?? false,
    usable: c?.usable ?? false,
    problem: c?.problem ?? '',
  };
}

function providerJson(p: Provider) {
  return {
    id: p.id,
    dialect: p.dialect,
    base_url: p.baseUrl,
    api_version: p.apiVersion,
    headers: p.headers,
    timeout_ms: p.timeoutMs,
    served_base_url: p.servedBaseUrl,
    auth: p.auth,
    credential: credentialJson(p.credential),
    models: p.models,
    served_models: p.servedModels,
  };
}

/** One line per provider: where it is, its credential here, the models on it. */
function providersTable(providers: readonly Provider[]): string {
  if (providers.length === 0) return '(no providers in the book)';
  const details = (p: Provider) =>
    [
      p.apiVersion ? `api-version ${p.apiVersion}` : '',
      p.timeoutMs > 0n ? `timeout ${p.timeoutMs} ms` : '',
      p.servedBaseUrl && p.servedBaseUrl !== p.baseUrl.replace(/\/+$/, '') ? `here: ${p.servedBaseUrl}` : '',
      ...Object.entries(p.headers)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => `${k}: ${v}`),
    ]
      .filter(Boolean)
      .join('; ');
  const columns: Column<Provider>[] = [
    { header: 'ID', align: 'left', cell: (p) => p.id },
    { header: 'DIALECT', align: 'left', cell: (p) => p.dialect },
    { header: 'BASE URL', align: 'left', cell: (p) => p.baseUrl },
    { header: 'CREDENTIAL', align: 'left', cell: (p) => credentialCell(p.credential) },
    { header: 'MODELS', align: 'right', cell: (p) => String(p.models) },
    { header: 'SERVED', align: 'right', cell: (p) => String(p.servedModels) },
    { header: 'DETAILS', align: 'left', cell: details },
  ];
  return textTable(providers, columns);
}

function deploymentJson(d: Deployment) {
  return {
    key: d.key,
    id: d.id,
    provider: d.provider,
    upstream_id: d.upstreamId,
    weight: d.weight,
    priority: d.priority,
    own_prices: d.ownPrices,
    served: d.served,
    from_setting: d.fromSetting,
    admission: d.admission,
    cool_until: when(d.coolUntil),
    consecutive_fails: d.consecutiveFails,
    latency_ms: d.latencyMs ?? null,
    p50_latency_ms: d.p50LatencyMs ?? null,
    error_rate: d.errorRate ?? null,
    cooldowns: d.cooldowns,
    // Limits (0: none) and their use this minute / now, on every instance.
    rpm: d.rpm,
    tpm: d.tpm,
    concurrency: d.concurrency,
    window_requests: d.windowRequests,
    window_tokens: d.windowTokens,
    in_flight: d.inFlight,
  };
}

/** One line per deployment, under its model's name and routing. */
function deploymentsTable(models: readonly ModelDeployments[]): string {
  const rows = models.flatMap((m) => m.deployments.map((d) => ({ m, d })));
  if (rows.length === 0) return '(no deployments)';
  type Row = (typeof rows)[number];
  const model = ({ m }: Row) => `${m.modelId}${!m.enabled ? ' (disabled)' : !m.available ? ' (not available)' : ''}`;
  const state = ({ d }: Row) =>
    !d.served
      ? 'no credential here'
      : d.admission === 'cooling' && d.coolUntil
        ? `cooling until ${when(d.coolUntil)}`
        : d.admission;
  const columns: Column<Row>[] = [
    { header: 'MODEL', align: 'left', cell: model },
    { header: 'ROUTING', align: 'left', cell: ({ m }) => m.strategy },
    { header: 'DEPLOYMENT', align: 'left', cell: ({ d }) => `${d.id}${d.fromSetting ? ' (setting)' : ''}` },
    { header: 'PROVIDER', align: 'left', cell: ({ d }) => d.provider },
    { header: 'UPSTREAM', align: 'left', cell: ({ d }) => d.upstreamId },
    { header: 'WEIGHT', align: 'right', cell: ({ d }) => String(d.weight) },
    { header: 'PRIORITY', align: 'right', cell: ({ d }) => String(d.priority) },
    { header: 'PRICES', align: 'left', cell: ({ d }) => (d.ownPrices ? 'own' : 'model') },
    { header: 'STATE', align: 'left', cell: state },
    { header: 'FAILS', align: 'right', cell: ({ d }) => String(d.consecutiveFails) },
    { header: 'P50', align: 'right', cell: ({ d }) => (d.p50LatencyMs !== undefined ? `${d.p50LatencyMs} ms` : '-') },
    { header: 'THIS MINUTE', align: 'left', cell: ({ d }) => limitUse(d) },
    {
      header: 'ERRORS',
      align: 'right',
      cell: ({ d }) => (d.errorRate !== undefined ? `${Math.round(d.errorRate * 100)}%` : '-'),
    },
    { header: 'COOLDOWNS', align: 'right', cell: ({ d }) => String(d.cooldowns) },
  ];
  return textTable(rows, columns);
}

/** A deployment's use of its limits this minute, on every instance: `12/500 rpm, 3100/200000 tpm`; '-' without limits. */
function limitUse(d: {
  rpm: number;
  tpm: bigint;
  concurrency: number;
  windowRequests: number;
  windowTokens: bigint;
  inFlight: number;
}): string {
  const parts: string[] = [];
  if (d.rpm > 0) parts.push(`${d.windowRequests}/${d.rpm} rpm`);
  if (d.tpm > 0n) parts.push(`${d.windowTokens}/${d.tpm} tpm`);
  if (d.concurrency > 0) parts.push(`${d.inFlight}/${d.concurrency} in flight`);
  return parts.length > 0 ? parts.join(', ') : '-';
}
