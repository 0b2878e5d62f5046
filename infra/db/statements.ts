import type pg from 'pg';

/**
 * Server-side prepared statements for the statements a process runs again and again.
 *
 * kysely sends every statement unnamed, so PostgreSQL parses and plans it on every execution; on an
 * article edit, planning alone was 40% of the database's time per statement (pg_stat_statements with
 * track_planning). A statement with a name is parsed once per connection, and once it has run a few
 * times PostgreSQL keeps a generic plan when that plan is as good as the custom ones
 * (`plan_cache_mode = auto`). node-postgres does this for a query given a `name`: each pooled client
 * here names a text the second time this process sends it with parameters. Statements without
 * parameters (begin, commit) stay unnamed; so do texts past the first `MAX_NAMED` (multi-row inserts
 * have a text per row count), which keeps the statements each server connection holds bounded.
 */
export const MAX_NAMED = 500;
/** Texts seen once are forgotten past this many, so that one-off texts cannot grow the map for ever. */
const MAX_SEEN = 5_000;

export type StatementNames = { nameOf(text: string): string | undefined; readonly named: number };

export function createStatementNames(maxNamed = MAX_NAMED): StatementNames {
  const names = new Map<string, string>();
  let seenOnce = new Set<string>();
  return {
    nameOf(text) {
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

type QueryFn = (...args: unknown[]) => unknown;

/** Makes every client of `pool` name the statements `names` gives a name to (see above). */
export function prepareRepeatedStatements(
  pool: pg.Pool,
  names: StatementNames = createStatementNames(),
): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as QueryFn;
    (client as unknown as { query: QueryFn }).query = (
      config: unknown,
      values?: unknown,
      callback?: unknown,
    ) => {
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0) {
        const name = names.nameOf(config);
        if (name !== undefined) return query({ name, text: config, values }, callback);
      }
      return query(config, values, callback);
    };
  });
}
