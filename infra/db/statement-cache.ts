import type { Compilable, CompiledQuery } from 'kysely';
import pg from 'pg';
import type { Db } from './schema.ts';

/*
 * The statement cache: the driver-level work that keeps the hot statements cheap, in one place, and
 * the one place that touches `pg`'s client.
 *
 * 1. Server-side prepared statements (`createStatementNames`, `StatementNamingClient`). kysely sends
 *    every statement unnamed, so PostgreSQL parses and plans it on every execution; on an article
 *    edit, planning alone was 40% of the database's time per statement (pg_stat_statements with
 *    track_planning), and naming the repeated statements took a get from 1,638 to 2,696 requests a
 *    second (docs/performance.md). A statement with a name is parsed once per connection, and once it
 *    has run a few times PostgreSQL keeps a generic plan when that plan is as good as the custom ones
 *    (`plan_cache_mode = auto`). node-postgres prepares a query given a `name`: the pool's clients are
 *    `StatementNamingClient`s (pg-pool's documented `Client` option, see `namingClient`), whose
 *    `query` names a text the second time this pool sends it with parameters. Statements without
 *    parameters (begin, commit) stay unnamed; so do texts past the first `MAX_NAMED`, which keeps the
 *    statements each server connection holds bounded, and texts longer than `MAX_NAMED_LENGTH`, which
 *    are never remembered at all. Those are multi-row inserts (a text per row count, tens of
 *    kilobytes at hundreds of rows): naming them saved little planning, and the texts, kept by the
 *    map and by every connection's client, grew the heap through a long run as more row counts came
 *    (docs/reliability.md, soak). The hot statements are under 2 KB.
 * 2. Compiled queries (`prepared`): a hot kysely query built and compiled to SQL once instead of on
 *    every call.
 *
 * What this relies on in `pg` (8.x), pinned by tests/infra/statement-cache.int.test.ts, which fails
 * if an upgrade changes it: pg-pool builds its clients with `new options.Client(options)`; kysely's
 * PostgresDialect and `pool.query` reach a client through `client.query(text, values[, callback])`;
 * and a query config with a `name` is sent as a named prepared statement (Parse once per connection).
 */

/** At most this many texts are named per pool (so per server connection). */
const MAX_NAMED = 500;
/** Texts seen once are forgotten past this many, so that one-off texts cannot grow the map for ever. */
const MAX_SEEN = 5_000;
/** Longer texts are never named nor remembered (see above): the maps hold at most this much a text. */
export const MAX_NAMED_LENGTH = 4_096;

type StatementNames = { nameOf(text: string): string | undefined; readonly named: number };

/** The names of one pool's statements: a text is named the second time it is seen (see above). */
export function createStatementNames(maxNamed = MAX_NAMED): StatementNames {
  const names = new Map<string, string>();
  let seenOnce = new Set<string>();
  return {
    nameOf(text) {
      if (text.length > MAX_NAMED_LENGTH) return undefined;
      const known = names.get(text);
      if (known !== undefined || names.size >= maxNamed) return known;
      if (!seenOnce.has(text)) {
        if (seenOnce.size >= MAX_SEEN) seenOnce = new Set();
        seenOnce.add(text);
        return undefined;
      }
      seenOnce.delete(text);
      const name = `cs_${names.size + 1}`;
      names.set(text, name);
      return name;
    },
    get named() {
      return names.size;
    },
  };
}

/**
 * A `pg` client that sends the texts its `StatementNames` name as named (prepared) statements and
 * everything else as `pg.Client` does. The one subclass in the project besides errors: pg-pool's
 * `Client` option takes a client class, and overriding `query` is the supported way to change how a
 * pooled client sends a statement.
 */
export class StatementNamingClient extends pg.Client {
  readonly statementNames: StatementNames;

  constructor(config: pg.ClientConfig | undefined, names: StatementNames) {
    super(config);
    this.statementNames = names;
  }

  // biome-ignore lint/suspicious/noExplicitAny: pg.Client's query has eight overloads; this one passes its arguments on
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && Array.isArray(values) && values.length > 0) {
      const name = this.statementNames.nameOf(config);
      if (name !== undefined) return super.query({ name, text: config, values }, callback);
    }
    return super.query(config, values, callback);
  }
}

/**
 * The client class for a pool's `Client` option (pg-pool constructs each client with the pool's
 * options): its clients share `names`, so a text has one name on every connection of the pool.
 */
export function namingClient(
  names: StatementNames = createStatementNames(),
): new (
  config?: pg.ClientConfig,
) => StatementNamingClient {
  return class PoolClient extends StatementNamingClient {
    constructor(config?: pg.ClientConfig) {
      super(config, names);
    }
  };
}

/**
 * A hot query built and compiled once: kysely builds an operation tree and compiles it to SQL on
 * every call, which on a request that runs one cheap statement is a good part of the request's
 * work. `build` receives stand-ins for the named values; the compiled SQL is kept, and each call
 * puts its own values where the stand-ins were. Only for values that reach the query as they are
 * (where clauses, not values the builder transforms); `build` must give the same SQL for any values.
 */
export function prepared<V extends Record<string, unknown>, R>(
  build: (db: Db, values: V) => Compilable<R>,
  names: readonly (keyof V & string)[],
): (db: Db, values: V) => Promise<R[]> {
  let compiled: { query: CompiledQuery<R>; slots: ((keyof V & string) | undefined)[] } | undefined;
  return async (db, values) => {
    if (compiled === undefined) {
      const standIns = Object.fromEntries(names.map((name) => [name, `\u0000prepared:${name}\u0000`])) as V;
      const query = build(db, standIns).compile();
      const slots = query.parameters.map((parameter) => names.find((n) => standIns[n] === parameter));
      for (const name of names) {
        if (!slots.includes(name)) throw new Error(`prepared: ${name} does not reach the query as it is`);
      }
      compiled = { query, slots };
    }
    const { query, slots } = compiled;
    const parameters = query.parameters.map((constant, i) => {
      const name = slots[i];
      return name === undefined ? constant : values[name];
    });
    const result = await db.executeQuery<R>({ ...query, parameters });
    return result.rows;
  };
}
