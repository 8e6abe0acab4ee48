// Ids the gateway makes: random, prefixed by what they name (req_, lease_, acct_, key_, …).
import { randomBase62 } from './keys.ts';

export const newId = (prefix: string): string => `${prefix}_${randomBase62(20)}`;

/** A request's id: every answer, log line, hold and usage row of the request carries it. */
export const newRequestId = (): string => newId('req');
