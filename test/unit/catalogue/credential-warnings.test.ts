// The warnings a change of the book answers beside what it wrote (src/catalogue/credential-warnings.ts):
// deployments it adds whose provider has no credential on the instance take no traffic, and the
// operator is told so, once per provider, naming the deployments.
import { describe, expect, it } from 'vitest';
import type { BookDocument } from '../../../src/catalogue/book-document.ts';
import { idleDeployments } from '../../../src/catalogue/credential-warnings.ts';
import { shippedBook } from '../../../src/catalogue/shipped-book.ts';

/** The shipped book with the worked example's providers (docs/providers.md). */
function book(): BookDocument {
  const doc = shippedBook();
  doc.providers!.push(
    {
      id: 'azure-east',
      dialect: 'azure-openai',
      baseUrl: 'https://acme-east.openai.azure.com',
      apiVersion: '2024-10-21',
    },
    { id: 'vllm', dialect: 'openai', baseUrl: 'http://10.0.4.12:8000/v1', auth: 'none' },
  );
  return doc;
}
const gpt4o = (doc: BookDocument) => doc.models.find((m) => m.id === 'gpt-4o')!;
/** Only the shipped openai provider has a credential here. */
const openaiOnly = (id: string) => id === 'openai';

describe('warnings about deployments no credential serves', () => {
  it('names a deployment the change adds on a provider without a credential here, and says what to do', () => {
    const current = book();
    const proposed = book();
    gpt4o(proposed).deployments = [
      { id: 'openai', provider: 'openai', weight: 3 },
      { id: 'azure-east', provider: 'azure-east', upstreamId: 'gpt4o-prod' },
    ];
    expect(idleDeployments(current, proposed, openaiOnly)).toEqual([
      {
        subject: 'azure-east',
        message:
          'provider azure-east has no credential on this instance: deployment gpt-4o/azure-east takes no traffic until it has one; set it with `npm run cli -- providers set-credential azure-east` (or give a server that checks none "auth": "none" in the book)',
      },
    ]);
    // Once it has a credential, the same change warns of nothing.
    expect(idleDeployments(current, proposed, (id) => id === 'openai' || id === 'azure-east')).toEqual([]);
  });

  it('says nothing of a provider that needs no credential, of deployments already in force, or of a disabled model', () => {
    const current = book();
    gpt4o(current).deployments = [{ id: 'azure-east', provider: 'azure-east', upstreamId: 'gpt4o-prod' }];
    const proposed = structuredClone(current);
    gpt4o(proposed).deployments!.push({ id: 'vllm', provider: 'vllm', upstreamId: 'Qwen/Qwen2.5-72B', priority: 1 });
    expect(idleDeployments(current, proposed, openaiOnly)).toEqual([]);
    const disabled = book();
    gpt4o(disabled).enabled = false;
    gpt4o(disabled).deployments = [{ id: 'east', provider: 'azure-east' }];
    expect(idleDeployments(book(), disabled, openaiOnly)).toEqual([]);
  });

  it('counts a new model on a provider without a key as a deployment on it, and moving a deployment there as a new one', () => {
    const current = book();
    const proposed = book();
    proposed.models.push({ ...structuredClone(gpt4o(proposed)), id: 'gpt-4o-east', provider: 'azure-east' });
    gpt4o(proposed).deployments = [{ id: 'openai', provider: 'azure-east' }];
    const [w] = idleDeployments(current, proposed, openaiOnly);
    expect(w!.message).toContain('2 deployments (gpt-4o/openai, gpt-4o-east/azure-east) take no traffic');
  });

  it('names five deployments of a provider and counts the rest, in one warning per provider', () => {
    const proposed = book();
    for (let i = 0; i < 7; i++)
      proposed.models.push({ ...structuredClone(gpt4o(proposed)), id: `m${i}`, provider: 'azure-east' });
    proposed.models.push({ ...structuredClone(gpt4o(proposed)), id: 'claude-x', provider: 'anthropic' });
    const warnings = idleDeployments(book(), proposed, openaiOnly);
    expect(warnings.map((w) => w.subject)).toEqual(['azure-east', 'anthropic']);
    expect(warnings[0]!.message).toContain(
      '7 deployments (m0/azure-east, m1/azure-east, m2/azure-east, m3/azure-east, m4/azure-east and 2 more) take no traffic',
    );
  });
});
