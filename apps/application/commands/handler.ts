import type { Transaction } from 'kysely';
import { DomainError } from '../../../domain/errors.ts';
import type { EventMetadata } from '../../../domain/event.ts';
import type { DomainEvent } from '../../../domain/events.ts';
import type { HtmlMemory } from '../../../domain/html/memory.ts';
import type { Database, Db } from '../../../infra/db/schema.ts';
import {
  ConcurrencyError,
  type EventStore,
  type ExpectedVersion,
  type Precondition,
  type StoredEvent,
  streamType,
} from '../../../infra/event-store.ts';
import type { Metrics } from '../../../infra/metrics.ts';
import { activeTraceparent, inSpanSync } from '../../../infra/telemetry/spans.ts';
import type { SnapshotMemory } from '../../../projections/article-snapshots.ts';

/*
 * The one command handler every aggregate's commands go through: start from a snapshot (or the
 * initial state), fold the events after it, decide, append at the version that was read. Commands on
 * one stream queue in this process; across processes the expected version decides, and the loser
 * loads and decides again.
 */

/** An aggregate's fold: its state before any event, and what one event makes of a state. */
export type Fold<S, E> = { initial: S; evolve: (state: S, event: E) => S };

/**
 * Where a fold starts: a snapshot of the state at a version, and the stream's version when the
 * snapshot's read knows it (equal: no event to read after it). Undefined: the initial state at 0.
 * `remembered`: the state is one this process remembered, taken for the stream's head without a read;
 * an append that finds the stream moved on is decided again at once from a read (`fresh`).
 */
export type StartFrom<S> = (opts: {
  fresh: boolean;
}) => Promise<{ state: S; version: number; streamVersion?: number; remembered?: boolean } | undefined>;

/** Told the state and version a command's append made (a later command on the stream may start there). */
export type Remember<S> = (state: S, version: number) => void;

/** Writes committed with a command's events or not at all (see EventStore.append). */
export type Alongside = (trx: Transaction<Database>) => Promise<void>;

/** The events a command appended (none: nothing to do), and the state and version after them. */
export type Handled<S, E extends DomainEvent> = { events: StoredEvent<E>[]; state: S; version: number };

export type CommandHandler = <S, E extends DomainEvent>(
  streamId: string,
  fold: Fold<S, E>,
  decide: (state: S, version: number) => E[],
  opts?: {
    snapshot?: StartFrom<S> | undefined;
    alongside?: Alongside | undefined;
    remember?: Remember<S> | undefined;
    /** Checked by the append's statement (or on its own when nothing is appended); false: its refusal. */
    precondition?: Precondition | undefined;
  },
) => Promise<Handled<S, E>>;

/** A command without its metadata: the handler stamps it when it decides. */
export type Unstamped<C> = C extends unknown ? Omit<C, 'metadata'> : never;

/** What the composition root gives the command handlers. */
export type CommandDeps = {
  db: Db;
  store: EventStore;
  /** The clock is injected so tests and replays are deterministic. */
  now?: () => Date;
  /** Sanitises a body ahead of its command, off this thread (infra/sanitize-pool.ts); optional. */
  sanitizeAhead?: (body: string) => Promise<void>;
  /** The runtime's snapshot memory, shared with its snapshot projector (projections/article-snapshots.ts). */
  snapshots: SnapshotMemory;
  /** What the html rules remember, passed to the article decider (the runtime's, shared with its pool and projectors). */
  html?: HtmlMemory;
  /** The process's metrics: revisions by origin, the activity batch's delay. Without them nothing is counted. */
  metrics?: Pick<Metrics, 'edits' | 'activityBatchDelay'> | undefined;
};

/** What every aggregate's commands are built from: the deps, the one handler, the clock and metadata. */
export type CommandContext = CommandDeps & {
  run: CommandHandler;
  now: () => Date;
  meta: (caller?: { requestId?: string | undefined }) => EventMetadata;
};

export function commandContext(deps: CommandDeps): CommandContext {
  const now = deps.now ?? (() => new Date());
  return {
    ...deps,
    run: createCommandHandler(deps.store),
    now,
    meta: (caller) => {
      // The trace that made the events (tracing on only): the work they cause later links to it.
      const traceparent = activeTraceparent();
      return {
        at: now().toISOString(),
        ...(caller?.requestId ? { requestId: caller.requestId } : {}),
        ...(traceparent ? { traceparent } : {}),
      };
    },
  };
}

/** How many times a command is decided again after losing a race for its stream. */
const MAX_ATTEMPTS = 10;

/** The command handler of one event store, with its per-stream queue. */
export function createCommandHandler(store: EventStore): CommandHandler {
  const queue = keyedQueue();
  return (streamId, fold, decide, opts = {}) =>
    queue(streamId, () => handle(store, streamId, fold, decide, opts));
}

/**
 * Load, fold, decide, append at the version that was read. On a concurrent write, load and decide
 * again (the decision may now differ: a stale If-Match is refused, an edit without one applies on top
 * of the winner) after a short random pause, up to MAX_ATTEMPTS times; then `conflict`. A start this
 * process remembered that turns out behind (another process appended since) is read again at once,
 * without the pause: nobody raced, the memory was old.
 */
async function handle<S, E extends DomainEvent>(
  store: EventStore,
  streamId: string,
  fold: Fold<S, E>,
  decide: (state: S, version: number) => E[],
  {
    snapshot,
    alongside,
    remember,
    precondition,
  }: {
    snapshot?: StartFrom<S> | undefined;
    alongside?: Alongside | undefined;
    precondition?: Precondition | undefined;
    remember?: Remember<S> | undefined;
  },
): Promise<Handled<S, E>> {
  let fresh = false;
  for (let attempt = 0; ; attempt++) {
    const start: { state: S; version: number; streamVersion?: number; remembered?: boolean } =
      (await snapshot?.({
        fresh,
      })) ?? { state: fold.initial, version: 0 };
    const history =
      start.streamVersion === start.version
        ? []
        : await store.readStream<E>(streamId, { from: start.version + 1 });
    const state = history.reduce((s, e) => fold.evolve(s, e), start.state);
    const version =
      history.length === 0 ? start.version : (history[history.length - 1]?.version ?? start.version);
    // The decider's call as a span of its own (domain/ knows nothing of tracing).
    const events = inSpanSync(
      `decide ${streamType(streamId)}`,
      {
        attributes: () => ({
          'content_service.stream.id': streamId,
          'content_service.stream.version': version,
          'content_service.decide.attempt': attempt + 1,
        }),
      },
      (span) => {
        const decided = decide(state, version);
        if (span.isRecording()) {
          span.setAttribute(
            'content_service.event.types',
            decided.map((e) => e.type),
          );
        }
        return decided;
      },
    );
    if (events.length === 0) {
      if (precondition) await store.append(streamId, [], { expectedVersion: 'any', precondition });
      return { events: [], state, version };
    }
    const expectedVersion: ExpectedVersion = version === 0 ? 'no_stream' : version;
    try {
      const result = await store.append(streamId, events, {
        expectedVersion,
        ...(alongside ? { alongside } : {}),
        ...(precondition ? { precondition } : {}),
      });
      const after = events.reduce(fold.evolve, state);
      remember?.(after, result.nextVersion);
      return { events: result.events, state: after, version: result.nextVersion };
    } catch (error) {
      if (error instanceof ConcurrencyError && start.remembered === true && !fresh) {
        fresh = true;
        continue;
      }
      fresh = true;
      if (error instanceof ConcurrencyError && attempt + 1 < MAX_ATTEMPTS) {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));
        continue;
      }
      if (error instanceof ConcurrencyError) {
        throw new DomainError(
          'conflict',
          'The resource was changed by another request at the same time; try again',
        );
      }
      throw error;
    }
  }
}

/**
 * Runs work for one key at a time in this process, in arrival order: concurrent commands on one
 * stream queue here instead of racing to the database and retrying.
 */
function keyedQueue(): <T>(key: string, work: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return async (key, work) => {
    const before = tails.get(key) ?? Promise.resolve();
    const mine = before.then(work, work);
    const tail = mine.catch(() => undefined);
    tails.set(key, tail);
    try {
      return await mine;
    } finally {
      if (tails.get(key) === tail) tails.delete(key);
    }
  };
}
