import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTemplates } from './db.ts';
import { startTestServices } from './services.ts';

/**
 * Once per run, before any test file of the suite: the PostgreSQL and Redis servers of the run
 * (tests/support/services.ts: the given ones, or containers), the migrated database templates every
 * test database is copied from (tests/support/db.ts), and a compile cache shared by the test workers
 * and the servers and CLIs they start (Node keys it by each file's content, so a changed file is
 * compiled again).
 */
export default async function setup(): Promise<() => Promise<void>> {
  process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'cs-test-node-compile-cache');
  const stopServices = await startTestServices();
  let removeTemplates: () => Promise<void>;
  try {
    removeTemplates = await makeTemplates();
  } catch (err) {
    await stopServices();
    throw err;
  }
  return async () => {
    try {
      await removeTemplates();
    } finally {
      await stopServices();
    }
  };
}
