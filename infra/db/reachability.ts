import type { EventEmitter } from 'node:events';
import type { PostgresPool } from 'kysely';
import type pg from 'pg';
import { isDatabaseUnavailable } from './unavailable.ts';

/*
 * How long a request waits for PostgreSQL, in two parts (docs/reliability.md, "A database that does
 * not answer"):
 *
 * - Opening a connection (TCP, startup, authentication) is given up after CONNECT_TIMEOUT_MS: a server
 *   that answers opens one in milliseconds, even under load; one that has not answered by then is
 *   taken for gone (a network black hole, a host down, a server that accepts and says nothing).
 * - Waiting for a pooled connection to become free (every connection busy with other requests) lasts
 *   up to POOL_WAIT_MS: under load a request waits its turn rather than failing.
 *
 * node-postgres has one `connectionTimeoutMillis` for both, so the pool's is the wait and each client
 * is given its own, shorter, for opening (`reachabilityClient`). And since the requests waiting for a
 * pooled connection during an outage wait for connection attempts that all fail, one after another,
 * the pool's users learn from those attempts (`guardPool`): once an attempt to open a connection has
 * failed because the server cannot be reached, and until one succeeds, a request that would have to
 * wait for a connection fails at once, and those already waiting fail with the attempt. A request
 * that finds room in the pool still makes an attempt of its own (at most the pool's size at a time),
 * and the first that succeeds ends the outage. An attempt refused for want of room on the server
 * (`too_many_connections`, class 53) says the server is there: it is no outage, and nobody else fails.
 *
 * Nor is an attempt that fails while the server answers on the pool's other connections (a statement
 * finished on one of them since the attempt began): the server is there, and only this attempt went
 * wrong (a name service slow to answer, a lost packet, a process too starved to see its connection
 * made in time). The request that made it then waits for one of those connections to come free, within
 * its POOL_WAIT_MS, instead of failing; nobody else fails.
 */

/** Opening a connection is given up after this long. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** A request waits at most this long for a pooled connection to become free. */
export const POOL_WAIT_MS = 30_000;

/** What a request is refused with while the database cannot be reached: a 503 (`cause`: the last failed attempt). */
export class DatabaseUnreachableError extends Error {
  constructor(cause: unknown) {
    super('the database cannot be reached: the last attempt to open a connection failed', { cause });
    this.name = 'DatabaseUnreachableError';
  }
}

/** What a pool's clients tell its users about opening connections. */
export interface Reachability {
  /** The error of the last failed attempt while the database cannot be reached; null once one succeeds. */
  readonly unreachable: Error | null;
  opened(): void;
  /** A connection's server finished a statement (or the startup): it is there. */
  answered(): void;
  /** Whether a connection's server finished a statement at or after `since` (a `performance.now()`). */
  answeredSince(since: number): boolean;
  /** An attempt begun at `since` failed with `error`. */
  failed(error: Error, since: number): void;
  /** Called with the error when an attempt fails because the database cannot be reached. Returns an unsubscribe. */
  onUnreachable(listener: (error: Error) => void): () => void;
}

export function createReachability(): Reachability {
  let unreachable: Error | null = null;
  let lastAnswer = Number.NEGATIVE_INFINITY;
  const listeners = new Set<(error: Error) => void>();
  return {
    get unreachable() {
      return unreachable;
    },
    opened() {
      unreachable = null;
    },
    answered() {
      lastAnswer = performance.now();
    },
    answeredSince(since) {
      return lastAnswer >= since;
    },
    failed(error, since) {
      if (!saysUnreachable(error) || lastAnswer >= since) return;
      unreachable = error;
      for (const listener of [...listeners]) listener(error);
    },
    onUnreachable(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}

/** Whether a failed attempt to open a connection says the server cannot be reached (not: it is full). */
function saysUnreachable(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  return isDatabaseUnavailable(error) && !(typeof code === 'string' && code.startsWith('53'));
}

/** How far an attempt to open a connection got, in ms from its start: what a given-up attempt's error says. */
type Progress = { started: number; resolved?: number; connected?: number };

/**
 * pg's own words for its client's timeout ("timeout expired") say nothing of what timed out: the
 * attempt's error says it, as a socket's timeout (ETIMEDOUT: the database is unavailable, a 503), with
 * how far the attempt got (the host's name resolved, the TCP connection made), which tells a slow name
 * service or a lost network from a server that does not answer its startup.
 */
function givenUp(error: Error, progress: Progress): Error {
  if (error.message !== 'timeout expired') return error;
  const at = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms - progress.started));
  const steps = [
    at(progress.resolved) === undefined
      ? 'its name not resolved'
      : `its name resolved in ${at(progress.resolved)} ms`,
    at(progress.connected) === undefined
      ? 'no TCP connection'
      : `TCP connected in ${at(progress.connected)} ms, no answer to the startup`,
  ];
  // A connection to an address (no name to resolve) says only the second.
  if (progress.resolved === undefined && progress.connected !== undefined) steps.shift();
  return Object.assign(
    new Error(
      `the database did not answer within ${CONNECT_TIMEOUT_MS} ms: connection attempt given up (${steps.join('; ')})`,
      { cause: error },
    ),
    { code: 'ETIMEDOUT' },
  );
}

/**
 * Follows an attempt's steps on pg's connection (its socket's `lookup`, its `connect`), and tells
 * `reachability` of every statement its server finishes from then on (`readyForQuery`).
 */
function follow(client: pg.Client, reachability: Reachability): Progress {
  const progress: Progress = { started: performance.now() };
  const connection = (client as unknown as { connection?: EventEmitter & { stream?: EventEmitter } })
    .connection;
  connection?.on('readyForQuery', () => reachability.answered());
  connection?.stream?.once('lookup', () => {
    progress.resolved = performance.now();
  });
  connection?.once('connect', () => {
    progress.connected = performance.now();
  });
  return progress;
}

type ClientClass<C extends pg.Client> = new (config?: pg.ClientConfig) => C;

/**
 * The pool's `Client` option: `Base` whose connections are given up after CONNECT_TIMEOUT_MS (pg's
 * client timeout, whatever the pool's), each attempt's outcome told to `reachability`.
 */
export function reachabilityClient<C extends pg.Client>(
  Base: ClientClass<C>,
  reachability: Reachability,
): ClientClass<C> {
  // A class expression over `Base`, as pg-pool constructs its clients from a class.
  const Reporting = class extends (Base as ClientClass<pg.Client>) {
    constructor(config?: pg.ClientConfig) {
      super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    }

    // biome-ignore lint/suspicious/noExplicitAny: pg.Client's connect has two overloads; this one passes its argument on
    override connect(callback?: any): any {
      const progress = follow(this, reachability);
      const report = (error: Error | null | undefined): Error | undefined => {
        if (!error) {
          reachability.opened();
          return undefined;
        }
        const told = givenUp(error, progress);
        reachability.failed(told, progress.started);
        return told;
      };
      if (typeof callback !== 'function') {
        return super.connect().then(
          (connected: unknown) => {
            report(undefined);
            return connected;
          },
          (error: Error) => {
            throw report(error);
          },
        );
      }
      return super.connect((error: Error) => callback(report(error)));
    }
  };
  return Reporting as unknown as ClientClass<C>;
}

/**
 * What kysely's dialect takes as its pool: `pool`, whose `connect` fails at once while the database
 * cannot be reached and the request would have to wait, and whose waiting requests fail when an attempt
 * to open a connection finds the database unreachable; a request whose own attempt fails while the
 * server answers on other connections waits for one of those instead (see the top of this file).
 */
export function guardPool(
  pool: pg.Pool,
  max: number,
  reachability: Reachability,
  /** Told of each attempt that failed while the server answered (its request waits on). */
  spared: (error: unknown) => void = () => {},
): PostgresPool {
  const idle = idleWatch(pool);
  /** One check-out, by `deadline` (a `performance.now()`) if it has to wait for a free connection. */
  const checkOut = (deadline: number): Promise<pg.PoolClient> => {
    const unreachable = reachability.unreachable;
    if (unreachable && pool.idleCount === 0 && pool.totalCount >= max) {
      return Promise.reject(new DatabaseUnreachableError(unreachable));
    }
    const since = performance.now();
    return new Promise<pg.PoolClient>((resolve, reject) => {
      let settled = false;
      const stop = reachability.onUnreachable((error) => {
        if (settled) return;
        settled = true;
        stop();
        reject(new DatabaseUnreachableError(error));
      });
      pool.connect().then(
        (client) => {
          stop();
          // Given up on meanwhile: the connection goes back to the pool for the next request.
          if (settled) client.release();
          else {
            settled = true;
            resolve(client);
          }
        },
        (error: unknown) => {
          stop();
          if (settled) return;
          settled = true;
          if (
            !isDatabaseUnavailable(error) ||
            !reachability.answeredSince(since) ||
            performance.now() >= deadline
          ) {
            reject(error);
            return;
          }
          // The server answered on another connection meanwhile: this attempt alone failed (top of
          // this file). The request waits for a connection to come free, and goes on with it.
          spared(error);
          resolve(
            idle.free(deadline).then((free) => {
              if (!free) throw error;
              return checkOut(deadline);
            }),
          );
        },
      );
    });
  };
  return {
    get Client() {
      return (pool as unknown as { Client: PostgresPool['Client'] }).Client;
    },
    get options() {
      return pool.options;
    },
    end: () => pool.end(),
    connect(): Promise<pg.PoolClient> {
      return checkOut(performance.now() + POOL_WAIT_MS);
    },
  };
}

/**
 * `free(deadline)` resolves true once `pool` has an idle connection (at once if it has one), false if
 * none came free by `deadline` (a `performance.now()`). One listener on the pool for all who wait;
 * pg-pool emits `release` before it puts the connection back among the idle ones: the count is read a
 * turn later.
 */
function idleWatch(pool: pg.Pool): { free(deadline: number): Promise<boolean> } {
  const waiting = new Set<() => void>();
  pool.on('release', () => {
    if (waiting.size === 0) return;
    setImmediate(() => {
      // As many as there are idle connections, the longest waiting first.
      for (const wake of [...waiting].slice(0, pool.idleCount)) wake();
    });
  });
  return {
    free(deadline) {
      if (pool.idleCount > 0) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const done = (free: boolean) => {
          clearTimeout(timer);
          waiting.delete(wake);
          resolve(free);
        };
        const wake = () => done(true);
        const timer = setTimeout(() => done(false), Math.max(0, deadline - performance.now()));
        waiting.add(wake);
      });
    },
  };
}
