// `npm run cli -- catalogue <command>`: the price book from a terminal (docs/operations.md#changing-a-price).
// The whole book is a JSON document an operator keeps in git: `export` writes it, `diff` shows
// what an edited copy changes (a dry run), `preview` what it would have charged over recent usage,
// `apply` writes it, all or nothing; the other commands each make one change. The gateway decides
// what is refused; a document is also checked here first, with the gateway's own rules
// (book-document.ts), so a bad file is one line per problem and is never sent.
import fs from 'node:fs';
import { timestampDate, timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { BookWarning, CatalogueService, Markup, PreviewRow } from '../gen/gateway/v1/catalogue_pb.js';
import { nanoToUsd } from '../money/money.ts';
import { BOOK_LIMITS, bookProblems, parseBookDocument, type BookProblem } from '../catalogue/book-document.ts';
import { scopeName } from '../catalogue/book-diff.ts';
import { isoSecond } from './usage-table.ts';
import { textTable, type Align } from './table.ts';

/** The command-line options the catalogue commands read. */
export interface CatalogueOptions {
  file?: string | undefined;
  from?: string | undefined;
  reason?: string | undefined;
  days?: string | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  group?: string | undefined;
}

/** What main.ts gives the commands: the client, the options, and its ways to print and to fail. */
export interface CatalogueCli {
  catalogue: Client<typeof CatalogueService>;
  options: CatalogueOptions;
  /** Prints `human`, or `json` under --json. */
  out(human: string, json: unknown): void;
  /** A wrong command line: one line, exit 2. */
  usageError(msg: string): never;
  /** Lines on stderr, then `code`. */
  fail(msg: string, code?: number): never;
}

const SOURCE = 'operator-cli';

/** One catalogue command, given what the command line said. */
interface Command {
  cli: CatalogueCli;
  cmd: string;
  /** The `i`th argument, or a usage error saying what it should be. */
  arg(i: number, what: string): string;
  args: string[];
  /** Who writes, and why (--reason): on every change. */
  meta: { reason: string; source: string };
}

const COMMANDS: Record<string, (c: Command) => Promise<void>> = {
  history: (c) => history(c.cli, c.arg(0, 'a model id')),
  'set-price': (c) => setPrice(c.cli, c.arg(0, 'a model id'), c.args.slice(1)),
  export: exportBook,
  schema: printSchema,
  diff: applyDocument,
  apply: applyDocument,
  preview: previewDocument,
  upsert: upsertModel,
  enable: setEnabled,
  disable: setEnabled,
  alias: setAlias,
  unalias: deleteAlias,
  markup: setMarkup,
  markups: listMarkups,
};

/** The catalogue commands, in the order help and errors list them. */
export const CATALOGUE_COMMANDS = Object.keys(COMMANDS);

export async function runCatalogue(cli: CatalogueCli, cmd: string | undefined, args: string[]): Promise<void> {
  if (!cmd) cli.usageError(`catalogue needs a command (${CATALOGUE_COMMANDS.join(', ')})`);
  const run = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (!run)
    cli.usageError(
      `unknown command "catalogue ${cmd}" (the commands are catalogue ${CATALOGUE_COMMANDS.join(', catalogue ')})`,
    );
  const arg = (i: number, what: string) => args[i] ?? cli.usageError(`catalogue ${cmd} needs ${what}`);
  await run({ cli, cmd, arg, args, meta: { reason: cli.options.reason ?? '', source: SOURCE } });
}

/** The book as a document (JSON already, in its canonical form: printed as it is, --json or not). */
async function exportBook({ cli }: Command): Promise<void> {
  const { catalogue } = cli;
  const { document } = await catalogue.exportBook({});
  process.stdout.write(document);
}

/**
 * The book document's JSON Schema (src/catalogue/book.schema.json, this CLI's own copy), as it is.
 * An export's `$schema` is "./book.schema.json": saved beside the export, editors and validators
 * find it there, wherever the file is kept (docs/price-book.md).
 */
async function printSchema({ cli, args }: Command): Promise<void> {
  if (args.length > 0) cli.usageError('catalogue schema takes no arguments (save it with > book.schema.json)');
  process.stdout.write(fs.readFileSync(new URL('../catalogue/book.schema.json', import.meta.url), 'utf8'));
}

/** diff: what a document would change; apply: writes it. */
async function applyDocument({ cli, cmd, meta }: Command): Promise<void> {
  const { catalogue, options, out } = cli;
  const dryRun = cmd === 'diff';
  if (dryRun && options.from !== undefined) cli.usageError('catalogue diff takes no --from (it writes nothing)');
  const from = dateOption(cli);
  const document = readDocument(cli, cmd);
  const r = await catalogue.applyBook({
    document,
    dryRun,
    ...(from ? { effectiveFrom: timestampFromDate(from) } : {}),
    ...meta,
  });
  // One line per change (what a dry run would write, or what was written), as a reviewer reads a diff.
  const lines = r.changes.map((c) => `${c.kind} ${c.subject} ${c.detail}`);
  out(lines.length > 0 ? lines.join('\n') : 'no changes', {
    applied: r.applied,
    changes: r.changes.map((c) => ({ kind: c.kind, subject: c.subject, detail: c.detail })),
    warnings: warningsJson(r.warnings),
  });
  warn(r.warnings);
}

/** What a change leaves to do (a deployment no credential serves here), on stderr: stdout stays the changes. */
export function warn(warnings: readonly BookWarning[]): void {
  for (const w of warnings) process.stderr.write(`warning: ${w.message}\n`);
}

export const warningsJson = (warnings: readonly BookWarning[]) =>
  warnings.map((w) => ({ subject: w.subject, message: w.message }));

/** A document's prices over the last --days of usage. */
async function previewDocument({ cli, cmd }: Command): Promise<void> {
  const { catalogue, options, out } = cli;
  const days = options.days === undefined ? 30 : Number(options.days);
  if (!/^\d+$/.test(options.days ?? '30') || days < 1 || days > 366)
    cli.usageError('--days must be a whole number of days from 1 to 366');
  const document = readDocument(cli, cmd);
  const r = await catalogue.previewBook({ document, days });
  const when = (t: Timestamp | undefined) => (t ? isoSecond(timestampDate(t)) : '');
  out(
    `usage from ${when(r.from)} to ${when(r.to)} (${days === 1 ? '1 day' : `${days} days`})\n${previewTable(r.rows, r.total)}`,
    {
      from: when(r.from),
      to: when(r.to),
      rows: r.rows.map(previewJson),
      total: r.total ? previewJson(r.total) : undefined,
    },
  );
}

/** Adds or replaces one model from a file. */
async function upsertModel({ cli, cmd, meta }: Command): Promise<void> {
  const { catalogue, options, out } = cli;
  const text = readFile(cli, cmd);
  try {
    JSON.parse(text);
  } catch (e) {
    cli.fail(`error: ${options.file === '-' ? 'stdin' : options.file}: not JSON: ${(e as Error).message}`, 1);
  }
  const parsed = parseBookDocument(`{"models":[${text}],"aliases":{},"markups":[]}`);
  if ('problems' in parsed) refuseFile(cli, parsed.problems);
  const r = await catalogue.upsertModel({ modelJson: text, ...meta });
  const m = r.model!;
  out(
    `${r.created ? 'added' : 'updated'} ${m.id} (${m.available ? 'available' : `not available: ${m.unavailableReason}`}; price version ${m.priceVersionId})`,
    {
      created: r.created,
      model_id: m.id,
      available: m.available,
      price_version_id: m.priceVersionId,
      warnings: warningsJson(r.warnings),
    },
  );
  warn(r.warnings);
}

/** Serves a model again, or stops serving it. */
async function setEnabled({ cli, cmd, arg, meta }: Command): Promise<void> {
  const { catalogue, out } = cli;
  const r = await catalogue.setModelEnabled({ modelId: arg(0, 'a model id'), enabled: cmd === 'enable', ...meta });
  const m = r.model!;
  out(
    `${m.id} ${m.enabled ? 'enabled' : 'disabled'}${m.enabled && !m.available ? ` (not available: ${m.unavailableReason})` : ''}`,
    { model_id: m.id, enabled: m.enabled, available: m.available },
  );
}

/** Points an alias at a model. */
async function setAlias({ cli, arg, meta }: Command): Promise<void> {
  const { catalogue, out } = cli;
  const alias = arg(0, 'an alias and a model id');
  const modelId = arg(1, 'a model id after the alias');
  await catalogue.setAlias({ alias, modelId, ...meta });
  out(`${alias} -> ${modelId}`, { alias, model_id: modelId });
}

/** Removes an alias. */
async function deleteAlias({ cli, arg, meta }: Command): Promise<void> {
  const { catalogue, out } = cli;
  const alias = arg(0, 'an alias');
  const r = await catalogue.deleteAlias({ alias, ...meta });
  out(r.deleted ? `${alias} deleted` : `no alias ${alias}`, { alias, deleted: r.deleted });
}

/** Sets (or clears) a markup for everyone or a group, on the default, a provider or a model. */
async function setMarkup({ cli, arg, meta }: Command): Promise<void> {
  const { catalogue, options, out } = cli;
  const rate = arg(0, 'a markup ("0.2" for 20%) or clear');
  if (options.provider !== undefined && options.model !== undefined)
    cli.usageError('a markup is for a provider or a model, not both');
  const from = dateOption(cli);
  const r = await catalogue.setMarkup({
    provider: options.provider ?? '',
    modelId: options.model ?? '',
    accountGroup: options.group ?? '',
    markup: rate === 'clear' ? '' : rate,
    ...(from ? { effectiveFrom: timestampFromDate(from) } : {}),
    ...meta,
  });
  const m = r.markup;
  if (!m) {
    out('no changes', { changed: false });
    return;
  }
  out(
    `${markupScopeName(m)} ${m.markup === '' ? 'cleared' : `= ${m.markup}`} from ${markupFrom(m)} (version ${m.id})`,
    markupJson(m),
  );
}

/** The markups in force and scheduled. */
async function listMarkups({ cli }: Command): Promise<void> {
  const { catalogue, out } = cli;
  const r = await catalogue.listMarkups({});
  const rows = [
    ...r.inForce.map((m) => ({ m, state: 'in force' })),
    ...r.scheduled.map((m) => ({ m, state: 'scheduled' })),
  ];
  out(
    rows.length === 0
      ? '(no markups: customers pay the providers’ prices)'
      : cellTable(
          ['SCOPE', 'MARKUP', 'STATE', 'FROM (UTC)', 'VERSION', 'SOURCE'],
          ['left', 'point', 'left', 'left', 'right', 'left'],
          rows.map(({ m, state }) => [
            markupScopeName(m),
            m.markup === '' ? 'cleared' : m.markup,
            state,
            markupFrom(m),
            m.id.toString(),
            m.reason ? `${m.source}: ${m.reason}` : m.source,
          ]),
        ),
    { in_force: r.inForce.map(markupJson), scheduled: r.scheduled.map(markupJson) },
  );
}

async function history(cli: CatalogueCli, model: string): Promise<void> {
  const { versions } = await cli.catalogue.getPriceHistory({ modelId: model });
  const when = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : '');
  cli.out(
    versions
      .map(
        (v) =>
          `version ${v.id}  from ${when(v.effectiveFrom)}  ${v.source}${v.reason ? `: ${v.reason}` : ''}\n  ${Object.entries(
            v.prices,
          )
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([k, p]) => `${k}=${p}`)
            .join(' ')}`,
      )
      .join('\n'),
    versions.map((v) => ({
      id: v.id,
      effective_from: when(v.effectiveFrom),
      source: v.source,
      reason: v.reason,
      prices: v.prices,
    })),
  );
}

async function setPrice(cli: CatalogueCli, model: string, pairs: string[]): Promise<void> {
  const prices: Record<string, string> = {};
  for (const pair of pairs) {
    const m = /^([a-z0-9_]+)=(.+)$/.exec(pair);
    if (!m) cli.usageError(`catalogue set-price takes prices as key=usd (e.g. input_per_mtok=0.15), not "${pair}"`);
    prices[m[1]!] = m[2]!;
  }
  if (Object.keys(prices).length === 0)
    cli.usageError("catalogue set-price needs the model's whole price map, as key=usd pairs");
  const from = dateOption(cli);
  const r = await cli.catalogue.setPrices({
    modelId: model,
    prices,
    ...(from ? { effectiveFrom: timestampFromDate(from) } : {}),
    reason: cli.options.reason ?? '',
    source: SOURCE,
  });
  const v = r.version!;
  const at = v.effectiveFrom ? timestampDate(v.effectiveFrom).toISOString() : '';
  cli.out(`version ${v.id} of ${v.modelId}, in force from ${at}`, {
    id: v.id,
    model_id: v.modelId,
    effective_from: at,
  });
}

function dateOption(cli: CatalogueCli): Date | undefined {
  if (cli.options.from === undefined) return undefined;
  const from = new Date(cli.options.from);
  if (Number.isNaN(from.getTime())) cli.usageError('--from must be a date such as 2026-12-01T00:00:00Z');
  return from;
}

/**
 * The text of `-f FILE` (`-f -`: stdin), refused (exit 1) past the gateway's document limit
 * without reading more than one byte beyond it: the gateway would refuse it whole anyway.
 */
function readFile(cli: CatalogueCli, cmd: string): string {
  const file = cli.options.file ?? cli.usageError(`catalogue ${cmd} needs -f <file> (or -f - for stdin)`);
  const max = BOOK_LIMITS.documentBytes;
  let bytes: Buffer;
  try {
    bytes = readAtMost(file === '-' ? 0 : file, max + 1);
  } catch (e) {
    return cli.usageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (bytes.length > max)
    cli.fail(
      `error: ${file === '-' ? 'stdin' : file}: more than ${max} bytes; a price book document is at most ${max} bytes (${max / 1024 / 1024} MiB, docs/price-book.md#limits)`,
      1,
    );
  return bytes.toString('utf8');
}

/** Up to `limit` bytes of a file or descriptor, read in chunks (stdin has no size to ask first). */
export function readAtMost(file: string | number, limit: number): Buffer {
  const fd = typeof file === 'number' ? file : fs.openSync(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    while (total < limit) {
      const chunk = Buffer.alloc(Math.min(64 * 1024, limit - total));
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
    }
    return Buffer.concat(chunks, total);
  } finally {
    if (typeof file !== 'number') fs.closeSync(fd);
  }
}

/** The book document in `-f FILE`, checked by the rules the gateway applies to it: a bad one is refused here, every problem on a line of its own. */
function readDocument(cli: CatalogueCli, cmd: string): string {
  const text = readFile(cli, cmd);
  const parsed = parseBookDocument(text);
  const problems = 'problems' in parsed ? parsed.problems : bookProblems(parsed.doc);
  if (problems.length > 0) refuseFile(cli, problems);
  return text;
}

function refuseFile(cli: CatalogueCli, problems: readonly BookProblem[]): never {
  const file = cli.options.file === '-' ? 'stdin' : cli.options.file;
  cli.fail(problems.map((p) => `error: ${file}: ${p.field}: ${p.message}`).join('\n'), 1);
}

const markupScopeName = (m: Markup) => scopeName({ provider: m.provider, modelId: m.modelId, group: m.accountGroup });
const markupFrom = (m: Markup) => (m.effectiveFrom ? isoSecond(timestampDate(m.effectiveFrom)) : '');

function markupJson(m: Markup) {
  return {
    id: m.id,
    scope: markupScopeName(m),
    provider: m.provider,
    model_id: m.modelId,
    group: m.accountGroup,
    markup: m.markup,
    effective_from: m.effectiveFrom ? timestampDate(m.effectiveFrom).toISOString() : '',
    source: m.source,
    reason: m.reason,
  };
}

function previewJson(r: PreviewRow) {
  return {
    model_id: r.modelId,
    requests: r.requests,
    revenue_nano: r.revenueNano,
    provider_cost_nano: r.providerCostNano,
    margin_nano: r.revenueNano - r.providerCostNano,
    proposed_revenue_nano: r.proposedRevenueNano,
    proposed_provider_cost_nano: r.proposedProviderCostNano,
    proposed_margin_nano: r.proposedRevenueNano - r.proposedProviderCostNano,
    inexact_requests: r.inexactRequests,
  };
}

/** Revenue, provider cost and margin per model, as charged and as the proposed book would charge; exact dollars. */
function previewTable(rows: readonly PreviewRow[], total: PreviewRow | undefined): string {
  if (rows.length === 0) return '(no usage in the period)';
  const inexact = rows.some((r) => r.inexactRequests > 0n);
  const line = (r: PreviewRow, name: string) => [
    inexact && r.inexactRequests > 0n ? `${name} *` : name,
    r.requests.toString(),
    nanoToUsd(r.revenueNano),
    nanoToUsd(r.providerCostNano),
    nanoToUsd(r.revenueNano - r.providerCostNano),
    nanoToUsd(r.proposedRevenueNano),
    nanoToUsd(r.proposedProviderCostNano),
    nanoToUsd(r.proposedRevenueNano - r.proposedProviderCostNano),
  ];
  const body = rows.map((r) => line(r, r.modelId));
  if (total) body.push(line(total, 'TOTAL'));
  const table = cellTable(
    ['MODEL', 'REQUESTS', 'REVENUE', 'COST', 'MARGIN', 'NEW REVENUE', 'NEW COST', 'NEW MARGIN'],
    ['left', 'right', 'point', 'point', 'point', 'point', 'point', 'point'],
    body,
  );
  const note = inexact
    ? '\n* some requests were charged at prices their recorded quantities do not show (service tiers, long context, tool fees, capped charges): their new figures scale with the base prices'
    : '';
  return `${table}\n(USD; cost is what the providers bill, margin = revenue - cost)${note}`;
}

/** An aligned table with a header, from rows of cells. */
function cellTable(headers: readonly string[], aligns: readonly Align[], rows: readonly string[][]): string {
  return textTable(
    rows,
    headers.map((header, c) => ({ header, align: aligns[c]!, cell: (r: readonly string[]) => r[c]! })),
  );
}
