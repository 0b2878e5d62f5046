import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Kysely as KyselyClass, PostgresDialect as PostgresDialectClass } from 'kysely';
import type pg from 'pg';
import { ConfigError } from '../config-error.ts';
import { type DataDirLock, type LockHolder, lockDataDir } from './data-dir-lock.ts';
import type { EngineMessage } from './pglite-thread.ts';
import { createReachability, guardPool, POOL_WAIT_MS, reachabilityClient } from './reachability.ts';
import type { Database, Db } from './schema.ts';
import type { namingClient as NamingClient } from './statement-cache.ts';

/*
 * Opens the app's database: PostgreSQL when a URL is given, otherwise the embedded default, PGlite
 * (PostgreSQL in WASM) served on a loopback port by pglite-socket. Both are reached through the
 * same `pg` driver and kysely's PostgresDialect, so every query runs the same code path.
 *
 * Value types, the same on both backends and set per pool (nothing global is changed in `pg`):
 * `bigint` (int8) columns come back as decimal strings (pg's default: lossless and JSON-safe; the
 * event store converts positions and transaction ids to JS `bigint`), `date` as its `YYYY-MM-DD`
 * text (pg's default would be a Date at local midnight), `timestamptz` as `Date`, `jsonb` as
 * parsed JSON.
 */

/** The notification channel the event store signals on after an append commits. */
const APPENDED_CHANNEL = 'events_appended';

/** The event types an append wrote; null: not known, maybe any. */
export type AppendedTypes = readonly string[] | null;

/** A NOTIFY payload on APPENDED_CHANNEL: the (distinct) event types of the append, comma-separated. */
function appendedPayload(types: readonly string[]): string {
  return types.join(',');
}

/** The types a payload names; null for an empty payload (a writer that does not say). */
function typesOfPayload(payload: string | undefined): AppendedTypes {
  return payload ? payload.split(',') : null;
}

/** The subset of a pino logger the database layer uses. */
export interface DbLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

interface OpenDatabaseOptions {
  /** PostgreSQL connection string; without it the embedded PGlite in `dataDir` is used. */
  databaseUrl?: string;
  /** The embedded database's folder (created if missing), or `memory://` for a throwaway in-memory one. */
  dataDir: string;
  /** pg pool size on PostgreSQL (default 10). Always 1 on PGlite: pglite-socket serves one connection. */
  poolSize?: number;
  logger?: DbLogger;
  /**
   * What this process is, in words, for the embedded database's lock on `dataDir` ("the server (npm
   * start)"): a second process is told who holds the folder. Default: the script this process runs.
   */
  holder?: string;
}

export interface DbHandle {
  /** Kysely<Database> over pg (PostgresDialect). */
  readonly db: Db;
  readonly kind: 'postgres' | 'pglite';
  readonly pool: pg.Pool;
  /**
   * Subscribe to "events were appended" wake-ups (LISTEN on PostgreSQL, in-process on PGlite), with
   * the types of the events appended, or null when they are not known (a reconnected LISTEN, whose
   * missed notifications are lost). Returns an unsubscribe.
   */
  onAppended(listener: (types: AppendedTypes) => void): () => void;
  /**
   * Called by the event store after a commit with the types it appended: wakes in-process listeners at
   * once and, on postgres, other processes through a NOTIFY sent after the commit (see createAnnouncer).
   */
  notifyAppended(types?: readonly string[]): void;
  close(): Promise<void>;
}

const DEFAULT_POOL_SIZE = 10;
/** A pool waiter gives up after this long: on PGlite's pool of one, a query issued on `db` inside a
 * transaction (instead of on `trx`) would otherwise wait for its own connection forever. (PostgreSQL's
 * pool: POOL_WAIT_MS and CONNECT_TIMEOUT_MS, reachability.ts.) */
const CONNECTION_TIMEOUT_MS = 30_000;
const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 30_000;
/** A LISTEN connection attempt that gets no answer (a server gone without a word) is given up after this long, and tried again. */
const LISTEN_CONNECT_TIMEOUT_MS = 5_000;

const DATE_OID = 1082;

/** The driver and the query builder, with pg's parsers except `date`, which stays text. */
interface Driver {
  pg: typeof pg;
  Kysely: typeof KyselyClass;
  PostgresDialect: typeof PostgresDialectClass;
  namingClient: typeof NamingClient;
  types: pg.CustomTypesConfig;
}

/**
 * The driver, loaded when a database is opened rather than with this module: a process that starts
 * the embedded engine first (apps/server/serve.ts) has its thread working before these are loaded.
 */
async function loadDriver(): Promise<Driver> {
  const [{ Kysely, PostgresDialect }, { default: pgModule }, { namingClient }] = await Promise.all([
    import('kysely'),
    import('pg'),
    import('./statement-cache.ts'),
  ]);
  const types: pg.CustomTypesConfig = {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
      oid === DATE_OID && format !== 'binary'
        ? (value: string) => value
        : pgModule.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
  };
  return { pg: pgModule, Kysely, PostgresDialect, namingClient, types };
}

/** What to log of an error: pg's pool hangs the whole client on `err.client`, which must not be dumped. */
function summary(err: unknown): { name?: string; message: string; code?: string } {
  if (!(err instanceof Error)) return { message: String(err) };
  const code = (err as { code?: unknown }).code;
  return { name: err.name, message: err.message, ...(typeof code === 'string' ? { code } : {}) };
}

const consoleLogger: DbLogger = {
  info: () => {},
  warn: (obj, msg) => console.warn(msg, obj),
  error: (obj, msg) => console.error(msg, obj),
};

/** The options that open the database `config` names: PostgreSQL at DATABASE_URL, else the embedded one in DATA_DIR. */
export function databaseOptions(
  config: { DATABASE_URL?: string | undefined; DATA_DIR: string },
  opts: Omit<OpenDatabaseOptions, 'dataDir' | 'databaseUrl'> = {},
): OpenDatabaseOptions {
  return {
    dataDir: config.DATA_DIR,
    ...(config.DATABASE_URL ? { databaseUrl: config.DATABASE_URL } : {}),
    ...opts,
  };
}

export async function openDatabase(opts: OpenDatabaseOptions): Promise<DbHandle> {
  return (await beginOpenDatabase(opts)).handle;
}

/** A database being opened: its handle, once it answers. */
export interface DatabaseOpening {
  readonly handle: Promise<DbHandle>;
}

/**
 * `openDatabase` in two steps, for a process that has other work to do while the database opens:
 * resolves once the opening is under way (the embedded folder checked and locked, its engine starting
 * in its thread), before the engine answers. Whatever fails first (an unwritable or locked folder) is
 * thrown here; what fails later, when `handle` is awaited.
 */
export async function beginOpenDatabase(opts: OpenDatabaseOptions): Promise<DatabaseOpening> {
  const logger = opts.logger ?? consoleLogger;
  const { handle } =
    opts.databaseUrl === undefined || opts.databaseUrl === ''
      ? await beginPglite(opts.dataDir, opts.holder ?? defaultHolder(), logger)
      : { handle: openPostgres(opts.databaseUrl, opts.poolSize ?? DEFAULT_POOL_SIZE, logger) };
  // Awaited by the caller later: a failure meanwhile is not an unhandled rejection.
  handle.catch(() => {});
  return { handle };
}

interface Wakeups {
  on(listener: (types: AppendedTypes) => void): () => void;
  wake(types?: AppendedTypes): void;
}

function createWakeups(logger: DbLogger): Wakeups {
  const listeners = new Set<(types: AppendedTypes) => void>();
  return {
    on(listener) {
      // Wrapped, so that the same function subscribed twice is two subscriptions.
      const entry = (types: AppendedTypes): void => listener(types);
      listeners.add(entry);
      return () => {
        listeners.delete(entry);
      };
    },
    wake(types = null) {
      for (const listener of [...listeners]) {
        try {
          listener(types);
        } catch (err) {
          logger.error({ err: summary(err) }, 'an onAppended listener threw');
        }
      }
    },
  };
}

/** Runs every step even when one fails, then throws the first failure. */
function closer(steps: ReadonlyArray<() => Promise<void>>, logger: DbLogger): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      let first: unknown;
      for (const step of steps) {
        try {
          await step();
        } catch (err) {
          logger.error({ err: summary(err) }, 'closing the database failed');
          first ??= err;
        }
      }
      if (first !== undefined) throw first;
    })();
    return closing;
  };
}

/**
 * A PostgreSQL pool and kysely over it. Opening a connection is given up after CONNECT_TIMEOUT_MS,
 * waiting for a free one after POOL_WAIT_MS; while the database cannot be reached, requests fail at
 * once (reachability.ts). `close()` ends it; `what` names its server in the log.
 */
function postgresPool(
  { pg, types, namingClient, Kysely, PostgresDialect }: Driver,
  databaseUrl: string,
  poolSize: number,
  logger: DbLogger,
  what: string,
): ReadPool {
  const reachability = createReachability();
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: poolSize,
    connectionTimeoutMillis: POOL_WAIT_MS,
    types,
    // Names the statements the pool runs again, so that PostgreSQL prepares them (statement-cache.ts).
    Client: reachabilityClient(namingClient(), reachability),
  });
  // An idle client whose connection breaks emits 'error' on the pool; unhandled, it would crash the
  // process. Once closing, clients pg-pool is still ending may see their server go: not news.
  let closing = false;
  pool.on('error', (err) => {
    if (!closing) logger.warn({ err: summary(err) }, `an idle ${what} connection failed`);
  });
  // A client checked out of the pool (a kysely connection, a transaction between two statements) has
  // no listener of pg-pool's: when its server goes away (a restart, a terminated backend), its 'error'
  // would be unhandled and end the process. The statement in flight fails by itself (and the request
  // with it); pg-pool drops the broken client when it is released, so nothing more is needed here.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({
      pool: guardPool(pool, poolSize, reachability, (err) =>
        logger.warn(
          { err: summary(err) },
          `an attempt to open a ${what} connection failed while the others answered; its request waits for one of them`,
        ),
      ),
    }),
  });
  return {
    db,
    pool,
    async close() {
      closing = true;
      await db.destroy();
    },
  };
}

async function openPostgres(databaseUrl: string, poolSize: number, logger: DbLogger): Promise<DbHandle> {
  const driver = await loadDriver();
  const { db, pool, close: closePool } = postgresPool(driver, databaseUrl, poolSize, logger, 'PostgreSQL');
  const wakeups = createWakeups(logger);
  const announcer = createAnnouncer(pool, logger);

  let listener: Listener;
  try {
    listener = await listen(driver, databaseUrl, wakeups.wake, logger);
  } catch (err) {
    await db.destroy();
    throw err;
  }

  return {
    db,
    kind: 'postgres',
    pool,
    onAppended: wakeups.on,
    notifyAppended(types) {
      wakeups.wake(types);
      if (types && types.length > 0) announcer.announce(types);
    },
    close: closer([() => announcer.close(), closePool, () => listener.close()], logger),
  };
}

interface Listener {
  close(): Promise<void>;
}

/** A pool of connections for reads only (a streaming replica): no LISTEN, no announcements. */
export interface ReadPool {
  readonly db: Db;
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

/**
 * A PostgreSQL pool for reads (a streaming replica, infra/db/replicas.ts), with the primary's value
 * types, named statements and connection timeouts; while its server cannot be reached, its requests
 * fail at once (reachability.ts), so that a read can go elsewhere.
 */
export async function openReadPool(
  databaseUrl: string,
  poolSize: number,
  logger: DbLogger,
): Promise<ReadPool> {
  return postgresPool(await loadDriver(), databaseUrl, poolSize, logger, 'read replica');
}

/** How long appended types wait to go out together in one NOTIFY. */
const ANNOUNCE_EVERY_MS = 50;

/**
 * Tells other processes (their LISTEN connections) which event types were appended: after the
 * append's commit, in a statement of its own. A NOTIFY inside the append's transaction would take
 * PostgreSQL's notification lock at commit and hold it through the commit's WAL flush, so that every
 * appending transaction on the server committed one at a time, each waiting for the flushes of those
 * before it. The types appended within `ANNOUNCE_EVERY_MS` go out together in one NOTIFY (a statement
 * per append would be most of an edit's statements after its own), one at a time per process; the
 * other processes' projectors wake that much later, which async read models allow. A NOTIFY that
 * fails is logged: the other processes poll every second.
 */
function createAnnouncer(
  pool: pg.Pool,
  logger: DbLogger,
): { announce(types: readonly string[]): void; close(): Promise<void> } {
  const waiting = new Set<string>();
  let sending: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  const pump = (): void => {
    timer = null;
    if (sending || closed || waiting.size === 0) return;
    const payload = appendedPayload([...waiting]);
    waiting.clear();
    sending = pool
      .query('select pg_notify($1, $2)', [APPENDED_CHANNEL, payload])
      .then(
        () => {},
        (err: unknown) => {
          if (!closed)
            logger.warn({ err: summary(err) }, 'could not announce an append to other processes; they poll');
        },
      )
      .finally(() => {
        sending = null;
        schedule();
      });
  };
  const schedule = (): void => {
    if (timer || closed || waiting.size === 0) return;
    timer = setTimeout(pump, ANNOUNCE_EVERY_MS);
    timer.unref();
  };
  return {
    announce(types) {
      for (const type of types) waiting.add(type);
      schedule();
    },
    async close() {
      // What was committed is announced before the pool ends.
      if (timer) clearTimeout(timer);
      await sending;
      pump();
      await sending;
      closed = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * One dedicated connection that LISTENs on the appended channel. When it drops, it reconnects with
 * exponential backoff and then wakes the listeners once, since notifications sent while it was
 * down are lost. Its timers are unref'd and `close()` ends it, so it never keeps the process alive.
 * The first connection must succeed: a wrong URL fails `openDatabase` loudly.
 */
async function listen(
  { pg }: Driver,
  databaseUrl: string,
  onNotify: (types: AppendedTypes) => void,
  logger: DbLogger,
): Promise<Listener> {
  let closed = false;
  let current: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let attempt = 0;

  const lost = (client: pg.Client, err?: unknown): void => {
    if (client !== current) return;
    current = undefined;
    client.end().catch(() => {});
    if (closed) return;
    logger.warn(
      { err: err === undefined ? undefined : summary(err) },
      'the LISTEN connection to PostgreSQL was lost; reconnecting',
    );
    schedule();
  };

  const connectOnce = async (): Promise<void> => {
    const client = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: LISTEN_CONNECT_TIMEOUT_MS,
      application_name: 'content-service:listen',
    });
    // Errors before `current` is set are reported by connect()/query() below; later ones by 'error'/'end'.
    client.on('error', (err) => lost(client, err));
    client.on('end', () => lost(client));
    client.on('notification', (message) => {
      if (message.channel === APPENDED_CHANNEL) onNotify(typesOfPayload(message.payload));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${APPENDED_CHANNEL}`);
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    if (closed) {
      await client.end().catch(() => {});
      return;
    }
    current = client;
  };

  const schedule = (): void => {
    const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** attempt);
    attempt += 1;
    timer = setTimeout(
      () => {
        timer = undefined;
        connecting = connectOnce().then(
          () => {
            connecting = undefined;
            if (closed) return;
            attempt = 0;
            logger.info({}, 'the LISTEN connection to PostgreSQL is back');
            onNotify(null);
          },
          (err: unknown) => {
            connecting = undefined;
            if (closed) return;
            logger.warn(
              { err: summary(err), attempt },
              'reconnecting the LISTEN connection failed; retrying',
            );
            schedule();
          },
        );
      },
      ceiling / 2 + Math.random() * (ceiling / 2),
    );
    timer.unref();
  };

  await connectOnce();

  return {
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      await connecting;
      const client = current;
      current = undefined;
      if (client !== undefined) await client.end();
    },
  };
}

/**
 * The embedded database's folder, made if missing and checked writable before PGlite opens it: a
 * read-only or unwritable folder stops the start with a message naming DATA_DIR (a ConfigError, which
 * the entry points print as one line), not with the database engine's abort deep inside.
 */
async function requireWritable(location: string): Promise<void> {
  try {
    await mkdir(location, { recursive: true });
    await access(location, constants.W_OK);
  } catch (error) {
    throw unwritable(location, error);
  }
}

/** The one line naming DATA_DIR and why the embedded database cannot write there. */
function unwritable(location: string, error: unknown): ConfigError {
  const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
  const why =
    code === 'EROFS'
      ? 'the folder is on a read-only file system'
      : code === 'EACCES' || code === 'EPERM'
        ? 'this process may not write there'
        : code === 'ENOSPC'
          ? 'the disk is full'
          : `it cannot be written (${code})`;
  return new ConfigError(
    `Invalid configuration: DATA_DIR=${JSON.stringify(location)}: the embedded database must write there, and ${why}`,
  );
}

/**
 * The folder's lock (data-dir-lock.ts); a lock file that cannot be written is said as requireWritable
 * says it. A lock on another host is watched before it is taken over, which is said; a lock taken over
 * from this process (silent too long: a paused container) ends it, before its engine writes again.
 */
async function lockFolder(location: string, holder: string, logger: DbLogger): Promise<DataDirLock> {
  const named = (h: LockHolder) => `${h.what} (pid ${h.pid} on ${h.host}, since ${h.since})`;
  try {
    return await lockDataDir(location, holder, {
      onWait: (other, waitMs) =>
        logger.warn(
          { dataDir: location, holder: other },
          `DATA_DIR=${JSON.stringify(location)} is locked by ${named(other)}, which cannot be checked from ` +
            `this host: taking the lock over unless it is renewed within ${Math.round(waitMs / 1000)} s`,
        ),
      onLost: (other) => {
        logger.error(
          { dataDir: location, holder: other },
          `DATA_DIR=${JSON.stringify(location)}: this process's lock was taken over by ${named(other)} ` +
            '(it was not renewed in time): stopping at once, so that two processes never write the folder',
        );
        process.exit(1);
      },
    });
  } catch (error) {
    throw error instanceof ConfigError ? error : unwritable(location, error);
  }
}

/** A process that does not say what it is: the script it runs. */
function defaultHolder(): string {
  return `a process running ${process.argv[1] ?? process.argv0}`;
}

/** Locks the folder and starts the engine's thread; the handle once the engine serves. */
async function beginPglite(dataDir: string, holder: string, logger: DbLogger): Promise<DatabaseOpening> {
  const inMemory = dataDir.startsWith('memory://');
  const location = inMemory ? dataDir : resolve(dataDir);
  if (!inMemory) await requireWritable(location);
  // One process per folder (data-dir-lock.ts): taken before the engine reads a page of it.
  const lock = inMemory ? undefined : await lockFolder(location, holder, logger);
  const starting = startEngine(location, logger);
  // Loaded while the engine starts; awaited once it serves.
  const loading = loadDriver();
  loading.catch(() => {});
  const handle = (async (): Promise<DbHandle> => {
    let engine: Engine;
    try {
      engine = await starting;
    } catch (err) {
      await lock?.release();
      throw err;
    }
    try {
      return pgliteHandle(engine, await loading, lock, logger);
    } catch (err) {
      await engine.close();
      await lock?.release();
      throw err;
    }
  })();
  return { handle };
}

/** The handle on a started engine: one pooled connection to its port. */
function pgliteHandle(
  engine: Engine,
  { pg, types, namingClient, Kysely, PostgresDialect }: Driver,
  lock: DataDirLock | undefined,
  logger: DbLogger,
): DbHandle {
  const { port } = engine;

  const pool = new pg.Pool({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password: 'postgres',
    database: 'postgres',
    max: 1,
    // Keep the one connection for good: a reconnect could race the server's slot for the old one.
    idleTimeoutMillis: 0,
    connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
    types,
    // Names the statements the pool runs again, so that PostgreSQL prepares them (statement-cache.ts).
    Client: namingClient(),
  });
  let closing = false;
  pool.on('error', (err) => {
    if (!closing) logger.warn({ err: summary(err) }, 'the PGlite connection failed');
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const wakeups = createWakeups(logger);

  return {
    db,
    kind: 'pglite',
    pool,
    onAppended: wakeups.on,
    notifyAppended: wakeups.wake,
    close: closer(
      [
        async () => {
          closing = true;
          await db.destroy();
        },
        () => engine.close(),
        async () => lock?.release(),
      ],
      logger,
    ),
  };
}

/** PGlite and its socket server, in their thread (pglite-thread.ts). */
interface Engine {
  /** The loopback port it serves on. */
  readonly port: number;
  /** Stops serving, closes PGlite and ends the thread. */
  close(): Promise<void>;
}

/**
 * Starts the embedded engine's thread on `location` and waits until it serves (or failed to start:
 * its error is thrown here). A thread that ends before it is closed is logged: the pool's connection
 * then fails, as it would with a PostgreSQL server gone.
 */
function startEngine(location: string, logger: DbLogger): Promise<Engine> {
  const thread = new Worker(new URL('./pglite-thread.ts', import.meta.url), { workerData: { location } });
  let closing: Promise<void> | undefined;
  return new Promise<Engine>((resolveStart, rejectStartOnly) => {
    let started = false;
    const rejectStart = (err: unknown): void => {
      void thread.terminate();
      rejectStartOnly(err);
    };
    thread.on('error', (err) => {
      if (!started) rejectStart(err);
      else logger.error({ err: summary(err) }, 'the embedded database thread failed');
    });
    thread.on('exit', (code) => {
      if (!started)
        rejectStart(new Error(`the embedded database thread ended (exit code ${code}) before it started`));
      else if (closing === undefined) logger.error({ code }, 'the embedded database thread ended');
    });
    thread.once('message', (message: EngineMessage) => {
      if (message.type !== 'ready') {
        rejectStart(
          message.type === 'failed'
            ? message.error
            : new Error('unexpected message from the embedded database thread'),
        );
        return;
      }
      started = true;
      resolveStart({
        port: message.port,
        close() {
          closing ??= new Promise<void>((resolveClose, rejectClose) => {
            // Settled once the thread is gone: by its answer (then ended here), or by its own end.
            const settle = (error?: unknown): void => {
              void thread.terminate().then(() => (error === undefined ? resolveClose() : rejectClose(error)));
            };
            thread.on('message', (closed: EngineMessage) => {
              if (closed.type === 'closed') settle(closed.error);
            });
            thread.once('exit', () => settle());
            thread.postMessage('close');
          });
          return closing;
        },
      });
    });
  });
}
