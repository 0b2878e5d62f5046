import type { Compilable, CompiledQuery } from 'kysely';
import type { Db } from './schema.ts';

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
