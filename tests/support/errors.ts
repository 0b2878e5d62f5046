import { type Outcome, unwrap } from '../../apps/application/call.ts';
import type { Answer } from '../../apps/application/idempotency.ts';
import { DomainError } from '../../domain/errors.ts';

/**
 * The code a promise is refused with (`accepted` when it resolves): a use case's outcome that is a
 * refusal counts as refused with its error. Anything but a DomainError is rethrown.
 */
export async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    const settled = await promise;
    if (isOutcome(settled) && !settled.ok) throw settled.error;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return 'accepted';
}

function isOutcome(value: unknown): value is Outcome<unknown> {
  return (
    typeof value === 'object' && value !== null && 'ok' in value && 'subject' in value && 'edits' in value
  );
}

/** Use cases whose answers are outcomes, each answering its value instead and throwing its refusal. */
export type Throwing<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<Outcome<infer V>>
    ? (...args: A) => Promise<V>
    : T[K];
};

/** A face's use cases (`app.webhooks`, ...) called as a test reads them: the value, or the refusal thrown. */
export function throwing<T extends object>(useCases: T): Throwing<T> {
  const entries = Object.entries(useCases).map(([name, member]) => [
    name,
    typeof member === 'function'
      ? async (...args: unknown[]) => unwrap(await member.apply(useCases, args))
      : member,
  ]);
  return Object.fromEntries(entries) as Throwing<T>;
}

/** Use cases whose writes answer `{value, replayed}` (apps/application/idempotency.ts), each answering its value. */
export type Answering<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<Answer<infer V>>
    ? (...args: A) => Promise<V>
    : T[K];
};

function isAnswer(value: unknown): value is Answer<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.keys(value).sort().join() === 'replayed,value' &&
    typeof (value as Answer<unknown>).replayed === 'boolean'
  );
}

/** `throwing`'s use cases with each write's answer read as its value (whether it was a replay left out). */
export function answering<T extends object>(useCases: T): Answering<T> {
  const entries = Object.entries(useCases).map(([name, member]) => [
    name,
    typeof member === 'function'
      ? async (...args: unknown[]) => {
          const answer: unknown = await member.apply(useCases, args);
          return isAnswer(answer) ? answer.value : answer;
        }
      : member,
  ]);
  return Object.fromEntries(entries) as Answering<T>;
}
