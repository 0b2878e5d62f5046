import { createRequire } from 'node:module';

/*
 * Node's table of HTTP reason phrases ("Not Found"), read through `require('node:http')`. An ESM
 * import of `node:http`, in any form, makes Node build that module's ESM facade, which reads every
 * export once; one of them is a lazy getter that loads Node's bundled undici (its fetch), 30 to 50 ms
 * of a start's thread on a 2-core machine, for a server that may never fetch. `require` reads only
 * the property asked for. The server's start modules import `node:http` no other way
 * (tests/server/start-loading.e2e.test.ts).
 */
const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** The reason phrase of each HTTP status code Node knows. */
export const STATUS_CODES: Readonly<Record<number, string | undefined>> = http.STATUS_CODES;
