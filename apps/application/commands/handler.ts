import { type SqlBool, sql, type Transaction } from 'kysely';
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
  opts?: CommandOpts<S>,
) => Promise<Handled<S, E>>;

/** What a command may give the handler besides its fold and decider. */
export type CommandOpts<S> = {
  snapshot?: StartFrom<S> | undefined;
  alongside?: Alongside | undefined;
  remember?: Remember<S> | undefined;
  /** Checked by the append's statement (or on its own when nothing is appended); false: its refusal. */
  precondition?: Precondition | undefined;
};

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
  /** Activity records held while the database is away before calls are refused (ACTIVITY_SPOOL_MAX). */
  activitySpoolMax?: number | undefined;
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

/** At most this many queued commands of one stream are decided and appended together. */
const MAX_TOGETHER = 32;

/** A command waiting for its stream, with what settles its caller's promise. */
type Queued = {
  fold: Fold<unknown, DomainEvent>;
  decide: (state: unknown, version: number) => DomainEvent[];
  opts: CommandOpts<unknown>;
  resolve: (handled: Handled<unknown, DomainEvent>) => void;
  reject: (error: unknown) => void;
};

/**
 * The command handler of one event store. Commands on one stream run one after the other in this
 * process, in arrival order: while one runs, the next wait; when it ends, those waiting go on
 * together (`handleTogether`), each deciding on the state the one before it made, their events
 * appended by one append. Across processes the expected version decides.
 */
export function createCommandHandler(store: EventStore): CommandHandler {
  /** The commands waiting for each stream that has one running. */
  const waiting = new Map<string, Queued[]>();

  const drive = async (streamId: string, first: Queued): Promise<void> => {
    let batch = [first];
    for (;;) {
      const [one] = batch;
      if (batch.length === 1 && one !== undefined) await settle(one, () => handle(store, streamId, one));
      else {
        // A failure before their outcomes (the start's read) is each one's; the settled ones ignore it.
        await handleTogether(store, streamId, batch).catch((error: unknown) => {
          for (const queued of batch) queued.reject(error);
        });
      }
      const line = waiting.get(streamId) ?? [];
      if (line.length === 0) {
        waiting.delete(streamId);
        return;
      }
      batch = line.splice(0, together(line));
    }
  };

  return <S, E extends DomainEvent>(
    streamId: string,
    fold: Fold<S, E>,
    decide: (state: S, version: number) => E[],
    opts: CommandOpts<S> = {},
  ) =>
    new Promise<Handled<S, E>>((resolve, reject) => {
      // One queue holds commands of every aggregate: `together` groups only those of one fold.
      const queued = { fold, decide, opts, resolve, reject } as unknown as Queued;
      const line = waiting.get(streamId);
      if (line !== undefined) line.push(queued);
      else {
        waiting.set(streamId, []);
        void drive(streamId, queued);
      }
    });
}

/**
 * How many of the waiting commands, from the first, go together: those of the first's fold, up to one
 * with writes alongside its events (an answer kept under an idempotency key), which goes alone.
 */
function together(line: readonly Queued[]): number {
  const [first] = line;
  if (first === undefined) return 0;
  if (first.opts.alongside !== undefined) return 1;
  let n = 1;
  while (n < line.length && n < MAX_TOGETHER) {
    const next = line[n];
    if (next === undefined || next.fold !== first.fold || next.opts.alongside !== undefined) break;
    n++;
  }
  return n;
}

/** Runs one command to its caller's answer. */
async function settle(queued: Queued, work: () => Promise<Handled<unknown, DomainEvent>>): Promise<void> {
  try {
    queued.resolve(await work());
  } catch (error) {
    queued.reject(error);
  }
}

/**
 * Commands queued on one stream, of one fold, without writes alongside: each decides in turn on the
 * state the one before it made (a refusal answers its own caller and changes nothing), and their
 * events are appended by one append at the version that was read, with every precondition of theirs.
 * A conflict decides them all again, as `handle` does one. Anything else that stops the append (a
 * precondition refused, an invalid event) leaves them to run one by one, so that each meets only its
 * own outcome.
 */
async function handleTogether(store: EventStore, streamId: string, batch: readonly Queued[]): Promise<void> {
  const [first] = batch;
  if (first === undefined) return;
  const { fold } = first;
  const remember = batch.findLast((queued) => queued.opts.remember !== undefined)?.opts.remember;
  const preconditions = new Map<string | Queued, Precondition>();
  for (const queued of batch) {
    const own = queued.opts.precondition;
    if (own !== undefined) preconditions.set(own.id ?? queued, own);
  }
  const precondition: Precondition | undefined =
    preconditions.size <= 1
      ? [...preconditions.values()][0]
      : {
          holds: sql<SqlBool>`(${sql.join(
            [...preconditions.values()].map((p) => p.holds),
            sql` and `,
          )})`,
          refusal: () => new Error('one of the commands appended together was refused'),
        };

  let pending: readonly Queued[] = batch;
  let fresh = false;
  for (let attempt = 0; ; attempt++) {
    const start = await startOf(store, streamId, fold, first.opts.snapshot, fresh);
    let { state, version } = start;
    const decided: { queued: Queued; events: DomainEvent[]; state: unknown; version: number }[] = [];
    const refused: { queued: Queued; error: unknown }[] = [];
    for (const queued of pending) {
      try {
        const events = decideInSpan(streamId, queued.decide, state, version, attempt);
        state = events.reduce(fold.evolve, state);
        version += events.length;
        decided.push({ queued, events, state, version });
      } catch (error) {
        refused.push({ queued, error });
      }
    }
    for (const { queued, error } of refused) queued.reject(error);
    pending = decided.map((d) => d.queued);
    const events = decided.flatMap((d) => d.events);
    if (events.length === 0) {
      // Nothing to append: each checks its own precondition, if any.
      for (const queued of pending) await settle(queued, () => handle(store, streamId, queued));
      return;
    }
    try {
      const result = await store.append(streamId, events, {
        expectedVersion: start.version === 0 ? 'no_stream' : start.version,
        ...(precondition ? { precondition } : {}),
      });
      remember?.(state, result.nextVersion);
      let at = 0;
      for (const d of decided) {
        d.queued.resolve({
          events: result.events.slice(at, at + d.events.length),
          state: d.state,
          version: d.version,
        });
        at += d.events.length;
      }
      return;
    } catch (error) {
      const next = afterFailure(error, start.remembered, fresh, attempt);
      fresh = true;
      if (next === 'again') continue;
      if (next === 'again after a pause') {
        await pause(attempt);
        continue;
      }
      if (next === 'conflict') {
        for (const queued of pending) queued.reject(conflict());
        return;
      }
      for (const queued of pending) await settle(queued, () => handle(store, streamId, queued));
      return;
    }
  }
}

/** Where a command starts: the snapshot, if any, and the events after it folded. */
async function startOf<S, E extends DomainEvent>(
  store: EventStore,
  streamId: string,
  fold: Fold<S, E>,
  snapshot: StartFrom<S> | undefined,
  fresh: boolean,
): Promise<{ state: S; version: number; remembered: boolean }> {
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
  return { state, version, remembered: start.remembered === true };
}

/** The decider's call as a span of its own (domain/ knows nothing of tracing). */
function decideInSpan<S, E extends DomainEvent>(
  streamId: string,
  decide: (state: S, version: number) => E[],
  state: S,
  version: number,
  attempt: number,
): E[] {
  return inSpanSync(
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
}

/**
 * What follows an append that failed: a conflict on a remembered start is decided again at once from
 * a read (the memory was old, nobody raced); another conflict again after a pause, up to MAX_ATTEMPTS
 * decisions, then `conflict`; any other failure is the command's.
 */
function afterFailure(
  error: unknown,
  remembered: boolean,
  fresh: boolean,
  attempt: number,
): 'again' | 'again after a pause' | 'conflict' | 'failed' {
  if (!(error instanceof ConcurrencyError)) return 'failed';
  if (remembered && !fresh) return 'again';
  return attempt + 1 < MAX_ATTEMPTS ? 'again after a pause' : 'conflict';
}

/** A short random pause before deciding again, longer with each attempt. */
const pause = (attempt: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));

const conflict = (): DomainError =>
  new DomainError('conflict', 'The resource was changed by another request at the same time; try again');

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
  {
    fold,
    decide,
    opts: { snapshot, alongside, remember, precondition },
  }: { fold: Fold<S, E>; decide: (state: S, version: number) => E[]; opts: CommandOpts<S> },
): Promise<Handled<S, E>> {
  let fresh = false;
  for (let attempt = 0; ; attempt++) {
    const { state, version, remembered } = await startOf(store, streamId, fold, snapshot, fresh);
    const events = decideInSpan(streamId, decide, state, version, attempt);
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
      const next = afterFailure(error, remembered, fresh, attempt);
      fresh = true;
      if (next === 'again') continue;
      if (next === 'again after a pause') {
        await pause(attempt);
        continue;
      }
      if (next === 'conflict') throw conflict();
      throw error;
    }
  }
}
