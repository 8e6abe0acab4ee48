// What the money path adds to a request's log line (docs/operations.md#log-formats): the
// deployment that answered, the attempts, the provider's cost and the charge. The facade writes
// the line but holds no money, and the settle, which knows these, writes no line: this is where
// they meet. The facade opens a note for each keyed request, the metering marks the note held
// when it holds and fills it when it settles, and the line is written once the answer is sent and
// the note settled, at once for a request that never held (a 401, a bad body). Notes are kept by
// request id (the facade's own, which it hands the services); one nobody opened is not kept, so
// calls on the RPC port cost a map lookup. Bounded: at most MAX_OPEN notes, none kept past
// OPEN_TTL_MS (an answer that never finished, a stream whose caller left, gets no onResponse from
// Fastify and so no line: its note goes with age).
export interface SettledFacts {
  /** `<model>/<deployment>`; '' when no deployment answered. */
  deployment: string;
  /** The attempts as the usage row keeps them (src/billing/attempts.ts); '' for none. */
  attempts: string;
  providerCostNano: bigint;
  chargeNano: bigint;
}

interface Note {
  openedAt: number;
  held: boolean;
  facts?: SettledFacts;
  /** The line, waiting for the settle of a request whose answer ended first. */
  write?: (facts: SettledFacts | undefined) => void;
  timer?: NodeJS.Timeout;
}

/** How many notes may be open at once (requests in flight on this instance); the oldest goes first past it. */
const MAX_OPEN = 100_000;
/** How long a note is kept at most (a long stream's included): one whose answer never closed is forgotten then. */
const OPEN_TTL_MS = 30 * 60_000;
/** How long a sent answer's line waits for its settle before it is written without the facts. */
export const SETTLE_WAIT_MS = 10_000;

export class RequestLines {
  private readonly notes = new Map<string, Note>();
  private readonly settleWaitMs: number;

  constructor(settleWaitMs = SETTLE_WAIT_MS) {
    this.settleWaitMs = settleWaitMs;
  }

  /** The facade will log `requestId`: the metering's facts about it are kept for its line. */
  open(requestId: string): void {
    const now = performance.now();
    // Maps iterate in insertion order: the oldest notes are first.
    for (const [id, note] of this.notes) {
      if (this.notes.size < MAX_OPEN && now - note.openedAt < OPEN_TTL_MS) break;
      this.drop(id, note);
    }
    this.notes.set(requestId, { openedAt: now, held: false });
  }

  /** The request holds money: its line waits for its settle. */
  held(requestId: string): void {
    const note = this.notes.get(requestId);
    if (note) note.held = true;
  }

  /** The request settled: its facts, for its line (written now if its answer has gone already). */
  settled(requestId: string, facts: SettledFacts): void {
    const note = this.notes.get(requestId);
    if (!note) return;
    note.facts = facts;
    if (note.write) this.drop(requestId, note);
  }

  /**
   * The request's answer is sent: `write` is called with its facts, now when it settled or never
   * held, else when it settles (or, should it not within SETTLE_WAIT_MS, then without them).
   */
  close(requestId: string, write: (facts: SettledFacts | undefined) => void): void {
    const note = this.notes.get(requestId);
    if (!note) return write(undefined);
    note.write = write;
    if (note.facts || !note.held) return this.drop(requestId, note);
    note.timer = setTimeout(() => this.drop(requestId, note), this.settleWaitMs);
    note.timer.unref();
  }

  /** Forgets a note, writing its line if one waits. */
  private drop(requestId: string, note: Note): void {
    if (this.notes.get(requestId) === note) this.notes.delete(requestId);
    clearTimeout(note.timer);
    const write = note.write;
    note.write = undefined;
    write?.(note.facts);
  }

  /** Notes open now (for tests). */
  get size(): number {
    return this.notes.size;
  }
}
