import type { Compilable, CompiledQuery } from 'kysely';
import pg from 'pg';
import type { Db } from './schema.ts';

/*
 * The statement cache, and the one place that touches `pg`'s client (figures: docs/performance.md,
 * "Prepared statements").
 *
 * 1. Named statements (`createStatementNames`, `StatementNamingClient`). kysely sends every statement
 *    unnamed, so PostgreSQL parses and plans it on every execution. The pool's clients (pg-pool's
 *    `Client` option, see `namingClient`) send a text with parameters as a named prepared statement
 *    the second time the pool sees it: parsed once per connection, planned once where a generic plan
 *    is as good (`plan_cache_mode = auto`). Texts without parameters stay unnamed, and so do texts past
 *    the first `MAX_NAMED` (bounding what each server connection holds) and texts over
 *    `MAX_NAMED_LENGTH`, which are never remembered: multi-row inserts have a text per row count, and
 *    keeping them grew the heap (docs/reliability.md, soak). A text that begins with `ALWAYS_NAMED` is
 *    named whatever its length: the event store's group appends, of which there are few texts. One
 *    that begins with `NEVER_NAMED` is never named: planned for its values each time (the search).
 * 2. Compiled queries (`prepared`): a hot kysely query built and compiled to SQL once.
 *
 * What this relies on in `pg` (8.x), pinned by tests/infra/statement-cache.int.test.ts: pg-pool builds
 * its clients with `new options.Client(options)`; kysely's PostgresDialect and `pool.query` call
 * `client.query(text, values[, callback])`; a query config with a `name` is sent as a named prepared
 * statement.
 */

/** At most this many texts are named per pool (so per server connection). */
const MAX_NAMED = 500;
/** Texts seen once are forgotten past this many, so that one-off texts cannot grow the map for ever. */
const MAX_SEEN = 5_000;
/** Longer texts are never named nor remembered (see above), unless they begin with `ALWAYS_NAMED`. */
export const MAX_NAMED_LENGTH = 4_096;
/**
 * What begins a text that is named whatever its length: a statement of which few texts exist however
 * long each is (a group of appends, whose text depends only on how many go together and their shape).
 */
export const ALWAYS_NAMED = '/* named */';
/**
 * What begins a text that is never named, so planned for its values on every execution: a statement
 * whose best plan depends on them more than a generic plan can know (a full-text search, whose words
 * may match one article or all of them).
 */
export const NEVER_NAMED = '/* planned each time */';
/** At most this many of the texts named are longer than MAX_NAMED_LENGTH (their plans are larger too). */
const MAX_NAMED_LONG = 16;

type StatementNames = { nameOf(text: string): string | undefined; readonly named: number };

/** Texts up to this long are their own key in a TextMap; longer ones are keyed by a fingerprint. */
const WHOLE_KEY_LENGTH = 256;
const FINGERPRINT_PART = 96;

/**
 * A map keyed by statement text that hashes a fingerprint of a long text (its length, head and tail)
 * rather than all of it. Each statement's text is built afresh, so a plain Map hashes every character
 * of it on every lookup (for a group of appends, kilobytes); finding it among the texts stored under
 * its fingerprint is a memory compare.
 */
export function createTextMap<V>(): {
  get(text: string): V | undefined;
  set(text: string, value: V): void;
  delete(text: string): void;
  readonly size: number;
} {
  const buckets = new Map<string, { text: string; value: V }[]>();
  let size = 0;
  const keyOf = (text: string): string =>
    text.length <= WHOLE_KEY_LENGTH
      ? text
      : `${text.length}:${text.slice(0, FINGERPRINT_PART)}${text.slice(-FINGERPRINT_PART)}`;
  return {
    get(text) {
      const bucket = buckets.get(keyOf(text));
      if (bucket === undefined) return undefined;
      for (const entry of bucket) if (entry.text === text) return entry.value;
      return undefined;
    },
    set(text, value) {
      const key = keyOf(text);
      const bucket = buckets.get(key);
      const entry = bucket?.find((e) => e.text === text);
      if (entry !== undefined) entry.value = value;
      else {
        if (bucket === undefined) buckets.set(key, [{ text, value }]);
        else bucket.push({ text, value });
        size++;
      }
    },
    delete(text) {
      const key = keyOf(text);
      const bucket = buckets.get(key);
      const index = bucket?.findIndex((e) => e.text === text) ?? -1;
      if (bucket === undefined || index < 0) return;
      bucket.splice(index, 1);
      if (bucket.length === 0) buckets.delete(key);
      size--;
    },
    get size() {
      return size;
    },
  };
}

/** The names of one pool's statements: a text is named the second time it is seen (see above). */
export function createStatementNames(maxNamed = MAX_NAMED, maxNamedLong = MAX_NAMED_LONG): StatementNames {
  const names = createTextMap<string>();
  let seenOnce = createTextMap<true>();
  let namedLong = 0;
  return {
    nameOf(text) {
      if (text.startsWith(NEVER_NAMED)) return undefined;
      const long = text.length > MAX_NAMED_LENGTH;
      if (long && !text.startsWith(ALWAYS_NAMED)) return undefined;
      const known = names.get(text);
      if (known !== undefined || names.size >= maxNamed || (long && namedLong >= maxNamedLong)) return known;
      if (seenOnce.get(text) === undefined) {
        if (seenOnce.size >= MAX_SEEN) seenOnce = createTextMap();
        seenOnce.set(text, true);
        return undefined;
      }
      seenOnce.delete(text);
      if (long) namedLong++;
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
 * everything else as `pg.Client` does. One of the two subclasses in the project besides errors (the
 * other, over this one: reachability.ts's, which times a connection's opening): pg-pool's `Client`
 * option takes a client class, and overriding `query` is the supported way to change how a pooled
 * client sends a statement.
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
