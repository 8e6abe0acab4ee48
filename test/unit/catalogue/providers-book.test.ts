// Providers and deployments in the book document (docs/providers.md): each bad input refused with
// one problem naming its field, a good one accepted, and the canonical text stable.
import fs from 'node:fs';
// The named export: the default one is not constructable under NodeNext's typing of a CommonJS module.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import {
  bookProblems,
  formatBookDocument,
  parseBookDocument,
  type BookProblem,
} from '../../../src/catalogue/book-document.ts';
import { describeChange, diffBooks } from '../../../src/catalogue/book-diff.ts';
import { idleDeployments } from '../../../src/catalogue/credential-warnings.ts';
import { shippedBook } from '../../../src/catalogue/shipped-book.ts';

/** A document under test: any JSON, to break at will. */
type Json = any;

const base = (): Json => JSON.parse(formatBookDocument(shippedBook()));
const model = (doc: Json, id: string) => doc.models.find((m: Json) => m.id === id);
const provider = (doc: Json, id: string) => doc.providers.find((p: Json) => p.id === id);

function problemsOf(doc: Json): BookProblem[] {
  const parsed = parseBookDocument(JSON.stringify(doc));
  return 'doc' in parsed ? bookProblems(parsed.doc) : parsed.problems;
}

/** The shipped book with an Azure provider and gpt-4o on OpenAI and Azure. */
function withDeployments(): Json {
  const doc = base();
  doc.providers.push({
    id: 'azure-east',
    dialect: 'azure-openai',
    baseUrl: 'https://east.openai.azure.com',
    apiVersion: '2024-10-21',
  });
  model(doc, 'gpt-4o').deployments = [
    { id: 'openai', provider: 'openai', weight: 3 },
    {
      id: 'azure',
      provider: 'azure-east',
      upstreamId: 'gpt4o-prod',
      weight: 1,
      limits: { rpm: 500, tpm: 200000 },
      prices: { input_per_mtok: '2.25' },
    },
  ];
  model(doc, 'gpt-4o').routing = 'weighted';
  return doc;
}

const CASES: { name: string; edit: (d: Json) => void; field: string; message: RegExp }[] = [
  {
    name: 'an unknown dialect',
    edit: (d) => (provider(d, 'openai').dialect = 'bedrock'),
    field: 'providers[openai].dialect',
    message: /dialect must be one of openai, azure-openai, anthropic, cohere, bfl, not "bedrock"/,
  },
  {
    name: 'a base URL that is not http(s)',
    edit: (d) => (provider(d, 'openai').baseUrl = 'ftp://api.openai.com/v1'),
    field: 'providers[openai].baseUrl',
    message: /baseUrl must be an http\(s\) URL, not ftp:/,
  },
  {
    name: 'a base URL carrying a password',
    edit: (d) => (provider(d, 'openai').baseUrl = 'https://user:sk-secret@api.openai.com/v1'),
    field: 'providers[openai].baseUrl',
    message: /must not carry a user or password/,
  },
  {
    name: 'an azure-openai provider without apiVersion',
    edit: (d) => delete provider(d, 'azure-east').apiVersion,
    field: 'providers[azure-east].apiVersion',
    message: /an azure-openai provider needs apiVersion/,
  },
  {
    name: 'a credential in a provider header',
    edit: (d) => (provider(d, 'openai').headers = { Authorization: 'Bearer sk-x' }),
    field: 'providers[openai].headers.Authorization',
    message: /never in the book/,
  },
  {
    name: 'a provider listed twice',
    edit: (d) => d.providers.push({ ...provider(d, 'openai') }),
    field: 'providers[openai].id',
    message: /listed 2 times/,
  },
  {
    name: 'a weight below 0',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].weight = -1),
    field: 'models[gpt-4o].deployments[azure].weight',
    message: /weight -1 is below 0/,
  },
  {
    name: 'a weight above the largest',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].weight = 1_000_001),
    field: 'models[gpt-4o].deployments[azure].weight',
    message: /weight 1000001 is above 1000000/,
  },
  {
    name: 'a weight that is not whole',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].weight = 1.5),
    field: 'models[gpt-4o].deployments[azure].weight',
    message: /weight must be a whole number from 0 to 1000000, not 1.5/,
  },
  {
    name: 'a priority with only zero weights',
    edit: (d) => {
      model(d, 'gpt-4o').deployments[0].weight = 0;
      model(d, 'gpt-4o').deployments[1].weight = 0;
    },
    field: 'models[gpt-4o].deployments',
    message: /every deployment of priority 0 has weight 0/,
  },
  {
    name: 'a deployment of a missing provider',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].provider = 'azure-west'),
    field: 'models[gpt-4o].deployments[azure].provider',
    message: /provider "azure-west" is not a provider in the book/,
  },
  {
    name: 'a deployment on a provider of another family',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].provider = 'anthropic'),
    field: 'models[gpt-4o].deployments[azure].provider',
    message: /speaks anthropic, and gpt-4o's requests take openai's form/,
  },
  {
    name: 'a model left with no deployment',
    edit: (d) => (model(d, 'gpt-4o').deployments = []),
    field: 'models[gpt-4o].deployments',
    message: /deployments is empty; a model is served by at least one/,
  },
  {
    name: 'a deployment id given twice',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].id = 'openai'),
    field: 'models[gpt-4o].deployments[openai].id',
    message: /listed twice/,
  },
  {
    name: 'a deployment price the model has none of',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].prices = { per_image: '0.01' }),
    field: 'models[gpt-4o].deployments[azure].prices.per_image',
    message: /not one of the model's prices/,
  },
  {
    name: 'an unknown routing strategy',
    edit: (d) => (model(d, 'gpt-4o').routing = 'random'),
    field: 'models[gpt-4o].routing',
    message: /routing must be one of weighted, cheapest, fastest/,
  },
  {
    name: 'a limit of 0',
    edit: (d) => (model(d, 'gpt-4o').deployments[1].limits = { rpm: 0 }),
    field: 'models[gpt-4o].deployments[azure].limits.rpm',
    message: /rpm must be a whole number above 0/,
  },
  {
    name: 'a provider removed while a model names it',
    edit: (d) => (d.providers = d.providers.filter((p: Json) => p.id !== 'azure-east')),
    field: 'models[gpt-4o].deployments[azure].provider',
    message: /provider "azure-east" is not a provider in the book/,
  },
  {
    name: 'an auth other than none',
    edit: (d) => (provider(d, 'azure-east').auth = 'bearer'),
    field: 'providers[azure-east].auth',
    message: /auth must be one of none, not "bearer"/,
  },
  {
    name: 'a deployment state other than draining or disabled',
    edit: (d) => (model(d, 'gpt-4o').deployments[0].state = 'enabled'),
    field: 'models[gpt-4o].deployments[openai].state',
    message: /state must be one of draining, disabled, not "enabled"/,
  },
  {
    name: 'a markup for a provider not in the book',
    edit: (d) => d.markups.push({ provider: 'groq', markup: '0.1' }),
    field: 'markups[provider:groq].provider',
    message: /provider "groq" is not a provider in the book/,
  },
];

describe('providers and deployments in the book', () => {
  it('accepts providers, deployments with weights, limits and their own prices, and writes them canonically', () => {
    const doc = withDeployments();
    expect(problemsOf(doc)).toEqual([]);
    const parsed = parseBookDocument(JSON.stringify(doc));
    if (!('doc' in parsed)) throw new Error('parse');
    const text = formatBookDocument(parsed.doc);
    const again = parseBookDocument(text);
    if (!('doc' in again)) throw new Error('parse');
    expect(formatBookDocument(again.doc)).toBe(text);
    // Providers sorted by id, a deployment's fields in their order.
    expect(again.doc.providers!.map((p) => p.id)).toEqual([...again.doc.providers!.map((p) => p.id)].sort());
    expect(Object.keys(again.doc.models.find((m) => m.id === 'gpt-4o')!.deployments![1]!)).toEqual([
      'id',
      'provider',
      'upstreamId',
      'weight',
      'limits',
      'prices',
    ]);
  });

  it('accepts a provider that needs no credential ("auth": "none"), written after its other fields, and the schema agrees', () => {
    const doc = withDeployments();
    doc.providers.push({ auth: 'none', baseUrl: 'http://10.0.4.12:8000/v1', dialect: 'openai', id: 'vllm' });
    model(doc, 'gpt-4o').deployments.push({
      id: 'vllm',
      provider: 'vllm',
      upstreamId: 'Qwen/Qwen2.5-72B',
      priority: 1,
    });
    expect(problemsOf(doc)).toEqual([]);
    const parsed = parseBookDocument(JSON.stringify(doc));
    if (!('doc' in parsed)) throw new Error('parse');
    const vllm = JSON.parse(formatBookDocument(parsed.doc)).providers.find((p: Json) => p.id === 'vllm');
    expect(Object.entries(vllm)).toEqual([
      ['id', 'vllm'],
      ['dialect', 'openai'],
      ['baseUrl', 'http://10.0.4.12:8000/v1'],
      ['auth', 'none'],
    ]);
    const schema = JSON.parse(
      fs.readFileSync(new URL('../../../src/catalogue/book.schema.json', import.meta.url), 'utf8'),
    );
    const valid = new Ajv2020({ allErrors: true }).compile(schema);
    expect(valid(doc), JSON.stringify(valid.errors)).toBe(true);
    provider(doc, 'vllm').auth = 'bearer';
    expect(valid(doc)).toBe(false);
  });

  it.each(CASES)('refuses $name with one problem naming the field', ({ edit, field, message }) => {
    const doc = withDeployments();
    edit(doc);
    const problems = problemsOf(doc);
    expect(problems, JSON.stringify(problems)).toHaveLength(1);
    expect(problems[0]!.field).toBe(field);
    expect(problems[0]!.message).toMatch(message);
  });

  it('refuses a weight no number holds (1e999) saying what a weight must be, quoting it as written', () => {
    const text = JSON.stringify(withDeployments()).replace('"weight":1,', '"weight":1e999,');
    expect(text).toContain('1e999');
    expect(problemsOf(JSON.parse(JSON.stringify(withDeployments())))).toEqual([]);
    const parsed = parseBookDocument(text);
    expect(parsed).toEqual({
      problems: [
        {
          field: 'models[gpt-4o].deployments[azure].weight',
          message: 'gpt-4o: deployments[azure].weight must be a whole number from 0 to 1000000, not 1e999',
        },
      ],
    });
  });

  it('keeps the providers in force for a document that leaves them out, and checks its models against those', () => {
    const inForce = withDeployments();
    const { providers, ...withoutProviders } = inForce;
    const parsed = parseBookDocument(JSON.stringify(withoutProviders));
    if (!('doc' in parsed)) throw new Error('parse');
    expect(parsed.doc.providers).toBeUndefined();
    expect(bookProblems(parsed.doc, providers)).toEqual([]);
    expect(
      bookProblems(
        parsed.doc,
        providers.filter((p: Json) => p.id !== 'azure-east'),
      ),
    ).toHaveLength(1);
    // And the diff writes no provider change for it.
    const current = parseBookDocument(JSON.stringify(inForce));
    if (!('doc' in current)) throw new Error('parse');
    expect(diffBooks(current.doc, parsed.doc).changes).toEqual([]);
  });

  it('diffs providers: added, changed and removed', () => {
    const before = parseBookDocument(JSON.stringify(base()));
    const doc = withDeployments();
    provider(doc, 'xai').baseUrl = 'https://eu.api.x.ai/v1';
    doc.providers = doc.providers.filter((p: Json) => p.id !== 'deepseek');
    const after = parseBookDocument(JSON.stringify(doc));
    if (!('doc' in before) || !('doc' in after)) throw new Error('parse');
    const kinds = diffBooks(before.doc, after.doc).changes.map((c) => c.kind);
    expect(kinds).toEqual(['add_provider', 'remove_provider', 'change_provider', 'change_model']);
  });

  it('takes a deployment out of traffic ("state": "draining" or "disabled"), written after its upstream model, and the schema agrees', () => {
    const doc = withDeployments();
    model(doc, 'gpt-4o').deployments[1].state = 'draining';
    model(doc, 'gpt-4o').deployments[0].state = 'disabled';
    expect(problemsOf(doc)).toEqual([]);
    const parsed = parseBookDocument(JSON.stringify(doc));
    if (!('doc' in parsed)) throw new Error('parse');
    const written = JSON.parse(formatBookDocument(parsed.doc));
    expect(Object.keys(model(written, 'gpt-4o').deployments[1])).toEqual([
      'id',
      'provider',
      'upstreamId',
      'state',
      'weight',
      'limits',
      'prices',
    ]);
    const schema = JSON.parse(
      fs.readFileSync(new URL('../../../src/catalogue/book.schema.json', import.meta.url), 'utf8'),
    );
    const valid = new Ajv2020({ allErrors: true }).compile(schema);
    expect(valid(doc), JSON.stringify(valid.errors)).toBe(true);
    model(doc, 'gpt-4o').deployments[1].state = 'paused';
    expect(valid(doc)).toBe(false);
  });

  it('describes a change of deployments deployment by deployment, field by field', () => {
    const parse = (d: Json) => {
      const p = parseBookDocument(JSON.stringify(d));
      if (!('doc' in p)) throw new Error(JSON.stringify(p.problems));
      return p.doc;
    };
    const before = withDeployments();
    const after = withDeployments();
    const [openai, azure] = model(after, 'gpt-4o').deployments;
    openai.weight = 5;
    azure.state = 'draining';
    azure.limits = { rpm: 600 };
    delete azure.prices;
    model(after, 'gpt-4o').deployments.push({ id: 'spare', provider: 'openai', priority: 2 });
    const [change] = diffBooks(parse(before), parse(after)).changes;
    expect(describeChange(change!)).toEqual({
      kind: 'change_model',
      subject: 'gpt-4o',
      detail: [
        'deployments[openai].weight: 3 -> 5',
        'deployments[azure].limits: {"rpm":500,"tpm":200000} -> {"rpm":600}',
        'deployments[azure].prices: {"input_per_mtok":"2.25"} -> unset',
        'deployments[azure].state: unset -> "draining"',
        'deployments[spare]: added {"id":"spare","provider":"openai","priority":2}',
      ].join('; '),
    });
    // A model that listed none, its one deployment now listed and weighted.
    const plain = base();
    const listed = base();
    model(listed, 'gpt-4o-mini').deployments = [{ id: 'openai', provider: 'openai', weight: 2 }];
    const [c] = diffBooks(parse(plain), parse(listed)).changes;
    expect(describeChange(c!).detail).toBe('deployments[openai].weight: unset -> 2');
  });

  it('warns of a deployment enabled again on a provider with no credential here, not of one disabled', () => {
    const parse = (d: Json) => {
      const p = parseBookDocument(JSON.stringify(d));
      if (!('doc' in p)) throw new Error(JSON.stringify(p.problems));
      return p.doc;
    };
    const off = withDeployments();
    model(off, 'gpt-4o').deployments[1].state = 'disabled';
    const on = withDeployments();
    const noAzureKey = (id: string) => id !== 'azure-east';
    expect(idleDeployments(parse(base()), parse(off), noAzureKey)).toEqual([]);
    expect(idleDeployments(parse(off), parse(on), noAzureKey).map((w) => w.subject)).toEqual(['azure-east']);
  });
});
