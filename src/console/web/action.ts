// A change the page asks the API for (save limits, top up, rotate, apply the book, sign in) and
// what its button and notes show meanwhile: busy while it runs, then what it answered (`done`)
// or why it failed (`error`). Every form and dialog of the console uses this one state.
import { useState } from 'preact/hooks';

export interface Action<A extends unknown[], R> {
  /**
   * Runs the change: busy meanwhile, the last error forgotten at the start. Resolves when it is
   * over either way (never rejects: a failure is kept in `error`), so the caller can then close
   * its dialog.
   */
  run: (...args: A) => Promise<void>;
  busy: boolean;
  /** Why the last run failed (until the next run, fail or reset). */
  error: unknown;
  /** What the last run answered; kept while the next one runs, forgotten when it fails. */
  done: R | undefined;
  /** A refusal the page decides itself (a form's check), shown as the action's error. */
  fail: (error: unknown) => void;
  /** Forgets the last answer only (an error stays shown). */
  dismiss: () => void;
  /** Forgets the last answer and error. */
  reset: () => void;
}

/** `perform` does the change and what follows its success; what it returns becomes `done`. */
export function useAction<A extends unknown[], R>(perform: (...args: A) => Promise<R>): Action<A, R> {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<{ value: R } | undefined>();
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      const value = await perform(...args);
      setDone({ value });
    } catch (err) {
      setDone(undefined);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return {
    run,
    busy,
    error,
    done: done?.value,
    fail: (err) => setError(() => err),
    dismiss: () => setDone(undefined),
    reset: () => {
      setDone(undefined);
      setError(undefined);
    },
  };
}
