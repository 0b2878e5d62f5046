import { SEARCH_LANGUAGE_DEFAULT } from '../domain/article/search.ts';
import { validateEvent } from '../domain/events.ts';
import type { Config } from '../infra/config.ts';
import { orExit } from '../infra/config-error.ts';
import { migrateToLatest } from '../infra/db/migrate.ts';
import { beginOpenDatabase, type DbHandle, type DbLogger, databaseOptions } from '../infra/db/open.ts';
import type { Db } from '../infra/db/schema.ts';
import { createEventStore, type EventStore, streamType } from '../infra/event-store.ts';
import { createHtmlMemory, type HtmlMemoryStore } from '../infra/html-memory.ts';
import type { Metrics } from '../infra/metrics.ts';
import { inlineProjection, retireCheckpoint } from '../infra/projection-runner.ts';
import { type BodyDiff, createSanitizePool, diffInThread } from '../infra/sanitize-pool.ts';
import { activityProjector } from '../projections/activity.ts';
import { createSnapshotMemory, type SnapshotMemory } from '../projections/article-snapshots.ts';
import { createProjectors } from '../projections/index.ts';
import { type Commands, createCommands } from './application/commands/index.ts';

/** Everything the faces of the service share: the database, the event store and the command handlers. */
export type Runtime = {
  handle: DbHandle;
  db: Db;
  store: EventStore;
  commands: Commands;
  /** The article snapshots this runtime's commands read last, for its snapshot projector: its own. */
  snapshots: SnapshotMemory;
  /** What the html rules remember (sanitised bodies, their facts and layouts): its pool, commands and projectors share it. */
  html: HtmlMemoryStore;
  /**
   * The word diff of two bodies for the pages, on the worker pool when there is one (within its size
   * and time budget), else in this thread within the size budget. `context`: the unchanged words kept
   * around each change (default CONTEXT_WORDS; ALL_WORDS: every one, for a diff that gives both texts back).
   */
  diff(before: string, after: string, context?: number): Promise<BodyDiff>;
  /**
   * Starts the sanitise pool's threads (none without a pool). A process calls it once it serves; the
   * pool's first use starts them otherwise (infra/sanitize-pool.ts).
   */
  startThreads(): void;
  /** The text search configuration its article projector writes search vectors with, and searches use (SEARCH_LANGUAGE). */
  searchLanguage: string;
  close(): Promise<void>;
};

/**
 * How many articles' last-read snapshots a runtime keeps (a snapshot is the state without the body):
 * an edit needs only the one its command read just before its append, so this covers as many
 * articles edited at once.
 */
export const SNAPSHOT_MEMORY = 256;

/**
 * The composition root of the core, used by the server, the worker, the CLI, the benchmark and the
 * tests: it plugs the read models (projections/) into the event store and the projection runner
 * (infra/), which know them only through the projector port (infra/projection.ts).
 * `sanitizeThreads` (config SANITIZE_THREADS; 0 or absent: none) starts a pool of worker threads that
 * sanitise edited bodies ahead of their commands and compare revisions for the pages. `htmlMemoryBytes` sizes the html memory (default
 * HTML_MEMORY_BYTES).
 */
export function createRuntime(
  handle: DbHandle,
  opts: {
    now?: () => Date;
    sanitizeThreads?: number;
    /** How long a comparison on the pool may take, waiting included, before it is `busy` (DIFF_WAIT_MS). */
    diffWaitMs?: number;
    htmlMemoryBytes?: number;
    metrics?: Metrics;
    /** Activity records held while the database is away before calls are refused (ACTIVITY_SPOOL_MAX). */
    activitySpoolMax?: number;
    /** SEARCH_LANGUAGE (default english). */
    searchLanguage?: string;
  } = {},
): Runtime {
  // The snapshot memory is the runtime's: its commands fill it, its snapshot projector reads it.
  const snapshots = createSnapshotMemory(SNAPSHOT_MEMORY);
  // So is the html memory: its pool and commands fill it, its commands and projectors read it.
  const html = createHtmlMemory(opts.htmlMemoryBytes ? { maxBytes: opts.htmlMemoryBytes } : {});
  const searchLanguage = opts.searchLanguage ?? SEARCH_LANGUAGE_DEFAULT;
  const projectors = createProjectors({ snapshots, html, searchLanguage });
  const store = createEventStore({
    db: handle.db,
    handle,
    validate: validateEvent,
    inline: inlineProjection(projectors),
    // An article's inline projections write its own rows alone (its row, body, snapshot, revisions).
    groupCommits: (streamId) => streamType(streamId) === 'article',
  });
  const sanitizer = opts.sanitizeThreads
    ? createSanitizePool(opts.sanitizeThreads, html, opts.diffWaitMs ? { diffWaitMs: opts.diffWaitMs } : {})
    : undefined;
  const commands = createCommands({
    db: handle.db,
    store,
    snapshots,
    html,
    ...(opts.now ? { now: opts.now } : {}),
    ...(sanitizer ? { sanitizeAhead: sanitizer.ahead } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    ...(opts.activitySpoolMax ? { activitySpoolMax: opts.activitySpoolMax } : {}),
  });
  return {
    handle,
    db: handle.db,
    store,
    commands,
    snapshots,
    html,
    diff: sanitizer ? sanitizer.diff : diffInThread,
    startThreads: () => sanitizer?.start(),
    searchLanguage,
    async close() {
      await sanitizer?.close();
      await handle.close();
    },
  };
}

type OpenRuntimeOptions = {
  migrate?: boolean;
  logger?: DbLogger;
  poolSize?: number;
  sanitizeThreads?: number;
  /** What this process is, for the embedded database's lock (openDatabase's `holder`). */
  holder?: string;
  /** The process's metrics, for its command handlers (edits, the activity batch). */
  metrics?: Metrics;
  /** SEARCH_LANGUAGE (default english). */
  searchLanguage?: string;
  /** The commands' clock (the time events record); the system's by default. */
  now?: () => Date;
};

export async function openRuntime(
  config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>,
  opts: OpenRuntimeOptions = {},
): Promise<Runtime> {
  const { handle } = await beginOpenDatabase(
    databaseOptions(config, {
      ...(opts.holder ? { holder: opts.holder } : {}),
      ...(opts.logger ? { logger: opts.logger } : {}),
      ...(opts.poolSize ? { poolSize: opts.poolSize } : {}),
    }),
  );
  return runtimeOn(handle, opts);
}

/**
 * The runtime on a database being opened (beginOpenDatabase's handle), migrated first when `migrate`:
 * for a process that began opening its database before it loaded this module (apps/server/serve.ts).
 */
export async function runtimeOn(
  opening: Promise<DbHandle>,
  opts: Pick<
    OpenRuntimeOptions,
    'migrate' | 'sanitizeThreads' | 'metrics' | 'logger' | 'searchLanguage' | 'now'
  > & {
    activitySpoolMax?: number;
  } = {},
): Promise<Runtime> {
  const handle = await opening;
  try {
    if (opts.migrate) {
      await migrateToLatest(handle.db, opts.logger);
      await retireCheckpoint(handle.db, activityProjector);
    }
  } catch (error) {
    await handle.close();
    throw error;
  }
  return createRuntime(handle, {
    ...(opts.sanitizeThreads ? { sanitizeThreads: opts.sanitizeThreads } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    ...(opts.activitySpoolMax ? { activitySpoolMax: opts.activitySpoolMax } : {}),
    ...(opts.searchLanguage ? { searchLanguage: opts.searchLanguage } : {}),
    ...(opts.now ? { now: opts.now } : {}),
  });
}

/**
 * `openRuntime` for a process entry point: a ConfigError (a data folder that cannot be written, say)
 * is one line on stderr and exit 1, as a bad variable is; anything else is thrown.
 */
export async function openRuntimeOrExit(
  config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>,
  opts: OpenRuntimeOptions = {},
): Promise<Runtime> {
  return orExit(openRuntime(config, opts));
}
