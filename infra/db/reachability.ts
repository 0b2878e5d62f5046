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
  failed(error: Error): void;
  /** Called with the error when an attempt fails because the database cannot be reached. Returns an unsubscribe. */
  onUnreachable(listener: (error: Error) => void): () => void;
}

export function createReachability(): Reachability {
  let unreachable: Error | null = null;
  const listeners = new Set<(error: Error) => void>();
  return {
    get unreachable() {
      return unreachable;
    },
    opened() {
      unreachable = null;
    },
    failed(error) {
      if (!saysUnreachable(error)) return;
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

/**
 * pg's own words for its client's timeout ("timeout expired") say nothing of what timed out: the
 * attempt's error says it, as a socket's timeout (ETIMEDOUT: the database is unavailable, a 503).
 */
function givenUp(error: Error): Error {
  if (error.message !== 'timeout expired') return error;
  return Object.assign(
    new Error(`the database did not answer within ${CONNECT_TIMEOUT_MS} ms: connection attempt given up`, {
      cause: error,
    }),
    { code: 'ETIMEDOUT' },
  );
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
      const report = (error: Error | null | undefined): Error | undefined => {
        if (!error) {
          reachability.opened();
          return undefined;
        }
        const told = givenUp(error);
        reachability.failed(told);
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
 * to open a connection finds the database unreachable (see the top of this file).
 */
export function guardPool(pool: pg.Pool, max: number, reachability: Reachability): PostgresPool {
  return {
    get Client() {
      return (pool as unknown as { Client: PostgresPool['Client'] }).Client;
    },
    get options() {
      return pool.options;
    },
    end: () => pool.end(),
    connect(): Promise<pg.PoolClient> {
      const unreachable = reachability.unreachable;
      if (unreachable && pool.idleCount === 0 && pool.totalCount >= max) {
        return Promise.reject(new DatabaseUnreachableError(unreachable));
      }
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
            reject(error);
          },
        );
      });
    },
  };
}
