// The providers workflow as docs/providers.md documents it (its worked example: Azure, OpenAI and
// a local vLLM), run with the operator CLI against simulators: the providers first, then their
// credentials (the vLLM server declares it needs none, and never gets a credential header), a
// test, then the deployments; a failover from OpenAI's 429 to Azure, and from Azure's 503 to vLLM.
// Deployments applied before their credential exist are written with a warning at diff, apply and
// upsert, and take no traffic until it is set. A second gateway's start summary counts each
// provider's models as ListProviders does and warns of a deployment with no credential there. An
// export validates where it is saved once `catalogue schema` wrote the schema beside it. The
// gateways run on a database of this file's own: its providers would show in the start summary of
// other files' gateways (terminal.test.ts checks that list).
import fs from 'node:fs';
import path from 'node:path';
// The named export: the default one is not constructable under NodeNext's typing of a CommonJS module.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { summaryLines, type StartupSummary } from '../../src/log/startup-summary.ts';
import { startSimulator, type RecordedRequest, type Simulator } from '../upstream/simulator.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { ownDatabase, until } from '../support/deployments.ts';
import { runCli } from '../support/catalogue-cli.ts';

const LONG = { timeout: 240_000 };
const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`providers_workflow_${RUN}`);
const AZURE_API_VERSION = '2024-10-21';
/** The worked example's gpt-4o, under a name of its own. */
const MODEL = `worked-gpt-4o-${RUN}`;
const EARLY = `early-${RUN}`;
const IDLE = `idle-${RUN}`;
const DIR = fs.mkdtempSync(path.join(inject('workDir'), 'providers-workflow-'));

type Json = Record<string, any>;

let openaiSim: Simulator;
let azureSim: Simulator;
let vllmSim: Simulator;
let gw: GatewayProcess;
let env: Record<string, string>;
let catalogue: ReturnType<typeof createClient<typeof CatalogueService>>;
let apiKey: string;
const gateways: GatewayProcess[] = [];

beforeAll(async () => {
  [openaiSim, azureSim, vllmSim] = await Promise.all([
    startSimulator({ apiKey: 'key-openai', name: 'openai' }),
    startSimulator({ apiKey: 'key-azure', name: 'azure', azure: { apiVersion: AZURE_API_VERSION } }),
    // A vLLM server in the operator's own network: it checks no key.
    startSimulator({ name: 'vllm' }),
  ]);
  await DB.create();
  env = {
    DATABASE_URL: DB.url,
    OPENAI_API_KEY: 'key-openai',
    OPENAI_BASE_URL: `${openaiSim.url}/v1`,
    AZURE_EAST_KEY: 'key-azure',
    DEPLOYMENT_HEADER: '1',
    PRICE_BOOK_REFRESH_MS: '200',
    UPSTREAM_RETRY_BASE_MS: '20',
    UPSTREAM_RETRY_MAX_WAIT_MS: '100',
  };
  gw = await extraGateway('providers-workflow', env);
  gateways.push(gw);
  catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  apiKey = (await billing.createKey({ creditsNano: usdToNano('5'), label: 'providers workflow' })).apiKey;
});

afterAll(async () => {
  for (const g of gateways) await g.stop();
  for (const s of [openaiSim, azureSim, vllmSim]) {
    if (!s) continue;
    s.clearMode();
    await s.close();
  }
});

/** `npm run cli -- <args>` against the file's gateway; a file argument is written in the file's folder first. */
async function cli(args: string[], file?: { name: string; json: unknown }) {
  if (file) fs.writeFileSync(path.join(DIR, file.name), `${JSON.stringify(file.json, null, 2)}\n`);
  return runCli(
    gw.rpcUrl,
    args.map((a) => (file && a === file.name ? path.join(DIR, a) : a)),
  );
}

/** A chat request to `model`: which deployment answered (x-gateway-deployment) and what it cost. */
async function chat(model: string): Promise<{ deployment: string | null; cost: string | null }> {
  const client = new OpenAI({ apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
  const { response } = await client.chat.completions
    // The same words every time: the same usage, so the same charge wherever it is served.
    .create({ model, messages: [{ role: 'user', content: 'hi [sim tokens=3]' }], max_tokens: 8 })
    .withResponse();
  return {
    deployment: response.headers.get('x-gateway-deployment'),
    cost: response.headers.get('x-gateway-cost-nano-usd'),
  };
}

const credentialHeaders = (r: RecordedRequest) =>
  ['authorization', 'api-key', 'x-api-key', 'x-key'].filter((h) => r.headers[h] !== undefined);

async function refusal(call: Promise<unknown>) {
  const err = await call.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => ConnectError.from(e),
  );
  return { code: err.code, detail: err.findDetails(GatewayErrorSchema)[0]! };
}

describe('the worked example of docs/providers.md', () => {
  it(
    'providers, then credentials (none for the vLLM server), a test, then deployments: nothing warns, OpenAI fails over to Azure and Azure to vLLM, which never gets a credential header',
    LONG,
    async () => {
      // 1. The providers.
      const azure = await cli(['providers', 'add', '-f', 'azure-east.json'], {
        name: 'azure-east.json',
        json: { id: 'azure-east', dialect: 'azure-openai', baseUrl: azureSim.url, apiVersion: AZURE_API_VERSION },
      });
      expect(azure.code, azure.stderr).toBe(0);
      expect(azure.stdout).toMatch(/^added provider azure-east /);
      // Its credential is the next step, and the answer says so.
      expect(azure.stderr).toContain(
        'warning: provider azure-east has no credential on this instance: deployments on it take no traffic until it has one; set it with `npm run cli -- providers set-credential azure-east`',
      );
      const vllm = await cli([
        'providers',
        'add',
        '--id',
        'vllm',
        '--dialect',
        'openai',
        '--base-url',
        `${vllmSim.url}/v1`,
        '--timeout-ms',
        '120000',
        '--auth',
        'none',
      ]);
      expect(vllm.code, vllm.stderr).toBe(0);
      expect(vllm.stdout).toMatch(/^added provider vllm /);
      expect(vllm.stderr).toBe('');

      // 2. The credentials: Azure's from a variable of the gateway; the vLLM server is refused one.
      const set = await cli(['providers', 'set-credential', 'azure-east', '--env-name', 'AZURE_EAST_KEY']);
      expect(set.stdout.trim()).toBe(
        "provider azure-east: credential from the gateway's variable AZURE_EAST_KEY, version 1 (usable here)",
      );
      const refused = await refusal(
        catalogue.setProviderCredential({
          providerId: 'vllm',
          credential: { case: 'envName', value: 'AZURE_EAST_KEY' },
        }),
      );
      expect(refused.code).toBe(Code.FailedPrecondition);
      expect(refused.detail).toMatchObject({ code: 'credential_not_needed', param: 'provider_id' });

      // 3. The test: one GET each, Azure's with its key, vLLM's with none.
      for (const id of ['azure-east', 'vllm']) {
        const tested = await cli(['providers', 'test', id]);
        expect(tested.code, `${id}: ${tested.stdout}${tested.stderr}`).toBe(0);
        expect(tested.stdout).toMatch(/^ok: 200 OK in \d+ ms/);
      }
      expect(azureSim.requests.at(-1)!.headers['api-key']).toBe('key-azure');
      expect(vllmSim.requests.map(credentialHeaders)).toEqual([[]]);
      const listed = await cli(['providers', 'list']);
      expect(listed.stdout.split('\n').find((l) => l.startsWith('vllm '))).toMatch(
        /^vllm +openai +\S+ +not needed +0 +0 /,
      );

      // 4. The deployments, on the book exported, diffed, applied.
      const exported = await cli(['catalogue', 'export']);
      const doc = JSON.parse(exported.stdout) as Json;
      const gpt4o = doc.models.find((m: Json) => m.id === 'gpt-4o');
      doc.models.push({
        ...gpt4o,
        id: MODEL,
        routing: 'weighted',
        deployments: [
          { id: 'openai', provider: 'openai', weight: 3 },
          {
            id: 'azure-east',
            provider: 'azure-east',
            upstreamId: 'gpt4o-prod',
            weight: 1,
            prices: { input_per_mtok: '2.25', output_per_mtok: '9.00' },
          },
          { id: 'vllm', provider: 'vllm', upstreamId: 'Qwen/Qwen2.5-72B-Instruct', priority: 1 },
        ],
      });
      for (const cmd of ['diff', 'apply']) {
        const r = await cli(['catalogue', cmd, '-f', 'book.json'], { name: 'book.json', json: doc });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain(`add_model ${MODEL}`);
        expect(r.stderr, `${cmd} warns of nothing`).toBe('');
      }

      // OpenAI answers 429 with retry-after 20: Azure takes everything (first try, or at once after the 429).
      openaiSim.setMode({ status: 429, retryAfter: '20' });
      const atAzure = [await chat(MODEL), await chat(MODEL), await chat(MODEL)];
      expect(atAzure.map((r) => r.deployment)).toEqual(Array(3).fill(`${MODEL}/azure-east`));
      // Azure fails too: vLLM, at priority 1, serves; customers pay gpt-4o's prices whichever answers.
      azureSim.setMode({ status: 503 });
      const atVllm = await chat(MODEL);
      expect(atVllm.deployment).toBe(`${MODEL}/vllm`);
      expect(atVllm.cost).toBe(atAzure[0]!.cost);
      const served = vllmSim.requests.filter((r) => r.path === '/v1/chat/completions');
      expect(served).toHaveLength(1);
      expect((served[0]!.body as Json).model).toBe('Qwen/Qwen2.5-72B-Instruct');
      expect(served.map(credentialHeaders)).toEqual([[]]);
      openaiSim.clearMode();
      azureSim.clearMode();
    },
  );

  it(
    'deployments applied before their provider has a credential are written with a warning at diff, apply and upsert, and take no traffic until it has one',
    LONG,
    async () => {
      const late = await catalogue.upsertProvider({
        providerJson: JSON.stringify({
          id: 'late-east',
          dialect: 'azure-openai',
          baseUrl: azureSim.url,
          apiVersion: AZURE_API_VERSION,
        }),
      });
      expect(late.warnings.map((w) => w.subject)).toEqual(['late-east']);
      const doc = JSON.parse((await cli(['catalogue', 'export'])).stdout) as Json;
      const gpt4o = doc.models.find((m: Json) => m.id === 'gpt-4o');
      doc.models.push({
        ...gpt4o,
        id: EARLY,
        deployments: [
          { id: 'late', provider: 'late-east', upstreamId: 'gpt4o-prod' },
          { id: 'openai', provider: 'openai', priority: 1 },
        ],
      });
      const warning = `warning: provider late-east has no credential on this instance: deployment ${EARLY}/late takes no traffic until it has one; set it with \`npm run cli -- providers set-credential late-east\` (or give a server that checks none "auth": "none" in the book)\n`;
      for (const cmd of ['diff', 'apply']) {
        const r = await cli(['catalogue', cmd, '-f', 'early.json'], { name: 'early.json', json: doc });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain(`add_model ${EARLY}`);
        expect(r.stderr).toBe(warning);
      }
      const upserted = await catalogue.upsertModel({
        modelJson: JSON.stringify({ ...gpt4o, id: `${EARLY}-2`, deployments: [{ id: 'late', provider: 'late-east' }] }),
      });
      expect(upserted.warnings).toHaveLength(1);
      expect(upserted.warnings[0]!.message).toContain(`deployment ${EARLY}-2/late takes no traffic`);
      expect(upserted.model).toMatchObject({ available: false });

      // Written, but it takes no traffic: OpenAI serves, and Azure gets nothing.
      const before = azureSim.requests.length;
      expect((await chat(EARLY)).deployment).toBe(`${EARLY}/openai`);
      expect(azureSim.requests.length).toBe(before);
      // With its credential, it serves at once on this instance.
      await catalogue.setProviderCredential({
        providerId: 'late-east',
        credential: { case: 'envName', value: 'AZURE_EAST_KEY' },
      });
      expect((await chat(EARLY)).deployment).toBe(`${EARLY}/late`);
    },
  );

  it(
    "a gateway's start summary counts each provider's models as ListProviders does, and warns of a deployment with no credential there",
    LONG,
    async () => {
      await catalogue.upsertProvider({
        providerJson: JSON.stringify({
          id: 'idle-west',
          dialect: 'azure-openai',
          baseUrl: azureSim.url,
          apiVersion: AZURE_API_VERSION,
        }),
      });
      const doc = JSON.parse((await catalogue.exportBook({})).document) as Json;
      const gpt4o = doc.models.find((m: Json) => m.id === 'gpt-4o');
      await catalogue.upsertModel({
        modelJson: JSON.stringify({
          ...gpt4o,
          id: IDLE,
          deployments: [
            { id: 'openai', provider: 'openai' },
            { id: 'west', provider: 'idle-west', upstreamId: 'gpt4o-west' },
          ],
        }),
      });
      const second = await extraGateway('providers-workflow-2', env);
      gateways.push(second);
      const summary = await until('the start summary', () => {
        for (const line of fs.readFileSync(second.logFile, 'utf8').split('\n')) {
          if (!line.includes('"summary"')) continue;
          return (JSON.parse(line) as { summary: StartupSummary }).summary;
        }
        return undefined;
      });
      const listed = await createClient(
        CatalogueService,
        createGrpcTransport({ baseUrl: second.rpcUrl }),
      ).listProviders({});
      // vLLM serves only as a deployment of the example's model: one model, served.
      expect(summary.providers.find((p) => p.name === 'vllm')).toMatchObject({ models: 1, served: 1, authNone: true });
      expect(summary.providers.find((p) => p.name === 'idle-west')).toMatchObject({ models: 1, served: 0, key: false });
      for (const p of listed.providers)
        expect({ id: p.id, ...pick(summary.providers.find((s) => s.name === p.id)) }).toEqual({
          id: p.id,
          models: p.models,
          served: p.servedModels,
        });
      expect(summary.deployments).toEqual(
        expect.arrayContaining([
          { model: MODEL, deployments: ['openai', 'azure-east', 'vllm'], strategy: 'weighted', noCredential: [] },
          { model: IDLE, deployments: ['openai', 'west'], strategy: 'weighted', noCredential: ['west'] },
        ]),
      );
      // Those with a deployment that takes no traffic come first, so none is hidden past the five shown.
      expect(summary.deployments[0]!.noCredential).not.toEqual([]);
      expect(summaryLines(summary)).toContain(
        `deployments  ${IDLE} on openai, west (weighted); WARN west takes no traffic: its provider has no credential here`,
      );
    },
  );

  it(
    'an export validates where it is saved: `catalogue schema` writes beside it the schema its $schema names',
    LONG,
    async () => {
      const folder = fs.mkdtempSync(path.join(DIR, 'kept-elsewhere-'));
      const exported = await cli(['catalogue', 'export']);
      fs.writeFileSync(path.join(folder, 'book.json'), exported.stdout);
      const schema = await cli(['catalogue', 'schema']);
      expect(schema.code, schema.stderr).toBe(0);
      fs.writeFileSync(path.join(folder, 'book.schema.json'), schema.stdout);

      const book = JSON.parse(fs.readFileSync(path.join(folder, 'book.json'), 'utf8')) as Json;
      // Resolved as an editor resolves it: relative to the document's own folder.
      const schemaFile = path.resolve(folder, book.$schema);
      expect(path.dirname(schemaFile)).toBe(folder);
      const validate = new Ajv2020({ allErrors: true }).compile(JSON.parse(fs.readFileSync(schemaFile, 'utf8')));
      expect(validate(book), JSON.stringify(validate.errors)).toBe(true);
      // It is the schema the gateway's own documents are checked with.
      expect(schema.stdout).toBe(
        fs.readFileSync(new URL('../../src/catalogue/book.schema.json', import.meta.url), 'utf8'),
      );
    },
  );
});

/** The counts of a summary's provider. */
function pick(p: StartupSummary['providers'][number] | undefined) {
  return { models: p?.models, served: p?.served };
}
