// Deployments a change of the book adds that this instance cannot call: their provider has no
// credential here, so they take no traffic until it has one. The change is right (a credential is
// never book data, and may come after), but nothing else would say so: ApplyBook (`catalogue
// apply` and `diff`), UpsertModel and UpsertProvider answer these warnings beside what they wrote.
import type { BookDocument } from './book-document.ts';
import { deploymentsOf } from './providers.ts';

/** Something a change leaves for the operator to do; the change is written all the same. */
export interface BookWarning {
  /** What it is about: a provider id. */
  subject: string;
  message: string;
}

/** Deployments named in a warning before the rest are counted. */
const NAMED = 5;

/** How to give a provider a credential, or say it needs none. */
export const credentialHint = (providerId: string) =>
  `set it with \`npm run cli -- providers set-credential ${providerId}\` (or give a server that checks none "auth": "none" in the book)`;

/**
 * One warning per provider without a usable credential here (`hasCredential`) that the enabled
 * models of `proposed` deploy on where `current` did not (a new model, a new deployment, one moved
 * to it or enabled again; a disabled one takes no traffic either way). A provider the book says needs no credential (`"auth": "none"`) is always usable.
 */
export function idleDeployments(
  current: BookDocument,
  proposed: BookDocument,
  hasCredential: (providerId: string) => boolean,
): BookWarning[] {
  const keyless = new Set((proposed.providers ?? []).filter((p) => p.auth === 'none').map((p) => p.id));
  const before = new Set(
    current.models.flatMap((m) =>
      m.enabled
        ? deploymentsOf(m).flatMap((d) => (d.state === 'disabled' ? [] : [`${m.id}/${d.id}@${d.provider}`]))
        : [],
    ),
  );
  const idle = new Map<string, string[]>();
  for (const m of proposed.models) {
    if (!m.enabled) continue;
    for (const d of deploymentsOf(m)) {
      if (d.state === 'disabled') continue; // it takes no traffic by the operator's word
      if (before.has(`${m.id}/${d.id}@${d.provider}`) || keyless.has(d.provider) || hasCredential(d.provider)) continue;
      idle.set(d.provider, [...(idle.get(d.provider) ?? []), `${m.id}/${d.id}`]);
    }
  }
  return [...idle].map(([provider, keys]) => {
    const named = keys.slice(0, NAMED).join(', ') + (keys.length > NAMED ? ` and ${keys.length - NAMED} more` : '');
    const what = keys.length === 1 ? `deployment ${named} takes` : `${keys.length} deployments (${named}) take`;
    return {
      subject: provider,
      message: `provider ${provider} has no credential on this instance: ${what} no traffic until it has one; ${credentialHint(provider)}`,
    };
  });
}
