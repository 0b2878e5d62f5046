import type { RawBuilder, SqlBool } from 'kysely';
import type { EventMetadata } from '../../domain/event.ts';
import type { DomainEvent } from '../../domain/events.ts';

/* The event store's vocabulary: events, their places in the log, expected versions, its errors. */

/**
 * What the stream's version must be for an append to go through: a number N means exactly N
 * (0 means the stream does not exist yet, the same as 'no_stream': a stream only comes into being
 * with its first event), 'no_stream' means it must not exist, 'any' skips the check.
 */
export type ExpectedVersion = number | 'no_stream' | 'any';

/** The shape of every event the store takes: domain events have it (the bound of a store's union). */
export interface NewEvent {
  readonly type: string;
  readonly data: unknown;
  readonly metadata: EventMetadata;
}

/** Where an event sits once stored: its stream version and its place in the global log. */
export interface EventPlace {
  position: bigint;
  transactionId: bigint;
  eventId: string;
  streamId: string;
  version: number;
  recordedAt: Date;
}

/** An event as the store reads it back: one of the union (its data narrowed by `type`) and its place. */
export type StoredEvent<E extends NewEvent = DomainEvent> = E & EventPlace;

/** A place in the global log; subscribers read events after it in (transaction_id, position) order. */
export interface LogPosition {
  transactionId: bigint;
  position: bigint;
}

/** Before every event. */
export const START: LogPosition = Object.freeze({ transactionId: 0n, position: 0n });

/** The stream's version was not the expected one: someone else appended first. */
export class ConcurrencyError extends Error {
  readonly streamId: string;
  readonly expected: ExpectedVersion;
  /** The stream's version when the conflict was detected (0: no such stream). */
  readonly actual: number;

  constructor(streamId: string, expected: ExpectedVersion, actual: number) {
    super(
      `Stream ${streamId}: expected ${expected === 'no_stream' ? 'no stream' : `version ${expected}`}, ` +
        `but it is ${actual === 0 ? 'missing' : `at version ${actual}`}`,
    );
    this.name = 'ConcurrencyError';
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}

interface ValidationIssue {
  readonly path: ReadonlyArray<PropertyKey>;
  readonly message: string;
  readonly code?: string;
}

/** An event's data or metadata does not match its schema; nothing was written. */
export class EventValidationError extends Error {
  readonly type: string;
  readonly issues: readonly ValidationIssue[];

  constructor(type: string, issues: readonly ValidationIssue[], options?: { cause?: unknown }) {
    const summary = issues.map(
      (issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`,
    );
    super(`Invalid ${type} event: ${summary.join('; ')}`, options);
    this.name = 'EventValidationError';
    this.type = type;
    this.issues = issues;
  }
}

/**
 * A condition the append's own statement checks with the version claim (an API key still unrevoked):
 * false, nothing is written and `refusal()` is thrown instead of a ConcurrencyError.
 */
export interface Precondition {
  holds: RawBuilder<SqlBool>;
  refusal: () => Error;
  /** Names the check: two preconditions with the same `id` are the same check (checked once when combined). */
  id?: string;
}

/** A stream id's prefix before the first `-` (`article-4f1c...` → `article`); without a `-`, the whole id. */
export function streamType(streamId: string): string {
  const dash = streamId.indexOf('-');
  return dash === -1 ? streamId : streamId.slice(0, dash);
}

/** A validator's complaint as validation issues (zod's `issues`, or the error's message). */
export function issuesOf(err: unknown): ValidationIssue[] {
  if (typeof err === 'object' && err !== null && 'issues' in err && Array.isArray(err.issues)) {
    return err.issues.map((issue: unknown): ValidationIssue => {
      const { path, message, code } = (issue ?? {}) as { path?: unknown; message?: unknown; code?: unknown };
      return {
        path: Array.isArray(path) ? (path as PropertyKey[]) : [],
        message: typeof message === 'string' ? message : String(message),
        ...(typeof code === 'string' ? { code } : {}),
      };
    });
  }
  return [{ path: [], message: err instanceof Error ? err.message : String(err) }];
}
