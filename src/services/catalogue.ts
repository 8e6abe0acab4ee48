// CatalogueService: the models, their availability and prices, and the price book's admin calls.
// Every change to the book is a proposed book document (the one in force with the change made),
// checked whole by the document's rules (book-document.ts), turned into the changes it makes
// (book-diff.ts), and written in one transaction (PriceBook.change); this instance serves it at
// once, the others within PRICE_BOOK_REFRESH_MS.
import { timestampDate, timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ModelKind, type CatalogueService, type ModelSchema } from '../gen/gateway/v1/catalogue_pb.js';
import { gatewayError, notFound } from '../errors/errors.ts';
import { Code } from '@connectrpc/connect';
import { customerPrice, markupPpm } from '../billing/markup.ts';
import { markupFor, type Catalogue, type ResolvedModel } from '../catalogue/catalogue.ts';
import {
  BOOK_VERSION_KINDS,
  PriceBook,
  type BookState,
  type BookVersionKind,
  type MarkupVersion,
  type PriceVersion,
  type WriteMeta,
} from '../catalogue/price-book.ts';
import { bookVersion, versionOfText } from '../catalogue/book-version.ts';
import {
  BOOK_LIMITS,
  bookProblems,
  clip,
  documentSizeProblem,
  formatBookDocument,
  MORE_PROBLEMS,
  parseBookDocument,
  tooLongMessage,
  type BookDocument,
  type BookProblem,
} from '../catalogue/book-document.ts';
import { priceVersionProblem } from '../catalogue/price-rules.ts';
import {
  bookMarkupOf,
  definitionOf,
  describeChange,
  diffBooks,
  scopeName,
  markupScopeOf,
  type Change,
  type MarkupScope,
} from '../catalogue/book-diff.ts';
import type { CatalogueEntry, ModelKindName } from '../catalogue/models.ts';
import type { BookPreview } from '../catalogue/preview.ts';
import { providerMethods, type ProviderParts } from './providers.ts';
import { idleDeployments, type BookWarning } from '../catalogue/credential-warnings.ts';

const KINDS: Record<ModelKindName, ModelKind> = {
  chat: ModelKind.CHAT,
  embedding: ModelKind.EMBEDDING,
  image: ModelKind.IMAGE,
  transcription: ModelKind.TRANSCRIPTION,
  speech: ModelKind.SPEECH,
  video: ModelKind.VIDEO,
};

/** The catalogue entry a resolved model was built from (its definition and prices), as a book document holds it. */
export function entryOf(m: ResolvedModel): CatalogueEntry {
  const {
    available: _a,
    unavailableReason: _u,
    dialect: _d,
    served: _s,
    strategy: _r,
    priceVersion: _v,
    markups: _m,
    ...entry
  } = m;
  return entry;
}

function toMessage(m: ResolvedModel, group: string, aliases: readonly string[]): MessageInitShape<typeof ModelSchema> {
  const markup = markupFor(m, group);
  return {
    id: m.id,
    kind: KINDS[m.kind],
    provider: m.provider,
    dialect: m.dialect,
    upstreamId: m.upstreamId,
    enabled: m.enabled,
    available: m.available,
    unavailableReason: m.unavailableReason,
    responsesPassthrough: m.responsesPassthrough ?? false,
    contextWindow: m.contextWindow,
    maxOutputTokens: m.maxOutputTokens,
    prices: { ...m.prices },
    priceVersionId: m.priceVersion,
    definitionJson: JSON.stringify(definitionOf(entryOf(m))),
    aliases: [...aliases],
    markup: markup.rate,
    markupVersionId: markup.versionId,
    customerPrices: Object.fromEntries(Object.entries(m.prices).map(([k, p]) => [k, customerPrice(p, markup)])),
  };
}

function versionMessage(v: PriceVersion) {
  return {
    id: v.id,
    modelId: v.modelId,
    prices: { ...v.prices },
    effectiveFrom: timestampFromDate(v.effectiveFrom),
    ...(v.createdAt ? { createdAt: timestampFromDate(v.createdAt) } : {}),
    source: v.source ?? '',
    reason: v.reason ?? '',
  };
}

function markupMessage(m: MarkupVersion) {
  return {
    id: m.id,
    provider: m.provider,
    modelId: m.modelId,
    accountGroup: m.group,
    markup: m.markup ?? '',
    effectiveFrom: timestampFromDate(m.effectiveFrom),
    createdAt: timestampFromDate(m.createdAt),
    source: m.source,
    reason: m.reason,
  };
}

const refused = (code: string, field: string, message: string) =>
  gatewayError({ httpStatus: 400, type: 'invalid_request_error', code, param: field, message });
const invalidPrice = (field: string, message: string) => refused('invalid_price', field, message);

/** The most text a refusal's message lists problems in: it travels twice in a gRPC trailer (grpc-message and the detail). */
const REFUSAL_TEXT_MAX = 8 * 1024;

/**
 * A change the rules refuse: every problem in the message (as many as fit in REFUSAL_TEXT_MAX,
 * then how many more), the first one's field as its param.
 */
function refusedAll(code: string, all: readonly BookProblem[]) {
  // A list cut at BOOK_LIMITS.problems ends in MORE_PROBLEMS: the count is then a lower bound.
  const cut = all.includes(MORE_PROBLEMS);
  const problems = all.filter((p) => p !== MORE_PROBLEMS);
  if (problems.length === 1 && !cut) return refused(code, problems[0]!.field, problems[0]!.message);
  const lines: string[] = [];
  let size = 0;
  for (const p of problems) {
    const line = `${p.field}: ${p.message}`;
    if (size + line.length > REFUSAL_TEXT_MAX) break;
    lines.push(line);
    size += line.length + 1;
  }
  const unlisted = problems.length - lines.length;
  const count = cut ? `more than ${problems.length} problems` : `${problems.length} problems`;
  const more = unlisted > 0 || cut ? `\n…and ${cut ? 'more' : unlisted} not listed` : '';
  return refused(code, problems[0]!.field, `${count}, nothing changed:\n${lines.join('\n')}${more}`);
}
/** A change the book's rules refuse (invalid_book). */
const invalidBook = (problems: readonly BookProblem[]) => refusedAll('invalid_book', problems);

/** A request's string past its limit (BOOK_LIMITS): `[field, value, limit, what it is]`. */
type Bounded = readonly [field: string, value: string, max: number, what: string];

/** Refuses a request whose strings are past their limits, naming each, before anything reads, quotes or stores them. */
function checkLengths(code: string, fields: readonly Bounded[]): void {
  const problems = fields
    .filter(([, value, max]) => value.length > max)
    .map(([field, value, max, what]) => ({ field, message: `${field} ${tooLongMessage(value, max)} (${what})` }));
  if (problems.length > 0) throw refusedAll(code, problems);
}

/** Who made a change and why: bounded on every RPC that writes (they are kept with each version). */
const metaFields = (req: { source: string; reason: string }): Bounded[] => [
  ['source', req.source, BOOK_LIMITS.source, 'who made the change'],
  ['reason', req.reason, BOOK_LIMITS.reason, 'why'],
];

/**
 * A version dated in the past is refused: the book records what was charged, it is not rewritten.
 * `subjects`: what the new versions would be of (models, markup scopes), named in the refusal.
 */
function effectiveFromOf(t: Timestamp | undefined, subjects: readonly string[] = []): Date | undefined {
  if (!t) return undefined;
  const at = timestampDate(t);
  if (at.getTime() < Date.now() - 1_000)
    throw refused(
      'invalid_book',
      'effective_from',
      `${subjects.length ? `${subjects.join(', ')}: ` : ''}effective_from ${at.toISOString()} is in the past; a version takes effect now or later`,
    );
  return at;
}

/** An apply based on a book version that is no longer in force: what was previewed is not what would be applied. */
const bookChanged = (basedOn: string, now: string) =>
  gatewayError({
    httpStatus: 409,
    rpcCode: Code.FailedPrecondition,
    type: 'invalid_request_error',
    code: 'book_changed',
    param: 'based_on',
    message: `The book changed since version ${clip(basedOn, 32)} (another change was applied; it is ${now} now): nothing was written. Preview the change again.`,
  });

/** The book in force as ExportBook answers it: its canonical document and that document's version. */
function exported(state: BookState) {
  const document = formatBookDocument(PriceBook.documentOf(state));
  return { document, version: versionOfText(document) };
}

/** ListBookHistory: the newest versions of the kinds asked for (all when none is named). */
async function bookHistory(book: PriceBook, req: { limit: number; kinds: readonly string[] }) {
  const limit = req.limit === 0 ? 50 : req.limit;
  if (!Number.isInteger(limit) || limit < 1 || limit > 200)
    throw refused('invalid_request', 'limit', `limit must be 1 to 200, not ${req.limit}`);
  const unknown = req.kinds.find((k) => !BOOK_VERSION_KINDS.includes(k as BookVersionKind));
  if (unknown !== undefined)
    throw refused(
      'invalid_request',
      'kinds',
      `${clip(unknown)} is not a kind of version (${BOOK_VERSION_KINDS.join(', ')})`,
    );
  const kinds = req.kinds.length > 0 ? (req.kinds as BookVersionKind[]) : BOOK_VERSION_KINDS;
  const versions = await book.versionsWritten(limit, kinds);
  return {
    versions: versions.map((v) => ({
      kind: v.kind,
      id: v.id,
      subject: v.subject,
      createdAt: timestampFromDate(v.createdAt),
      source: v.source,
      reason: v.reason,
      valueJson: JSON.stringify(v.value),
    })),
  };
}

/** Reads the book in force and serves it here at once. */
async function serveBookIn(catalogue: Catalogue, book: PriceBook): Promise<BookState> {
  const state = await book.read();
  catalogue.load(state);
  return state;
}

/**
 * The one way the book is changed: `change(edit, meta, dryRun, basedOn)` makes `edit` on the book
 * in force and writes what it changes (nothing on a dry run), or refuses the whole edit with every
 * problem the proposed book has; or, `basedOn` a version the book no longer is, refuses it unseen.
 * The warnings: deployments it adds that no credential here serves (credential-warnings.ts). The
 * version: the book's now, or on a dry run the one it was seen against.
 */
function bookChange(catalogue: Catalogue, book: PriceBook) {
  return async (
    edit: (doc: BookDocument) => void,
    meta: WriteMeta,
    dryRun = false,
    basedOn = '',
  ): Promise<{ changes: Change[]; warnings: BookWarning[]; version: string }> => {
    let warnings: BookWarning[] = [];
    let version = '';
    const decided = await book.change(
      (state) => {
        const current = PriceBook.documentOf(state);
        version = bookVersion(current);
        if (basedOn !== '' && basedOn !== version) throw bookChanged(basedOn, version);
        const proposed = structuredClone(current);
        edit(proposed);
        const checked = checkedChanges(current, proposed);
        warnings = idleDeployments(current, proposed, (id) => catalogue.secretOf(id) !== undefined);
        return checked;
      },
      meta,
      dryRun,
    );
    if (!dryRun && decided.changes.length > 0)
      version = bookVersion(PriceBook.documentOf(await serveBookIn(catalogue, book)));
    return { changes: decided.changes, warnings, version };
  };
}

/** The providers a document without its own is checked against: the book's, as the catalogue serves them. */
function providersInForce(catalogue: Catalogue) {
  return catalogue
    .providers()
    .filter((p) => !p.fromSetting)
    .map((p) => ({ id: p.id, dialect: p.dialect, baseUrl: p.baseUrl }));
}

export function catalogueService(
  catalogue: Catalogue,
  book: PriceBook,
  preview: BookPreview,
  providerParts: ProviderParts,
): ServiceImpl<typeof CatalogueService> {
  /** A catalogue model by its own id (not an alias: a price belongs to the model that serves). */
  const modelNamed = (id: string, code: string): ResolvedModel => {
    checkLengths(code, [['model_id', id, BOOK_LIMITS.name, 'a model id']]);
    const m = catalogue.list().find((x) => x.id === id);
    if (!m) {
      const alias = catalogue.get(id);
      throw refused(
        code,
        'model_id',
        `No model '${id}' in the catalogue${alias ? ` ('${id}' is an alias of ${alias.id}: name that model)` : ''}.`,
      );
    }
    return m;
  };

  const serveBook = () => serveBookIn(catalogue, book);
  const change = bookChange(catalogue, book);

  const metaOf = (req: { source: string; reason: string }, effectiveFrom?: Date): WriteMeta => ({
    source: req.source || 'catalogue-rpc',
    reason: req.reason,
    ...(effectiveFrom ? { effectiveFrom } : {}),
  });

  const aliasesOf = () => {
    const out = new Map<string, string[]>();
    for (const a of catalogue.aliases()) out.set(a.model.id, [...(out.get(a.model.id) ?? []), a.alias]);
    return out;
  };

  return {
    // Providers, their credentials and the deployments (services/providers.ts).
    ...providerMethods(
      { catalogue, book, change, metaOf, metaFields, checkLengths, refused, invalidBook },
      providerParts,
    ),

    async getPriceHistory(req) {
      const m = modelNamed(req.modelId, 'invalid_price');
      const [versions, definitions] = await Promise.all([book.history(m.id), book.definitionHistory(m.id)]);
      return {
        versions: versions.map(versionMessage),
        definitions: definitions.map((d) => ({
          id: d.id,
          definitionJson: JSON.stringify(d.definition),
          createdAt: timestampFromDate(d.createdAt),
          source: d.source,
          reason: d.reason,
        })),
      };
    },

    async setPrices(req) {
      const m = modelNamed(req.modelId, 'invalid_price');
      const keys = Object.keys(req.prices);
      if (keys.length > BOOK_LIMITS.prices)
        throw invalidPrice(
          'prices',
          `${m.id}: ${keys.length} prices; a model has at most ${BOOK_LIMITS.prices} (its kind is billed by fewer)`,
        );
      checkLengths('invalid_price', [
        ...metaFields(req),
        ...keys.flatMap((k): Bounded[] => [
          [`prices.${clip(k, BOOK_LIMITS.priceKey)}`, k, BOOK_LIMITS.priceKey, 'a price key'],
          [`prices.${clip(k, BOOK_LIMITS.priceKey)}`, req.prices[k]!, BOOK_LIMITS.decimal, 'a price'],
        ]),
      ]);
      const effectiveFrom = req.effectiveFrom ? timestampDate(req.effectiveFrom) : undefined;
      const problem = priceVersionProblem(entryOf(m), req.prices, effectiveFrom, new Date());
      if (problem) throw invalidPrice(problem.field, problem.message);
      // Always a new version, even of the same prices: the operator asked for one (e.g. to date it).
      const prices = { ...req.prices };
      const { written } = await book.change(
        (state) => {
          // The book with these prices checked whole, as every edit is (bookProblems).
          const proposed = structuredClone(PriceBook.documentOf(state));
          for (const e of proposed.models) if (e.id === m.id) e.prices = prices;
          const problems = bookProblems(proposed);
          if (problems.length) throw invalidBook(problems);
          return { changes: [{ kind: 'set_prices', modelId: m.id, prices, before: m.prices } satisfies Change] };
        },
        metaOf(req, effectiveFrom),
      );
      await serveBook();
      return { version: versionMessage(written[0]!) };
    },

    async upsertModel(req) {
      checkLengths('invalid_book', metaFields(req));
      const tooLarge = documentSizeProblem(req.modelJson, 'model_json', 'model_json');
      if (tooLarge) throw invalidBook([tooLarge]);
      const parsed = parseBookDocument(`{"models":[${req.modelJson}],"aliases":{},"markups":[]}`);
      if ('problems' in parsed) throw invalidBook(parsed.problems);
      const entry = parsed.doc.models[0];
      if (!entry || parsed.doc.models.length !== 1)
        throw refused('invalid_book', 'model_json', 'model_json must be one model entry (a JSON object)');
      const existing = catalogue.list().find((x) => x.id === entry.id);
      // An existing model's prices stay as they are unless the entry brings some.
      if (existing && Object.keys(entry.prices).length === 0) entry.prices = { ...existing.prices };
      const { warnings } = await change((doc) => {
        doc.models = [...doc.models.filter((x) => x.id !== entry.id), entry];
      }, metaOf(req));
      return {
        model: toMessage(catalogue.get(entry.id)!, '', aliasesOf().get(entry.id) ?? []),
        created: !existing,
        warnings,
      };
    },

    async setModelEnabled(req) {
      checkLengths('invalid_book', metaFields(req));
      const m = modelNamed(req.modelId, 'invalid_book');
      await change((doc) => {
        for (const x of doc.models) if (x.id === m.id) x.enabled = req.enabled;
      }, metaOf(req));
      return { model: toMessage(catalogue.get(m.id)!, '', aliasesOf().get(m.id) ?? []) };
    },

    async setAlias(req) {
      checkLengths('invalid_book', [
        ['alias', req.alias, BOOK_LIMITS.name, 'an alias'],
        ['model_id', req.modelId, BOOK_LIMITS.name, 'a model id'],
        ...metaFields(req),
      ]);
      await change((doc) => {
        doc.aliases[req.alias] = req.modelId;
      }, metaOf(req));
      return {};
    },

    async deleteAlias(req) {
      checkLengths('invalid_book', [['alias', req.alias, BOOK_LIMITS.name, 'an alias'], ...metaFields(req)]);
      const { changes } = await change((doc) => {
        delete doc.aliases[req.alias];
      }, metaOf(req));
      return { deleted: changes.length > 0 };
    },

    async setMarkup(req) {
      checkLengths('invalid_book', [
        ['provider', req.provider, BOOK_LIMITS.name, 'a provider'],
        ['model_id', req.modelId, BOOK_LIMITS.name, 'a model id'],
        ['account_group', req.accountGroup, BOOK_LIMITS.group, 'an account group'],
        ['markup', req.markup, BOOK_LIMITS.decimal, 'a decimal fraction'],
        ...metaFields(req),
      ]);
      const scope: MarkupScope = { provider: req.provider, modelId: req.modelId, group: req.accountGroup };
      const effectiveFrom = effectiveFromOf(req.effectiveFrom, [scopeName(scope)]);
      if (req.markup !== '' && markupPpm(req.markup) === undefined)
        throw refused(
          'invalid_book',
          'markup',
          `${scopeName(scope)}: markup ${JSON.stringify(req.markup)} is not a decimal fraction >= 0 with at most 6 places (e.g. "0.2" for 20%)`,
        );
      const name = scopeName(scope);
      await change(
        (doc) => {
          doc.markups = doc.markups.filter((m) => scopeName(markupScopeOf(m)) !== name);
          if (req.markup !== '') doc.markups.push(bookMarkupOf(scope, req.markup));
        },
        metaOf(req, effectiveFrom),
      );
      const { inForce, scheduled } = await book.markupVersions();
      const written = [...scheduled, ...inForce]
        .filter((m) => scopeName(m) === name)
        .sort((a, b) => Number(b.id - a.id))[0];
      return written ? { markup: markupMessage(written) } : {};
    },

    async listMarkups() {
      const { inForce, scheduled } = await book.markupVersions();
      return { inForce: inForce.map(markupMessage), scheduled: scheduled.map(markupMessage) };
    },

    async exportBook() {
      return exported(await book.read());
    },

    listBookHistory: (req) => bookHistory(book, req),

    async applyBook(req) {
      checkLengths('invalid_book', metaFields(req));
      // The document's own limits (its size, then each field's) are parseBookDocument's.
      const parsed = parseBookDocument(req.document);
      if ('problems' in parsed) throw invalidBook(parsed.problems);
      const edit = (doc: BookDocument) => {
        if (parsed.doc.providers) doc.providers = parsed.doc.providers;
        doc.models = parsed.doc.models;
        doc.aliases = parsed.doc.aliases;
        doc.markups = parsed.doc.markups;
      };
      // A date in the past names what it would have dated: the models and markups the document changes.
      const dated = (changes: readonly Change[]) =>
        changes.flatMap((c) =>
          c.kind === 'set_prices'
            ? [c.modelId]
            : c.kind === 'add_model'
              ? [c.definition.id]
              : c.kind.endsWith('_markup')
                ? [describeChange(c).subject]
                : [],
        );
      const effectiveFrom = req.effectiveFrom
        ? effectiveFromOf(req.effectiveFrom, dated((await change(edit, metaOf(req), true, req.basedOn)).changes))
        : undefined;
      const { changes, warnings, version } = await change(edit, metaOf(req, effectiveFrom), req.dryRun, req.basedOn);
      return { changes: changes.map(describeChange), applied: !req.dryRun && changes.length > 0, warnings, version };
    },

    async previewBook(req) {
      const parsed = parseBookDocument(req.document);
      if ('problems' in parsed) throw invalidBook(parsed.problems);
      const problems = bookProblems(parsed.doc, providersInForce(catalogue));
      if (problems.length) throw invalidBook(problems);
      const days = req.days === 0 ? 30 : req.days;
      if (!Number.isInteger(days) || days < 1 || days > 366)
        throw refused('invalid_book', 'days', `days must be 1 to 366, not ${req.days}`);
      return preview.preview(parsed.doc, days);
    },

    listModels(req) {
      const models = catalogue
        .list()
        .filter(
          (m) =>
            (req.kind === ModelKind.UNSPECIFIED || KINDS[m.kind] === req.kind) && (!req.availableOnly || m.available),
        );
      const shown = new Set(models.map((m) => m.id));
      const aliases = catalogue
        .aliases()
        .filter((a) => shown.has(a.model.id))
        .map((a) => ({ alias: a.alias, modelId: a.model.id }));
      const byModel = aliasesOf();
      return { models: models.map((m) => toMessage(m, req.accountGroup, byModel.get(m.id) ?? [])), aliases };
    },
    getModel(req) {
      const m = catalogue.get(req.id);
      if (!m) throw notFound('model_not_found', `No model '${clip(req.id)}' in the catalogue.`, { param: 'id' });
      return {
        model: toMessage(m, req.accountGroup, aliasesOf().get(m.id) ?? []),
        alias: m.id === req.id ? '' : req.id,
      };
    },
  };
}

/** The changes `proposed` makes to `current`, or the refusal naming every problem it has. */
function checkedChanges(current: BookDocument, proposed: BookDocument): { changes: Change[] } {
  const diff = diffBooks(current, proposed);
  const problems = [...bookProblems(proposed), ...diff.problems];
  if (problems.length) throw invalidBook(problems);
  return { changes: diff.changes };
}
