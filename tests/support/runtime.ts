import { sql } from 'kysely';
import { type Application, createApplication } from '../../apps/application/index.ts';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import type { Actor } from '../../domain/event.ts';
import type { ReadModelTables } from '../../infra/db/read-model-tables.ts';
import type { Db } from '../../infra/db/schema.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { asyncProjectors, projectors } from '../../projections/index.ts';
import { type Backend, createTestDatabase } from './db.ts';

export const apiKeyActor: Actor = { type: 'api_key', id: 'key_test', name: 'Test key' };
export const pipelineActor: Actor = { type: 'system', id: 'pipeline', name: 'Content pipeline' };

/** A migrated database of the given backend with the core wired on it; `drop()` in afterAll. */
export async function createTestRuntime(
  kind: Backend,
  opts: { now?: () => Date; sanitizeThreads?: number; diffWaitMs?: number } = {},
): Promise<{ runtime: Runtime; databaseUrl: string | undefined; drop(): Promise<void> }> {
  const test = await createTestDatabase(kind);
  return { runtime: createRuntime(test.handle, opts), databaseUrl: test.databaseUrl, drop: test.drop };
}

export async function catchUpAll(db: Db): Promise<void> {
  for (const p of asyncProjectors) await catchUp(db, p);
}

/** Every projector's tables: a new read model is compared as soon as its projector exists. */
const tables = projectors.flatMap((p) => p.tables);

/** Every read-model row, in a stable order, as JSON text: two snapshots compare equal iff the rows are identical. */
export async function snapshotReadModels(db: Db): Promise<Record<string, string[]>> {
  return snapshotTables(db, tables);
}

/** The rows of `tables`, each table's in a stable order, as JSON text. */
export async function snapshotTables(
  db: Db,
  tables: readonly (keyof ReadModelTables)[],
): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of tables) {
    const result = await sql<{
      row: string;
    }>`select row_to_json(t)::text as row from ${sql.table(table)} t`.execute(db);
    out[table] = result.rows.map((r) => r.row).sort();
  }
  return out;
}

export async function setUpAccount(
  runtime: Runtime,
  name = 'Plumbers Ltd',
): Promise<{ accountId: string; siteId: string; otherSiteId: string }> {
  const email = `${name.toLowerCase().replace(/[^a-z]+/g, '.')}.${Math.random().toString(36).slice(2, 8)}@example.com`;
  const { accountId } = await runtime.commands.openAccount({ name, email });
  const { siteId } = await runtime.commands.addSite(accountId, {
    name: 'Northside Plumbing',
    domain: 'northside.example',
    url: 'https://northside.example/',
  });
  const { siteId: otherSiteId } = await runtime.commands.addSite(accountId, {
    name: 'Harbour Dental',
    domain: 'harbour.example',
    url: 'https://harbour.example/',
  });
  return { accountId, siteId, otherSiteId };
}

export const protectedBody = (n: number): string =>
  `<p>Intro ${n}.</p><p>See <a href="https://partner.example.org/${n}" data-service-protected="backlink" data-service-id="bl_${n}">our partner</a> and <a href="https://northside.example/services" data-service-protected="internal" data-service-id="il_${n}">our services</a>.</p>`;

/**
 * A site of `accountId` (Northside Plumbing) with one published article made by the content pipeline,
 * whose body has a protected backlink and internal link (`protectedBody(1)`).
 */
export async function addSiteWithArticle(
  runtime: Runtime,
  accountId: string,
): Promise<{ siteId: string; articleId: string }> {
  const { siteId } = await runtime.commands.addSite(accountId, {
    name: 'Northside Plumbing',
    domain: 'northside.example',
    url: 'https://northside.example/',
  });
  const { articleId } = await runtime.commands.createArticle(
    accountId,
    {
      siteId,
      title: 'Boiler care',
      body: protectedBody(1),
      url: 'https://northside.example/blog/boiler-care',
      status: 'published',
      publishedAt: '2026-10-01T09:00:00Z',
      targetKeyword: null,
      featuredImage: null,
    },
    { origin: 'rewrite', actor: pipelineActor },
  );
  return { siteId, articleId };
}

/**
 * The application on a test runtime for use cases that neither store nor fetch images: every edit
 * allowed (1,000 a day), no media.
 */
export function readingApplication(runtime: Runtime, now: () => Date): Application {
  return createApplication({
    db: runtime.db,
    commands: runtime.commands,
    searchLanguage: runtime.searchLanguage,
    publicUrl: 'https://content.example',
    now,
    editLimit: {
      take: async () => ({
        policy: { name: 'edits', quota: 1000, window: 'utc-day' },
        allowed: true,
        remaining: 999,
        resetSeconds: 3600,
      }),
    },
    media: createDirectoryMediaStore('/nonexistent-media'),
    fetchImage: async () => {
      throw new Error('no images here');
    },
  });
}
