import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli, ROOT } from '../support/process.ts';

/*
 * A CLI command loads what it uses when it runs: `--help` loads the entry point, tracing's start (which
 * finds nothing to start) and the CLI's dispatcher, and nothing of the configuration's schemas, the
 * database, the runtime or the application; a usage error, besides them, only the configuration it
 * reads first. A command that works on the database loads them (the control: the check can fail).
 * The modules are recorded by tests/fixtures/record-modules.ts (`--import`), as in
 * tests/infra/tracing-off.e2e.test.ts.
 */

/** Module URLs that mean a part of the service beyond the CLI's dispatcher was loaded. */
const HEAVY_PARTS = [
  '/node_modules/zod/',
  '/node_modules/kysely/',
  '/node_modules/pg/',
  '/node_modules/@electric-sql/',
  '/node_modules/@opentelemetry/',
  '/apps/runtime.ts',
  '/apps/application/',
  '/infra/db/',
  '/infra/event-store.ts',
  '/projections/',
  '/domain/errors.ts',
];
/** What a usage error may load besides: the configuration, read before the command is looked at. */
const CONFIGURATION = ['/node_modules/zod/', '/node_modules/ipaddr.js/'];

describe('what a CLI command loads', () => {
  let dir: string;
  let db: TestDatabase;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-cli-loading-'));
    db = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs the CLI with `args`; its exit code, and the modules it loaded. */
  async function modulesOf(
    name: string,
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number | null; modules: string[] }> {
    const file = join(dir, `${name}.txt`);
    const r = await cli(args, {
      NODE_OPTIONS: `--import=${resolve(ROOT, 'tests/fixtures/record-modules.ts')}`,
      CS_TEST_MODULES_FILE: file,
      ...env,
    });
    return { code: r.code, modules: (await readFile(file, 'utf8')).split('\n') };
  }

  const loaded = (modules: string[], parts: readonly string[]): string[] =>
    parts.filter((part) => modules.some((url) => url.includes(part)));

  it('`--help` loads the dispatcher and nothing of the service behind it', async () => {
    const { code, modules } = await modulesOf('help', ['--help']);
    expect(code).toBe(0);
    expect(modules.some((url) => url.endsWith('/apps/cli/cli.ts'))).toBe(true);
    expect(loaded(modules, HEAVY_PARTS)).toEqual([]);
  });

  it('a usage error loads the configuration it reads first, and nothing of the database', async () => {
    const { code, modules } = await modulesOf('usage', ['frobnicate'], {
      DATABASE_URL: db.databaseUrl as string,
    });
    expect(code).toBe(2);
    expect(loaded(modules, HEAVY_PARTS)).toEqual(['/node_modules/zod/']);
    expect(
      modules
        .filter((url) => url.includes('/node_modules/'))
        .every((url) => CONFIGURATION.some((part) => url.includes(part))),
    ).toBe(true);
  });

  it('a command on the database loads the runtime (the control)', async () => {
    const { code, modules } = await modulesOf('status', ['projections', 'status'], {
      DATABASE_URL: db.databaseUrl as string,
    });
    expect(code).toBe(0);
    expect(loaded(modules, HEAVY_PARTS)).toEqual(
      expect.arrayContaining(['/apps/runtime.ts', '/infra/db/', '/projections/', '/node_modules/pg/']),
    );
  });
});
