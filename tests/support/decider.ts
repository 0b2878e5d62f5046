import { expect } from 'vitest';
import { DomainError } from '../../domain/errors.ts';

/** given(events).when(command).thenEvents(events) | thenThrows(code, details): a decider test that reads as a specification. */
export function specFor<S, E, C>(decider: {
  initialState: S;
  evolve: (state: S, event: E) => S;
  decide: (command: C, state: S) => E[];
}) {
  return {
    given(events: readonly E[]) {
      const state = events.reduce(decider.evolve, decider.initialState);
      return {
        when(command: C) {
          const run = (): E[] => decider.decide(command, state);
          return {
            thenEvents(expected: readonly E[] | ((events: E[]) => void)): void {
              const actual = run();
              if (typeof expected === 'function') expected(actual);
              else expect(actual).toEqual(expected);
            },
            thenThrows(code: string, details?: Record<string, unknown>): void {
              let caught: unknown;
              try {
                run();
              } catch (error) {
                caught = error;
              }
              expect(caught).toBeInstanceOf(DomainError);
              const error = caught as DomainError;
              expect(error.code).toBe(code);
              if (details?.errors) expect(error.errors).toEqual(details.errors);
            },
          };
        },
      };
    },
  };
}
