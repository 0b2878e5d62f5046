import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTemplates } from './db.ts';

/**
 * Once per run, before any test file: the migrated database templates every test database is copied
 * from (tests/support/db.ts), and a compile cache shared by the test workers and the servers and
 * CLIs they start (Node keys it by each file's content, so a changed file is compiled again).
 */
export default async function setup(): Promise<() => Promise<void>> {
  process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'cs-test-node-compile-cache');
  return makeTemplates();
}
