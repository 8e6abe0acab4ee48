// A deployment's concurrency shared between accounts (src/inference/routing/fair-share.ts): what a
// request asking for a slot gets, given who holds the slots and who was turned away lately.
import { describe, expect, it } from 'vitest';
import { shareOf, slotVerdict, type SlotState } from '../../../src/inference/routing/fair-share.ts';

const state = (limit: number, held: Record<string, number>, waiting: string[] = []): SlotState => ({
  limit,
  held: new Map(Object.entries(held)),
  waiting: new Set(waiting),
});

describe("a deployment's slots shared fairly", () => {
  it('an account alone may fill the deployment, and nobody gets a slot once it is full', () => {
    expect(slotVerdict(state(3, {}), 'a')).toBe('take');
    expect(slotVerdict(state(3, { a: 2 }), 'a')).toBe('take');
    expect(slotVerdict(state(3, { a: 3 }), 'a')).toBe('full');
    expect(slotVerdict(state(3, { a: 3 }), 'b')).toBe('full');
  });

  it('while another account waits, one at or above its share is refused the free slot and the waiting one gets it', () => {
    // b was turned away from the full deployment; one of a's three finished.
    const s = state(3, { a: 2 }, ['b']);
    expect(shareOf(s, 'a')).toBe(1);
    expect(slotVerdict(s, 'a')).toBe('share');
    expect(slotVerdict(s, 'b')).toBe('take');
  });

  it('an account below its share always gets a free slot, waiters or not', () => {
    // Ten slots, three accounts: a share of three each.
    const s = state(10, { a: 2, b: 5 }, ['c']);
    expect(shareOf(s, 'a')).toBe(3);
    expect(slotVerdict(s, 'a')).toBe('take');
    expect(slotVerdict(s, 'b')).toBe('share');
    expect(slotVerdict(s, 'c')).toBe('take');
  });

  it('a waiting account that already holds its share is no reason to refuse anyone', () => {
    // a and b were both turned away earlier and each got a slot since; the third slot is free.
    const s = state(3, { a: 1, b: 1 }, ['a', 'b']);
    expect(slotVerdict(s, 'a')).toBe('take');
    expect(slotVerdict(s, 'b')).toBe('take');
  });

  it('a share is at least one slot, however many accounts wait', () => {
    const s = state(2, { a: 1 }, ['b', 'c', 'd']);
    expect(shareOf(s, 'e')).toBe(1);
    expect(slotVerdict(s, 'e')).toBe('take');
    expect(slotVerdict(s, 'a')).toBe('share');
  });
});
