// A deployment's concurrency shared fairly between accounts (docs/providers.md#limits). An
// account's share is the deployment's concurrency divided by the accounts holding its slots or
// waiting for one (the asking account counted too), at least one slot. An account may always
// take a free slot below its share; at or above it, only while no other account waits. Waiting
// means turned away from the full deployment lately and holding less than its share now (one
// that holds its share is served, and is no reason to refuse anyone). So an account alone may
// fill the deployment, and once another is turned away the first one's slots, as they come
// free, go to the other until both hold their shares. Nobody's running request is cut for it.

/** What a request asking for a slot gets: one, none because every slot is taken, or none because its account holds its share while another waits. */
export type SlotVerdict = 'take' | 'full' | 'share';

export interface SlotState {
  /** The deployment's concurrency. */
  limit: number;
  /** Slots each account holds now, on every instance. */
  held: ReadonlyMap<string, number>;
  /** Accounts turned away from the full deployment lately and not given a slot since. */
  waiting: ReadonlySet<string>;
}

/** The share of each account holding or waiting for a slot, with `account` among them. */
export function shareOf(s: SlotState, account: string): number {
  const accounts = new Set(s.waiting);
  accounts.add(account);
  for (const [a, n] of s.held) if (n > 0) accounts.add(a);
  return Math.max(1, Math.floor(s.limit / accounts.size));
}

export function slotVerdict(s: SlotState, account: string): SlotVerdict {
  let total = 0;
  for (const n of s.held.values()) total += n;
  if (total >= s.limit) return 'full';
  const share = shareOf(s, account);
  if ((s.held.get(account) ?? 0) < share) return 'take';
  for (const w of s.waiting) if (w !== account && (s.held.get(w) ?? 0) < share) return 'share';
  return 'take';
}
