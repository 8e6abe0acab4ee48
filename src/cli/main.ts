// Operator CLI: `npm run cli -- keys <command>`, `orgs|members|invites|teams <command>`,
// `catalogue <command>`, `providers <command>`, `deployments <command>`, `accounts set-group` and
// `report margin`. Talks to the Billing, Organisation and Catalogue services over the RPC port,
// never to the database directly; finds the gateway as src/config/gateway-address.ts says. Every
// failure is one line on stderr (exit 2: wrong usage; exit 1: the call failed).
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../gen/gateway/v1/errors_pb.js';
import { usdToNano } from '../money/money.ts';
import { formatUsd } from '../money/format.ts';
import { loadCliConfig } from '../config/cli-config.ts';
import { usageTable } from './usage-table.ts';
import { OPERATOR_USAGE_CSV_HEADER, operatorUsageCsvLine } from '../billing/usage-csv.ts';
import { CATALOGUE_COMMANDS, runCatalogue } from './catalogue-commands.ts';
import { DEPLOYMENT_COMMANDS, PROVIDER_COMMANDS, runProviders } from './provider-commands.ts';
import { marginTable, type MarginLine } from './margin-table.ts';
import { MarginGrouping } from '../gen/gateway/v1/billing_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { ORGANISATION_GROUPS, runOrganisations } from './organisation-commands.ts';
import { BUDGETS } from './budget-commands.ts';

const USAGE = `usage: npm run cli -- keys|catalogue|providers|deployments|accounts|report|orgs|members|invites|teams|budgets <command> [options]
  keys create --credits <usd> [--label <text>]   create an account and key; prints the key once
  keys balance <key|key_id>                       balance, held and available
  keys topup <key|key_id> --amount <usd> [--external-id <id>]
  keys rotate <key|key_id>                        new key on the same balance; the old one dies now
  keys revoke <key|key_id>
  keys usage <key|key_id> [--limit <n>] [--csv]   the last requests (default 20), newest first: cost, provider
                                                  cost, margin, the deployment and its attempts
  keys limits <key|key_id> [--rpm <n>] [--tpm <n>] [--in-flight <n>]
                                                  per-key rate limits and requests in flight at once
                                                  (0 = unlimited; omitted = default)
  catalogue history <model>                       the model's price versions, newest first
  catalogue set-price <model> <key=usd>... [--from <iso date>] [--reason <text>]
                                                  a new price version: the whole price map, now or from a date
  catalogue export                                the whole price book as a JSON document, on stdout
  catalogue schema                                its JSON Schema, on stdout: save it as book.schema.json beside
                                                  the export (the export's $schema names that file)
  catalogue diff -f <file>                        what applying the document would change; writes nothing
  catalogue apply -f <file> [--from <iso date>] [--reason <text>]
                                                  writes the document's changes, all or none; prices and markups from --from
  catalogue preview -f <file> [--days <n>]        the last n days' usage (default 30) as charged and under the document
  catalogue upsert -f <model.json> [--reason <text>]
                                                  adds a model, or changes one's definition (and prices)
  catalogue enable <model>                        serves the model again
  catalogue disable <model>                       refuses the model (model_not_available); move its aliases first
  catalogue alias <alias> <model>                 the alias is served by the model
  catalogue unalias <alias>                       the alias is an unknown model from now on
  catalogue markup [--provider <p> | --model <m>] [--group <g>] <rate>|clear [--from <iso date>]
                                                  the scope's markup over provider prices ("0.2" = 20%)
  catalogue markups                               the markups in force and scheduled
  providers list                                  the book's providers, each credential's state here (never the secret), their models
  providers add -f <provider.json> | --id <id> --dialect <d> --base-url <url> [--api-version <v>]
                [--timeout-ms <n>] [--header 'Name: value']... [--auth none] [--reason <text>]
                                                  adds a provider to the book, or replaces one's definition
  providers remove <id> [--reason <text>]         removes a provider (and its credential); refused while a model names it
  providers set-credential <id> --from-env <VAR> | --stdin | --env-name <NAME>
                                                  the provider's credential: the secret in this shell's VAR or on stdin
                                                  (sealed by the gateway), or the gateway's own variable NAME
  providers remove-credential <id>                removes the provider's stored credential
  providers test <id>                             one authenticated GET to the provider with its credential; exit 1 if refused
  deployments list [--model <id>]                 each model's deployments, with their health on the instance that answers
  deployments state <model>/<deployment> enabled|draining|disabled [--reason <text>]
                                                  its traffic, as the console sets it (a book change, in its history)
  deployments end-cooldown <model>/<deployment>   ends its cooldown on every instance
  accounts set-group <key|key_id> <group>         the account's price group for markups ('' = the default)
  report margin [--from <date>] [--to <date>] [--by model|day|account|deployment|team|member|key]
                                                  revenue, provider cost and margin of the requests in [from, to), UTC
  orgs create <name> --owner <name> [--telegram telegram:<id>] [--credits <usd>]
                                                  an organisation and its owner; prints its id (the owner's first key on stderr)
  orgs list [query]                               organisations, newest first
  orgs show <org>                                 balance, held, available; members, teams, live keys
  orgs rename <org> <name>
  orgs spend <org> [--by team|member|key|model|day] [--from <date>] [--to <date>] [--csv]
                                                  who spent what (default: by member, the last 30 days)
  orgs usage <org> [--member <id>] [--team <id>] [--key-id <id>] [--limit <n>] [--csv]
                                                  requests, newest first, with the team, member and key of each
  orgs audit <org> [--limit <n>] [--csv]          the organisation's whole audit log (or its newest n entries),
                                                  newest first: who, through what, from where, what
  orgs keys <org> [--member <id> | --team <id>] [--all]
                                                  the organisation's keys and whose each is
  orgs add-key <org> --member <id> | --team <id> [--name <text>]
                                                  a member's or a team's key; prints it once
  members list <org> [query]                      members, roles, teams and live keys
  members role <org> <member> <role>              owner, admin, billing or member
  members remove <org> <member> [--to-member <id> | --to-team <id>]
                                                  revokes their keys (or hands them over), ends their sessions
  members link <org> <member>                     a one-time console sign-in link for the member
  invites create <org> [--role member|billing|admin|owner] [--team <id>] [--hours <n>] [--note <text>]
                                                  a one-time invitation; prints its token
  invites list <org>
  invites revoke <org> <invitation>
  invites redeem <token> --name <name>            joins as a new member; prints their first key once
  teams create <org> <name>                       prints the team's id
  teams list <org>
  teams rename <org> <team> <name>
  teams delete <org> <team>                       refused while the team has live keys
  teams add <org> <team> <member>
  teams remove <org> <team> <member>
  budgets set <org> <usd> --period day|week|month|rolling|lifetime [--scope organisation|team|member|key|customer]
              [--scope-id <id>] [--time-zone <IANA zone>] [--start-day <n>] [--hours <n>] [--mode hard|soft]
              [--thresholds 50,80,100] [--name <text>] [--budget <id>]
                                                  a budget (--budget: changes that one, keeping what is not given);
                                                  prints its id
  budgets list <org> [--csv]                      budgets with their current window: spent, held, left, when it resets
  budgets delete <org> <budget>
  budgets raise <org> <budget> <usd> [--customer <id>]
                                                  the current window's raise (0 takes it back), until the window ends
  budgets reset <org> <budget> [--customer <id>]  forgives what was spent in the current window
options: --json for machine-readable output; -f - reads the file from stdin; -h, --help for this text
finding the gateway: GATEWAY_RPC_URL, else GRPC_PORT (and GRPC_HOST), else the address a running
  gateway wrote to DATA_DIR/gateway.json (default ./data), else http://127.0.0.1:8081
env: ADMIN_TOKEN when the gateway requires it`;

const COMMANDS = ['create', 'balance', 'topup', 'rotate', 'revoke', 'usage', 'limits'];
/** The groups on OrganisationService: organisations, members, invitations, teams and budgets. */
const ORGANISATION_COMMANDS = { ...ORGANISATION_GROUPS, budgets: BUDGETS };

function fail(msg: string, code = 2): never {
  console.error(msg);
  process.exit(code);
}

function usageError(msg: string): never {
  fail(`error: ${msg}; see npm run cli -- --help`);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      credits: { type: 'string' },
      amount: { type: 'string' },
      label: { type: 'string' },
      'external-id': { type: 'string' },
      limit: { type: 'string' },
      rpm: { type: 'string' },
      tpm: { type: 'string' },
      'in-flight': { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      by: { type: 'string' },
      reason: { type: 'string' },
      file: { type: 'string', short: 'f' },
      days: { type: 'string' },
      provider: { type: 'string' },
      model: { type: 'string' },
      group: { type: 'string' },
      id: { type: 'string' },
      dialect: { type: 'string' },
      'base-url': { type: 'string' },
      'api-version': { type: 'string' },
      'timeout-ms': { type: 'string' },
      auth: { type: 'string' },
      header: { type: 'string', multiple: true },
      'from-env': { type: 'string' },
      stdin: { type: 'boolean' },
      'env-name': { type: 'string' },
      owner: { type: 'string' },
      telegram: { type: 'string' },
      role: { type: 'string' },
      team: { type: 'string' },
      member: { type: 'string' },
      'key-id': { type: 'string' },
      name: { type: 'string' },
      note: { type: 'string' },
      hours: { type: 'string' },
      'to-member': { type: 'string' },
      'to-team': { type: 'string' },
      period: { type: 'string' },
      scope: { type: 'string' },
      'scope-id': { type: 'string' },
      'time-zone': { type: 'string' },
      'start-day': { type: 'string' },
      mode: { type: 'string' },
      thresholds: { type: 'string' },
      budget: { type: 'string' },
      customer: { type: 'string' },
      all: { type: 'boolean' },
      csv: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
} catch (err) {
  const e = err as NodeJS.ErrnoException;
  // "-1" reads as an option (or an option's missing value): say what it is instead.
  const negative = process.argv.slice(2).find((a) => /^-[\d.]/.test(a));
  if (negative) usageError(`${negative} is negative: amounts, hours and days are never negative`);
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')
    usageError(`unknown option ${/'([^']+)'/.exec(e.message)?.[1] ?? ''}`.trim());
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') usageError(e.message.replace(/\.$/, ''));
  usageError(e.message);
}
const { values, positionals } = parsed!;

const { gateway, adminToken, variable } = loadCliConfig();
const transport = createGrpcTransport({
  baseUrl: gateway.rpcUrl,
  // An address that swallows packets fails here rather than hanging the terminal.
  defaultTimeoutMs: 30_000,
  interceptors: adminToken
    ? [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${adminToken}`);
          return next(req);
        },
      ]
    : [],
});
const client = createClient(BillingService, transport);
const catalogue = createClient(CatalogueService, transport);
// The audit log says a change came through the CLI.
const organisations = createClient(
  OrganisationService,
  createGrpcTransport({
    baseUrl: gateway.rpcUrl,
    defaultTimeoutMs: 30_000,
    interceptors: [
      (next) => (req) => {
        req.header.set('x-gateway-via', 'cli');
        if (adminToken) req.header.set('authorization', `Bearer ${adminToken}`);
        return next(req);
      },
    ],
  }),
);

const keyRef = (s: string | undefined, cmd: string) => {
  if (!s) usageError(`keys ${cmd} needs a key (prx-…) or a key id`);
  return { ref: s.startsWith('prx-') ? { case: 'apiKey' as const, value: s } : { case: 'keyId' as const, value: s } };
};
const out = (human: string, json: unknown) =>
  console.log(values.json ? JSON.stringify(json, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) : human);

function dollars(text: string | undefined, flag: string): bigint {
  if (text === undefined) usageError(`--${flag} <usd> is required`);
  try {
    return usdToNano(text);
  } catch {
    usageError(`--${flag} must be a dollar amount such as 5 or 0.25`);
  }
}

function count(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) usageError(`--${flag} must be a whole number`);
  return Number(v);
}

/** The console's address for links: the gateway's HTTP address as the running gateway wrote it, when known. */
function consoleAddress(): string {
  return gateway.httpUrl ? `${gateway.httpUrl}/console/` : '';
}

async function run(): Promise<void> {
  const [group, cmd, arg] = positionals;
  if (values.help || group === 'help' || (group === 'keys' && cmd === 'help')) {
    console.log(USAGE);
    return;
  }
  if (group === undefined) fail(USAGE);
  if (group === 'catalogue')
    return runCatalogue({ catalogue, options: values, out, usageError, fail }, cmd, positionals.slice(2));
  if (group === 'providers' || group === 'deployments')
    return runProviders(
      { catalogue, options: values, out, usageError, fail, variable },
      group,
      cmd,
      positionals.slice(2),
    );
  if (group === 'accounts') return runAccounts(cmd, arg, positionals[3]);
  if (Object.hasOwn(ORGANISATION_COMMANDS, group))
    return runOrganisations(
      { orgs: organisations, billing: client, options: values, out, usageError, consoleUrl: consoleAddress() },
      group,
      cmd,
      positionals.slice(2),
      ORGANISATION_COMMANDS,
    );
  if (group === 'report') return runReport(cmd);
  if (group !== 'keys')
    usageError(
      `unknown command "${group}" (the commands are keys ${COMMANDS.join(', keys ')}, catalogue ${CATALOGUE_COMMANDS.join(', catalogue ')}, providers ${PROVIDER_COMMANDS.join(', providers ')}, deployments ${DEPLOYMENT_COMMANDS.join(', deployments ')}, accounts set-group, report margin)`,
    );
  if (!cmd) fail(USAGE);
  return runKeys(cmd, arg);
}

/** The keys commands. */
async function runKeys(cmd: string, arg: string | undefined): Promise<void> {
  switch (cmd) {
    case 'create':
      return createKey();
    case 'balance': {
      const b = await client.getBalance({ key: keyRef(arg, cmd) });
      out(
        `balance   ${formatUsd(b.balanceNano)}\nheld      ${formatUsd(b.heldNano)}\navailable ${formatUsd(b.availableNano)}`,
        {
          account_id: b.accountId,
          balance_nano: b.balanceNano,
          held_nano: b.heldNano,
          available_nano: b.availableNano,
        },
      );
      return;
    }
    case 'topup': {
      const key = keyRef(arg, cmd);
      const amountNano = dollars(values.amount, 'amount');
      const externalId = values['external-id'] ?? `cli:${randomUUID()}`;
      const r = await client.topUp({ key, amountNano, externalId, cause: 'operator-cli' });
      out(`${r.applied ? 'applied' : 'already applied'} (${externalId}); balance ${formatUsd(r.balanceNano)}`, {
        applied: r.applied,
        external_id: externalId,
        balance_nano: r.balanceNano,
      });
      return;
    }
    case 'rotate': {
      const r = await client.rotateKey({ key: keyRef(arg, cmd) });
      if (values.json) out('', { api_key: r.apiKey, key_id: r.keyId, revoked_key_id: r.revokedKeyId });
      else {
        console.log(r.apiKey);
        console.error(`new key id ${r.keyId}; ${r.revokedKeyId} is revoked.`);
      }
      return;
    }
    case 'revoke': {
      const r = await client.revokeKey({ key: keyRef(arg, cmd) });
      out(r.revoked ? 'revoked' : 'was already revoked', { revoked: r.revoked });
      return;
    }
    case 'usage':
      return keyUsage(arg);
    case 'limits':
      return setLimits(arg);
    default:
      usageError(`unknown command "keys ${cmd}" (the commands are keys ${COMMANDS.join(', keys ')})`);
  }
}

/** keys create: the key alone on stdout, so `KEY=$(npm run -s cli -- keys create --credits 5)` works. */
async function createKey(): Promise<void> {
  const r = await client.createKey({
    creditsNano: dollars(values.credits ?? '0', 'credits'),
    label: values.label ?? '',
    cause: 'operator-cli',
  });
  if (values.json)
    out('', {
      api_key: r.apiKey,
      key_id: r.keyId,
      account_id: r.accountId,
      prefix: r.prefix,
      balance_nano: r.balanceNano,
    });
  else {
    console.log(r.apiKey);
    console.error(
      `key id ${r.keyId}, account ${r.accountId}, balance ${formatUsd(r.balanceNano)}. The key is shown once; store it now.`,
    );
  }
}

/** keys usage: a key's latest usage rows (its account's), as the operator's request log has them. */
async function keyUsage(arg: string | undefined): Promise<void> {
  const key = keyRef(arg, 'usage');
  const limit = count(values.limit, 'limit') ?? 20;
  if (limit < 1 || limit > 1000) usageError('--limit must be between 1 and 1000');
  const r = await client.listUsage({ key, limit });
  // The console operator's CSV, line for line (src/billing/usage-csv.ts).
  if (values.csv)
    return void process.stdout.write(OPERATOR_USAGE_CSV_HEADER + r.records.map(operatorUsageCsvLine).join(''));
  out(
    usageTable(r.records.map((u) => ({ ...u, createdAt: u.createdAt ? timestampDate(u.createdAt) : undefined }))),
    r.records.map((u) => ({
      request_id: u.requestId,
      model: u.model,
      route: u.route,
      status: u.status,
      cost_nano: u.costNano,
      input_tokens: u.inputTokens,
      output_tokens: u.outputTokens,
      provider_cost_nano: u.providerCostNano,
      margin_nano: u.marginNano,
      deployment: u.deployment,
      attempts: u.attempts.map((a) => ({ deployment: a.deployment, outcome: a.outcome })),
      attempts_omitted: u.attemptsOmitted,
      trace_id: u.traceId,
    })),
  );
}

/** keys limits: a key's rate limits (unset: the default). */
async function setLimits(arg: string | undefined): Promise<void> {
  const key = keyRef(arg, 'limits');
  const rpm = count(values.rpm, 'rpm');
  const tpm = count(values.tpm, 'tpm');
  const inFlight = count(values['in-flight'], 'in-flight');
  const r = await client.setRateLimits({
    key,
    ...(rpm !== undefined ? { requestsPerMinute: rpm } : {}),
    ...(tpm !== undefined ? { tokensPerMinute: BigInt(tpm) } : {}),
    ...(inFlight !== undefined ? { maxInFlight: inFlight } : {}),
  });
  const set = `rpm ${rpm ?? 'default'}, tpm ${tpm ?? 'default'}, in flight ${inFlight ?? 'default'}`;
  out(r.updated ? `limits set: ${set}` : 'no such key', { updated: r.updated });
}

/** An account's price group (docs/billing.md#account-groups). */
async function runAccounts(cmd: string | undefined, key: string | undefined, group: string | undefined): Promise<void> {
  if (cmd !== 'set-group')
    usageError(`unknown command "accounts${cmd ? ` ${cmd}` : ''}" (the command is accounts set-group)`);
  if (!key || group === undefined)
    usageError("accounts set-group needs a key (prx-…) or a key id, then a group ('' for the default)");
  const r = await client.setAccountGroup({ key: keyRef(key, cmd), group });
  out(`account ${r.accountId} is in group ${r.group ? r.group : '"" (the default)'}`, {
    account_id: r.accountId,
    group: r.group,
  });
}

const GROUPINGS = {
  model: MarginGrouping.MODEL,
  day: MarginGrouping.DAY,
  account: MarginGrouping.ACCOUNT,
  deployment: MarginGrouping.DEPLOYMENT,
  team: MarginGrouping.TEAM,
  member: MarginGrouping.MEMBER,
  key: MarginGrouping.KEY,
} as const;

/** The margin report (docs/billing.md#the-margin-report). */
async function runReport(cmd: string | undefined): Promise<void> {
  if (cmd !== 'margin') usageError(`unknown command "report${cmd ? ` ${cmd}` : ''}" (the command is report margin)`);
  // Unset: the last 30 days, as the console's margin page shows.
  const to = utcTime(values.to, 'to', new Date());
  const from = utcTime(values.from, 'from', new Date(to.getTime() - 30 * 86_400_000));
  const by = (values.by ?? 'model') as keyof typeof GROUPINGS;
  if (!Object.hasOwn(GROUPINGS, by)) usageError('--by must be model, day, account, deployment, team, member or key');
  const r = await client.getMarginReport({
    from: timestampFromDate(from),
    to: timestampFromDate(to),
    by: GROUPINGS[by],
  });
  const total: MarginLine = r.total ?? { key: '', requests: 0n, revenueNano: 0n, providerCostNano: 0n, marginNano: 0n };
  const figures = (m: MarginLine) => ({
    requests: m.requests,
    revenue_nano: m.revenueNano,
    provider_cost_nano: m.providerCostNano,
    margin_nano: m.marginNano,
  });
  out(marginTable(by, r.rows, total), {
    from: from.toISOString(),
    to: to.toISOString(),
    by,
    rows: r.rows.map((m) => ({ key: m.key, ...figures(m) })),
    total: figures(total),
  });
}

/** A date (UTC midnight) or an ISO time; one without an offset is UTC too, never the machine's zone. */
/** A time given as --from / --to (UTC when it names no zone); `fallback` when not given. */
function utcTime(text: string | undefined, flag: string, fallback: Date): Date {
  if (text === undefined) return fallback;
  const d = new Date(/^\d{4}-\d{2}-\d{2}T[\d:.]+$/.test(text) ? `${text}Z` : text);
  if (Number.isNaN(d.getTime())) usageError(`--${flag} must be a date such as 2026-01-01 or 2026-01-01T12:00:00Z`);
  return d;
}

/** One line that says what went wrong, where the CLI looked, and how to point it elsewhere. */
function describeFailure(err: unknown): string {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(GatewayErrorSchema)[0];
  // A refused admin token is told below, with where the CLI looked.
  if (detail && detail.code !== 'admin_token_required') return `error: ${detail.message}`;
  const where = `${gateway.rpcUrl} (from ${gateway.source}${gateway.ignored.length ? `; ignored ${gateway.ignored.join('; ')}` : ''})`;
  switch (ce.code) {
    case Code.Unauthenticated:
      return adminToken
        ? `error: the gateway at ${where} refused ADMIN_TOKEN: it is not this gateway's admin token`
        : `error: the gateway at ${where} requires ADMIN_TOKEN; set it to the gateway's admin token`;
    case Code.Unavailable:
    case Code.DeadlineExceeded:
      return `error: no gateway answered at ${where}. Start one with \`npm start\`, or point the CLI at it with GATEWAY_RPC_URL=http://host:port (or GRPC_PORT, or the gateway's DATA_DIR)`;
    default:
      return `error: the gateway at ${where} failed: ${ce.rawMessage}`;
  }
}

run().catch((err) => fail(describeFailure(err), 1));
