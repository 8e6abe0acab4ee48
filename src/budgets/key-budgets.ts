// What GET /v1/budgets answers a key (docs/budgets.md#seeing-and-managing-them): every budget over
// its requests now, each with its current window's figures as the hold statements count them.
import type { Db } from '../db/db.ts';
import type { Caller } from '../billing/caller.ts';
import type { BudgetBook } from './budget-book.ts';
import { figuresOf, type BudgetFigures } from './budget-store.ts';

export interface KeyBudgetFigures extends BudgetFigures {
  /** The end customer whose window this is ('' but for a customer budget with a customer named). */
  customer: string;
}

/** The caller's budgets, organisation first, then team or member, key and customer; at most MAX_BUDGETS. */
export async function keyBudgets(db: Db, book: BudgetBook, caller: Caller, now: number): Promise<KeyBudgetFigures[]> {
  const over = await book.budgetsOver(caller, caller.customer ?? '');
  const order = ['organisation', 'team', 'member', 'key', 'customer'];
  over.sort((a, b) => order.indexOf(a.budget.scope) - order.indexOf(b.budget.scope));
  return Promise.all(
    over.map(async ({ budget, subject }) => ({ ...(await figuresOf(db, budget, now, subject)), customer: subject })),
  );
}
